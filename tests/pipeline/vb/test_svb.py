"""Streaming variational Bayes (Broderick et al. 2013): reference, batch identity, recovery, determinism, resume."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.pipeline.vb.test_batch import matched_cosines
from tests.pipeline.vb.test_batch_reference import reference_docs
from tests.reference.corpora import random_counts
from tests.reference.svb_numpy import svb_reference
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.models.lda.priors import SeedTopic
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb, initial_state
from topicflow.pipeline.vb.online import OnlineConfig
from topicflow.pipeline.vb.svb import SVBConfig, fit_svb
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

K, ALPHA, ETA = 3, 0.3, 0.05


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    truth = draw_planted_corpus(n_docs=400, n_topics=4, n_terms=40, doc_length=30, alpha=0.3, seed=21)
    path = write_test_store(tmp_path_factory.mktemp("svb") / "c.zarr", truth.counts, shard_size=50)
    return path, truth


def small_config(**changes: object) -> VBConfig:
    base = dict(n_topics=K, doc_topic_prior_mode="fixed", doc_topic_prior=ALPHA, topic_word_prior=ETA,
                max_iter=4, tol=0.0, max_doc_iter=50, doc_tol=1e-6, seed=5)
    base.update(changes)
    return VBConfig(**base)  # type: ignore[arg-type]


CASES = {
    "lda": ({"default": (30, 25, 1, (4,))}, {}),
    "lda, stopping at tol": ({"default": (30, 25, 6, ())}, {"max_iter": 30, "tol": 1e-3}),
    "informed prior": ({"default": (30, 25, 2, ())},
                       {"seed_topics": (SeedTopic("first", ("de00001", "de00002"), (1.0, 2.0)),), "seed_strength": 3.0}),
    "polylingual": ({"en": (30, 20, 3, ()), "de": (30, 15, 4, (0, 9, 17))}, {}),
}


@pytest.mark.parametrize("case", list(CASES))
def test_svb_matches_numpy_reference(tmp_path: Path, client: object, case: str) -> None:
    shapes, changes = CASES[case]
    dense = {lang: random_counts(n, v, seed=s, empty_rows=empty) for lang, (n, v, s, empty) in shapes.items()}
    path = write_test_store(tmp_path / "c.zarr", {k: sp.csr_matrix(v) for k, v in dense.items()}, shard_size=7)
    corpus = Corpus.open(path)
    config = small_config(**changes)
    result = fit_svb(corpus, config, SVBConfig(batch_size=10, pieces=3, min_piece_docs=1), client=client,
                     split_every=2)
    start, _ = initial_state(corpus, config)
    history, elbos = svb_reference(
        reference_docs(dense), [list(range(lo, lo + 10)) for lo in (0, 10, 20)], start.topic_word_var,
        start.topic_word_prior, np.full(K, ALPHA), config.max_iter, config.tol, config.max_doc_iter, config.doc_tol)
    assert result.t == 3 and result.docs_seen == 30
    assert [r.iterations for r in result.trace] == [len(e) for e in elbos]
    if config.tol:
        assert all(r.converged for r in result.trace) and max(r.iterations for r in result.trace) < config.max_iter
    for record, trace in zip(result.trace, elbos):
        assert record.elbo_per_token * record.tokens == pytest.approx(trace[-1], rel=1e-10)
    for lang, lam in history[-1].items():
        np.testing.assert_allclose(result.state.topic_word_var[lang], lam, rtol=1e-10)
    for lang, eta in start.topic_word_prior.items():  # eta stays the model's prior; lambda carries the stream
        np.testing.assert_array_equal(result.state.topic_word_prior[lang], eta)


@pytest.mark.parametrize(("mode", "tol"), [("fixed", 0.0), ("auto", 0.0), ("symmetric", 1e-3)])
def test_one_minibatch_holding_the_corpus_is_batch_vb(
    planted: tuple[Path, object], client: object, mode: str, tol: float
) -> None:
    """The independent check: with the corpus as one minibatch, the prior is eta and primitive A is batch VB.

    Same start, same E-steps, same M-step and alpha update, same stopping rule: the same model bit for bit
    (pieces of 50 documents line up with the shards, so even the merge tree is the batch one).
    """
    path, _ = planted
    corpus = Corpus.open(path)
    config = VBConfig(n_topics=4, doc_topic_prior_mode=mode, max_iter=8, tol=tol, seed=2)  # type: ignore[arg-type]
    batch = fit_batch_vb(corpus, config, client=client, split_every=3)
    streamed = fit_svb(corpus, config, SVBConfig(batch_size=400, pieces=8), client=client, split_every=3)
    np.testing.assert_array_equal(streamed.state.topic_word_var["default"], batch.state.topic_word_var["default"])
    np.testing.assert_array_equal(streamed.state.doc_topic_prior, batch.state.doc_topic_prior)
    (record,) = streamed.trace
    assert record.iterations == len(batch.trace) and record.converged == batch.converged
    assert record.elbo_per_token * record.tokens == batch.trace[-1].elbo
    assert streamed.iterations == len(batch.trace)


def test_svb_recovers_planted_topics(planted: tuple[Path, object], client: object) -> None:
    path, truth = planted
    result = fit_svb(Corpus.open(path), VBConfig(n_topics=4, seed=1), SVBConfig(batch_size=50), client=client)
    _, cosines = matched_cosines(truth.topic_word["default"], result.state.topic_word()["default"])  # type: ignore[attr-defined]
    assert cosines.min() > 0.95, cosines
    assert result.t == 8 and result.docs_seen == 400 and len(result.trace) == 8
    # The posterior holds every document's words once: lambda sums to eta * K * V plus the tokens.
    lam = result.state.topic_word_var["default"]
    assert lam.sum() == pytest.approx(0.01 * 4 * 40 + sum(r.tokens for r in result.trace), rel=1e-12)


@pytest.mark.parametrize("estep", ["vb", pytest.param("hybrid", marks=pytest.mark.slow)])
def test_same_model_for_any_executor_worker_count_and_shard_size(
    planted: tuple[Path, object], tmp_path: Path, local_cluster: object, estep: str
) -> None:
    from distributed import Client

    path, truth = planted
    config = VBConfig(n_topics=4, seed=9, max_iter=10, estep=estep)  # type: ignore[arg-type]
    base = dict(batch_size=64, shuffle_window=128, pieces=4, min_piece_docs=1)
    local = fit_svb(Corpus.open(path), config, SVBConfig(**base)).state  # type: ignore[arg-type]
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        for executor in ("servers", "threads", "tasks"):
            state = fit_svb(Corpus.open(path), config, SVBConfig(**base, executor=executor), client=client).state  # type: ignore[arg-type]
            np.testing.assert_array_equal(state.topic_word_var["default"], local.topic_word_var["default"])
            np.testing.assert_array_equal(state.doc_topic_prior, local.doc_topic_prior)
    if estep == "vb":  # other shard sizes change the merge order only: equal up to rounding
        other = write_test_store(tmp_path / "s70.zarr", truth.counts, shard_size=70)  # type: ignore[attr-defined]
        resharded = fit_svb(Corpus.open(other), config, SVBConfig(**base)).state  # type: ignore[arg-type]
        np.testing.assert_allclose(resharded.topic_word_var["default"], local.topic_word_var["default"], rtol=1e-9)


def test_servers_get_lambda_once_then_only_column_steps(
    planted: tuple[Path, object], local_cluster: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each local iteration changes lambda only in the minibatch's columns: servers follow by ColumnStep."""
    from distributed import Client

    from topicflow.pipeline.vb import online as online_module
    from topicflow.pipeline.vb.estep_servers import ActorPool

    pools: list[ActorPool] = []

    class RecordedPool(ActorPool):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)
            pools.append(self)

    monkeypatch.setattr(online_module, "ActorPool", RecordedPool)
    path, _ = planted
    config = VBConfig(n_topics=4, seed=3, max_iter=5)
    local = fit_svb(Corpus.open(path), config, SVBConfig(batch_size=100, pieces=4, min_piece_docs=1))
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        served = fit_svb(Corpus.open(path), config,
                         SVBConfig(batch_size=100, pieces=4, min_piece_docs=1, executor="servers"), client=client)
    assert len(pools) == 1 and pools[0].full_syncs == 1
    assert served.iterations == local.iterations > 4
    np.testing.assert_array_equal(served.state.topic_word_var["default"], local.state.topic_word_var["default"])


