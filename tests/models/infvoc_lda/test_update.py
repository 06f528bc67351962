"""Tests of topicflow.models.infvoc_lda.update: expansion, eqs. 7.6-7.8, reordering and contraction.

* Whole minibatches against the plain-loop reference tests/reference/infvoc.py: E-step (same uniforms), sticks,
  ranks (with and without G0), expansion, reorder and contraction over several minibatches, integer parts
  (TOS words, counts) equal, floats to 1e-12.
* Batch equivalence (|S| = D, kappa = 0): nu1 = 1 + phi sums, nu2 = alpha^beta + tail sums, R = G0 * phi.
* Reordering keeps the multiset of (word, nu1, nu2) of the kept words and keeps exactly the top T by R (ties:
  lower word id), and new words enter with nu1 = 1 and nu2 = 1 or alpha^beta (P3).
* restate_tail (an option): matches the reference's loop, and is the identity while the order stands (nu2 of new
  words = alpha^beta), i.e. it gives the nu2 that eqs. 7.6-7.7 hold for an unchanged order.
* Planted word (spec 3.11): a word absent from the first minibatches, frequent in one topic's documents
  later, reaches that topic's top 10 within a few minibatches.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from tests.models.infvoc_lda.test_estep import csr
from tests.models.infvoc_lda.test_tos import random_state
from tests.reference import infvoc as ref
from topicflow.errors import InvalidParameterError
from topicflow.models.infvoc_lda.estep import InfVocStats, estep_documents
from topicflow.models.infvoc_lda.params import InfVocParams
from topicflow.models.infvoc_lda.tos import (
    InfVocState,
    empty_state,
    prepare_weights,
    top_words,
)
from topicflow.models.infvoc_lda.update import (
    expand_tos,
    reorder_and_contract,
    restate_tails,
    update_minibatch,
)
from topicflow.models.lda.vb.online import StepSchedule


def to_reference(state: InfVocState) -> ref.RefState:
    tos = [[[int(w), float(a), float(b)] for w, a, b in zip(*state.topic_tos(k))] for k in range(state.n_topics)]
    ranks = []
    for k in range(state.n_topics):
        words, log_r = state.topic_log_ranks(k)
        ranks.append(dict(zip(words.tolist(), log_r.tolist())))
    return ref.RefState(tos, ranks, state.n_updates)


def assert_same_state(fast: InfVocState, slow: ref.RefState) -> None:
    assert fast.n_updates == slow.n_updates
    for k in range(fast.n_topics):
        words, nu1, nu2 = fast.topic_tos(k)
        assert words.tolist() == [int(e[0]) for e in slow.tos[k]]
        assert_allclose(nu1, [e[1] for e in slow.tos[k]], rtol=1e-12)
        assert_allclose(nu2, [e[2] for e in slow.tos[k]], rtol=1e-12)
        rank_words, log_r = fast.topic_log_ranks(k)
        assert rank_words.tolist() == sorted(slow.log_rank[k])
        assert_allclose(log_r, [slow.log_rank[k][w] for w in rank_words.tolist()], rtol=1e-12, atol=1e-12)


def stream_docs(rng: np.random.Generator, minibatch: int, n_docs: int) -> list[list[int]]:
    """Documents whose vocabulary widens with the minibatch number (new words keep arriving)."""
    top = 6 + 3 * minibatch
    return [rng.integers(0, top, rng.integers(1, 10)).tolist() for _ in range(n_docs)]


@pytest.mark.parametrize("with_g0, new_word_nu2, restate_tail", [(False, "one", False), (True, "one", False),
                                                                 (True, "prior", False), (True, "one", True)])
def test_minibatches_match_reference(with_g0: bool, new_word_nu2: str, restate_tail: bool) -> None:
    rng = np.random.default_rng(11)
    params = InfVocParams(n_topics=3, stick_concentration=20.0, truncation=8, reorder_every=2,
                          step=StepSchedule(tau0=2.0, kappa=0.7), burn_in=2, samples=3, seed=5,
                          new_word_nu2=new_word_nu2, restate_tail=restate_tail)  # type: ignore[arg-type]
    log_g0 = rng.uniform(-30.0, -5.0, 64) if with_g0 else None
    fast, slow, first_doc, n_total = empty_state(3), ref.empty(3), 0, 200
    for i in range(1, 7):  # reorders at i = 2, 4, 6
        docs = stream_docs(rng, i, 7)
        indptr, words = csr(docs)
        prepared = prepare_weights(fast, words)
        present, W = ref.weights(slow, words.tolist())
        assert_allclose(prepared.weights, W, rtol=1e-12, atol=1e-300)
        halves = [csr(docs[:3]), csr(docs[3:])]  # two partitions, merged as the driver will
        stats = InfVocStats.zeros(3, params.samples)
        for (part_indptr, part_words), offset in zip(halves, (0, 3)):
            stats = stats.merge(estep_documents(part_indptr, part_words, prepared, params, first_doc=first_doc + offset,
                                                minibatch=i)[0])
        kept, _ = ref.estep(docs, first_doc, present, W, 3, params.alpha, 5, i, 2, 3)
        assert {(int(w), k): int(v) for w, row in zip(stats.word_ids, stats.kept_counts)
                for k, v in enumerate(row) if v} == kept
        fast = update_minibatch(fast, stats, params, n_docs_total=n_total, log_g0=log_g0)
        slow = ref.update(slow, kept, len(docs), n_total, params.samples, params.stick_concentration, params.new_nu2,
                          params.step.rho(i), params.truncation, params.reorder_every,
                          None if log_g0 is None else dict(enumerate(log_g0.tolist())), restate_tail=restate_tail)
        assert_same_state(fast, slow)
        first_doc += len(docs)
    assert fast.tos_sizes().max() == params.truncation  # contracted at i = 6 (the vocabulary reached 24 words)


def test_restated_tails_are_what_the_updates_hold_while_the_order_stands() -> None:
    """With nu2 of new words = alpha^beta and no reordering, eqs. 7.6-7.7 keep nu2_t = alpha^beta + sum_{s>t}
    (nu1_s - 1) exactly (both are the same step-weighted averages), so restating changes nothing; after a
    reorder it is the nu2 a run in the new order would hold, not the carried one."""
    rng = np.random.default_rng(21)
    params = InfVocParams(n_topics=3, stick_concentration=20.0, truncation=100, reorder_every=1000,
                          step=StepSchedule(tau0=2.0, kappa=0.7), burn_in=1, samples=2, new_word_nu2="prior")
    state, first_doc = empty_state(3), 0
    for i in range(1, 6):
        docs = stream_docs(rng, i, 6)
        indptr, words = csr(docs)
        stats, _ = estep_documents(indptr, words, prepare_weights(state, words), params, first_doc=first_doc,
                                   minibatch=i)
        state = update_minibatch(state, stats, params, n_docs_total=60)
        first_doc += len(docs)
        assert_allclose(restate_tails(state, params).nu2, state.nu2, rtol=1e-12)
    ranked = reorder_and_contract(state, 9)
    restated = restate_tails(ranked, params)
    assert_array_equal(restated.nu1, ranked.nu1)
    assert_array_equal(restated.tos_words, ranked.tos_words)
    assert not np.allclose(restated.nu2, ranked.nu2)  # the carried nu2 belonged to the old positions
    for k in range(3):
        _, nu1, nu2 = restated.topic_tos(k)
        assert_allclose(nu2, [20.0 + float(np.sum(nu1[t + 1:] - 1.0)) for t in range(nu1.shape[0])], rtol=1e-12)


def test_batch_equivalence_closed_form() -> None:
    """|S| = D and kappa = 0 (epsilon = 1): one update is the closed form, whatever the previous nu and R."""
    rng = np.random.default_rng(12)
    state = random_state(rng, n_topics=3, n_words=12, size=7)
    params = InfVocParams(n_topics=3, stick_concentration=50.0, truncation=100, step=StepSchedule(tau0=1.0, kappa=0.0))
    stats = InfVocStats(np.array([1, 4, 12, 13]), rng.integers(0, 9, (4, 3)).astype(float), 6, 40, params.samples)
    log_g0 = rng.uniform(-20.0, -3.0, 14)
    new = update_minibatch(state, stats, params, n_docs_total=6, log_g0=log_g0)
    phi = stats.kept_counts / params.samples
    for k in range(3):
        words, nu1, nu2 = new.topic_tos(k)
        c = np.array([phi[list(stats.word_ids).index(w), k] if w in stats.word_ids else 0.0 for w in words])
        assert_allclose(nu1, 1.0 + c, rtol=1e-12)
        assert_allclose(nu2, [50.0 + c[t + 1:].sum() for t in range(len(c))], rtol=1e-12)
        rank_words, log_r = new.topic_log_ranks(k)
        nz = phi[:, k] > 0
        assert_array_equal(rank_words, stats.word_ids[nz])  # eps = 1 forgets every old score
        assert_allclose(log_r, log_g0[stats.word_ids[nz]] + np.log(phi[nz, k]), rtol=1e-12)


def test_reorder_keeps_entries_and_exactly_the_top_t() -> None:
    rng = np.random.default_rng(13)
    state = random_state(rng, n_topics=4, n_words=15, size=10)
    for truncation in (3, 6, 10, 50):
        new = reorder_and_contract(state, truncation)
        for k in range(4):
            words, nu1, nu2 = state.topic_tos(k)
            entries = {int(w): (a, b) for w, a, b in zip(words, nu1, nu2)}
            kept_words, kept1, kept2 = new.topic_tos(k)
            assert len(kept_words) == min(truncation, len(words))
            assert all(entries[int(w)] == (a, b) for w, a, b in zip(kept_words, kept1, kept2))
            rank_words, log_r = state.topic_log_ranks(k)
            score = {int(w): v for w, v in zip(rank_words, log_r)}
            want = sorted(entries, key=lambda w: (-score.get(w, -math.inf), w))[:truncation]
            assert kept_words.tolist() == want
    # the ranks themselves are untouched by a reorder
    assert_array_equal(new.rank_log, state.rank_log)


@pytest.mark.parametrize("mode, nu2", [("one", 1.0), ("prior", 77.0)])
def test_expansion_appends_new_words_in_id_order(mode: str, nu2: float) -> None:
    state = random_state(np.random.default_rng(14), n_topics=2, n_words=8, size=4)
    params = InfVocParams(n_topics=2, stick_concentration=77.0, new_word_nu2=mode)  # type: ignore[arg-type]
    new = expand_tos(state, np.array([0, 3, 9, 11]), params)
    for k in range(2):
        old_words = state.topic_tos(k)[0]
        words, nu1, nu2s = new.topic_tos(k)
        added = [w for w in (0, 3, 9, 11) if w not in old_words]
        assert words.tolist() == old_words.tolist() + added
        assert_array_equal(nu1[len(old_words):], 1.0)
        assert_array_equal(nu2s[len(old_words):], nu2)


def test_update_errors() -> None:
    params = InfVocParams(n_topics=2)
    stats = InfVocStats(np.array([3]), np.ones((1, 2)), 2, 2, params.samples)
    with pytest.raises(InvalidParameterError, match="below the minibatch size"):
        update_minibatch(empty_state(2), stats, params, n_docs_total=1)
    with pytest.raises(InvalidParameterError, match="log_g0 has 2 entries"):
        update_minibatch(empty_state(2), stats, params, n_docs_total=5, log_g0=np.zeros(2))
    with pytest.raises(InvalidParameterError, match="at least one document"):
        update_minibatch(empty_state(2), InfVocStats.zeros(2, 5), params, n_docs_total=5)


def planted_stream(rng: np.random.Generator, n_minibatches: int, n_docs: int, doc_len: int, planted_from: int
                   ) -> list[list[list[int]]]:
    """Three topics on disjoint 15-word blocks (Zipf-like weights); from ``planted_from`` on, word 200 is a
    frequent word of topic 1's documents (each document is mostly one topic)."""
    base = 1.0 / np.arange(1, 16)
    batches = []
    for i in range(n_minibatches):
        docs = []
        for _ in range(n_docs):
            topic = int(rng.integers(0, 3))
            words = 15 * topic + rng.choice(15, doc_len, p=base / base.sum())
            if topic == 1 and i >= planted_from:
                words[rng.random(doc_len) < 0.15] = 200
            docs.append(words.tolist())
        batches.append(docs)
    return batches


