"""Streaming samplers end to end: actors on the cluster or threads, traces, resume, outputs."""
from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model
from topicflow.pipeline.streaming import TraceRotation, run_stream
from topicflow.pipeline.streaming.actors import DocumentStream, stream_source
from topicflow.pipeline.streaming.config import StreamConfig
from topicflow.pipeline.streaming.init_trials import (
    run_initialization_trial,
    trial_seed,
)
from topicflow.pipeline.streaming.outputs import summarize
from topicflow.pipeline.streaming.particles import evaluation_points
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

N_TRAIN = 240
N_TEST = 60


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Three well-separated topics; each document's label is its dominant topic."""
    planted = draw_planted_corpus(n_docs=N_TRAIN + N_TEST, n_topics=3, n_terms=30, doc_length=25, alpha=0.1, seed=3)
    labels = [f"topic-{k}" for k in np.argmax(planted.doc_topic, axis=1)]
    counts = planted.counts["default"]
    root = tmp_path_factory.mktemp("stream")
    train = write_test_store(root / "train.zarr", {"default": counts[:N_TRAIN]}, shard_size=64, labels=labels[:N_TRAIN])
    test = write_test_store(root / "test.zarr", {"default": counts[N_TRAIN:]}, shard_size=64, labels=labels[N_TRAIN:])
    return train, test


def small_config(algorithm: str, **changes: Any) -> StreamConfig:
    settings: dict[str, Any] = dict(
        algorithm=algorithm, n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.05, n_particles=8,
        rejuvenation_steps=5, reservoir_size=200, init_docs=40, init_sweeps=30, runs=2, eval_every=50,
        sweeps=30, seed=11,
    )
    settings.update(changes)
    names = StreamConfig.setting_names(settings["algorithm"])
    return StreamConfig.create(**{name: value for name, value in settings.items() if name in names})