class Interrupted(Exception):
    pass


def test_resume_from_checkpoint_equals_uninterrupted_run(planted: tuple[Path, object], tmp_path: Path) -> None:
    path, _ = planted
    corpus = Corpus.open(path)
    config = VBConfig(n_topics=4, seed=4, max_iter=10)
    svb = SVBConfig(batch_size=50, shuffle_window=100)
    full = fit_svb(corpus, config, svb)
    policy = CheckpointPolicy(tmp_path / "ckpt", every=2, resume=True)

    def crash_after_five(record: object, state: object) -> None:
        if record.t == 5:  # type: ignore[attr-defined]
            raise Interrupted

    with pytest.raises(Interrupted):
        fit_svb(corpus, config, svb, checkpoint=policy, on_minibatch=crash_after_five)
    redone: list[int] = []
    resumed = fit_svb(corpus, config, dataclasses.replace(svb, executor="tasks"), checkpoint=policy,
                      on_minibatch=lambda record, state: redone.append(record.t))  # type: ignore[attr-defined]
    assert redone == [5, 6, 7, 8]  # from the checkpoint after minibatch 4
    assert resumed.t == full.t == 8 and resumed.iterations == full.iterations
    assert [r.t for r in resumed.trace] == list(range(1, 9))
    np.testing.assert_array_equal(resumed.state.topic_word_var["default"], full.state.topic_word_var["default"])


def test_refuses_what_streaming_vb_cannot_honour(planted: tuple[Path, object]) -> None:
    corpus = Corpus.open(planted[0])
    with pytest.raises(InvalidParameterError, match="optimize_topic_word_prior cannot be used with method 'svb'"):
        fit_svb(corpus, VBConfig(n_topics=4, optimize_topic_word_prior=True), SVBConfig())
    with pytest.raises(InvalidParameterError, match="warm_start applies to method 'batch' only"):
        fit_svb(corpus, VBConfig(n_topics=4, warm_start=True), SVBConfig())
    with pytest.raises(InvalidParameterError, match=r"passes=2: streaming VB \(svb\) sees each document once"):
        SVBConfig.from_online(OnlineConfig(passes=2))
    with pytest.raises(InvalidParameterError, match="needs no corpus size"):
        SVBConfig.from_online(OnlineConfig(total_docs=1000))
    with pytest.raises(InvalidParameterError, match="batch_size must be at least 1"):
        SVBConfig(batch_size=0)
    assert SVBConfig.from_online(OnlineConfig(batch_size=33, executor="threads")) == SVBConfig(33, executor="threads")
