"""DP-unigram Gibbs word segmenter (Goldwater, Griffiths & Johnson 2009): the MCMC baseline of issue 24.

This module owns the unigram model of Goldwater et al. (2009) and its boundary Gibbs sampler, used as
an independent MCMC arm beside py-cfg (``benchmarks/anchors/pycfg.py``) in the word-segmentation
experiment of Zhai (2014, section 8.4.1). The unigram model is the unigram adaptor grammar of Table 8.1
with a Dirichlet process (Pitman-Yor discount 0) on ``Word`` whose base distribution draws characters
uniformly with a stop probability, collapsed and sampled one boundary at a time. It is pure math
(numba kernels and frozen dataclasses); it must not import dask, zarr or logging, and does no I/O.

Glossary (Goldwater et al. 2009, section 3 and appendix A):
    concentration (alpha_0): DP concentration over words
    stop_prob (p_#): probability that a word ends after each character under the base distribution
    base distribution (P_0): ``P_0(w) = p_# (1 - p_#)^(|w| - 1) (1 / n_symbols)^|w|``
    utterance_prior (rho): Beta(rho/2, rho/2) prior on the probability that a word ends its sentence
    n_words (n): word tokens in the current segmentation, without the ones being resampled
    n_final (n_$): sentence-final word tokens among them (one per sentence)
    boundaries: ``boundaries[i] = 1`` when a word ends after character ``i`` of the concatenated text
        (always 1 at the last character of a sentence)
    inverse temperature (1 / gamma): probabilities are raised to it while annealing

Work units: one *sentence resampled* (every internal boundary of it once) counts as one "inside call
equivalent" on the x axis of Figure 8.2. An inside call of an adaptor-grammar sampler costs O(n^3) in the
sentence length n; one sentence of this sampler costs O(n x mean word length). The unit counts passes over
the data, not time.

References
----------
Goldwater, S., Griffiths, T. L. & Johnson, M. (2009). A Bayesian framework for word segmentation:
    exploring the effects of context. Cognition 112, 21-54 (eqs. 3-4 and appendix A).
Zhai, K. (2014). Online adaptor grammars with hybrid inference (dissertation chapter 8 / TACL 2014).
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, replace
from typing import Sequence

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.rng import STREAM_GIBBS, counter_key, uniform_from_key

#: Epoch of the counter-based draws of :func:`sample_heldout` (sweeps use epochs 1, 2, ...; init 0).
HELDOUT_EPOCH = 1 << 30

#: Stages of the annealing schedule: the inverse temperature steps through 0.1, 0.2, ..., 1.0.
ANNEAL_STAGES = 10


@dataclass(frozen=True, slots=True)
class DPSegParams:
    """Hyperparameters of the DP-unigram segmenter.

    Attributes
    ----------
    concentration : float
        alpha_0 > 0 (Goldwater et al. use 20 for the unigram model).
    stop_prob : float
        p_# in (0, 1) (0.5 in the paper).
    utterance_prior : float
        rho > 0 (2 in the paper).
    n_symbols : int
        Characters of the alphabet (P_0 draws each uniformly).
    anneal_sweeps : int
        Anneal over this many first sweeps (0: no annealing), see :func:`inverse_temperature`.
    """

    concentration: float = 20.0
    stop_prob: float = 0.5
    utterance_prior: float = 2.0
    n_symbols: int = 26
    anneal_sweeps: int = 0

    def __post_init__(self) -> None:
        if not self.concentration > 0:
            raise InvalidParameterError(f"concentration must be positive, got {self.concentration!r}.")
        if not 0.0 < self.stop_prob < 1.0:
            raise InvalidParameterError(f"stop_prob must lie in (0, 1), got {self.stop_prob!r}.")
        if not self.utterance_prior > 0:
            raise InvalidParameterError(f"utterance_prior must be positive, got {self.utterance_prior!r}.")
        if self.n_symbols < 1 or self.anneal_sweeps < 0:
            raise InvalidParameterError(
                f"need n_symbols >= 1 and anneal_sweeps >= 0, got {self.n_symbols!r} and {self.anneal_sweeps!r}.")


@dataclass(frozen=True, slots=True)
class DPSegState:
    """A segmentation of the whole training text.

    Attributes
    ----------
    text : str
        Every sentence, concatenated.
    starts : ndarray of shape (n_sentences + 1,), int64
        Sentence ``d`` is ``text[starts[d]:starts[d + 1]]``.
    boundaries : ndarray of shape (n_chars,), uint8
        ``1`` where a word ends after the character.
    sweeps : int
        Sweeps done so far.
    """

    text: str
    starts: IntArray
    boundaries: np.ndarray
    sweeps: int = 0

    @property
    def n_sentences(self) -> int:
        return len(self.starts) - 1


def inverse_temperature(sweep: int, anneal_sweeps: int) -> float:
    """1 / gamma at 0-based ``sweep``: ``0.1, 0.2, ..., 1.0`` in ten equal stages of ``anneal_sweeps``, then 1.

    Goldwater et al. (2009) anneal by raising the sampling probabilities to 1/gamma with gamma
    decreasing to 1 over the first sweeps; the ten equal stages of 1/gamma are this module's choice.
    """
    if anneal_sweeps <= 0 or sweep >= anneal_sweeps:
        return 1.0
    return (sweep * ANNEAL_STAGES // anneal_sweeps + 1) / ANNEAL_STAGES


def init_state(sentences: Sequence[str], *, seed: int, boundary_prob: float = 0.5) -> DPSegState:
    """A random initial segmentation: each internal boundary present with ``boundary_prob``.

    Parameters
    ----------
    sentences : sequence of str
        Unsegmented, nonempty.
    seed : int
        With the sentence index, fixes the draws (counter-based, epoch 0).
    boundary_prob : float in [0, 1]

    Returns
    -------
    DPSegState

    Raises
    ------
    InvalidParameterError
        No sentence, an empty sentence, or ``boundary_prob`` outside [0, 1].
    """
    if not sentences or any(len(s) == 0 for s in sentences):
        raise InvalidParameterError("give at least one sentence, and no empty sentence.")
    if not 0.0 <= boundary_prob <= 1.0:
        raise InvalidParameterError(f"boundary_prob must lie in [0, 1], got {boundary_prob!r}.")
    starts = np.zeros(len(sentences) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(s) for s in sentences])
    boundaries = np.zeros(int(starts[-1]), dtype=np.uint8)
    _init_boundaries(starts, seed, boundary_prob, boundaries)
    return DPSegState("".join(sentences), starts, boundaries, 0)


@numba.njit(nogil=True, cache=True)
def _init_boundaries(starts: IntArray, seed: int, boundary_prob: float, out: np.ndarray) -> None:
    """``out[i] = u_i < boundary_prob`` inside sentences, 1 at sentence ends (u from (seed, epoch 0, d))."""
    for d in range(len(starts) - 1):
        key = counter_key(seed, STREAM_GIBBS, 0, d)
        for i in range(starts[d], starts[d + 1] - 1):
            out[i] = 1 if uniform_from_key(key, i - starts[d]) < boundary_prob else 0
        out[starts[d + 1] - 1] = 1


def _codes(text: str) -> IntArray:
    """The code points of ``text`` as int64 (what the kernels compare)."""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)


def _table_capacity(n_chars: int) -> int:
    """A power of two at least 4 (n_chars + 4): live words never exceed n_chars, so a recount always
    leaves the table at most a quarter full."""
    capacity = 16
    while capacity < 4 * (n_chars + 4):
        capacity *= 2
    return capacity


# The count table: open addressing with linear probing over arrays, keyed by a word's code points. A
# key is stored as a reference (start, length) into the training codes, which never change. Words whose
# count falls to zero keep their slot; when more than MAX_LOAD of the slots are taken, the table is
# rebuilt from the boundaries (it is a function of them). Arrays keep the kernels free of numba's typed
# containers, which take long to compile.
MAX_LOAD = 0.6


@numba.njit(nogil=True, cache=True)
def _find(query: IntArray, s: int, e: int, keys: IntArray, key_start: IntArray, key_len: IntArray) -> int:
    """Slot of the word ``query[s:e]``: its own slot, or the empty slot where it would go."""
    h = np.uint64(14695981039346656037)
    for k in range(s, e):
        h = (h ^ np.uint64(query[k])) * np.uint64(1099511628211)
    mask = len(key_start) - 1
    slot = np.int64(h & np.uint64(mask))
    while key_start[slot] >= 0:
        if key_len[slot] == e - s:
            start = key_start[slot]
            same = True
            for k in range(e - s):
                if keys[start + k] != query[s + k]:
                    same = False
                    break
            if same:
                return int(slot)
        slot = (slot + 1) & mask
    return int(slot)


@numba.njit(nogil=True, cache=True)
def _count(query: IntArray, s: int, e: int, keys: IntArray, key_start: IntArray, key_len: IntArray,
           counts: IntArray) -> int:
    """Current count of ``query[s:e]`` (0 when absent)."""
    slot = _find(query, s, e, keys, key_start, key_len)
    return counts[slot] if key_start[slot] >= 0 else 0


@numba.njit(nogil=True, cache=True)
def _add(keys: IntArray, s: int, e: int, delta: int, key_start: IntArray, key_len: IntArray, counts: IntArray,
         used: IntArray) -> None:
    """Add ``delta`` to the count of the training word ``keys[s:e]`` (taking a slot if it has none)."""
    slot = _find(keys, s, e, keys, key_start, key_len)
    if key_start[slot] < 0:
        key_start[slot] = s
        key_len[slot] = e - s
        used[0] += 1
    counts[slot] += delta


@numba.njit(nogil=True, cache=True)
def _recount(keys: IntArray, starts: IntArray, boundaries: np.ndarray, key_start: IntArray, key_len: IntArray,
             counts: IntArray, used: IntArray) -> int:
    """Empty the table, count every word of the segmentation into it; returns the number of tokens."""
    key_start[:] = -1
    key_len[:] = 0
    counts[:] = 0
    used[0] = 0
    n_words = 0
    for d in range(len(starts) - 1):
        begin = starts[d]
        for i in range(starts[d], starts[d + 1]):
            if boundaries[i]:
                _add(keys, begin, i + 1, 1, key_start, key_len, counts, used)
                n_words += 1
                begin = i + 1
    return n_words


@numba.njit(nogil=True, cache=True)
def _word_prob(count: int, length: int, n_words: int, concentration: float, log_stop: float,
               log_continue: float, log_symbol: float) -> float:
    """CRP predictive ``(n_w + alpha_0 P_0(w)) / (n + alpha_0)`` (Goldwater et al. 2009, eq. 3)."""
    base = math.exp(log_stop + (length - 1) * log_continue + length * log_symbol)
    return (count + concentration * base) / (n_words + concentration)


@numba.njit(nogil=True, cache=True)
def _end_prob(final: bool, n_words: int, n_final: int, rho: float) -> float:
    """Probability that a word ends (``final``) or does not end its sentence, given the other words."""
    if final:
        return (n_final + rho / 2.0) / (n_words + rho)
    return (n_words - n_final + rho / 2.0) / (n_words + rho)


@numba.njit(nogil=True, cache=True)
def _same_word(codes: IntArray, s1: int, e1: int, s2: int, e2: int) -> bool:
    """Whether ``codes[s1:e1]`` equals ``codes[s2:e2]``."""
    if e1 - s1 != e2 - s2:
        return False
    for k in range(e1 - s1):
        if codes[s1 + k] != codes[s2 + k]:
            return False
    return True


@numba.njit(nogil=True, cache=True)
def _run_sweeps(codes: IntArray, starts: IntArray, boundaries: np.ndarray, concentration: float,
                stop_prob: float, n_symbols: int, rho: float, inv_temps: FloatArray, seed: int,
                first_epoch: int, max_load: float) -> None:
    """One Gibbs sweep per entry of ``inv_temps`` over every internal boundary, in text order, in place.

    Notes
    -----
    Goldwater et al. (2009), appendix A, unigram model: at the boundary after character ``i`` the two
    hypotheses are one word ``w12 = [s, e)`` (h1) or two words ``w1 = [s, i+1)``, ``w2 = [i+1, e)``
    (h2), with the counts of every other word (h-). With ``P(w) =`` :func:`_word_prob` and
    ``E`` = :func:`_end_prob`:

        P(h1) = P(w12 | n) E(final | n, n_$)
        P(h2) = P(w1 | n) E(not final | n, n_$) x (n_w2 + [w1 = w2] + alpha_0 P_0(w2)) / (n + 1 + alpha_0)
                x E(final of w2 | n + 1, n_$)

    ``final`` is whether ``e`` ends the sentence. Both are raised to the sweep's inverse temperature.
    The uniform of the boundary is ``uniform_from_key(counter_key(seed, STREAM_GIBBS, epoch, d), i - starts[d])``
    with ``epoch = first_epoch + sweep``. The count table is rebuilt before a sentence when more than
    ``max_load`` of its slots are taken. NumPy equivalent:
    ``tests/models/adaptor_grammar/test_mcmc.py::reference_sweep``.
    """
    log_stop, log_continue, log_symbol = math.log(stop_prob), math.log(1.0 - stop_prob), -math.log(n_symbols)
    capacity = len(codes)
    key_start = np.full(capacity, -1, dtype=np.int64)
    key_len = np.zeros(capacity, dtype=np.int64)
    counts = np.zeros(capacity, dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    n_words = _recount(codes, starts, boundaries, key_start, key_len, counts, used)
    n_sentences = len(starts) - 1
    for k in range(len(inv_temps)):
        key_epoch = first_epoch + k
        for d in range(n_sentences):
            if used[0] > max_load * capacity:
                n_words = _recount(codes, starts, boundaries, key_start, key_len, counts, used)
            key = counter_key(seed, STREAM_GIBBS, key_epoch, d)
            a, b = starts[d], starts[d + 1]
            for i in range(a, b - 1):
                s = i
                while s > a and boundaries[s - 1] == 0:
                    s -= 1
                e = i + 1
                while boundaries[e] == 0:
                    e += 1
                e += 1
                final = e == b
                if boundaries[i]:
                    _add(codes, s, i + 1, -1, key_start, key_len, counts, used)
                    _add(codes, i + 1, e, -1, key_start, key_len, counts, used)
                    n_words -= 2
                else:
                    _add(codes, s, e, -1, key_start, key_len, counts, used)
                    n_words -= 1
                n_final = n_sentences - 1 if final else n_sentences
                p_one = (_word_prob(_count(codes, s, e, codes, key_start, key_len, counts), e - s, n_words,
                                    concentration, log_stop, log_continue, log_symbol)
                         * _end_prob(final, n_words, n_final, rho))
                same = 1 if _same_word(codes, s, i + 1, i + 1, e) else 0
                p_two = (_word_prob(_count(codes, s, i + 1, codes, key_start, key_len, counts), i + 1 - s, n_words,
                                    concentration, log_stop, log_continue, log_symbol)
                         * _end_prob(False, n_words, n_final, rho)
                         * _word_prob(_count(codes, i + 1, e, codes, key_start, key_len, counts) + same, e - i - 1,
                                      n_words + 1, concentration, log_stop, log_continue, log_symbol)
                         * _end_prob(final, n_words + 1, n_final, rho))
                p_one, p_two = p_one ** inv_temps[k], p_two ** inv_temps[k]
                if uniform_from_key(key, i - a) * (p_one + p_two) < p_two:
                    boundaries[i] = 1
                    _add(codes, s, i + 1, 1, key_start, key_len, counts, used)
                    _add(codes, i + 1, e, 1, key_start, key_len, counts, used)
                    n_words += 2
                else:
                    boundaries[i] = 0
                    _add(codes, s, e, 1, key_start, key_len, counts, used)
                    n_words += 1


def run_sweeps(state: DPSegState, params: DPSegParams, *, seed: int, n_sweeps: int) -> DPSegState:
    """Run ``n_sweeps`` Gibbs sweeps from ``state``; return the new state (``state`` is not modified).

    Parameters
    ----------
    state : DPSegState
    params : DPSegParams
    seed : int
        With the sweep number and sentence index, fixes every draw.
    n_sweeps : int

    Returns
    -------
    DPSegState
        ``sweeps`` advanced by ``n_sweeps``.

    Raises
    ------
    InvalidParameterError
        ``n_sweeps`` is negative.
    """
    if n_sweeps < 0:
        raise InvalidParameterError(f"n_sweeps must be >= 0, got {n_sweeps!r}.")
    boundaries = state.boundaries.copy()
    inv_temps = np.array([inverse_temperature(sweep, params.anneal_sweeps)
                          for sweep in range(state.sweeps, state.sweeps + n_sweeps)], dtype=np.float64)
    codes = _codes(state.text)
    _run_sweeps(_padded(codes), state.starts, boundaries, params.concentration, params.stop_prob,
                params.n_symbols, params.utterance_prior, inv_temps, seed, state.sweeps + 1, MAX_LOAD)
    return replace(state, boundaries=boundaries, sweeps=state.sweeps + n_sweeps)


def _padded(codes: IntArray) -> IntArray:
    """``codes`` followed by zeros up to the table capacity: the kernels size their table by its length."""
    out = np.zeros(_table_capacity(len(codes)), dtype=np.int64)
    out[:len(codes)] = codes
    return out


def segmentations(state: DPSegState) -> list[list[str]]:
    """The words of every sentence under ``state``."""
    return [_split(state.text[state.starts[d]:state.starts[d + 1]],
                   state.boundaries[state.starts[d]:state.starts[d + 1]]) for d in range(state.n_sentences)]


def word_counts(state: DPSegState) -> dict[str, int]:
    """Token count of every word type of the segmentation."""
    return dict(Counter(word for words in segmentations(state) for word in words))


@numba.njit(nogil=True, cache=True)
def _heldout_sentence(query: IntArray, a: int, b: int, keys: IntArray, key_start: IntArray, key_len: IntArray,
                      counts: IntArray, n_words: int, n_final: int, concentration: float, stop_prob: float,
                      n_symbols: int, rho: float, key: np.uint64, cuts_out: np.ndarray,
                      log_probs_out: FloatArray) -> float:
    """Forward pass over the sentence ``query[a:b]`` with the predictive unigram frozen, then backward draws.

    ``cuts_out[j, i] = 1`` when sample ``j`` has a word ending after character ``a + i``; returns the log
    marginal likelihood ``log sum_segmentations prod_words P(w) E(w)`` (frozen counts, no updating).
    NumPy equivalent: brute-force enumeration of the 2^(L-1) segmentations in the tests.
    """
    log_stop, log_continue, log_symbol = math.log(stop_prob), math.log(1.0 - stop_prob), -math.log(n_symbols)
    length = b - a
    log_word = np.empty((length + 1, length + 1))
    for i in range(length):
        for j in range(i + 1, length + 1):
            count = _count(query, a + i, a + j, keys, key_start, key_len, counts)
            log_word[i, j] = math.log(_word_prob(count, j - i, n_words, concentration, log_stop, log_continue,
                                                 log_symbol) * _end_prob(j == length, n_words, n_final, rho))
    log_alpha = np.full(length + 1, -np.inf)
    log_alpha[0] = 0.0
    for j in range(1, length + 1):
        top = -np.inf
        for i in range(j):
            top = max(top, log_alpha[i] + log_word[i, j])
        total = 0.0
        for i in range(j):
            total += math.exp(log_alpha[i] + log_word[i, j] - top)
        log_alpha[j] = top + math.log(total)
    draw = 0
    for sample in range(cuts_out.shape[0]):
        j = length
        log_prob = 0.0
        while j > 0:
            u = uniform_from_key(key, draw)
            draw += 1
            acc = 0.0
            chosen = 0
            for i in range(j):
                acc += math.exp(log_alpha[i] + log_word[i, j] - log_alpha[j])
                chosen = i
                if u < acc:
                    break
            log_prob += log_word[chosen, j]
            cuts_out[sample, j - 1] = 1
            j = chosen
        log_probs_out[sample] = log_prob
    return log_alpha[length]


def sample_heldout(state: DPSegState, params: DPSegParams, sentences: Sequence[str], *, n_samples: int = 10,
                   seed: int = 0) -> tuple[list[list[list[str]]], list[list[float]], list[float]]:
    """Independent segmentations of held-out sentences from the state's predictive unigram, frozen.

    Each test sentence is segmented on its own with the word probabilities of :func:`_word_prob` and
    the end probabilities of the training counts, which are not updated by the test words (the same
    protocol as the hybrid E-step's independent draws from one chart, Zhai 2014 P4).

    Parameters
    ----------
    state : DPSegState
    params : DPSegParams
    sentences : sequence of str
    n_samples : int
        Draws per sentence (10 in Zhai 2014).
    seed : int

    Returns
    -------
    samples : list (per sentence) of list (per sample) of list of str
    log_probs : list (per sentence) of list of float
        Log-probability (nats) of each sampled segmentation.
    log_marginals : list of float
        Log-probability of each sentence summed over all its segmentations.
    """
    if n_samples < 1:
        raise InvalidParameterError(f"n_samples must be >= 1, got {n_samples!r}.")
    if any(len(s) == 0 for s in sentences):
        raise InvalidParameterError("a held-out sentence is empty.")
    starts = np.zeros(len(sentences) + 1, dtype=np.int64)
    starts[1:] = np.cumsum([len(s) for s in sentences])
    cuts = np.zeros((n_samples, int(starts[-1])), dtype=np.uint8)
    log_probs = np.zeros((len(sentences), n_samples))
    marginals = np.zeros(len(sentences))
    _heldout(_padded(_codes(state.text)), state.starts, state.boundaries, _codes("".join(sentences)), starts,
             params.concentration, params.stop_prob, params.n_symbols, params.utterance_prior, seed, cuts, log_probs,
             marginals)
    samples = [[_split(sentence, cuts[j, starts[d]:starts[d + 1]]) for j in range(n_samples)]
               for d, sentence in enumerate(sentences)]
    return samples, log_probs.tolist(), marginals.tolist()




@numba.njit(nogil=True, cache=True)
def _heldout(codes: IntArray, starts: IntArray, boundaries: np.ndarray, test_codes: IntArray, test_starts: IntArray,
             concentration: float, stop_prob: float, n_symbols: int, rho: float, seed: int, cuts_out: np.ndarray,
             log_probs_out: FloatArray, marginals_out: FloatArray) -> None:
    """:func:`_heldout_sentence` for every test sentence, with the training counts; fills the outputs."""
    key_start = np.full(len(codes), -1, dtype=np.int64)
    key_len = np.zeros(len(codes), dtype=np.int64)
    counts = np.zeros(len(codes), dtype=np.int64)
    used = np.zeros(1, dtype=np.int64)
    n_words = _recount(codes, starts, boundaries, key_start, key_len, counts, used)
    n_sentences = len(starts) - 1
    for d in range(len(test_starts) - 1):
        a, b = test_starts[d], test_starts[d + 1]
        marginals_out[d] = _heldout_sentence(test_codes, a, b, codes, key_start, key_len, counts, n_words,
                                             n_sentences, concentration, stop_prob, n_symbols, rho,
                                             counter_key(seed, STREAM_GIBBS, HELDOUT_EPOCH, d), cuts_out[:, a:b],
                                             log_probs_out[d])


def _split(sentence: str, cuts: np.ndarray) -> list[str]:
    """Words of ``sentence`` ending where ``cuts`` is 1 (the last entry is always 1)."""
    ends = (np.flatnonzero(cuts) + 1).tolist()
    return [sentence[a:b] for a, b in zip([0, *ends[:-1]], ends)]
