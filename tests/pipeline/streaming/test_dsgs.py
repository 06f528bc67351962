"""The DSGS parameter server and the SGS / DSGS drivers: no lost update, exact equalities, bounds, models.

Where a test's outcome would depend on how the sampler loops happen to interleave, an event hook
(:mod:`topicflow.testing.faults`) fixes what matters: that every loop claims a minibatch, or the
whole order of fetches and pushes. Nothing here waits on the clock.
"""
from __future__ import annotations

import concurrent.futures
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from tests.reference import sgs_numpy as ref
from topicflow.errors import InvalidParameterError
from topicflow.io.models.store import load_model, save_model
from topicflow.io.corpus.reader import Corpus
from topicflow.models.lda.streaming import sgs
from topicflow.models.lda.streaming.sgs import SGSParams
from topicflow.pipeline.streaming.dsgs import ParameterServer, ServerHandle, WireDelta, run_dsgs
from topicflow.pipeline.cluster import actor_of
from topicflow.pipeline.policies import SyncPolicy
from topicflow.pipeline.streaming.sgs import run_sgs
from topicflow.testing.corpora import draw_planted_corpus, write_test_store
from topicflow.testing.faults import After, Barrier, InOrder

N_DOCS = 360
BATCH = 40
N_TERMS, N_TOPICS = 30, 3


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three well-separated topics over 30 terms; shards of 64 documents (minibatches straddle them)."""
    planted = draw_planted_corpus(n_docs=N_DOCS, n_topics=N_TOPICS, n_terms=N_TERMS, doc_length=25, alpha=0.1, seed=3)
    return write_test_store(tmp_path_factory.mktemp("sgs") / "train.zarr", {"default": planted.counts["default"]},
                            shard_size=64)


def params(decay: float = 0.9, **changes: Any) -> SGSParams:
    settings: dict[str, Any] = dict(n_topics=N_TOPICS, doc_topic_prior=0.1, topic_word_prior=0.05, decay=decay,
                                    max_iter=15, seed=1)
    settings.update(changes)
    return SGSParams(**settings)


def known_deltas(n_pushes: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """Integer deltas on random distinct rows, as minibatch_delta returns them."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n_pushes):
        rows = np.sort(rng.choice(N_TERMS, size=int(rng.integers(1, 8)), replace=False)).astype(np.int64)
        out.append((rows, rng.integers(0, 6, size=(rows.shape[0], N_TOPICS)).astype(np.int32)))
    return out


def push_all(server: Any, deltas: list[tuple[np.ndarray, np.ndarray]], first_id: int) -> list[int]:
    """Push every delta (tagged first_id, first_id + 1, ...); returns the versions the server answered."""
    handle = ServerHandle(server)
    versions = []
    for i, (rows, values) in enumerate(deltas):
        fetched = handle.call("fetch", rows)
        versions.append(handle.call("push", rows, values, fetched.version, first_id + i, 0))
    return versions


def expected_after(start: np.ndarray, deltas: dict[int, tuple[np.ndarray, np.ndarray]], order: list[int],
                   decay: float) -> tuple[np.ndarray, np.ndarray]:
    counts, totals = start.copy(), start.sum(axis=0)
    for tag in order:
        rows, values = deltas[tag]
        counts, totals = ref.decayed_update(counts, totals, rows, values, decay)
    return counts, totals


# ----------------------------------------------------------------------------- the server


@pytest.mark.parametrize("decay", [1.0, 0.8])
def test_concurrent_pushes_from_threads_lose_no_update(decay: float) -> None:
    start = np.arange(N_TERMS * N_TOPICS, dtype=np.float64).reshape(N_TERMS, N_TOPICS) % 7
    server = ParameterServer(start, start.sum(axis=0), decay, 0)
    batches = [known_deltas(40, seed) for seed in range(6)]
    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        versions = list(pool.map(lambda i: push_all(server, batches[i], 1000 * i), range(6)))
    assert sorted(v for part in versions for v in part) == list(range(1, 241))
    counts, totals, version = server.snapshot()
    stats = server.stats()
    assert version == 240 and sorted(stats["push_order"]) == sorted(1000 * i + j for i in range(6) for j in range(40))
    deltas = {1000 * i + j: batches[i][j] for i in range(6) for j in range(40)}
    expected_counts, expected_totals = expected_after(start, deltas, stats["push_order"], decay)
    assert_array_equal(counts, expected_counts)
    assert_array_equal(totals, expected_totals)
    if decay == 1.0:  # any order gives the plain sum
        added = np.zeros_like(start)
        for rows, values in deltas.values():
            added[rows] += values
        assert_array_equal(counts, start + added)


