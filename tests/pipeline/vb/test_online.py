"""Online variational LDA: the minibatch plan, the reference, batch equivalence, determinism, resume."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.vb.test_batch import matched_cosines
from tests.pipeline.vb.test_batch_reference import reference_docs
from tests.reference.online_vb_numpy import online_vb_reference
from topicflow.io.corpus.reader import Corpus
from topicflow.models.lda.vb.objective import initial_topic_word_var
from topicflow.models.lda.vb.estep import random_initial_gamma
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb
from topicflow.pipeline.vb.online import OnlineConfig, fit_online, plan_minibatches
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    truth = draw_planted_corpus(n_docs=400, n_topics=4, n_terms=40, doc_length=30, alpha=0.3, seed=21)
    path = write_test_store(tmp_path_factory.mktemp("online") / "c.zarr", truth.counts, shard_size=50)
    return path, truth


def members(minibatch: object, starts: list[int]) -> list[int]:
    return [starts[s] + r for s, lo, hi in minibatch.pieces for r in range(lo, hi)]  # type: ignore[attr-defined]


@pytest.mark.parametrize("window", [0, 120])
def test_plan_visits_every_document_once_per_pass(window: int) -> None:
    sizes = [50, 30, 70, 10, 40]
    starts = list(np.cumsum([0] + sizes[:-1]))
    config = OnlineConfig(batch_size=37, pieces=4, min_piece_docs=1, shuffle_window=window)
    plan = list(plan_minibatches(sizes, range(5), config, seed=3, epoch=0))
    seen = [d for mb in plan for d in members(mb, starts)]
    assert sorted(seen) == list(range(sum(sizes)))
    assert [mb.n_docs for mb in plan] == [37] * 5 + [15]
    for mb in plan:
        for shard, lo, hi in mb.pieces:
            assert 0 <= lo < hi <= sizes[shard] and hi - lo <= config.piece_docs
    if window:
        assert seen != sorted(seen)
        for lo in range(0, 200, window):  # the shuffle never leaves its window
            assert sorted(seen[lo:lo + window]) == list(range(lo, min(200, lo + window)))
        other = [d for mb in plan_minibatches(sizes, range(5), config, seed=3, epoch=1) for d in members(mb, starts)]
        assert other != seen  # each pass draws its own order
    else:
        assert seen == sorted(seen)


def test_plan_depends_on_documents_not_shards() -> None:
    config = OnlineConfig(batch_size=25, pieces=3, min_piece_docs=1, shuffle_window=60)
    by_shards = {}
    for sizes in ([50, 50, 50], [30] * 5, [150]):
        starts = list(np.cumsum([0] + sizes[:-1]))
        plan = plan_minibatches(sizes, range(len(sizes)), config, seed=8, epoch=2)
        by_shards[len(sizes)] = [members(mb, starts) for mb in plan]
    assert by_shards[3] == by_shards[5] == by_shards[1]


def test_plan_over_new_shards_only() -> None:
    sizes = [50, 30, 70]
    plan = list(plan_minibatches(sizes, [1, 2], OnlineConfig(batch_size=64, pieces=2, min_piece_docs=1), seed=0, epoch=0))
    assert {shard for mb in plan for shard, _, _ in mb.pieces} == {1, 2}
    assert sum(mb.n_docs for mb in plan) == 100


def test_online_matches_numpy_reference(planted: tuple[Path, object]) -> None:
    path, truth = planted
    corpus = Corpus.open(path)
    config = VBConfig(n_topics=4, doc_topic_prior_mode="fixed", doc_topic_prior=0.3, topic_word_prior=0.05, max_doc_iter=50, doc_tol=1e-6, seed=5)
    online = OnlineConfig(batch_size=80, tau0=4.0, kappa=0.6, pieces=4, min_piece_docs=1, eval_every=0)
    result = fit_online(corpus, config, online)
    batches = [list(range(lo, lo + 80)) for lo in range(0, 400, 80)]
    docs = reference_docs({"default": truth.counts["default"].toarray()})  # type: ignore[attr-defined]
    lam0 = {"default": initial_topic_word_var(4, 40, seed=5)}
    # Online VB starts each document's gamma at Gamma(100, 1/100) draws keyed by its position.
    start = lambda members: random_initial_gamma(len(members), 4, seed=5, first_doc=members[0])  # noqa: E731
    history = online_vb_reference(docs, batches, lam0, 0.05, np.full(4, 0.3), 4.0, 0.6, 400, 50, 1e-6,
                                  gamma_init=start)
    np.testing.assert_allclose(result.state.topic_word_var["default"], history[-1]["default"], rtol=1e-8)
    assert result.t == 5 and result.docs_seen == 400
    assert [r.rho for r in result.trace] == pytest.approx([(4.0 + t) ** -0.6 for t in range(5)])


@pytest.mark.parametrize("optimize_eta", [False, True])
def test_one_full_minibatch_with_unit_step_is_a_batch_iteration(
    planted: tuple[Path, object], client: object, optimize_eta: bool
) -> None:
    path, _ = planted
    corpus = Corpus.open(path)
    config = VBConfig(n_topics=4, max_iter=1, tol=0.0, seed=2, optimize_topic_word_prior=optimize_eta, gamma_init="uniform")
    batch = fit_batch_vb(corpus, config, client=client, split_every=3).state
    # pieces of 50 documents line up with the shards, so even the merge tree is the batch one.
    online = OnlineConfig(batch_size=400, tau0=0.0, kappa=0.0, pieces=8, eval_every=0)
    state = fit_online(corpus, config, online, client=client, split_every=3).state
    np.testing.assert_array_equal(state.topic_word_var["default"], batch.topic_word_var["default"])
    np.testing.assert_array_equal(state.doc_topic_prior, batch.doc_topic_prior)
    assert state.topic_word_prior["default"] == batch.topic_word_prior["default"]


def test_online_recovers_planted_topics(planted: tuple[Path, object], client: object) -> None:
    path, truth = planted
    config = VBConfig(n_topics=4, seed=1)
    online = OnlineConfig(batch_size=50, tau0=1.0, kappa=0.6, passes=4, shuffle_window=200)
    result = fit_online(Corpus.open(path), config, online, client=client)
    _, cosines = matched_cosines(truth.topic_word["default"], result.state.topic_word()["default"])  # type: ignore[attr-defined]
    assert cosines.mean() > 0.9, cosines
    assert len(result.trace) == 32
    bounds = [r.bound_per_token for r in result.trace if np.isfinite(r.bound_per_token)]
    assert len(bounds) == 3 and bounds[-1] > bounds[0]


def test_same_seed_same_model_for_any_worker_count_and_shard_size(
    planted: tuple[Path, object], tmp_path: Path, local_cluster: object
) -> None:
    from distributed import Client

    path, truth = planted
    config = VBConfig(n_topics=4, seed=9)
    online = OnlineConfig(batch_size=64, passes=2, shuffle_window=128, pieces=4, min_piece_docs=1)
    reference = fit_online(Corpus.open(path), config, online).state
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        distributed = fit_online(Corpus.open(path), config, online, client=client).state
    np.testing.assert_array_equal(distributed.topic_word_var["default"], reference.topic_word_var["default"])
    other = write_test_store(tmp_path / "s70.zarr", truth.counts, shard_size=70)  # type: ignore[attr-defined]
    resharded = fit_online(Corpus.open(other), config, online).state
    np.testing.assert_allclose(resharded.topic_word_var["default"], reference.topic_word_var["default"], rtol=1e-11)
    np.testing.assert_allclose(resharded.doc_topic_prior, reference.doc_topic_prior, rtol=1e-11)


class Interrupted(Exception):
    pass


def test_resume_from_checkpoint_equals_uninterrupted_run(planted: tuple[Path, object], tmp_path: Path) -> None:
    path, _ = planted
    corpus = Corpus.open(path)
    config = VBConfig(n_topics=4, seed=4)
    online = OnlineConfig(batch_size=60, passes=2, shuffle_window=100)
    full = fit_online(corpus, config, online)
    policy = CheckpointPolicy(tmp_path / "ckpt", every=3, resume=True)

    def crash_after_eight(record: object, state: object) -> None:
        if record.t == 8:  # type: ignore[attr-defined]
            raise Interrupted

    with pytest.raises(Interrupted):
        fit_online(corpus, config, online, checkpoint=policy, on_minibatch=crash_after_eight)
    # The rest runs on another executor: the checkpoint still applies, and the model is the same.
    redone: list[int] = []
    resumed = fit_online(corpus, config, dataclasses.replace(online, executor="tasks"), checkpoint=policy,
                         on_minibatch=lambda record, state: redone.append(record.t))  # type: ignore[attr-defined]
    assert redone == list(range(7, 15))  # from the checkpoint after minibatch 6
    assert resumed.t == full.t == 14
    assert [r.t for r in resumed.trace] == list(range(1, 15))
    np.testing.assert_array_equal(resumed.state.topic_word_var["default"], full.state.topic_word_var["default"])
    np.testing.assert_array_equal(resumed.state.doc_topic_prior, full.state.doc_topic_prior)


@pytest.mark.parametrize("estep", ["vb", "hybrid"])
def test_every_executor_gives_the_same_model(planted: tuple[Path, object], local_cluster: object, estep: str) -> None:
    """Tasks get exp(E[log beta]) for every term from the driver; servers and threads compute their own
    terms' values from lambda. The values, and so the models, must be the same."""
    from distributed import Client

    path, _ = planted
    config = VBConfig(n_topics=4, seed=12, estep=estep)  # type: ignore[arg-type]
    base = dict(batch_size=100, passes=2, shuffle_window=200, pieces=4, min_piece_docs=1)
    local = fit_online(Corpus.open(path), config, OnlineConfig(**base)).state  # type: ignore[arg-type]
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        for executor in ("servers", "threads", "tasks"):
            state = fit_online(Corpus.open(path), config, OnlineConfig(**base, executor=executor), client=client).state  # type: ignore[arg-type]
            np.testing.assert_array_equal(state.topic_word_var["default"], local.topic_word_var["default"])
            np.testing.assert_array_equal(state.doc_topic_prior, local.doc_topic_prior)