def without_clock(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


@pytest.mark.parametrize("algorithm", ["olda", "incgibbs", "pf", "gibbs"])
def test_every_algorithm_learns_the_labels_and_saves_a_usable_model(
    algorithm: str, stores: tuple[Path, Path], client: object, tmp_path: Path
) -> None:
    train, test = stores
    result = run_stream(Corpus.open(train), small_config(algorithm), client=client, test_corpus=Corpus.open(test))
    points = len(result.summary)
    assert len(result.records) == 2 * points
    assert [r["run"] for r in result.records[:2]] == [0, 1]
    final = result.summary[-1]
    assert final["runs"] == 2
    # Planted topics with one dominant topic per document: every sampler finds the labels.
    assert final["nmi_in_mean"] > 0.6, final
    assert final["nmi_out_mean"] > 0.6, final
    assert np.isfinite(final["perplexity_out_mean"]) and final["perplexity_out_mean"] < 30  # 30 terms
    top = result.records[-1]["top_terms"]
    assert len(top) == 3 and all(len(terms) == 10 and all(t.startswith("de") for t in terms) for terms in top)
    # Each planted topic owns a block of 10 terms; a learned topic's top terms mostly come from one block.
    assert all(np.bincount([int(t[2:]) // 10 for t in terms[:5]]).max() >= 4 for terms in top)
    state = result.model.state
    assert state.topic_word_var["default"].shape == (3, 30)
    assert np.all(state.topic_word_var["default"] >= 0.05)
    save_model(tmp_path / "model", result.model)
    loaded = load_model(tmp_path / "model")
    assert loaded.info.kind == "stream" and loaded.info.algorithm == algorithm
    np.testing.assert_array_equal(loaded.state.topic_word_var["default"], state.topic_word_var["default"])


@pytest.mark.parametrize("algorithm", ["incgibbs", "pf"])
def test_same_seed_same_trace_on_threads_and_on_the_cluster(
    algorithm: str, stores: tuple[Path, Path], local_cluster: object
) -> None:
    from distributed import Client

    train, _ = stores
    config = small_config(algorithm, runs=3)
    local = run_stream(Corpus.open(train), config, client=None)
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        distributed = run_stream(Corpus.open(train), config, client=client)
    assert without_clock(local.records) == without_clock(distributed.records)
    np.testing.assert_array_equal(local.model.state.topic_word_var["default"],
                                  distributed.model.state.topic_word_var["default"])


def test_a_run_does_not_depend_on_the_other_runs(stores: tuple[Path, Path]) -> None:
    train, _ = stores
    alone = run_stream(Corpus.open(train), small_config("pf", runs=1, seed=12), client=None)
    among = run_stream(Corpus.open(train), small_config("pf", runs=2, seed=11), client=None)
    assert without_clock([{**r, "run": 0} for r in among.records if r["run"] == 1]) == \
        without_clock([{**r, "seed": 12} for r in alone.records])


@pytest.mark.parametrize("algorithm", ["pf", "gibbs", "incgibbs"])
def test_resumed_stream_ends_as_the_uninterrupted_one(algorithm: str, stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    corpus = Corpus.open(train)
    whole = run_stream(corpus, small_config(algorithm), client=None)
    stop = {"sweeps": 10} if algorithm == "gibbs" else {"max_docs": 150}
    # Saved at every point, and the trace rotated at every save (max_bytes=1): each save's records
    # become a segment of their own, and the history on disk is still the uninterrupted trace.
    rotation = TraceRotation(max_bytes=1, keep=100)
    run_stream(corpus, small_config(algorithm, **stop), client=None, out=tmp_path / "out", checkpoint_every=1,
               trace=rotation)
    assert (tmp_path / "out" / "trace.jsonl").is_file() and (tmp_path / "out" / "state" / "stream.json").is_file()
    resumed = run_stream(corpus, small_config(algorithm), client=None, out=tmp_path / "out", resume=True,
                         trace=rotation)
    segments = sorted((tmp_path / "out").glob("trace-*.jsonl.gz"))
    texts = [gzip.decompress(p.read_bytes()).decode() for p in segments] + [(tmp_path / "out" / "trace.jsonl").read_text()]
    on_disk = [json.loads(line) for text in texts for line in text.splitlines()]
    # Every record of the uninterrupted run, once (gibbs also has one at the sweep where it stopped).
    whole_points = {r["point"] for r in whole.records}
    assert segments and without_clock([r for r in on_disk if r["point"] in whole_points]) == without_clock(whole.records)
    assert len(on_disk) == len({(r["point"], r["run"]) for r in on_disk})
    np.testing.assert_array_equal(resumed.model.state.topic_word_var["default"],
                                  whole.model.state.topic_word_var["default"])
    for (a_arrays, _), (b_arrays, _) in zip(resumed.snapshots, whole.snapshots):
        assert a_arrays.keys() == b_arrays.keys()
        for name in a_arrays:
            np.testing.assert_array_equal(a_arrays[name], b_arrays[name], err_msg=name)
    # The result's records are those of the current trace segment: this run's, here.
    assert resumed.records and resumed.records == on_disk[len(on_disk) - len(resumed.records):]


def test_resume_refuses_other_settings_and_another_store(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, test = stores
    run_stream(Corpus.open(train), small_config("olda", max_docs=100), client=None, out=tmp_path / "out")
    with pytest.raises(InvalidParameterError, match="n_topics"):
        run_stream(Corpus.open(train), small_config("olda", n_topics=4), client=None, out=tmp_path / "out", resume=True)
    with pytest.raises(InvalidParameterError, match="not the store"):
        run_stream(Corpus.open(test), small_config("olda"), client=None, out=tmp_path / "out", resume=True)


def test_initialization_keeps_the_best_of_several_trials(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    config = small_config("olda", runs=1, init_trials=4, init_select="nmi", init_sweeps=5, max_docs=60)
    result = run_stream(Corpus.open(train), config, client=None)
    source = stream_source(Corpus.open(train))
    prefix = DocumentStream(source).read(0, config.particles.init_docs)
    scores = [run_initialization_trial(prefix, config.gibbs_params(trial_seed(config.run.seed, t)), sweeps=5,
                                       select="nmi", n_trials=4).score for t in range(4)]
    assert len(set(scores)) > 1  # the trials differ, so choosing means something
    chosen = result.snapshots[0][1]
    assert chosen["init_seed"] == trial_seed(config.run.seed, int(np.argmax(scores)))
    assert chosen["init_score"] == pytest.approx(max(scores))


def test_perplexity_selection_fits_four_fifths_of_the_prefix(stores: tuple[Path, Path]) -> None:
    train, _ = stores
    config = small_config("olda", runs=1, init_trials=2, init_select="perplexity", init_sweeps=5, max_docs=60)
    result = run_stream(Corpus.open(train), config, client=None)
    assert result.records[0]["docs_seen"] == 32  # 80% of the 40 prefix documents; the rest are streamed
    assert result.records[-1]["docs_seen"] == 60


def test_bad_settings_are_explained(stores: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="algorithm must be one of"):
        StreamConfig.create(algorithm="smc")  # type: ignore[arg-type]
    with pytest.raises(InvalidParameterError, match="share of the particles"):
        StreamConfig.create(ess_threshold=20)
    unlabeled = draw_planted_corpus(n_docs=50, n_topics=2, n_terms=10, doc_length=10, alpha=0.5, seed=1)
    store = write_test_store(tmp_path / "u.zarr", unlabeled.counts, shard_size=50)
    with pytest.raises(InvalidParameterError, match="labels"):
        run_stream(Corpus.open(store), small_config("olda", init_trials=2, init_select="nmi", n_topics=2), client=None)
    two = draw_planted_corpus(n_docs=20, n_topics=2, n_terms=10, doc_length=10, alpha=0.5, seed=1, languages=("en", "de"))
    multi = write_test_store(tmp_path / "m.zarr", two.counts, shard_size=20)
    with pytest.raises(InvalidParameterError, match="multilingual"):
        run_stream(Corpus.open(multi), small_config("olda"), client=None)


def test_evaluation_points_and_summary() -> None:
    assert evaluation_points(40, 240, 50) == [50, 100, 150, 200, 240]
    assert evaluation_points(50, 240, 50) == [100, 150, 200, 240]
    assert evaluation_points(240, 240, 50) == []
    records = [{"point": 5, "docs_seen": 5, "run": r, "nmi_in": v, "seconds": 1.0} for r, v in enumerate([0.2, 0.4])]
    (row,) = summarize(records)
    # Sample standard deviation (ddof=1): sqrt(((0.2-0.3)^2 + (0.4-0.3)^2) / 1).
    assert row["nmi_in_mean"] == pytest.approx(0.3) and row["nmi_in_std"] == pytest.approx(0.1 * np.sqrt(2))


@pytest.mark.parametrize("start", ["random", "sequential"])
def test_gibbs_starts_its_chain_as_asked(start: str, stores: tuple[Path, Path]) -> None:
    from topicflow.models.lda.gibbs import chain, scores

    train, _ = stores
    config = small_config("gibbs", runs=1, sweeps=1, eval_every=1, gibbs_start=start)
    record = run_stream(Corpus.open(train), config, client=None).records[-1]
    assert record["sweeps"] == 1
    block = DocumentStream(stream_source(Corpus.open(train))).read(0, N_TRAIN)
    params = config.gibbs_params(config.run_seed(0))
    expected = chain.run_sweeps(chain.initial_state(block, params, init=start), params, 1)
    n_tokens = expected.token_terms.shape[0]
    assert record["log_likelihood_per_token"] == pytest.approx(scores.joint_log_likelihood(expected) / n_tokens)
    random = chain.run_sweeps(chain.initial_state(block, params, init="random"), params, 1)
    if start == "sequential":  # the sequential start is a different chain, and a better one after a sweep
        assert scores.joint_log_likelihood(expected) > scores.joint_log_likelihood(random)
    with pytest.raises(InvalidParameterError, match="gibbs_start"):
        small_config("gibbs", gibbs_start="progressive")


def test_gibbs_partitioned_sweeps_are_the_chain_built_by_hand(stores: tuple[Path, Path]) -> None:
    from topicflow.models.lda.gibbs import chain, scores

    train, _ = stores
    config = small_config("gibbs", runs=1, sweeps=3, eval_every=3, gibbs_partitions=2, gibbs_threads=2)
    record = run_stream(Corpus.open(train), config, client=None).records[-1]
    block = DocumentStream(stream_source(Corpus.open(train))).read(0, N_TRAIN)
    params = config.gibbs_params(config.run_seed(0))
    expected = chain.run_sweeps(chain.initial_state(block, params), params, 3, partitions=2)
    n_tokens = expected.token_terms.shape[0]
    assert record["log_likelihood_per_token"] == pytest.approx(scores.joint_log_likelihood(expected) / n_tokens)
    one_thread = small_config("gibbs", runs=1, sweeps=3, eval_every=3, gibbs_partitions=2)
    assert config.fingerprint() == one_thread.fingerprint()  # threads are not part of the chain
    with pytest.raises(InvalidParameterError, match="gibbs_partitions"):
        small_config("gibbs", gibbs_partitions=0)


def test_gibbs_can_learn_its_priors(stores: tuple[Path, Path]) -> None:
    train, _ = stores
    fixed = run_stream(Corpus.open(train), small_config("gibbs", runs=1, sweeps=70), client=None)
    learned = run_stream(Corpus.open(train), small_config("gibbs", runs=1, sweeps=70, optimize_every=5), client=None)
    np.testing.assert_array_equal(fixed.model.state.doc_topic_prior, np.full(3, 0.1))
    alpha = learned.model.state.doc_topic_prior
    assert not np.allclose(alpha, 0.1) and np.all(alpha > 0)
    assert learned.model.state.topic_word_prior["default"] != pytest.approx(0.05)