@pytest.mark.parametrize("decay", [1.0, 0.8])
def test_concurrent_pushes_to_a_dask_actor_lose_no_update(decay: float, local_cluster: object) -> None:
    from distributed import Client

    start = np.ones((N_TERMS, N_TOPICS))
    with Client(local_cluster) as client:  # type: ignore[arg-type]
        # actor_of keeps the submitting future: a handle alone lets the scheduler release the actor (test_actors.py)
        actor = actor_of(client.submit(ParameterServer, start, start.sum(axis=0), decay, 0, actor=True, pure=False))
        batches = [known_deltas(25, 10 + seed) for seed in range(4)]
        tasks = [client.submit(push_all, actor, batches[i], 1000 * i, pure=False) for i in range(3)]
        with concurrent.futures.ThreadPoolExecutor(1) as pool:  # and one more pusher from the client side
            local = pool.submit(push_all, actor, batches[3], 3000)
            versions = [v for part in client.gather(tasks) for v in part] + local.result()
        counts, totals, version = actor.snapshot().result()
        stats = actor.stats().result()
    assert sorted(versions) == list(range(1, 101)) and version == 100
    deltas = {1000 * i + j: batches[i][j] for i in range(4) for j in range(25)}
    expected_counts, expected_totals = expected_after(start, deltas, stats["push_order"], decay)
    assert_array_equal(counts, expected_counts)
    assert_array_equal(totals, expected_totals)


def test_wire_delta_round_trip() -> None:
    values = np.array([[0, 3, 0], [1, 0, 0], [0, 0, 0], [2, 2, 5]], dtype=np.int32)
    wire = WireDelta.from_dense(values)
    assert wire.indptr.tolist() == [0, 1, 2, 2, 5] and wire.counts.tolist() == [3, 1, 2, 2, 5]
    assert_array_equal(wire.to_dense(), values)
    assert wire.nbytes == 5 * 4 + 5 * 4 + 5 * 4
    server = ParameterServer(np.zeros((4, 3)), np.zeros(3), 0.5, 0)
    server.push(np.arange(4), wire, 0)
    assert_array_equal(server.snapshot()[0], values * 0.5)
    assert_array_equal(server.snapshot()[1], values.sum(axis=0) * 0.5)


def test_fetch_grows_and_accounts_bytes() -> None:
    server = ParameterServer(np.ones((4, 2)), np.full(2, 4.0), 1.0, 3)
    assert [server.claim() for _ in range(4)] == [0, 1, 2, -1]
    fetched = server.fetch(np.array([1, 5]), 2)
    assert fetched.version == 0 and fetched.n_terms == 6 and fetched.missing == 2
    assert_array_equal(fetched.rows, [[1.0, 1.0], [0.0, 0.0]])
    assert server.push(np.array([5]), np.array([[2, 1]], dtype=np.int32), 0, 1, 6) == 1
    assert server.watermark() == 0
    assert server.push(np.array([0]), np.array([[1, 0]], dtype=np.int32), 0, 0, 6) == 2
    assert server.watermark() == 2 and server.fetch(np.array([0]), 2).missing == 0
    stats = server.stats()
    assert stats["max_staleness"] == 1 and stats["push_order"] == [1, 0]
    assert stats["bytes_sent"] == (2 + 1) * 16 + (1 + 1) * 16  # per fetch: rows (8 bytes x 2 topics) and N_k
    assert stats["bytes_received"] == 2 * 8 + 2 * (8 + 2 * 4) + 1 * 8  # requested ids; pushed ids + int32 deltas
    assert stats["dense_update_bytes"] == 6 * 2 * 8


