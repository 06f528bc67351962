"""The global state of infinite-vocabulary LDA: per-topic truncation ordered sets, sticks and ranking scores.

This module owns :class:`InfVocState` (the TOS of every topic with its Beta parameters nu^1, nu^2 and the
ranking score R of every (topic, word) ever scored), the stick expectations of eqs. 7.3-7.4 and the
E-step's prepared weights built from them (:func:`prepare_weights`), the read-outs (expected topic-word
probabilities, top words, TOS ranks) and the snapshot to plain arrays. It works on integer word ids of a
global append-only word index that the driver keeps (ids in first-seen order); it never sees strings.
Pure NumPy/SciPy: no Dask, no I/O, no logging.

Glossary (Zhai 2014, ch. 7):
    TOS T_k: topic k's ordered list of word ids; t = T_k(w) its position (0-based here, 1-based in the text)
    nu1, nu2 (nu^1_kt, nu^2_kt): Beta parameters of the stick b_kt, in TOS order
    E[log beta_kt] = psi(nu1_t) - psi(nu1_t + nu2_t) + sum_{s<t} [psi(nu2_s) - psi(nu1_s + nu2_s)]  (eq. 7.3, P1)
    remaining (eq. 7.4): sum_{s<T_k} [psi(nu2_s) - psi(nu1_s + nu2_s)], the same for every word not in T_k
    R_k(w) (eq. 7.8): ranking score, kept in log space for every word ever scored (spec P5, P6)

Layout: the TOS is CSR over topics (``tos_indptr``, ``tos_words``, ``nu1``, ``nu2``); the ranking scores
are CSR over topics too (``rank_indptr``, ``rank_words`` ascending within a topic, ``rank_log``). Every
minibatch multiplies every R by (1 - epsilon) (eq. 7.8); instead of touching every entry, the common
factor is kept as ``rank_log_offset``: log R_k(w) = rank_log + rank_log_offset. Sorting by ``rank_log``
within a topic is sorting by R. A (topic, word) absent from the rank table has R = 0.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Mapping

import numpy as np
from scipy.special import digamma

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.infvoc_lda.params import InfVocParams

_EMPTY_INT = np.zeros(0, dtype=np.int64)
_EMPTY_FLOAT = np.zeros(0, dtype=np.float64)


@dataclass(frozen=True, slots=True)
class InfVocState:
    """Every topic's truncation ordered set with its sticks, and the ranking scores (pure data).

    Attributes
    ----------
    tos_indptr : ndarray of shape (n_topics + 1,), int64
        Topic k's TOS is ``tos_words[tos_indptr[k]:tos_indptr[k + 1]]``.
    tos_words : ndarray of shape (n_entries,), int64
        Word ids in TOS order (position 0 first); no word twice within a topic.
    nu1, nu2 : ndarray of shape (n_entries,), float64
        Beta parameters of each TOS entry's stick (eqs. 7.6-7.7).
    rank_indptr : ndarray of shape (n_topics + 1,), int64
        Topic k's scored words are ``rank_words[rank_indptr[k]:rank_indptr[k + 1]]``.
    rank_words : ndarray of shape (n_scored,), int64
        Word ids, ascending within each topic.
    rank_log : ndarray of shape (n_scored,), float64
        log R - rank_log_offset of each scored (topic, word).
    rank_log_offset : float
        The accumulated log of the (1 - epsilon) decays (<= 0).
    n_updates : int
        Minibatches applied so far (i of the last update).
    """

    tos_indptr: IntArray
    tos_words: IntArray
    nu1: FloatArray
    nu2: FloatArray
    rank_indptr: IntArray
    rank_words: IntArray
    rank_log: FloatArray
    rank_log_offset: float = 0.0
    n_updates: int = 0

    @property
    def n_topics(self) -> int:
        """K, the number of topics."""
        return int(self.tos_indptr.shape[0] - 1)

    def tos_sizes(self) -> IntArray:
        """Return T_k, the TOS length of every topic, shape (n_topics,)."""
        return np.diff(self.tos_indptr).astype(np.int64)

    def topic_tos(self, k: int) -> tuple[IntArray, FloatArray, FloatArray]:
        """Return topic ``k``'s TOS as (word ids, nu1, nu2), in TOS order (views, do not modify)."""
        lo, hi = int(self.tos_indptr[k]), int(self.tos_indptr[k + 1])
        return self.tos_words[lo:hi], self.nu1[lo:hi], self.nu2[lo:hi]

    def topic_log_ranks(self, k: int) -> tuple[IntArray, FloatArray]:
        """Return topic ``k``'s scored words (ascending) and their log R (true scale, offset added)."""
        lo, hi = int(self.rank_indptr[k]), int(self.rank_indptr[k + 1])
        return self.rank_words[lo:hi], self.rank_log[lo:hi] + self.rank_log_offset

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Return an exact snapshot: the arrays and the JSON-able scalars (no pickle).

        Returns
        -------
        arrays : dict of str to ndarray
            ``tos_indptr``, ``tos_words``, ``nu1``, ``nu2``, ``rank_indptr``, ``rank_words``, ``rank_log``.
        scalars : dict
            ``rank_log_offset`` and ``n_updates``.
        """
        arrays = {f.name: np.asarray(getattr(self, f.name)) for f in fields(self) if f.name not in _SCALARS}
        return arrays, {"rank_log_offset": float(self.rank_log_offset), "n_updates": int(self.n_updates)}

    @classmethod
    def from_arrays(cls, arrays: Mapping[str, np.ndarray], scalars: Mapping[str, Any]) -> InfVocState:
        """Rebuild a state from :meth:`to_arrays`'s output, checking its consistency.

        Parameters
        ----------
        arrays : mapping of str to ndarray
            The arrays of :meth:`to_arrays`.
        scalars : mapping
            The scalars of :meth:`to_arrays`.

        Returns
        -------
        InfVocState

        Raises
        ------
        InvalidParameterError
            An array is missing or the layout is inconsistent.
        """
        missing = [f.name for f in fields(cls) if f.name not in _SCALARS and f.name not in arrays]
        if missing:
            raise InvalidParameterError(f"infvoc snapshot lacks arrays {missing!r}; it is damaged or not an infvoc state")
        ints = {"tos_indptr", "tos_words", "rank_indptr", "rank_words"}
        kwargs: dict[str, Any] = {
            name: np.array(arrays[name], dtype=np.int64 if name in ints else np.float64)
            for name in (f.name for f in fields(cls)) if name not in _SCALARS
        }
        state = cls(**kwargs, rank_log_offset=float(scalars["rank_log_offset"]), n_updates=int(scalars["n_updates"]))
        check_state(state)
        return state


_SCALARS = ("rank_log_offset", "n_updates")


def empty_state(n_topics: int) -> InfVocState:
    """Return the state before the first minibatch: every TOS empty, no ranking score.

    Parameters
    ----------
    n_topics : int
        K.

    Returns
    -------
    InfVocState

    Examples
    --------
    >>> empty_state(3).tos_sizes().tolist()
    [0, 0, 0]
    """
    zeros = np.zeros(n_topics + 1, dtype=np.int64)
    return InfVocState(zeros, _EMPTY_INT, _EMPTY_FLOAT, _EMPTY_FLOAT, zeros.copy(), _EMPTY_INT, _EMPTY_FLOAT)


def check_state(state: InfVocState) -> None:
    """Raise InvalidParameterError unless the CSR layouts are consistent and no word repeats in a TOS.

    Parameters
    ----------
    state : InfVocState
        The state to check.

    Raises
    ------
    InvalidParameterError
        Naming the first inconsistency found.
    """
    n = state.tos_words.shape[0]
    if state.tos_indptr[0] != 0 or state.tos_indptr[-1] != n or np.any(np.diff(state.tos_indptr) < 0):
        raise InvalidParameterError("infvoc state: tos_indptr is not a valid CSR pointer over tos_words")
    if state.nu1.shape != (n,) or state.nu2.shape != (n,) or not (np.all(state.nu1 > 0) and np.all(state.nu2 > 0)):
        raise InvalidParameterError("infvoc state: nu1 and nu2 must be positive and one per TOS entry")
    if state.rank_indptr.shape != state.tos_indptr.shape or state.rank_indptr[-1] != state.rank_words.shape[0]:
        raise InvalidParameterError("infvoc state: rank_indptr does not match the topics or rank_words")
    for k in range(state.n_topics):
        words = state.topic_tos(k)[0]
        if np.unique(words).shape[0] != words.shape[0]:
            raise InvalidParameterError(f"infvoc state: topic {k}'s TOS holds a word twice")
        lo, hi = int(state.rank_indptr[k]), int(state.rank_indptr[k + 1])
        if np.any(np.diff(state.rank_words[lo:hi]) <= 0):
            raise InvalidParameterError(f"infvoc state: topic {k}'s scored words are not strictly ascending")


def expected_log_sticks(nu1: FloatArray, nu2: FloatArray) -> tuple[FloatArray, float]:
    """Return E[log beta_t] of every TOS position and the expected log of the remaining stick.

    Parameters
    ----------
    nu1, nu2 : ndarray of shape (n_positions,), float64
        One topic's Beta parameters in TOS order.

    Returns
    -------
    elog_beta : ndarray of shape (n_positions,), float64
        ``psi(nu1_t) - psi(nu1_t + nu2_t) + sum_{s<t} [psi(nu2_s) - psi(nu1_s + nu2_s)]``.
    remaining : float
        ``sum_{s<T} [psi(nu2_s) - psi(nu1_s + nu2_s)]``, 0 for an empty TOS.

    Notes
    -----
    Eq. 7.3 with the misprint of the printed version fixed (spec P1): the sum of psi(nu2) stops before t,
    so that E[log beta_kt] = E[log b_kt] + sum_{s<t} E[log(1 - b_ks)]. ``remaining`` is eq. 7.4: the
    weight of every word outside the TOS. Prefix sums accumulate in position order (``np.cumsum``).

    Examples
    --------
    >>> elog, rest = expected_log_sticks(np.array([1.0]), np.array([1.0]))
    >>> round(float(elog[0]), 6), round(rest, 6)
    (-1.0, -1.0)
    """
    total = digamma(nu1 + nu2)
    elog_b = digamma(nu1) - total
    elog_rest = digamma(nu2) - total
    prefix = np.cumsum(elog_rest)
    exclusive = np.concatenate(([0.0], prefix[:-1])) if prefix.shape[0] else _EMPTY_FLOAT
    remaining = float(prefix[-1]) if prefix.shape[0] else 0.0
    return elog_b + exclusive, remaining


def tos_positions(state: InfVocState, word_ids: IntArray) -> IntArray:
    """Return T_k(w) for every topic and word: the 0-based TOS position, or -1 when w is not in T_k.

    Parameters
    ----------
    state : InfVocState
        The state.
    word_ids : ndarray of shape (n_words,), int
        Any word ids.

    Returns
    -------
    ndarray of shape (n_topics, n_words), int64
    """
    word_ids = np.asarray(word_ids, dtype=np.int64)
    out = np.full((state.n_topics, word_ids.shape[0]), -1, dtype=np.int64)
    for k in range(state.n_topics):
        words = state.topic_tos(k)[0]
        order = np.argsort(words, kind="stable")
        sorted_words = words[order]
        idx = np.searchsorted(sorted_words, word_ids)
        found = idx < sorted_words.shape[0]
        found[found] = sorted_words[idx[found]] == word_ids[found]
        out[k, found] = order[idx[found]]
    return out


@dataclass(frozen=True, slots=True)
class PreparedWeights:
    """The E-step's per-(word, topic) weights exp(E[log beta_k, T_k(w)]) for one minibatch's distinct words.

    Built once per minibatch on the driver (:func:`prepare_weights`) and shipped to every partition.

    Attributes
    ----------
    word_ids : ndarray of shape (n_present,), int64
        The distinct word ids, ascending.
    log_weights : ndarray of shape (n_present, n_topics), float64
        E[log beta_kt] at t = T_k(w) (eq. 7.3), or topic k's remaining-stick value (eq. 7.4).
    weights : ndarray of shape (n_present, n_topics), float64
        ``exp(log_weights - log_weights.max(axis=1, keepdims=True))``: the conditional of eq. 7.2 only
        needs each word's weights up to a common factor, and shifting by the row maximum keeps words
        deep in a long TOS from underflowing to zero in every topic.
    """

    word_ids: IntArray
    log_weights: FloatArray
    weights: FloatArray

    @property
    def n_topics(self) -> int:
        """K."""
        return int(self.weights.shape[1])


def prepare_weights(
    state: InfVocState, word_ids: IntArray, params: InfVocParams | None = None, *, log_g0: FloatArray | None = None,
) -> PreparedWeights:
    """Build the E-step's weights for the given words from the current sticks (eqs. 7.3, 7.4).

    Parameters
    ----------
    state : InfVocState
        The state; its TOS and nu are read, not modified.
    word_ids : ndarray of shape (n_words,), int
        Word ids of a minibatch (repeats allowed; any ids, seen or not).
    params : InfVocParams, optional
        Only ``unseen_weight`` and ``stick_concentration`` are read; None means eq. 7.4.
    log_g0 : ndarray of shape (n_words_total,), float64, optional
        The log G0 of every word id; required by ``unseen_weight="g0"``, ignored otherwise.

    Returns
    -------
    PreparedWeights
        For the distinct ids in ascending order.

    Notes
    -----
    A word in T_k gets eq. 7.3 at its position; a word outside gets eq. 7.4's remaining stick or, with
    ``unseen_weight="g0"`` (spec P2's variant), remaining + psi(1) - psi(1 + alpha^beta) + log G0(w): the
    expected log weight of a fresh prior stick times the base measure.

    Examples
    --------
    >>> w = prepare_weights(empty_state(2), np.array([4, 1, 4]))
    >>> w.word_ids.tolist(), w.weights.tolist()
    ([1, 4], [[1.0, 1.0], [1.0, 1.0]])
    """
    present = np.unique(np.asarray(word_ids, dtype=np.int64))
    if present.shape[0] and present[0] < 0:
        raise InvalidParameterError(f"word ids must be >= 0, got {int(present[0])}")
    extra = _unseen_extra(present, params, log_g0)
    positions = tos_positions(state, present)
    log_weights = np.empty((present.shape[0], state.n_topics), dtype=np.float64)
    for k in range(state.n_topics):
        _, nu1, nu2 = state.topic_tos(k)
        elog, remaining = expected_log_sticks(nu1, nu2)
        pos = positions[k]
        log_weights[:, k] = np.where(pos >= 0, elog[np.maximum(pos, 0)] if elog.shape[0] else 0.0, remaining + extra)
    shift = log_weights.max(axis=1, keepdims=True)
    return PreparedWeights(present, log_weights, np.exp(log_weights - shift))


def _unseen_extra(present: IntArray, params: InfVocParams | None, log_g0: FloatArray | None) -> FloatArray:
    """Per word, what ``unseen_weight`` adds to the remaining stick (zeros for eq. 7.4)."""
    if params is None or params.unseen_weight == "remaining":
        return np.zeros(present.shape[0])
    if log_g0 is None or (present.shape[0] and int(present[-1]) >= np.shape(log_g0)[0]):
        raise InvalidParameterError(
            "unseen_weight='g0' needs log_g0 with an entry for every word id of the minibatch "
            f"(largest id {int(present[-1]) if present.shape[0] else -1}); pass the G0 model's log probabilities")
    fresh = float(digamma(1.0) - digamma(1.0 + params.stick_concentration))
    return fresh + np.asarray(log_g0, dtype=np.float64)[present]


def expected_topic_words(state: InfVocState, k: int) -> tuple[IntArray, FloatArray, float]:
    """Return topic ``k``'s words in TOS order, E[beta_kt] and the expected remaining stick.

    Parameters
    ----------
    state : InfVocState
        The state.
    k : int
        The topic.

    Returns
    -------
    word_ids : ndarray of shape (T_k,), int64
    expected_beta : ndarray of shape (T_k,), float64
        ``nu1_t / (nu1_t + nu2_t) * prod_{s<t} nu2_s / (nu1_s + nu2_s)`` (independent Beta sticks).
    remaining : float
        ``prod_{s<T_k} nu2_s / (nu1_s + nu2_s)``: the mass of every word outside the TOS; the three sum to 1.
    """
    words, nu1, nu2 = state.topic_tos(k)
    total = nu1 + nu2
    rest = np.cumprod(nu2 / total)
    before = np.concatenate(([1.0], rest[:-1])) if rest.shape[0] else _EMPTY_FLOAT
    return words.copy(), nu1 / total * before, float(rest[-1]) if rest.shape[0] else 1.0


def top_words(state: InfVocState, n_words: int) -> list[tuple[IntArray, FloatArray]]:
    """Return each topic's ``n_words`` most probable words by E[beta] (ties: lower word id first).

    Parameters
    ----------
    state : InfVocState
        The state.
    n_words : int
        How many words per topic (fewer when a TOS is shorter).

    Returns
    -------
    list of (ndarray of int64, ndarray of float64)
        Per topic: word ids and their E[beta_kt], most probable first.
    """
    out = []
    for k in range(state.n_topics):
        words, probs, _ = expected_topic_words(state, k)
        order = np.lexsort((words, -probs))[:n_words]
        out.append((words[order], probs[order]))
    return out
