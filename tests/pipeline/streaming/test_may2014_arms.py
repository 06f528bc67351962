"""The stream-level arms of May, Clemmer & Van Durme (2014): no rejuvenation, no initialization, one
shared or saved initial model, an initialization on a share of the stream, and a random Gibbs start."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow.api.streaming import StreamingLDA
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.stream_state import write_stream_state
from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
from topicflow.models.lda.streaming import particle_filter as pf
from topicflow.pipeline.streaming import run_stream
from topicflow.pipeline.streaming.actors import DocumentStream, stream_source
from topicflow.pipeline.streaming.config import ParticleSettings, StreamConfig
from topicflow.pipeline.streaming.init_trials import run_initialization_trial
from topicflow.pipeline.streaming.particles import initialize_runs, load_initial_model
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

N_TRAIN, N_TEST = 160, 40


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    planted = draw_planted_corpus(n_docs=N_TRAIN + N_TEST, n_topics=3, n_terms=24, doc_length=12, alpha=0.1, seed=8)
    labels = [f"t{k}" for k in np.argmax(planted.doc_topic, axis=1)]
    counts = planted.counts["default"]
    root = tmp_path_factory.mktemp("may2014")
    train = write_test_store(root / "train.zarr", {"default": counts[:N_TRAIN]}, shard_size=50, labels=labels[:N_TRAIN])
    test = write_test_store(root / "test.zarr", {"default": counts[N_TRAIN:]}, shard_size=50, labels=labels[N_TRAIN:])
    other = write_test_store(root / "other.zarr", {"default": counts[N_TEST:]}, shard_size=50, labels=labels[N_TEST:])
    return train, test, other


def config(**changes: Any) -> StreamConfig:
    settings: dict[str, Any] = dict(algorithm="pf", n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.1,
                                    n_particles=6, ess_threshold=0.5, resampling="multinomial", rejuvenation_steps=4,
                                    reservoir_size=100, init_docs=20, init_sweeps=15, runs=3, eval_every=50, seed=4)
    settings.update(changes)
    return StreamConfig.create(**settings)


def no_clock(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "seconds"} for r in records]


def test_rejuv_zero_runs_the_particle_filter_with_no_rejuvenation_step(stores: tuple[Path, Path, Path]) -> None:
    train, test, _ = stores
    cfg = config(rejuvenation_steps=0)
    params = cfg.pf_params(24, 0)
    assert params.algorithm == "pf" and params.n_particles == 6 and params.rejuvenation_steps == 0
    result = run_stream(Corpus.open(train), cfg, client=None, test_corpus=Corpus.open(test))
    final = [r for r in result.records if r["docs_seen"] == N_TRAIN]
    assert len(final) == 3
    assert all(r["rejuvenation_steps"] == 0 and r["resamples"] > 0 for r in final)
    with_rejuvenation = run_stream(Corpus.open(train), config(), client=None)
    steps = [r["rejuvenation_steps"] for r in with_rejuvenation.records if r["docs_seen"] == N_TRAIN]
    resamples = [r["resamples"] for r in with_rejuvenation.records if r["docs_seen"] == N_TRAIN]
    assert steps == [6 * 4 * n for n in resamples]


def test_zero_document_initialization(stores: tuple[Path, Path, Path]) -> None:
    train, test, _ = stores
    result = run_stream(Corpus.open(train), config(init_docs=0), client=None, test_corpus=Corpus.open(test))
    first = result.records[:3]
    # The first record is at the start of the stream: nothing seen, no initialization.
    assert [r["docs_seen"] for r in first] == [0, 0, 0] and [r["tokens_seen"] for r in first] == [0, 0, 0]
    final = [r for r in result.records if r["docs_seen"] == N_TRAIN]
    assert all(r["nmi_out"] is not None and r["tokens_seen"] > 0 for r in final)
    with pytest.raises(InvalidParameterError, match="init_docs = 0 has none"):
        config(init_docs=0, init_trials=3)


def test_init_docs_as_a_share_of_the_stream(stores: tuple[Path, Path, Path]) -> None:
    assert ParticleSettings(init_docs=0.1).prefix_docs(N_TRAIN) == 16
    assert ParticleSettings(init_docs=0.1).prefix_docs(200) == 20
    for bad in (1.5, -1, "10%", True):
        with pytest.raises(InvalidParameterError, match="init_docs"):
            ParticleSettings(init_docs=bad)  # type: ignore[arg-type]
    train, _, _ = stores
    result = run_stream(Corpus.open(train), config(init_docs=0.1, max_docs=100), client=None)
    assert result.records[0]["docs_seen"] == 10  # 10% of the 100 documents streamed


def test_random_start_is_the_uniform_gibbs_start(stores: tuple[Path, Path, Path]) -> None:
    train, _, _ = stores
    prefix = DocumentStream(stream_source(Corpus.open(train))).read(0, 20)
    params = config().gibbs_params(9)
    trial = run_initialization_trial(prefix, params, sweeps=5, select="nmi", n_trials=1, start="random")
    expected = run_sweeps(initial_state(prefix, params, init="random"), params, 5)
    assert np.array_equal(trial.state.topics, expected.topics)
    sequential = run_initialization_trial(prefix, params, sweeps=5, select="nmi", n_trials=1)
    assert not np.array_equal(sequential.state.topics, trial.state.topics)


def _start(state: tuple[dict[str, np.ndarray], dict[str, Any]]) -> tuple[np.ndarray, dict[int, int]]:
    """A run's initial topic-word counts and the topic of every prefix token its source holds.

    The counts and assignments are the initial model; which prefix tokens sit in the reservoir is
    the run's own (keyed by its seed)."""
    arrays, meta = state
    cloud = pf.cloud_from_arrays({k[len("cloud/"):]: v for k, v in arrays.items() if k.startswith("cloud/")},
                                 meta["cloud"])
    positions, topics = pf.particle_topics(cloud, 0)
    return pf.particle_topic_word_counts(cloud, 0), dict(zip(positions.tolist(), topics.tolist()))