# ----------------------------------------------------------------------------- drivers


def test_sgs_driver_equals_the_model_loop_and_resumes_exactly(store: Path) -> None:
    corpus = Corpus.open(store)
    settings = params()
    whole = run_sgs(corpus, settings, batch_size=BATCH)
    assert len(whole.records) == 9 and whole.state.docs_seen == N_DOCS
    assert [r.first_doc for r in whole.records] == list(range(0, N_DOCS, BATCH))
    state = sgs.empty_state(N_TERMS, settings)
    for block in corpus.iter_minibatches(BATCH):
        state, _ = sgs.observe_minibatch(state, block, settings)
    assert_array_equal(whole.state.term_topic_counts, state.term_topic_counts)
    seen: list[tuple[int, int]] = []
    first = run_sgs(corpus, settings, batch_size=BATCH, max_docs=160,
                    on_minibatch=lambda record, state: seen.append((record.minibatch, state.docs_seen)))
    assert seen == [(0, 40), (1, 80), (2, 120), (3, 160)]
    kept = first.state.term_topic_counts.copy()
    rest = run_sgs(corpus, settings, batch_size=BATCH, state=first.state)
    assert_array_equal(first.state.term_topic_counts, kept)  # the state to resume from is not modified
    assert [r.first_doc for r in rest.records] == list(range(160, N_DOCS, BATCH))
    assert_array_equal(rest.state.term_topic_counts, whole.state.term_topic_counts)
    assert (rest.state.minibatches_done, rest.state.tokens_seen) == (9, whole.state.tokens_seen)


@pytest.mark.parametrize("n_workers, staleness", [(1, None), (3, 0)])
def test_dsgs_without_asynchrony_equals_sgs(n_workers: int, staleness: int | None, store: Path,
                                            client: object) -> None:
    corpus = Corpus.open(store)
    settings = params()
    expected = run_sgs(corpus, settings, batch_size=BATCH)
    every_loop_claims = Barrier(client, "dsgs-claimed", key="loop", parties=n_workers)  # a late loop gets one too
    result = run_dsgs(corpus, settings, batch_size=BATCH, client=client, n_workers=n_workers, staleness=staleness,
                      hook=every_loop_claims)
    assert_array_equal(result.state.term_topic_counts, expected.state.term_topic_counts)
    assert_array_equal(result.state.topic_counts, expected.state.topic_counts)
    assert result.server_stats["push_order"] == list(range(9))
    assert all(r.lag == 0 and r.staleness == 0 for r in result.records)
    assert [r.iterations for r in result.records] == [r.iterations for r in expected.records]
    assert [r.perplexity for r in result.records] == [r.perplexity for r in expected.records]
    assert (result.state.docs_seen, result.state.minibatches_done, result.state.tokens_seen) == (
        expected.state.docs_seen, expected.state.minibatches_done, expected.state.tokens_seen)
    assert {r.worker for r in result.records} == set(range(n_workers))


