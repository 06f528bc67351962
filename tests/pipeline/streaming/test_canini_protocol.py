"""Canini et al. (2009)'s protocol through the stream driver: best of N samples, training-set NMI, next-docs held-out."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.models.lda.streaming import particle_filter as pf
from topicflow.models.lda.streaming import samples
from topicflow.pipeline.streaming import StreamConfig, run_stream
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

N_TRAIN, N_TEST = 150, 40


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    planted = draw_planted_corpus(n_docs=N_TRAIN + N_TEST, n_topics=3, n_terms=24, doc_length=15, alpha=0.1, seed=8)
    labels = [f"topic-{k}" for k in np.argmax(planted.doc_topic, axis=1)]
    counts = planted.counts["default"]
    root = tmp_path_factory.mktemp("canini")
    train = write_test_store(root / "train.zarr", {"default": counts[:N_TRAIN]}, shard_size=50, labels=labels[:N_TRAIN])
    test = write_test_store(root / "test.zarr", {"default": counts[N_TRAIN:]}, shard_size=50, labels=labels[N_TRAIN:])
    return train, test


def config(algorithm: str = "incgibbs", **changes: Any) -> StreamConfig:
    settings: dict[str, Any] = {"n_topics": 3, "doc_topic_prior": 0.1, "topic_word_prior": 0.1,
                                "rejuvenation_steps": 2, "rejuvenation_source": "history", "independent_samples": 4,
                                "heldout_mode": "next_docs", "init_docs": 15, "init_sweeps": 20, "runs": 2,
                                "eval_every": 45, "seed": 4}
    if algorithm == "pf":
        settings.update(n_particles=6, ess_threshold=0.5)
    settings.update(changes)
    return StreamConfig.create(algorithm=algorithm, **settings)  # type: ignore[arg-type]


def without(records: list[dict[str, Any]], *names: str) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in ("seconds",) + names} for r in records]


@pytest.mark.parametrize("algorithm", ["olda", "incgibbs", "pf"])
def test_trace_has_both_training_nmis_and_both_heldout_nmis(algorithm: str, stores: tuple[Path, Path],
                                                           client: object) -> None:
    train, test = stores
    result = run_stream(Corpus.open(train), config(algorithm), client=client, test_corpus=Corpus.open(test))
    for record in result.records:
        for name in ("nmi_in", "nmi_train_best", "nmi_out", "nmi_out_next"):
            assert 0.0 <= record[name] <= 1.0, name
        assert 0 <= record["best_sample"] < (6 if algorithm == "pf" else 4)
    final = result.summary[-1]
    assert final["nmi_train_best_mean"] > 0.5 and final["nmi_out_next_mean"] > 0.5  # well-separated planted topics
    # the best sample is the one of highest log p(w, z) in the final state
    arrays, meta = result.snapshots[0]
    cloud = pf.cloud_from_arrays({k[len("cloud/"):]: v for k, v in arrays.items() if k.startswith("cloud/")}, meta["cloud"])
    last = [r for r in result.records if r["run"] == 0][-1]
    assert last["best_sample"] == samples.best_sample(samples.sample_log_joints(cloud))


def test_next_docs_evaluation_leaves_the_stream_unchanged(stores: tuple[Path, Path]) -> None:
    train, test = (Corpus.open(p) for p in stores)
    probed = run_stream(train, config(), test_corpus=test)
    plain = run_stream(train, config(heldout_mode="fold_in"), test_corpus=test)
    assert without(probed.records, "nmi_out_next") == without(plain.records)
    for (a_arrays, a_meta), (b_arrays, b_meta) in zip(probed.snapshots, plain.snapshots):
        assert {k: v for k, v in a_meta.items() if k != "seconds"} == {k: v for k, v in b_meta.items() if k != "seconds"}
        for name in a_arrays:
            np.testing.assert_array_equal(a_arrays[name], b_arrays[name], err_msg=name)


def test_same_trace_for_any_number_of_workers(stores: tuple[Path, Path], local_cluster: object) -> None:
    from distributed import Client, LocalCluster

    train, test = (Corpus.open(p) for p in stores)
    with Client(local_cluster) as two:  # type: ignore[arg-type]
        on_two = run_stream(train, config(runs=3), client=two, test_corpus=test)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=":0") as one_cluster, \
            Client(one_cluster) as one:
        on_one = run_stream(train, config(runs=3), client=one, test_corpus=test)
    assert without(on_one.records) == without(on_two.records)


def test_best_of_n_runs_never_resample_and_pf_ignores_the_sample_count() -> None:
    olda = config("olda").pf_params(24, 0)
    assert (olda.n_particles, olda.ess_threshold, olda.rejuvenation_steps) == (4, 0.0, 0)
    single = config("incgibbs", independent_samples=1).pf_params(24, 0)
    assert single.n_particles == 1
    particle = config("pf").pf_params(24, 0)
    assert (particle.n_particles, particle.ess_threshold) == (6, 0.5)


def test_next_docs_needs_the_history_source() -> None:
    with pytest.raises(InvalidParameterError, match="history"):
        config(rejuvenation_source="reservoir")
    with pytest.raises(InvalidParameterError, match="heldout_mode"):
        config(heldout_mode="later")