def planted_in_right_topic(state: InfVocState) -> bool:
    """Learned topics match the three word blocks one to one, and word 200 is in the top 10 of topic 1's match only."""
    tops = [set(w.tolist()) for w, _ in top_words(state, 10)]
    owner = [max(range(3), key=lambda j: len(top & set(range(15 * j, 15 * j + 15)))) for top in tops]
    return sorted(owner) == [0, 1, 2] and all((200 in tops[k]) == (owner[k] == 1) for k in range(3))


def test_planted_new_word_enters_its_topic_top_ten() -> None:
    """Word 200 first appears in minibatch 5; it must be in the right topic's top 10 by minibatch 7 and stay."""
    rng = np.random.default_rng(15)
    planted_from, n_batches, within = 4, 10, 3
    params = InfVocParams(n_topics=3, stick_concentration=100.0, truncation=40, reorder_every=2,
                          step=StepSchedule(tau0=4.0, kappa=0.6), seed=1)
    state, first_doc, history = empty_state(3), 0, []
    for i, docs in enumerate(planted_stream(rng, n_batches, 40, 40, planted_from), start=1):
        indptr, words = csr(docs)
        stats, _ = estep_documents(indptr, words, prepare_weights(state, words), params, first_doc=first_doc,
                                   minibatch=i)
        state = update_minibatch(state, stats, params, n_docs_total=40 * n_batches)
        first_doc += len(docs)
        history.append(planted_in_right_topic(state))
    assert not any(history[:planted_from])  # absent before it is planted
    assert all(history[planted_from + within - 1:])


def test_expanding_before_the_estep_is_the_code_order() -> None:
    """expand_tos is idempotent, so a driver may expand before prepare_weights (the reference code's order)."""
    state = random_state(np.random.default_rng(16), n_topics=2, n_words=8, size=4)
    params = InfVocParams(n_topics=2)
    words = np.array([0, 5, 9, 12])
    once = expand_tos(state, words, params)
    twice = expand_tos(once, words, params)
    for name in ("tos_indptr", "tos_words", "nu1", "nu2"):
        assert_array_equal(getattr(twice, name), getattr(once, name))
    stats = InfVocStats(words, np.arange(8.0).reshape(4, 2), 3, 10, params.samples)
    late, early = update_minibatch(state, stats, params, n_docs_total=30), update_minibatch(once, stats, params,
                                                                                             n_docs_total=30)
    for name in ("tos_indptr", "tos_words", "nu1", "nu2", "rank_words", "rank_log"):
        assert_array_equal(getattr(late, name), getattr(early, name))