@pytest.mark.parametrize("staleness", [None, 1])
def test_asynchronous_dsgs_keeps_every_update_and_its_bound(staleness: int | None, store: Path,
                                                            client: object) -> None:
    """Asynchronous loops in one fixed interleaving (fetch 0, fetch 1, push 0, fetch 2, push 1, ...), so
    the outcome does not depend on which loop the machine happens to run first: every minibatch but
    the first samples without its predecessor's counts (lag 1) and sees that push land before its own."""
    corpus = Corpus.open(store)
    interleaved = InOrder(client, [After("dsgs-fetch", "dsgs-pushed", -2), After("dsgs-push", "dsgs-fetched", +1),
                                   After("dsgs-push", "dsgs-pushed", -1)], key="minibatch", count=9)
    result = run_dsgs(corpus, params(decay=1.0), batch_size=BATCH, client=client, n_workers=3, staleness=staleness,
                      hook=interleaved)
    assert [r.minibatch for r in result.records] == list(range(9))
    assert [(r.lag, r.staleness) for r in result.records] == [(0, 0)] + [(1, 1)] * 8
    assert result.server_stats["push_order"] == list(range(9))
    assert sorted(result.server_stats["push_order"]) == list(range(9))
    assert_allclose(result.state.term_topic_counts.sum(), corpus.n_tokens)  # decay 1: every token counted once
    assert_allclose(result.state.topic_counts, result.state.term_topic_counts.sum(axis=0))
    if staleness is not None:
        assert max(r.lag for r in result.records) <= staleness
    assert max(r.staleness for r in result.records) == result.server_stats["max_staleness"]
    for r in result.records:
        assert r.bytes_pushed == r.terms_used * 8 + (r.terms_used + 1) * 4 + r.nonzeros * 8  # ids, CSR delta
        assert r.terms_used <= r.nonzeros <= min(r.tokens, r.terms_used * N_TOPICS)
        assert r.bytes_fetched == (r.terms_used + 1) * N_TOPICS * 8
        assert r.dense_bytes == N_TERMS * N_TOPICS * 8
    lam = result.model.state.topic_word_var["default"]
    topics = lam / lam.sum(axis=1, keepdims=True)
    owners = [np.bincount(np.argsort(-row)[:5] // 10, minlength=3).max() for row in topics]
    assert min(owners) >= 4  # each topic's top terms come from one planted block of 10 terms


def test_sync_policy_and_synchronized_start(store: Path) -> None:
    policy = SyncPolicy(staleness=2, sync_first=3)
    assert [policy.needed(t) for t in range(6)] == [0, 1, 2, 1, 2, 3]
    assert SyncPolicy().needed(5) is None and SyncPolicy(sync_first=2).needed(5) is None
    with pytest.raises(InvalidParameterError, match="sync_first"):
        SyncPolicy(sync_first=-1)
    result = run_dsgs(Corpus.open(store), params(), batch_size=BATCH, n_workers=3, sync_first=4)
    assert all(r.lag == 0 for r in result.records[:4]) and result.sync_first == 4
    order = result.server_stats["push_order"]
    positions = [order.index(t) for t in range(4)]
    assert positions == sorted(positions)  # each of the first four waited for all earlier ones


def test_models_are_lda_models(store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(store)
    settings = params()
    for result, algorithm in ((run_sgs(corpus, settings, batch_size=BATCH), "sgs"),
                              (run_dsgs(corpus, settings, batch_size=BATCH, n_workers=2), "dsgs")):
        lam = result.model.state.topic_word_var["default"]
        assert_array_equal(lam, result.state.term_topic_counts.T + 0.05)
        assert_array_equal(result.model.state.doc_topic_prior, [0.1] * N_TOPICS)
        save_model(tmp_path / algorithm, result.model)
        loaded = load_model(tmp_path / algorithm)
        assert loaded.info.kind == "stream" and loaded.info.algorithm == algorithm
        assert loaded.info.settings["batch_size"] == BATCH and loaded.info.settings["decay"] == 0.9
        assert_array_equal(loaded.state.topic_word_var["default"], lam)


def test_driver_validation(store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(store)
    with pytest.raises(InvalidParameterError, match="batch_size"):
        run_sgs(corpus, params(), batch_size=0)
    with pytest.raises(InvalidParameterError, match="n_workers"):
        run_dsgs(corpus, params(), batch_size=BATCH, n_workers=0)
    with pytest.raises(InvalidParameterError, match="staleness"):
        run_dsgs(corpus, params(), batch_size=BATCH, staleness=-1)
    with pytest.raises(InvalidParameterError, match="topics"):
        run_sgs(corpus, params(), batch_size=BATCH, state=sgs.empty_state(N_TERMS, params(n_topics=4)))
    planted = draw_planted_corpus(n_docs=20, n_topics=2, n_terms=10, doc_length=5, alpha=0.5, seed=1,
                                  languages=("en", "de"))
    two = write_test_store(tmp_path / "two.zarr", planted.counts, shard_size=10)
    with pytest.raises(InvalidParameterError, match="multilingual"):
        run_sgs(Corpus.open(two), params(), batch_size=BATCH)