def test_servers_get_lambda_once_then_only_steps(
    planted: tuple[Path, object], local_cluster: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Servers keep a replica of lambda and follow the driver's steps; the model is the local one."""
    from distributed import Client

    from topicflow.pipeline.vb import online as online_module
    from topicflow.pipeline.vb.estep_servers import ActorPool, LocalPool

    pools: list[ActorPool] = []

    class RecordedPool(ActorPool):
        def __init__(self, *args: object) -> None:
            super().__init__(*args)
            pools.append(self)

    monkeypatch.setattr(online_module, "ActorPool", RecordedPool)
    path, _ = planted
    corpus = Corpus.open(path)
    config = VBConfig(n_topics=4, seed=3, optimize_topic_word_prior=True)
    base = dict(batch_size=100, passes=2, pieces=4, min_piece_docs=1)
    local = fit_online(corpus, config, OnlineConfig(**base)).state  # type: ignore[arg-type]
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        result = fit_online(corpus, config, OnlineConfig(**base, executor="servers"), client=client)  # type: ignore[arg-type]
        assert result.t == 8 and len(pools) == 1 and pools[0].full_syncs == 1
        np.testing.assert_array_equal(result.state.topic_word_var["default"], local.topic_word_var["default"])
        assert result.state.topic_word_prior["default"] == local.topic_word_prior["default"]

        # A state the servers were not stepped to is shipped whole, and used.
        pool = RecordedPool(client, str(corpus.path), corpus.shards, corpus.vocab_sizes())
        threads = LocalPool(str(corpus.path), corpus.shards, corpus.vocab_sizes(), threads=2)
        pieces = [(0, 0, 0, 50), (1, 1, 0, 30)]
        params = config.estep_params(online=True)
        for state in (local, result.state.with_updates(doc_topic_prior=local.doc_topic_prior * 2)):
            got = pool.estep(pieces, state, params, 0, split_every=8)
            want = threads.estep(pieces, state, params, 0, split_every=8)
            np.testing.assert_array_equal(got.topic_terms["default"].values, want.topic_terms["default"].values)
        assert pool.full_syncs == 2
        threads.close()