def test_shared_initial_model_gives_every_run_the_same_start(stores: tuple[Path, Path, Path], tmp_path: Path) -> None:
    train, _, other = stores
    corpus = Corpus.open(train)
    source = stream_source(corpus)
    shared = config(init_shared=True, init_trials=3, init_select="nmi", init_start="random", init_docs=0.125)
    states = initialize_runs(corpus, source, shared, None, tmp_path / "out")
    assert len(states) == 3 and {s[1]["position"] for s in states} == {20}
    assert {s[1]["init_seed"] for s in states} == {states[0][1]["init_seed"]}
    trial = load_initial_model(tmp_path / "out" / "init", source, shared)
    assert trial.n_fitted_docs == 20 and trial.seed == states[0][1]["init_seed"]
    expected_counts = trial.state.term_topic_counts.T
    for state in states:
        counts, topics = _start(state)
        assert np.array_equal(counts, expected_counts)
        assert topics and all(trial.state.topics[t] == k for t, k in topics.items())
    # Per-run initializations differ between runs.
    own = [_start(s)[0] for s in initialize_runs(corpus, source, config(init_docs=20), None)]
    assert not np.array_equal(own[0], own[1])
    # The saved shared model starts every run of another stream identically.
    saved = tmp_path / "out" / "init"
    for state in initialize_runs(corpus, source, config(init_model=str(saved), runs=2), None):
        counts, topics = _start(state)
        assert np.array_equal(counts, expected_counts) and all(trial.state.topics[t] == k for t, k in topics.items())
    with pytest.raises(InvalidParameterError, match="fitted on other documents"):
        load_initial_model(saved, stream_source(Corpus.open(other)), shared)
    with pytest.raises(InvalidParameterError, match="K=3"):
        load_initial_model(saved, source, config(n_topics=4))
    with pytest.raises(InvalidParameterError, match="not a saved initial model"):
        write_stream_state(tmp_path / "other-state", {"kind": "something else"}, [({}, {})])
        load_initial_model(tmp_path / "other-state", source, shared)
    # A saved model wins over the settings that would choose one (a preset's init_shared, init_trials).
    for state in initialize_runs(corpus, source, config(init_model=str(saved), init_shared=True, init_trials=4), None):
        assert np.array_equal(_start(state)[0], expected_counts)


def test_shared_init_stream_is_the_same_on_threads_and_on_the_cluster(
        stores: tuple[Path, Path, Path], client: object, tmp_path: Path) -> None:
    """Same seed, same records, whether the runs are threads of this process or actors on two workers."""
    train, test, _ = stores
    cfg = config(init_shared=True, init_trials=2, init_select="nmi", init_docs=20, runs=2, rejuvenation_steps=0)
    threads = run_stream(Corpus.open(train), cfg, client=None, test_corpus=Corpus.open(test))
    here = run_stream(Corpus.open(train), cfg, client=client, test_corpus=Corpus.open(test), out=tmp_path / "s")
    assert no_clock(here.records) == no_clock(threads.records)
    assert (tmp_path / "s" / "init" / "stream.json").exists()
    empty = config(init_docs=0, runs=2)
    assert no_clock(run_stream(Corpus.open(train), empty, client=client).records) == \
        no_clock(run_stream(Corpus.open(train), empty, client=None).records)


def test_the_may2014_preset_is_the_papers_configuration() -> None:
    model = StreamingLDA.from_preset("may2014")
    cfg = model.config()
    particles = cfg.particles
    assert (cfg.algorithm, cfg.n_topics, cfg.doc_topic_prior, cfg.topic_word_prior) == ("pf", 3, 0.1, 0.1)
    assert (particles.n_particles, particles.ess_threshold, particles.resampling) == (100, 0.2, "multinomial")
    assert (particles.rejuvenation_steps, particles.rejuvenation_source, particles.reservoir_size) == \
        (30, "reservoir", 1000)
    assert (particles.init_docs, particles.init_sweeps, particles.init_start) == (0.1, 200, "random")
    assert particles.init_shared and particles.init_trials == 100 and cfg.run.runs == 30
    assert particles.prefix_docs(1000) == 100
    no_rejuvenation = StreamingLDA.from_preset("may2014", rejuvenation_steps=0).config()
    assert no_rejuvenation.pf_params(10, 0).rejuvenation_steps == 0
    assert no_rejuvenation.pf_params(10, 0).algorithm == "pf"
