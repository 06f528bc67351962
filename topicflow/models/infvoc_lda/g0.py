"""The base distribution G0 over all strings of infinite-vocabulary LDA (Zhai 2014, sec. 7.2.1).

This module owns G0: a length multinomial zeta times a character n-gram model trained on a word list,

    G0(rho) = p(l = |rho| | zeta) * prod_{i=1..|rho|} p(c_i | c_{i-n+1..i-1})        ([Z] sec. 7.2.1)

with the context of the first characters padded by a boundary symbol (shown as ``#``, the reference
code's padding character). It trains G0 (character counts, Lidstone smoothing, zeta), scores words
(``log_g0``, a numba kernel over all words of a call at once) and computes its total mass exactly
(``g0_total_mass``, a forward pass over contexts). Pure NumPy and numba: no I/O, no logging, no Dask;
files are :mod:`topicflow.io.g0`, the command ``topicflow g0`` is :mod:`topicflow.cli.g0`.

Alphabet. The charset is the characters seen in the training words (after lowercasing), sorted by code
point; code ``i`` is ``charset[i]``. Every character outside the charset is scored as one extra
outcome, the *unknown character* (code ``n_chars``), and stands as that symbol in later contexts. The
boundary symbol (code ``n_chars + 1``) only ever appears in contexts, never as an outcome, so a literal
``#`` in a word is an ordinary character. With the unknown bin G0 is a proper distribution over strings
over ``charset + {unknown}``: all strings that differ only in which unknown characters they hold share
one value, and the sum over all strings of lengths ``min_length..max_length`` is 1 (checked by exact
enumeration in the tests).

Smoothing. Lidstone (additive) smoothing over the ``n_chars + 1`` outcomes of every context,
``p(c | h) = (count(h, c) + gamma) / (count(h) + gamma * (n_chars + 1))``, as the reference code's
``nltk.LidstoneProbDist(fdist, gamma, len(char_set) + 1)``. The reference passes gamma = 1e6
(``Hybrid.__init__``) or 1e9 (``nchar.demo``): against counts of at most a few thousand per context
that makes every conditional uniform, 1 / (n_chars + 1), and G0 a function of the length alone.
topicflow's default ``DEFAULT_SMOOTHING = 0.1`` maximized held-out character log-likelihood on the
English word list (docs/infvoc.md, "Base distribution G0"); pass ``smoothing=1e6`` for the reference.

Length multinomial. ``length_fit="least_squares"`` is the chapter's zeta: it minimizes
sum_rho |p_C(rho) - zeta_|rho| p_ng(rho)|^2 over the dictionary words rho subject to sum_l zeta_l = 1,
solved exactly with zeta_l >= 0 added (``zeta_least_squares``; without active bounds it is the closed
form zeta_l = (E_l - mu) / S_l). On an English word list that fit puts all mass on lengths 3..7
(squared errors of tiny probabilities are dominated by short words) and G0 of every longer word is 0,
so the default is ``length_fit="empirical"``: zeta_l is the share of training words of length l, with
add-1/2 smoothing over ``min_length..max_length`` (the maximum-likelihood zeta of the generative story
"choose l ~ Mult(zeta), then the characters"; the reference code also builds this distribution, as
``self._length``, and has the line using it commented out).

Glossary ([Z] sec. 7.2.1; reference kzhai/InfVocLDA ``src/infvoc/nchar.py``):
    order (n): characters per n-gram; a context is the n - 1 preceding codes
    smoothing (gamma): Lidstone pseudo-count per outcome and context
    zeta (zeta_l): probability of length l; ``log_zeta`` has shape (max_length + 1,)
    p_ng(rho): the n-gram part prod_i p(c_i | context_i); p_C(rho): empirical probability of rho in the word list
    E_l = sum_{|rho|=l} p_C(rho) p_ng(rho), S_l = sum_{|rho|=l} p_ng(rho)^2 (the least-squares moments)
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.validation import (
    parse_choice,
    parse_int,
    parse_positive_float,
)

#: How zeta is fitted: the maximum-likelihood length shares, or the chapter's least squares.
LengthFit = Literal["empirical", "least_squares"]
LENGTH_FITS: tuple[str, ...] = ("empirical", "least_squares")
#: The reference code's n-gram order, and its word-length bounds (shorter and longer words get G0 = 0).
DEFAULT_ORDER = 3
DEFAULT_MIN_LENGTH = 3
DEFAULT_MAX_LENGTH = 20
#: Lidstone gamma; best held-out character log-likelihood on the English word list (see module docstring).
DEFAULT_SMOOTHING = 0.1
#: Pseudo-count per length of the empirical zeta (Jeffreys), so no length in the bounds gets zero mass.
LENGTH_PSEUDO_COUNT = 0.5
#: How the boundary (padding) symbol is displayed; it is a context symbol distinct from any character.
BOUNDARY_DISPLAY = "#"
#: Largest context table (n_contexts * n_outcomes entries) train_g0 builds.
MAX_TABLE_ENTRIES = 1 << 25


@dataclass(frozen=True, slots=True)
class CharNgramG0:
    """A trained G0: character n-gram counts, smoothing, length bounds and the length multinomial.

    Build one with :func:`train_g0` (or :meth:`from_counts` when reading a file); the conditional
    log-probabilities ``log_cond`` are derived from ``counts`` and ``smoothing`` at construction.

    Attributes
    ----------
    charset : str
        The known characters, sorted by code point; code ``i`` is ``charset[i]``.
    order : int
        n of the n-gram (contexts hold ``order - 1`` codes).
    smoothing : float
        Lidstone gamma (> 0).
    min_length, max_length : int
        Words outside ``[min_length, max_length]`` (in characters, after lowercasing) have G0 = 0.
    lowercase : bool
        Whether training and scoring lowercase words first.
    length_fit : {"empirical", "least_squares"}
        How ``log_zeta`` was fitted.
    counts : ndarray of shape (n_contexts, n_chars + 1), int64
        Training n-gram counts; row = context id (base ``n_chars + 2`` digits, oldest first), column =
        next character (``n_chars`` = unknown).
    length_counts : ndarray of shape (max_length + 1,), int64
        Training words per length (zero outside the bounds).
    log_zeta : ndarray of shape (max_length + 1,), float64
        log zeta_l; ``-inf`` outside the bounds or where zeta_l = 0.
    n_too_short, n_too_long : int
        Training words dropped by the length bounds.
    log_cond : ndarray of shape (n_contexts, n_chars + 1), float64
        log p(c | context), derived.
    """

    charset: str
    order: int
    smoothing: float
    min_length: int
    max_length: int
    lowercase: bool
    length_fit: str
    counts: IntArray
    length_counts: IntArray
    log_zeta: FloatArray
    n_too_short: int
    n_too_long: int
    log_cond: FloatArray

    @classmethod
    def from_counts(cls, *, charset: str, order: int, smoothing: float, min_length: int, max_length: int,
                    lowercase: bool, length_fit: str, counts: IntArray, length_counts: IntArray,
                    log_zeta: FloatArray, n_too_short: int = 0, n_too_long: int = 0) -> CharNgramG0:
        """Validate the parts of a G0 and derive its conditional log-probabilities.

        Parameters
        ----------
        charset : str
            Distinct characters sorted by code point.
        order : int
            n >= 1.
        smoothing : float
            Lidstone gamma > 0.
        min_length : int
            Shortest scored word, >= 1.
        max_length : int
            Longest scored word, >= ``min_length``.
        lowercase : bool
            Lowercase words before scoring.
        length_fit : {"empirical", "least_squares"}
            How ``log_zeta`` was fitted (recorded).
        counts : ndarray of shape (n_contexts, n_chars + 1)
            Non-negative integer n-gram counts.
        length_counts : ndarray of shape (max_length + 1,)
            Non-negative training words per length.
        log_zeta : ndarray of shape (max_length + 1,)
            log zeta; exp sums to 1 over the bounds and is 0 outside.
        n_too_short : int, default 0
            Training words shorter than ``min_length`` (recorded).
        n_too_long : int, default 0
            Training words longer than ``max_length`` (recorded).

        Returns
        -------
        CharNgramG0

        Raises
        ------
        InvalidParameterError
            A setting out of range or an array of the wrong shape, sign or normalization.
        """
        order = parse_int("CharNgramG0.order", order, 1)
        smoothing = parse_positive_float("CharNgramG0.smoothing", smoothing)
        min_length = parse_int("CharNgramG0.min_length", min_length, 1)
        max_length = parse_int("CharNgramG0.max_length", max_length, min_length)
        length_fit = parse_choice("CharNgramG0.length_fit", length_fit, LENGTH_FITS)
        if list(charset) != sorted(set(charset)):
            raise InvalidParameterError("CharNgramG0.charset must hold distinct characters sorted by code point, "
                                        f"got {charset!r}")
        n_chars = len(charset)
        shape = ((n_chars + 2) ** (order - 1), n_chars + 1)
        counts = np.ascontiguousarray(counts, dtype=np.int64)
        length_counts = np.ascontiguousarray(length_counts, dtype=np.int64)
        log_zeta = np.ascontiguousarray(log_zeta, dtype=np.float64)
        if counts.shape != shape or counts.min(initial=0) < 0:
            raise InvalidParameterError(f"CharNgramG0.counts must be non-negative of shape {shape} (order {order}, "
                                        f"{n_chars} characters), got shape {counts.shape}")
        if length_counts.shape != (max_length + 1,) or length_counts.min(initial=0) < 0:
            raise InvalidParameterError(f"CharNgramG0.length_counts must be non-negative of shape ({max_length + 1},)")
        zeta = np.exp(log_zeta) if log_zeta.shape == (max_length + 1,) else np.array([np.nan])
        if (zeta.shape != (max_length + 1,) or np.isnan(log_zeta).any() or zeta[:min_length].any()
                or abs(zeta.sum() - 1.0) > 1e-9):
            raise InvalidParameterError(f"CharNgramG0.log_zeta must have shape ({max_length + 1},), be -inf below "
                                        f"length {min_length} and exponentiate to a distribution summing to 1")
        return cls(charset=charset, order=order, smoothing=smoothing, min_length=min_length, max_length=max_length,
                   lowercase=bool(lowercase), length_fit=length_fit, counts=counts, length_counts=length_counts,
                   log_zeta=log_zeta, n_too_short=int(n_too_short), n_too_long=int(n_too_long),
                   log_cond=conditional_log_probs(counts, smoothing))

    @property
    def n_chars(self) -> int:
        """Number of known characters (the unknown character's code)."""
        return len(self.charset)

    @property
    def zeta(self) -> FloatArray:
        """The length multinomial, shape (max_length + 1,)."""
        return np.exp(self.log_zeta)

    @property
    def n_words(self) -> int:
        """Training words kept (within the length bounds)."""
        return int(self.length_counts.sum())


def conditional_log_probs(counts: IntArray, smoothing: float) -> FloatArray:
    """Lidstone-smoothed log p(c | context) of every context row.

    Parameters
    ----------
    counts : ndarray of shape (n_contexts, n_outcomes), int64
        The n-gram counts; the last outcome is the unknown character.
    smoothing : float
        Lidstone gamma > 0.

    Returns
    -------
    ndarray of shape (n_contexts, n_outcomes), float64
        ``log((counts + gamma) / (counts.sum(1) + gamma * n_outcomes))``; every row exponentiates to 1.
    """
    counts = np.asarray(counts, dtype=np.float64)
    totals = counts.sum(axis=1, keepdims=True) + smoothing * counts.shape[1]
    return np.asarray(np.log(counts + smoothing) - np.log(totals), dtype=np.float64)


def normalize_words(words: Iterable[str], *, lowercase: bool) -> list[str]:
    """The strings G0 sees: each word lowercased when ``lowercase``.

    Parameters
    ----------
    words : iterable of str
    lowercase : bool

    Returns
    -------
    list of str

    Raises
    ------
    InvalidParameterError
        An item is not a str (its position is named).
    """
    out = []
    for index, word in enumerate(words):
        if not isinstance(word, str):
            raise InvalidParameterError(f"G0 scores strings; item {index} is {word!r} of type {type(word).__name__}")
        out.append(word.lower() if lowercase else word)
    return out


def encode_strings(strings: Sequence[str], charset: str) -> tuple[IntArray, IntArray]:
    """Character codes of already-normalized strings, concatenated, with CSR offsets.

    Parameters
    ----------
    strings : sequence of str
    charset : str
        Sorted known characters; others get code ``len(charset)`` (unknown).

    Returns
    -------
    codes : ndarray of shape (total characters,), int64
    offsets : ndarray of shape (len(strings) + 1,), int64
        String ``j`` is ``codes[offsets[j]:offsets[j + 1]]``.
    """
    lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
    offsets = np.zeros(len(strings) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    points = np.frombuffer("".join(strings).encode("utf-32-le", "surrogatepass"), dtype=np.uint32).astype(np.int64)
    known = np.frombuffer(charset.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
    pos = np.searchsorted(known, points)
    hit = pos < known.size
    hit[hit] = known[pos[hit]] == points[hit]
    codes = np.where(hit, pos, known.size).astype(np.int64)
    return codes, offsets


@numba.njit(nogil=True, cache=True)
def _count_ngrams(codes, offsets, order, base, boundary, counts):
    """Add every word's n-grams (boundary-padded context) to ``counts`` in place.

    NumPy equivalent: for each word, for each position i, ``counts[context_id(i), codes[i]] += 1``.
    """
    span = base ** (order - 1)
    start = 0
    for _ in range(order - 1):
        start = start * base + boundary
    for j in range(offsets.size - 1):
        ctx = start
        for i in range(offsets[j], offsets[j + 1]):
            c = codes[i]
            counts[ctx, c] += 1
            ctx = (ctx * base + c) % span


@numba.njit(nogil=True, cache=True)
def _sum_log_cond(codes, offsets, order, base, boundary, log_cond, out):
    """``out[j]`` = sum over word j's characters of log p(c_i | context_i), the log n-gram part of G0.

    NumPy equivalent: the same context walk as ``_count_ngrams`` summing ``log_cond[ctx, c]``.
    """
    span = base ** (order - 1)
    start = 0
    for _ in range(order - 1):
        start = start * base + boundary
    for j in range(offsets.size - 1):
        ctx = start
        total = 0.0
        for i in range(offsets[j], offsets[j + 1]):
            c = codes[i]
            total += log_cond[ctx, c]
            ctx = (ctx * base + c) % span
        out[j] = total


def _log_ngram_codes(g0: CharNgramG0, codes: IntArray, offsets: IntArray) -> FloatArray:
    out = np.empty(offsets.size - 1, dtype=np.float64)
    _sum_log_cond(codes, offsets, g0.order, g0.n_chars + 2, g0.n_chars + 1, g0.log_cond, out)
    return out


def log_ngram(g0: CharNgramG0, words: Sequence[str]) -> FloatArray:
    """Score words by log p_ng(rho) = sum_i log p(c_i | c_{i-n+1..i-1}), G0 without the length factor.

    Parameters
    ----------
    g0 : CharNgramG0
    words : sequence of str
        Normalized like training (lowercased when ``g0.lowercase``).

    Returns
    -------
    ndarray of shape (len(words),), float64
        0 for the empty string.
    """
    codes, offsets = encode_strings(normalize_words(words, lowercase=g0.lowercase), g0.charset)
    return _log_ngram_codes(g0, codes, offsets)


def log_g0(g0: CharNgramG0, words: Sequence[str]) -> FloatArray:
    """Score words by log G0(rho) = log zeta_|rho| + log p_ng(rho) ([Z] sec. 7.2.1).

    Parameters
    ----------
    g0 : CharNgramG0
    words : sequence of str
        Lowercased first when ``g0.lowercase``; characters outside ``g0.charset`` are scored as the
        unknown character.

    Returns
    -------
    ndarray of shape (len(words),), float64
        Natural logs; ``-inf`` for words shorter than ``g0.min_length`` or longer than
        ``g0.max_length`` (and for lengths whose zeta is 0).

    Examples
    --------
    >>> g0 = train_g0(["cat", "cart", "care", "dog", "dart"], min_length=3, max_length=5)
    >>> scores = log_g0(g0, ["cat", "xqz", "ab"])
    >>> bool(scores[0] > scores[1]), bool(np.isneginf(scores[2]))
    (True, True)
    """
    strings = normalize_words(words, lowercase=g0.lowercase)
    codes, offsets = encode_strings(strings, g0.charset)
    lengths = np.diff(offsets)
    log_len = np.full(lengths.size, -np.inf)
    inside = lengths <= g0.max_length
    log_len[inside] = g0.log_zeta[lengths[inside]]
    return np.asarray(log_len + _log_ngram_codes(g0, codes, offsets), dtype=np.float64)


def zeta_least_squares(expected: FloatArray, squares: FloatArray) -> FloatArray:
    """The zeta of [Z] sec. 7.2.1: argmin sum_l (S_l zeta_l^2 - 2 E_l zeta_l), sum zeta = 1, zeta >= 0.

    sum_rho |p_C(rho) - zeta_|rho| p_ng(rho)|^2 expands per length into S_l zeta_l^2 - 2 E_l zeta_l
    plus a constant. Its KKT conditions give zeta_l = max(0, (E_l - mu) / S_l) with mu fixed by
    sum zeta = 1; the active lengths are those of largest E_l. Without active bounds this is the closed
    form zeta_l = (E_l - lambda / 2) / S_l, lambda = 2 (sum_l E_l / S_l - 1) / sum_l 1 / S_l, which sums
    to 1 by itself. (The reference code and the spec print lambda with the opposite sign,
    2 (1 - sum E/S) / sum 1/S, and then renormalize: a point that is not the constrained minimum.)

    Parameters
    ----------
    expected : ndarray of shape (n_lengths,), float64
        E_l >= 0.
    squares : ndarray of shape (n_lengths,), float64
        S_l >= 0; a length with S_l = 0 (no word) gets zeta_l = 0.

    Returns
    -------
    ndarray of shape (n_lengths,), float64
        Non-negative, summing to 1.

    Raises
    ------
    InvalidParameterError
        No length has S_l > 0, or negative inputs.
    """
    expected = np.asarray(expected, dtype=np.float64)
    squares = np.asarray(squares, dtype=np.float64)
    if expected.shape != squares.shape or (expected < 0).any() or (squares < 0).any():
        raise InvalidParameterError("zeta_least_squares needs non-negative E and S of one shape")
    used = np.flatnonzero(squares > 0)
    if used.size == 0:
        raise InvalidParameterError("zeta_least_squares: no length has a word (every S_l is 0)")
    e, s = expected[used], squares[used]
    by_e = np.argsort(-e, kind="stable")
    zeta = np.zeros_like(expected)
    for k in range(1, used.size + 1):
        top = by_e[:k]
        mu = (np.sum(e[top] / s[top]) - 1.0) / np.sum(1.0 / s[top])
        if k == used.size or e[by_e[k]] <= mu:
            zeta[used[top]] = np.maximum(0.0, (e[top] - mu) / s[top])
            break
    return np.asarray(zeta / zeta.sum(), dtype=np.float64)


def least_squares_moments(lengths: IntArray, log_p_ngram: FloatArray, empirical: FloatArray,
                          n_lengths: int) -> tuple[FloatArray, FloatArray]:
    """E_l and S_l of [Z] sec. 7.2.1 over the distinct words rho of a word list.

    Parameters
    ----------
    lengths : ndarray of shape (n_distinct,), int64
        Length of each distinct word.
    log_p_ngram : ndarray of shape (n_distinct,), float64
        The log p_ng of each distinct word.
    empirical : ndarray of shape (n_distinct,), float64
        The p_C of each distinct word (its share of the list; the reference code's ``MLEProbDist``).
    n_lengths : int
        Size of the returned arrays (max length + 1).

    Returns
    -------
    expected : ndarray of shape (n_lengths,), float64
        E_l = sum_{|rho|=l} p_C(rho) p_ng(rho).
    squares : ndarray of shape (n_lengths,), float64
        S_l = sum_{|rho|=l} p_ng(rho)^2.
    """
    p = np.exp(log_p_ngram)
    expected = np.bincount(lengths, weights=np.asarray(empirical) * p, minlength=n_lengths)
    squares = np.bincount(lengths, weights=p * p, minlength=n_lengths)
    return np.asarray(expected, dtype=np.float64), np.asarray(squares, dtype=np.float64)


def train_g0(words: Iterable[str], *, order: int = DEFAULT_ORDER, smoothing: float = DEFAULT_SMOOTHING,
             min_length: int = DEFAULT_MIN_LENGTH, max_length: int = DEFAULT_MAX_LENGTH, lowercase: bool = True,
             length_fit: LengthFit = "empirical") -> CharNgramG0:
    """Train G0 on a word list ([Z] sec. 7.2.1; reference ``nchar.NcharModel``).

    Words are lowercased (when ``lowercase``); those outside ``[min_length, max_length]`` are dropped
    and counted. Each kept word adds its n-grams with a boundary-padded context (each word on its own:
    the reference concatenates the padded words, so its n-grams also span word ends). Duplicates count
    as often as they occur. The words are not stemmed (the reference Porter-stems them).

    Parameters
    ----------
    words : iterable of str
    order : int, default 3
        The n of the character n-gram.
    smoothing : float, default DEFAULT_SMOOTHING (0.1)
        Lidstone gamma; ``1e6`` reproduces the reference code (near-uniform conditionals).
    min_length : int, default 3
        Shortest word kept and scored.
    max_length : int, default 20
        Longest word kept and scored.
    lowercase : bool, default True
        Lowercase training words, and words scored later.
    length_fit : {"empirical", "least_squares"}, default "empirical"
        zeta as add-1/2 length shares, or the chapter's least squares (:func:`zeta_least_squares`).

    Returns
    -------
    CharNgramG0

    Raises
    ------
    InvalidParameterError
        Bad settings, a non-string word, no word within the bounds, or a context table too large.

    Examples
    --------
    >>> g0 = train_g0(["abc", "abd", "bcd"], min_length=3, max_length=4)
    >>> g0.charset, g0.n_words
    ('abcd', 3)
    """
    order = parse_int("train_g0 order", order, 1)
    smoothing = parse_positive_float("train_g0 smoothing", smoothing)
    min_length = parse_int("train_g0 min_length", min_length, 1)
    max_length = parse_int("train_g0 max_length", max_length, min_length)
    length_fit = parse_choice("train_g0 length_fit", length_fit, LENGTH_FITS)  # type: ignore[assignment]
    strings = normalize_words(words, lowercase=lowercase)
    all_lengths = np.fromiter((len(s) for s in strings), dtype=np.int64, count=len(strings))
    keep = (all_lengths >= min_length) & (all_lengths <= max_length)
    kept = [s for s, k in zip(strings, keep) if k]
    if not kept:
        raise InvalidParameterError(f"train_g0: none of the {len(strings)} words has a length in "
                                    f"[{min_length}, {max_length}]; give a word list or change the bounds")
    charset = "".join(sorted(set("".join(kept))))
    base = len(charset) + 2
    if base ** (order - 1) * (len(charset) + 1) > MAX_TABLE_ENTRIES:
        raise InvalidParameterError(f"train_g0: order {order} over {len(charset)} characters needs a table of "
                                    f"{base ** (order - 1) * (len(charset) + 1):,} entries (limit "
                                    f"{MAX_TABLE_ENTRIES:,}); lower the order")
    codes, offsets = encode_strings(kept, charset)
    counts = np.zeros((base ** (order - 1), len(charset) + 1), dtype=np.int64)
    _count_ngrams(codes, offsets, order, base, base - 1, counts)
    kept_lengths = all_lengths[keep]
    length_counts = np.bincount(kept_lengths, minlength=max_length + 1).astype(np.int64)
    if length_fit == "empirical":
        zeta = np.zeros(max_length + 1)
        zeta[min_length:] = length_counts[min_length:] + LENGTH_PSEUDO_COUNT
    else:
        distinct = Counter(kept)
        d_codes, d_offsets = encode_strings(list(distinct), charset)
        log_p = np.empty(len(distinct), dtype=np.float64)
        _sum_log_cond(d_codes, d_offsets, order, base, base - 1, conditional_log_probs(counts, smoothing), log_p)
        p_c = np.fromiter(distinct.values(), dtype=np.float64, count=len(distinct)) / len(kept)
        expected, squares = least_squares_moments(np.diff(d_offsets), log_p, p_c, max_length + 1)
        zeta = zeta_least_squares(expected, squares)
    with np.errstate(divide="ignore"):
        log_zeta = np.log(zeta / zeta.sum())
    return CharNgramG0.from_counts(charset=charset, order=order, smoothing=smoothing, min_length=min_length,
                                   max_length=max_length, lowercase=lowercase, length_fit=length_fit, counts=counts,
                                   length_counts=length_counts, log_zeta=log_zeta,
                                   n_too_short=int(np.sum(all_lengths < min_length)),
                                   n_too_long=int(np.sum(all_lengths > max_length)))


def length_masses(g0: CharNgramG0, max_length: int) -> FloatArray:
    """Total n-gram probability of all strings of each length 0..max_length (each 1 for a proper model).

    A forward pass over contexts: ``v_0`` is the boundary context with mass 1, and
    ``v_{t+1}[shift(h, c)] += v_t[h] p(c | h)`` over all ``n_chars + 1`` outcomes.

    Parameters
    ----------
    g0 : CharNgramG0
    max_length : int
        Longest length.

    Returns
    -------
    ndarray of shape (max_length + 1,), float64
        ``masses[l]`` = sum over strings rho of length l (over charset + unknown) of p_ng(rho).
    """
    base = g0.n_chars + 2
    span = base ** (g0.order - 1)
    start = 0
    for _ in range(g0.order - 1):
        start = start * base + base - 1
    cond = np.exp(g0.log_cond)
    targets = (np.arange(span)[:, None] * base + np.arange(g0.n_chars + 1)[None, :]) % span
    mass = np.zeros(span)
    mass[start] = 1.0
    out = np.empty(max_length + 1)
    for length in range(max_length + 1):
        out[length] = mass.sum()
        nxt = np.zeros(span)
        np.add.at(nxt, targets.ravel(), (mass[:, None] * cond).ravel())
        mass = nxt
    return np.asarray(out, dtype=np.float64)


def g0_total_mass(g0: CharNgramG0, max_length: int | None = None) -> float:
    """Sum of G0 over all strings of length up to ``max_length``: sum_l zeta_l * length_masses[l].

    Parameters
    ----------
    g0 : CharNgramG0
    max_length : int, optional
        Default ``g0.max_length`` (then the result is 1 up to rounding).

    Returns
    -------
    float
    """
    top = g0.max_length if max_length is None else min(int(max_length), g0.max_length)
    return float(np.sum(g0.zeta[:top + 1] * length_masses(g0, top)))
