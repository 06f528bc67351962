"""Global updates of infinite-vocabulary online LDA: expansion, sticks, ranking scores, reordering and contraction.

This module owns Algorithm 4's lines 6-8 (Zhai 2014, sec. 7.4-7.4.1) as pure functions of
(state, merged minibatch statistics) -> new state: :func:`expand_tos` (unseen words appended to every TOS),
:func:`update_sticks` (eqs. 7.6-7.7), :func:`update_ranks` (eq. 7.8), :func:`reorder_and_contract` (every U
minibatches), the optional :func:`restate_tails` after it, and :func:`update_minibatch`, which runs them in
that order. Pure NumPy: no Dask, no I/O.

Glossary (Zhai 2014, ch. 7):
    epsilon_i = (tau0 + i) ** -kappa, i = 1, 2, ... (``StepSchedule.rho(i)``); scale = D / |S|
    c_kt = scale * phi sums of the word at position t of topic k (0 for words not in the minibatch)
    tail_kt = sum_{s>t} c_ks: the "T_k(w) > t" sum of eq. 7.6, a reverse exclusive cumulative sum
    r_ik(w) = G0(w) * scale * phi sums; R_ik = (1 - epsilon) R_{i-1,k} + epsilon r_ik (eq. 7.8)
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.infvoc_lda.estep import InfVocStats
from topicflow.models.infvoc_lda.params import InfVocParams
from topicflow.models.infvoc_lda.tos import InfVocState, tos_positions


def _csr(parts: Sequence[tuple[np.ndarray, ...]], n_fields: int) -> tuple[IntArray, list[np.ndarray]]:
    """Concatenate per-topic tuples of arrays into a CSR pointer and flat arrays."""
    sizes = [p[0].shape[0] for p in parts]
    indptr = np.concatenate(([0], np.cumsum(sizes))).astype(np.int64)
    return indptr, [np.concatenate([p[i] for p in parts]) for i in range(n_fields)]


def expand_tos(state: InfVocState, word_ids: IntArray, params: InfVocParams) -> InfVocState:
    """Append every word of ``word_ids`` missing from a topic's TOS to its end (sec. 7.4.1, "Expanding").

    Parameters
    ----------
    state : InfVocState
        The state before the minibatch's update.
    word_ids : ndarray of shape (n_present,), int
        The minibatch's distinct word ids, ascending.
    params : InfVocParams
        ``new_word_nu2`` (spec P3) and alpha^beta.

    Returns
    -------
    InfVocState
        New words get nu^1 = 1 and nu^2 = ``params.new_nu2`` at positions T_k, T_k + 1, ... in
        ascending word id (= first-seen) order. Their R is left as it is: 0 for a word never scored,
        the old decayed value for a word dropped by an earlier contraction (R is kept for every word
        ever seen, spec 3.5).
    """
    word_ids = np.asarray(word_ids, dtype=np.int64)
    positions = tos_positions(state, word_ids)
    parts = []
    for k in range(state.n_topics):
        words, nu1, nu2 = state.topic_tos(k)
        new = word_ids[positions[k] < 0]
        parts.append((np.concatenate([words, new]), np.concatenate([nu1, np.ones(new.shape[0])]),
                      np.concatenate([nu2, np.full(new.shape[0], params.new_nu2)])))
    indptr, (words, nu1, nu2) = _csr(parts, 3)
    return InfVocState(indptr, words.astype(np.int64), nu1, nu2, state.rank_indptr, state.rank_words,
                       state.rank_log, state.rank_log_offset, state.n_updates)


def reverse_exclusive_cumsum(values: FloatArray) -> FloatArray:
    """Return ``out[t] = sum_{s>t} values[s]``, accumulated from the end (the tail sums of eq. 7.6).

    Parameters
    ----------
    values : ndarray of shape (n,), float64
        Per-position values.

    Returns
    -------
    ndarray of shape (n,), float64

    Examples
    --------
    >>> reverse_exclusive_cumsum(np.array([1.0, 2.0, 4.0])).tolist()
    [6.0, 4.0, 0.0]
    """
    if values.shape[0] == 0:
        return np.zeros(0)
    running = np.cumsum(values[::-1])
    return np.concatenate((running[-2::-1], [0.0])) if values.shape[0] > 1 else np.zeros(1)


def update_sticks(state: InfVocState, stats: InfVocStats, params: InfVocParams, *, eps: float,
                  scale: float) -> InfVocState:
    """Move every TOS entry's nu by the natural-gradient step of eqs. 7.6-7.7.

    Parameters
    ----------
    state : InfVocState
        An expanded state: every word of ``stats`` is in every topic's TOS.
    stats : InfVocStats
        The minibatch's merged statistics.
    params : InfVocParams
        The settings (alpha^beta).
    eps : float
        The step epsilon_i, in (0, 1].
    scale : float
        D / |S|.

    Returns
    -------
    InfVocState

    Notes
    -----
    With c_t = scale * phi sums of position t's word: ``nu1 <- (1 - eps) nu1 + eps (1 + c_t)`` and
    ``nu2 <- (1 - eps) nu2 + eps (alpha^beta + sum_{s>t} c_s)``, which is eq. 7.7's ``nu + eps * Delta nu``
    with Delta nu of eq. 7.6, written so that eps = 1 gives the closed form exactly.
    """
    positions = tos_positions(state, stats.word_ids)
    if np.any(positions < 0):
        raise InvalidParameterError("update_sticks needs an expanded state (expand_tos first)")
    phi = stats.phi_sums
    nu1, nu2 = state.nu1.copy(), state.nu2.copy()
    for k in range(state.n_topics):
        lo, hi = int(state.tos_indptr[k]), int(state.tos_indptr[k + 1])
        c = np.zeros(hi - lo)
        c[positions[k]] = scale * phi[:, k]
        nu1[lo:hi] = (1.0 - eps) * state.nu1[lo:hi] + eps * (1.0 + c)
        nu2[lo:hi] = (1.0 - eps) * state.nu2[lo:hi] + eps * (params.stick_concentration + reverse_exclusive_cumsum(c))
    return InfVocState(state.tos_indptr, state.tos_words, nu1, nu2, state.rank_indptr, state.rank_words,
                       state.rank_log, state.rank_log_offset, state.n_updates)


def update_ranks(state: InfVocState, stats: InfVocStats, *, eps: float, scale: float,
                 log_g0: FloatArray | None = None) -> InfVocState:
    """Interpolate the ranking scores with the minibatch's estimate (eq. 7.8), in log space.

    Parameters
    ----------
    state : InfVocState
        The state.
    stats : InfVocStats
        The minibatch's merged statistics.
    eps : float
        The step epsilon_i, in (0, 1].
    scale : float
        D / |S|.
    log_g0 : ndarray of shape (n_words_total,), float64, optional
        The log G0(w) of every word id (spec P6). None means no G0 (G0 = 1 for every word), the behaviour of the
        reference code (spec 3.8).

    Returns
    -------
    InfVocState

    Notes
    -----
    ``log R_ik(w) = logaddexp(log(1 - eps) + log R_{i-1,k}(w), log eps + log G0(w) + log(scale phi_kw))``
    for words with phi_kw > 0, and ``log(1 - eps) + log R_{i-1,k}(w)`` otherwise. The decay of the
    untouched scores is the shared ``rank_log_offset``, so a minibatch costs its own entries only.
    eps = 1 replaces every score by r_ik.
    """
    phi = stats.phi_sums
    if log_g0 is not None and stats.word_ids.shape[0] and int(stats.word_ids[-1]) >= np.shape(log_g0)[0]:
        raise InvalidParameterError(
            f"log_g0 has {np.shape(log_g0)[0]} entries but the minibatch holds word id {int(stats.word_ids[-1])}; "
            "pass log G0 for every word of the index")
    word_g0 = np.zeros(stats.word_ids.shape[0]) if log_g0 is None else np.asarray(log_g0, np.float64)[stats.word_ids]
    rows, topics = np.nonzero(phi)
    log_r = word_g0[rows] + np.log(scale * phi[rows, topics])
    if eps >= 1.0:  # eq. 7.8 with eps = 1: the old scores are forgotten
        offset, old_keep = 0.0, False
    else:
        offset, old_keep = state.rank_log_offset + math.log1p(-eps), True
    new_words, new_topics, new_vals = stats.word_ids[rows], topics, math.log(eps) + log_r - offset
    old_topics = np.repeat(np.arange(state.n_topics), np.diff(state.rank_indptr))
    old_words, old_vals = state.rank_words, state.rank_log
    if not old_keep:
        old_topics, old_words, old_vals = old_topics[:0], old_words[:0], old_vals[:0]
    bound = int(max(old_words.max(initial=-1), new_words.max(initial=-1))) + 1
    old_keys, new_keys = old_topics * bound + old_words, new_topics * bound + new_words
    keys = np.union1d(old_keys, new_keys)
    vals = np.full(keys.shape[0], -np.inf)
    vals[np.searchsorted(keys, old_keys)] = old_vals
    at = np.searchsorted(keys, new_keys)
    vals[at] = np.logaddexp(vals[at], new_vals)
    indptr = np.concatenate(([0], np.cumsum(np.bincount(keys // bound, minlength=state.n_topics)))).astype(np.int64) \
        if bound else np.zeros(state.n_topics + 1, np.int64)
    return InfVocState(state.tos_indptr, state.tos_words, state.nu1, state.nu2, indptr,
                       (keys % bound if bound else keys).astype(np.int64), vals, offset, state.n_updates)


def reorder_and_contract(state: InfVocState, truncation: int) -> InfVocState:
    """Sort each topic's TOS by R, descending, and keep its first ``truncation`` words (sec. 7.4.1).

    Parameters
    ----------
    state : InfVocState
        The state.
    truncation : int
        T.

    Returns
    -------
    InfVocState
        Each kept word carries its (nu1, nu2) to its new position; dropped words lose nu and position
        (their R stays). Ties in R (words never scored in the topic have R = 0) go to the lower word
        id, i.e. the word seen first (spec P4: an explicit sort, not a dict's order).
    """
    parts = []
    for k in range(state.n_topics):
        words, nu1, nu2 = state.topic_tos(k)
        lo, hi = int(state.rank_indptr[k]), int(state.rank_indptr[k + 1])
        scored, log_r = state.rank_words[lo:hi], state.rank_log[lo:hi]
        idx = np.searchsorted(scored, words)
        found = idx < scored.shape[0]
        found[found] = scored[idx[found]] == words[found]
        score = np.full(words.shape[0], -np.inf)
        score[found] = log_r[idx[found]]
        order = np.lexsort((words, -score))[:truncation]
        parts.append((words[order], nu1[order], nu2[order]))
    indptr, (words, nu1, nu2) = _csr(parts, 3)
    return InfVocState(indptr, words.astype(np.int64), nu1, nu2, state.rank_indptr, state.rank_words,
                       state.rank_log, state.rank_log_offset, state.n_updates)


def restate_tails(state: InfVocState, params: InfVocParams) -> InfVocState:
    """Recompute every nu^2 from the tail sums of the current TOS order (the ``restate_tail`` option).

    Parameters
    ----------
    state : InfVocState
        A state right after :func:`reorder_and_contract`.
    params : InfVocParams
        The settings (alpha^beta).

    Returns
    -------
    InfVocState
        The same state with ``nu2_kt = alpha^beta + sum_{s>t} (nu1_ks - 1)`` within each topic (nu^1 and all
        else unchanged).

    Notes
    -----
    Under eq. 7.7, ``nu1_t - 1`` is the step-weighted average of the scaled counts c_t (nu^1 starts at 1), and
    a word whose nu^2 started at alpha^beta has ``nu2_t - alpha^beta`` = the same average of its tail sums
    ``sum_{s>t} c_s`` (eq. 7.6), so long as the order did not change. A reordering breaks the second identity:
    each word keeps the nu^2 of its old position's tail (and a word appended since the last reordering, the
    chapter's nu^2 = 1). Restating gives each position the nu^2 those updates would have produced had the
    new order been the order all along, over the words kept by the contraction. It is not in the chapter
    nor in its code (they carry (nu1, nu2) with the word, spec 3.11); see docs/infvoc.md.

    Examples
    --------
    >>> from topicflow.models.infvoc_lda.tos import InfVocState
    >>> s = InfVocState(np.array([0, 3]), np.array([5, 6, 7]), np.array([3.0, 2.0, 1.5]), np.ones(3),
    ...                 np.zeros(2, np.int64), np.zeros(0, np.int64), np.zeros(0))
    >>> restate_tails(s, InfVocParams(n_topics=1, stick_concentration=10.0)).nu2.tolist()
    [11.5, 10.5, 10.0]
    """
    nu2 = state.nu2.copy()
    for k in range(state.n_topics):
        lo, hi = int(state.tos_indptr[k]), int(state.tos_indptr[k + 1])
        nu2[lo:hi] = params.stick_concentration + reverse_exclusive_cumsum(state.nu1[lo:hi] - 1.0)
    return InfVocState(state.tos_indptr, state.tos_words, state.nu1, nu2, state.rank_indptr, state.rank_words,
                       state.rank_log, state.rank_log_offset, state.n_updates)


def update_minibatch(state: InfVocState, stats: InfVocStats, params: InfVocParams, *, n_docs_total: int,
                     log_g0: FloatArray | None = None) -> InfVocState:
    """Apply one minibatch's merged statistics: Algorithm 4, lines 6-8 (with the expansion first).

    Parameters
    ----------
    state : InfVocState
        The state the minibatch's E-step used.
    stats : InfVocStats
        The merged statistics of the whole minibatch (|S| = ``stats.n_docs``).
    params : InfVocParams
        The settings (alpha^beta, T, U, step schedule, new-word nu).
    n_docs_total : int
        D, the corpus size the minibatch stands for.
    log_g0 : ndarray of shape (n_words_total,), float64, optional
        The log G0 of every word id; None ranks without G0 (reference code, spec 3.8).

    Returns
    -------
    InfVocState
        With ``n_updates = i``; reordered and contracted when i is a multiple of U (then, with
        ``params.restate_tail``, its nu^2 restated by :func:`restate_tails`).

    Notes
    -----
    i = ``state.n_updates + 1``, epsilon_i = ``params.step.rho(i)`` = (tau0 + i) ** -kappa, scale = D / |S|.
    Steps: :func:`expand_tos` with the minibatch's words, :func:`update_sticks`, :func:`update_ranks`,
    then :func:`reorder_and_contract` to T if i mod U == 0. With |S| = D and kappa = 0 (epsilon = 1)
    the sticks take the batch closed form nu1 = 1 + phi sums, nu2 = alpha^beta + tail sums.

    Examples
    --------
    >>> from topicflow.models.infvoc_lda.tos import empty_state, prepare_weights
    >>> from topicflow.models.infvoc_lda.estep import estep_documents
    >>> params = InfVocParams(n_topics=2, truncation=5)
    >>> words = np.array([0, 1, 2, 1])
    >>> stats, _ = estep_documents(np.array([0, 4]), words, prepare_weights(empty_state(2), words), params,
    ...                            first_doc=0, minibatch=1)
    >>> update_minibatch(empty_state(2), stats, params, n_docs_total=10).tos_sizes().tolist()
    [3, 3]
    """
    if stats.n_docs < 1 or stats.kept_counts.shape[1] != state.n_topics:
        raise InvalidParameterError(
            f"update_minibatch needs statistics of at least one document with K = {state.n_topics} topics, "
            f"got {stats.n_docs} documents and K = {stats.kept_counts.shape[1]}")
    if n_docs_total < stats.n_docs:
        raise InvalidParameterError(f"n_docs_total (D = {n_docs_total}) is below the minibatch size {stats.n_docs}")
    i = state.n_updates + 1
    eps, scale = params.step.rho(i), n_docs_total / stats.n_docs
    new = expand_tos(state, stats.word_ids, params)
    new = update_sticks(new, stats, params, eps=eps, scale=scale)
    new = update_ranks(new, stats, eps=eps, scale=scale, log_g0=log_g0)
    new = InfVocState(new.tos_indptr, new.tos_words, new.nu1, new.nu2, new.rank_indptr, new.rank_words,
                      new.rank_log, new.rank_log_offset, i)
    if i % params.reorder_every == 0:
        new = reorder_and_contract(new, params.truncation)
        if params.restate_tail:
            new = restate_tails(new, params)
    return new
