"""Counts of the words and word pairs that topic coherence needs: boolean documents and sliding windows.

Coherence only ever asks for the words of the topics' top-N lists (the *relevant* words, numbered
``0 .. n_words - 1``) and for the pairs of relevant words that share a topic (:class:`PairIndex`), so
the counts of a reference corpus of any size fit in ``O(K N^2)`` memory. Counts of disjoint parts of a
corpus add up (:class:`CooccurrenceCounts` is a monoid), which is what lets the Dask graph count one
shard at a time and tree-reduce.

Two ways of counting, as gensim 4.4's ``topic_coherence.text_analysis`` defines them:

* boolean document (``CorpusAccumulator``): a word occurs in a document if the document holds it at
  least once; a pair if both occur; ``n_units`` counts every document, empty ones included.
* boolean sliding window (``WordOccurrenceAccumulator`` over ``utils.iter_windows(...,
  ignore_below_size=False)``): a document of ``n`` tokens gives ``n - window + 1`` windows of
  ``window`` consecutive tokens, or a single window holding the whole document when ``n <= window``
  (an empty document gives one empty window); ``n_units`` counts every window. Tokens that are not
  relevant words (other terms, out-of-vocabulary tokens) take their place in a window and are never
  counted. With ``exact=False`` (gensim) the set of words of a window is gensim's incremental one: the
  first window of a document holds its distinct relevant words, and each slide removes the token that
  left and adds the token that entered, *even when the token that left still occurs inside the
  window*; with ``exact=True`` a word belongs to a window exactly when one of its tokens does. See
  docs/evaluation.md, "Coherence".

Glossary: ``n_words`` relevant words R, ``n_pairs`` relevant pairs P (unordered, distinct words).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numba
import numpy as np

from topicflow._typing import IndexArray, Int32Array, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock, OrderedBlock


@dataclass(frozen=True, slots=True)
class PairIndex:
    """The unordered pairs of relevant words that share at least one topic, in CSR form.

    Pair ``s`` with ``indptr[i] <= s < indptr[i + 1]`` is ``(i, partners[s])``, and ``partners[s] > i``;
    partners are sorted within a word, so the pairs are in ``(i, j)`` lexicographic order.

    Attributes
    ----------
    n_words : int
        Number of relevant words R.
    indptr : ndarray of shape (n_words + 1,), int64
    partners : ndarray of shape (n_pairs,), int32
    """

    n_words: int
    indptr: IntArray
    partners: Int32Array

    @property
    def n_pairs(self) -> int:
        return int(self.partners.shape[0])

    @classmethod
    def from_topics(cls, topics: Sequence[IndexArray], n_words: int) -> PairIndex:
        """Every pair of distinct words that occur together in one of ``topics``.

        Parameters
        ----------
        topics : sequence of int arrays
            Each topic's words as relevant-word numbers in ``[0, n_words)``.
        n_words : int
            Number of relevant words.

        Returns
        -------
        PairIndex
        """
        firsts, seconds = [], []
        for topic in topics:
            ids = np.unique(np.asarray(topic, dtype=np.int64))
            if ids.size and (ids[0] < 0 or ids[-1] >= n_words):
                raise InvalidParameterError(f"topic word numbers must lie in [0, {n_words}), got {ids.tolist()}")
            first, second = np.triu_indices(ids.size, k=1)
            firsts.append(ids[first])
            seconds.append(ids[second])
        keys = np.unique(np.concatenate(firsts + [np.zeros(0, np.int64)]) * max(n_words, 1)
                         + np.concatenate(seconds + [np.zeros(0, np.int64)]))
        rows, cols = np.divmod(keys, max(n_words, 1))
        indptr = np.zeros(n_words + 1, dtype=np.int64)
        np.add.at(indptr, rows + 1, 1)
        return cls(n_words=n_words, indptr=np.cumsum(indptr), partners=cols.astype(np.int32))

    def slots(self, first: IndexArray, second: IndexArray) -> IntArray:
        """Positions of the pairs ``{first[k], second[k]}`` (either order) among the pairs.

        Parameters
        ----------
        first, second : int arrays of one shape
            Relevant-word numbers, ``first != second`` elementwise.

        Returns
        -------
        ndarray of int64, same shape

        Raises
        ------
        InvalidParameterError
            A pair is not indexed (its words share no topic).
        """
        first, second = np.asarray(first, dtype=np.int64), np.asarray(second, dtype=np.int64)
        low, high = np.minimum(first, second), np.maximum(first, second)
        width = max(self.n_words, 1)
        rows = np.repeat(np.arange(self.n_words, dtype=np.int64), np.diff(self.indptr))
        keys = rows * width + self.partners
        wanted = low * width + high
        found = np.searchsorted(keys, wanted)
        if wanted.size and (keys.size == 0 or not np.all(keys[np.minimum(found, keys.size - 1)] == wanted)):
            raise InvalidParameterError("a requested word pair shares no topic: it was not counted")
        return found.astype(np.int64)


@dataclass(frozen=True, slots=True)
class CooccurrenceCounts:
    """Occurrence counts of the relevant words and their pairs over documents or windows.

    Attributes
    ----------
    occurrences : ndarray of shape (n_words,), int64
        Units (documents or windows) holding each word.
    pair_counts : ndarray of shape (n_pairs,), int64
        Units holding both words of each pair of the :class:`PairIndex`.
    n_units : int
        Units counted: documents, or windows (gensim's ``num_docs``).
    """

    occurrences: IntArray
    pair_counts: IntArray
    n_units: int

    @classmethod
    def zeros(cls, n_words: int, n_pairs: int) -> CooccurrenceCounts:
        """The identity of :meth:`merge`."""
        return cls(np.zeros(n_words, np.int64), np.zeros(n_pairs, np.int64), 0)

    def merge(self, other: CooccurrenceCounts) -> CooccurrenceCounts:
        """Counts of the union of the two disjoint parts counted (associative, commutative)."""
        if self.occurrences.shape != other.occurrences.shape or self.pair_counts.shape != other.pair_counts.shape:
            raise InvalidParameterError("co-occurrence counts of different word sets cannot be merged")
        return CooccurrenceCounts(self.occurrences + other.occurrences, self.pair_counts + other.pair_counts,
                                  self.n_units + other.n_units)

    @staticmethod
    def merge_all(parts: Iterable[CooccurrenceCounts]) -> CooccurrenceCounts:
        """Merge ``parts`` left to right (at least one)."""
        parts = list(parts)
        if not parts:
            raise InvalidParameterError("merge_all needs at least one part")
        total = parts[0]
        for part in parts[1:]:
            total = total.merge(part)
        return total

    def topic_matrix(self, ids: IndexArray, pairs: PairIndex) -> IntArray:
        """Counts among the words ``ids`` of one topic: ``C[a, b]`` units holding both, ``C[a, a]`` units holding ``a``.

        Parameters
        ----------
        ids : int array of shape (n,)
            Distinct relevant-word numbers.
        pairs : PairIndex
            The index the counts were made with.

        Returns
        -------
        ndarray of shape (n, n), int64, symmetric
        """
        ids = np.asarray(ids, dtype=np.int64)
        n = ids.size
        matrix = np.zeros((n, n), dtype=np.int64)
        if n:
            first, second = np.triu_indices(n, k=1)
            values = self.pair_counts[pairs.slots(ids[first], ids[second])]
            matrix[first, second] = values
            matrix[second, first] = values
            matrix[np.arange(n), np.arange(n)] = self.occurrences[ids]
        return matrix


@dataclass(frozen=True, slots=True)
class RelevantWords:
    """The relevant words and their term ids in one reference vocabulary.

    Attributes
    ----------
    words : tuple of str
        Relevant word r is ``words[r]``.
    term_ids : ndarray of shape (n_words,), int64
        Term id of each word in the reference vocabulary, -1 where the vocabulary lacks it.
    """

    words: tuple[str, ...]
    term_ids: IntArray

    @classmethod
    def in_vocabulary(cls, words: Sequence[str], terms: Sequence[str] | np.ndarray) -> RelevantWords:
        """Look ``words`` up in the vocabulary ``terms`` (term id = position) by their strings."""
        wanted = {w: r for r, w in enumerate(words)}
        term_ids = np.full(len(words), -1, dtype=np.int64)
        for term_id, term in enumerate(terms):
            r = wanted.get(str(term))
            if r is not None and term_ids[r] < 0:
                term_ids[r] = term_id
        return cls(tuple(words), term_ids)

    @property
    def known(self) -> np.ndarray:
        """Boolean mask: the word is in the reference vocabulary."""
        return self.term_ids >= 0

    def term_map(self, n_terms: int) -> Int32Array:
        """Reference term id -> relevant-word number (-1 for other terms), shape ``(n_terms,)``."""
        out = np.full(n_terms, -1, dtype=np.int32)
        keep = (self.term_ids >= 0) & (self.term_ids < n_terms)
        out[self.term_ids[keep]] = np.flatnonzero(keep).astype(np.int32)
        return out

    def string_map(self, strings: Sequence[str] | np.ndarray) -> Int32Array:
        """Relevant-word number of each of ``strings`` (-1 for other strings), e.g. a block's ``oov_terms``."""
        wanted = {w: r for r, w in enumerate(self.words)}
        return np.array([wanted.get(str(s), -1) for s in strings], dtype=np.int32).reshape(-1)


# ----------------------------------------------------------------------------- kernels


@numba.njit(nogil=True, cache=True, inline="always")
def _flush(present, n_present, is_present, weight, indptr, partners, occurrences, pair_counts):
    """Add ``weight`` units holding the words ``present[:n_present]`` (marked in ``is_present``)."""
    for a in range(n_present):
        w = present[a]
        occurrences[w] += weight
        for s in range(indptr[w], indptr[w + 1]):
            if is_present[partners[s]]:
                pair_counts[s] += weight


@numba.njit(nogil=True, cache=True)
def _word_of(code, term_map, string_map):
    """Relevant-word number of a token code (term id >= 0, or out-of-vocabulary string -(k + 1))."""
    if code >= 0:
        return term_map[code] if code < term_map.shape[0] else -1
    k = -code - 1
    return string_map[k] if k < string_map.shape[0] else -1


@numba.njit(nogil=True, cache=True)
def _count_documents(doc_indptr, codes, term_map, string_map, indptr, partners, occurrences, pair_counts):
    n_words = occurrences.shape[0]
    is_present = np.zeros(n_words, dtype=np.bool_)
    present = np.empty(n_words, dtype=np.int64)
    n_docs = doc_indptr.shape[0] - 1
    for d in range(n_docs):
        n_present = 0
        for t in range(doc_indptr[d], doc_indptr[d + 1]):
            w = _word_of(codes[t], term_map, string_map)
            if w >= 0 and not is_present[w]:
                is_present[w] = True
                present[n_present] = w
                n_present += 1
        _flush(present, n_present, is_present, 1, indptr, partners, occurrences, pair_counts)
        for a in range(n_present):
            is_present[present[a]] = False
    return n_docs


@numba.njit(nogil=True, cache=True)
def _count_windows(doc_indptr, codes, term_map, string_map, window, exact, indptr, partners,
                   occurrences, pair_counts):
    n_words = occurrences.shape[0]
    is_present = np.zeros(n_words, dtype=np.bool_)
    in_window = np.zeros(n_words, dtype=np.int64)   # tokens of each word in the window (exact sets)
    present = np.empty(n_words, dtype=np.int64)     # the window's words, unordered
    position = np.full(n_words, -1, dtype=np.int64)  # where each present word sits in `present`
    n_windows = 0
    for d in range(doc_indptr.shape[0] - 1):
        lo, hi = doc_indptr[d], doc_indptr[d + 1]
        n = hi - lo
        n_present = 0
        # the first window (the whole document when it is not longer than the window)
        first_hi = hi if n <= window else lo + window
        for t in range(lo, first_hi):
            w = _word_of(codes[t], term_map, string_map)
            if w >= 0:
                if exact:
                    in_window[w] += 1
                if not is_present[w]:
                    is_present[w] = True
                    position[w] = n_present
                    present[n_present] = w
                    n_present += 1
        n_windows += 1 if n <= window else n - window + 1
        run = 1  # consecutive windows holding the same words, counted at once
        for k in range(1, n - window + 1):
            leaving = _word_of(codes[lo + k - 1], term_map, string_map)
            entering = _word_of(codes[lo + k + window - 1], term_map, string_map)
            if exact:
                if leaving == entering:
                    run += 1
                    continue
                drop = leaving >= 0 and in_window[leaving] == 1
                add = entering >= 0 and in_window[entering] == 0
                if leaving >= 0:
                    in_window[leaving] -= 1
                if entering >= 0:
                    in_window[entering] += 1
            else:  # gensim: the word that left is dropped even if it still occurs in the window
                drop = leaving >= 0 and leaving != entering and is_present[leaving]
                add = entering >= 0 and not is_present[entering]
            if not (drop or add):
                run += 1
                continue
            _flush(present, n_present, is_present, run, indptr, partners, occurrences, pair_counts)
            run = 1
            if drop:
                p = position[leaving]
                last = present[n_present - 1]
                present[p] = last
                position[last] = p
                n_present -= 1
                position[leaving] = -1
                is_present[leaving] = False
            if add:
                is_present[entering] = True
                position[entering] = n_present
                present[n_present] = entering
                n_present += 1
        if n > 0:
            _flush(present, n_present, is_present, run, indptr, partners, occurrences, pair_counts)
        for a in range(n_present):
            is_present[present[a]] = False
            position[present[a]] = -1
        if exact:  # the token counts of the last window
            for t in range(max(lo, hi - window), hi):
                w = _word_of(codes[t], term_map, string_map)
                if w >= 0:
                    in_window[w] = 0
    return n_windows


def _check_pairs(relevant: RelevantWords, pairs: PairIndex) -> None:
    if pairs.n_words != len(relevant.words):
        raise InvalidParameterError(
            f"the pair index has {pairs.n_words} words but {len(relevant.words)} relevant words were given"
        )


def count_documents(block: DocBlock | OrderedBlock, relevant: RelevantWords, pairs: PairIndex) -> CooccurrenceCounts:
    """Boolean-document counts of one block (gensim's ``CorpusAccumulator``).

    Parameters
    ----------
    block : DocBlock or OrderedBlock
        A bag-of-words block, or an ordered one (whose out-of-vocabulary tokens are matched by string).
    relevant : RelevantWords
        The relevant words in the block's vocabulary.
    pairs : PairIndex
        The pairs to count.

    Returns
    -------
    CooccurrenceCounts
        ``n_units`` is the block's number of documents.

    Notes
    -----
    NumPy equivalent: ``X = (csr[:, relevant.term_ids] > 0)``; ``occurrences = X.sum(0)``;
    ``pair_counts[s] = (X[:, i] & X[:, j]).sum()`` for each pair ``s = (i, j)``.
    """
    _check_pairs(relevant, pairs)
    counts = CooccurrenceCounts.zeros(pairs.n_words, pairs.n_pairs)
    if isinstance(block, OrderedBlock):
        codes, strings = block.tokens, relevant.string_map(block.oov_terms)
    else:
        codes, strings = block.term_ids, np.zeros(0, np.int32)
    n_docs = _count_documents(block.indptr.astype(np.int64, copy=False), codes, relevant.term_map(block.n_terms),
                              strings, pairs.indptr, pairs.partners, counts.occurrences, counts.pair_counts)
    return CooccurrenceCounts(counts.occurrences, counts.pair_counts, int(n_docs))


def count_windows(
    block: OrderedBlock, relevant: RelevantWords, pairs: PairIndex, *, window: int, exact: bool = False
) -> CooccurrenceCounts:
    """Boolean sliding-window counts of one ordered block (gensim's ``WordOccurrenceAccumulator``).

    Parameters
    ----------
    block : OrderedBlock
        Each document's tokens in reading order; out-of-vocabulary tokens are matched by string.
    relevant : RelevantWords
        The relevant words in the block's vocabulary.
    pairs : PairIndex
        The pairs to count.
    window : int
        Window width in tokens, at least 1.
    exact : bool, default False
        False: gensim's incremental window sets; True: the exact set of words of each window.

    Returns
    -------
    CooccurrenceCounts
        ``n_units`` is the number of windows, ``sum(max(1, n_d - window + 1))`` over the documents.

    Notes
    -----
    NumPy equivalent (``exact=True``): for every window ``tokens[d][k:k + window]`` (or the whole
    document if it is not longer), ``S = set(relevant words in it)``; ``occurrences[i] += i in S``,
    ``pair_counts[(i, j)] += i in S and j in S``. Consecutive windows holding the same set are
    counted at once, so the cost grows with the relevant tokens, not with ``window``.
    """
    _check_pairs(relevant, pairs)
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise InvalidParameterError(f"the sliding window must be a positive number of tokens, got {window!r}")
    counts = CooccurrenceCounts.zeros(pairs.n_words, pairs.n_pairs)
    n_windows = _count_windows(block.indptr.astype(np.int64, copy=False), block.tokens,
                               relevant.term_map(block.n_terms), relevant.string_map(block.oov_terms), int(window),
                               bool(exact), pairs.indptr, pairs.partners, counts.occurrences, counts.pair_counts)
    return CooccurrenceCounts(counts.occurrences, counts.pair_counts, int(n_windows))
