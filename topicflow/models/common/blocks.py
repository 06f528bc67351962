"""Document blocks: the unit of data every kernel and task works on.

A :class:`DocBlock` is one shard of one language as CSR arrays, with the global identity of its
documents. It is pure data: readers in :mod:`topicflow.io` build it, kernels consume it.

It also owns token expansion, the step every sampler starts from: CSR counts become one entry per
token (:func:`expand_tokens` for driver code, :func:`expand_entries_into` inside kernels).

Glossary: ``n_docs`` documents in the block, ``n_terms`` size of the language's vocabulary,
``first_doc`` the global position (over the whole corpus, in store order) of the block's first document;
``token_indptr`` ((n_docs + 1,)) and ``token_terms`` ((n_tokens,)): the tokens of document d are
``token_terms[token_indptr[d]:token_indptr[d + 1]]``, its terms in CSR order repeated by count.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping

import numba
import numpy as np

from topicflow._typing import Int32Array, IntArray
from topicflow.models.common.vocabulary import Vocabulary

if TYPE_CHECKING:  # scipy.sparse costs a few tenths of a second to import; a fit never needs it
    import scipy.sparse as sp


@dataclass(frozen=True, slots=True)
class DocBlock:
    """Bag-of-words counts of consecutive documents in CSR form.

    Attributes
    ----------
    indptr : ndarray of shape (n_docs + 1,), int64
    term_ids : ndarray of shape (n_nonzero,), int32
        Sorted ascending within each document, no duplicates.
    counts : ndarray of shape (n_nonzero,), int32
        Positive.
    doc_ids : ndarray of shape (n_docs,), object (str)
    first_doc : int
        Global position of the first document; seeds and output alignment use it.
    n_terms : int
        Vocabulary size of ``language``.
    language : str
    labels : ndarray of shape (n_docs,), object (str) or None
    timestamps : ndarray of shape (n_docs,), int64 or None
        Seconds since the epoch (UTC).
    """

    indptr: IntArray
    term_ids: Int32Array
    counts: Int32Array
    doc_ids: np.ndarray
    first_doc: int
    n_terms: int
    language: str = "default"
    labels: np.ndarray | None = field(default=None)
    timestamps: IntArray | None = field(default=None)

    @property
    def n_docs(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.counts.sum(dtype=np.int64))

    def doc_lengths(self) -> IntArray:
        """Tokens per document, shape (n_docs,)."""
        out = np.zeros(self.n_docs, dtype=np.int64)
        np.add.at(out, np.repeat(np.arange(self.n_docs), np.diff(self.indptr)), self.counts)
        return out

    def to_csr(self) -> sp.csr_matrix:
        """The counts as a ``(n_docs, n_terms)`` scipy CSR matrix (arrays are shared, not copied)."""
        import scipy.sparse as sp

        return sp.csr_matrix(
            (self.counts, self.term_ids, self.indptr), shape=(self.n_docs, self.n_terms)
        )

    def doc_bag(self, row: int) -> dict[int, int]:
        """Term-id to count mapping of the ``row``-th document of the block."""
        lo, hi = int(self.indptr[row]), int(self.indptr[row + 1])
        return dict(zip(self.term_ids[lo:hi].tolist(), self.counts[lo:hi].tolist()))

    def slice(self, start: int, stop: int) -> DocBlock:
        """Documents ``start`` to ``stop`` (exclusive) of the block, as a new block."""
        start, stop = max(0, start), min(self.n_docs, stop)
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        return DocBlock(
            indptr=self.indptr[start : stop + 1] - lo,
            term_ids=self.term_ids[lo:hi],
            counts=self.counts[lo:hi],
            doc_ids=self.doc_ids[start:stop],
            first_doc=self.first_doc + start,
            n_terms=self.n_terms,
            language=self.language,
            labels=None if self.labels is None else self.labels[start:stop],
            timestamps=None if self.timestamps is None else self.timestamps[start:stop],
        )


@dataclass(frozen=True, slots=True)
class OrderedBlock:
    """Each document's tokens in reading order: the ordered-token layer of one shard of one language.

    Stores ingested with ``--keep-order`` hold it beside the bag of words (docs/corpus-format.md);
    sliding-window coherence, first-half document completion and raw-text models read it.

    Attributes
    ----------
    indptr : ndarray of shape (n_docs + 1,), int64
        The tokens of document d are ``tokens[indptr[d]:indptr[d + 1]]``.
    tokens : ndarray of shape (n_tokens,), int32
        A term id of the block's vocabulary (>= 0), or an out-of-vocabulary token as ``-(k + 1)``
        where ``oov_terms[k]`` is its string.
    oov_terms : ndarray of shape (n_oov,), object (str)
        The block's distinct out-of-vocabulary strings.
    doc_ids : ndarray of shape (n_docs,), object (str)
    first_doc : int
        Global position of the first document (as :attr:`DocBlock.first_doc`).
    n_terms : int
        Vocabulary size of ``language``.
    language : str
    """

    indptr: IntArray
    tokens: Int32Array
    oov_terms: np.ndarray
    doc_ids: np.ndarray
    first_doc: int
    n_terms: int
    language: str = "default"

    @property
    def n_docs(self) -> int:
        return int(self.indptr.shape[0] - 1)

    @property
    def n_tokens(self) -> int:
        return int(self.tokens.shape[0])

    def doc_tokens(self, row: int) -> Int32Array:
        """Token codes of the ``row``-th document of the block, in reading order."""
        return self.tokens[int(self.indptr[row]) : int(self.indptr[row + 1])]

    def texts(self, vocab: Vocabulary, *, include_oov: bool = True) -> list[list[str]]:
        """Each document's tokens as strings, in reading order: the tokenizer's output for it.

        This is the one way to turn the layer back into tokenized texts (for example the ``texts``
        that gensim's ``CoherenceModel`` and ``Dictionary`` take).

        Parameters
        ----------
        vocab : Vocabulary
            The vocabulary of the block's language: the store's current one, or any version at
            least as long as the one the shard was encoded with (every version is a prefix of the
            next).
        include_oov : bool, default True
            Keep the out-of-vocabulary tokens (as their strings), so that each list is exactly what
            the tokenizer produced; False keeps only the in-vocabulary tokens (whose counts are the
            document's bag of words).

        Returns
        -------
        list of list of str
            One list per document of the block.

        Raises
        ------
        ValueError
            ``vocab`` is shorter than the largest term id of the block.

        Notes
        -----
        NumPy equivalent: ``table = np.concatenate([vocab.terms, oov_terms[::-1]])``, then
        ``table[tokens]`` (a code ``-(k + 1)`` indexes ``oov_terms[k]`` from the end), split at
        ``indptr``.

        Examples
        --------
        >>> vocab = Vocabulary(np.array(["fox", "dog"], dtype=object), np.ones(2, np.int64), np.ones(2, np.int64))
        >>> block = OrderedBlock(np.array([0, 3, 4]), np.array([1, -1, 0, -2], np.int32),
        ...                      np.array(["cat", "emu"], dtype=object), np.array(["a", "b"], dtype=object), 0, 2)
        >>> block.texts(vocab)
        [['dog', 'cat', 'fox'], ['emu']]
        >>> block.texts(vocab, include_oov=False)
        [['dog', 'fox'], []]
        """
        terms = np.asarray(vocab.terms, dtype=object)
        if len(self.tokens) and int(self.tokens.max()) >= len(terms):
            raise ValueError(
                f"the block holds term id {int(self.tokens.max())} but the vocabulary given has only "
                f"{len(terms)} terms; pass the vocabulary of language {self.language!r} of the block's store."
            )
        table = np.concatenate([terms, np.asarray(self.oov_terms, dtype=object)[::-1]])
        words = table[self.tokens].tolist() if len(self.tokens) else []
        keep = (self.tokens >= 0).tolist()
        bounds = self.indptr.tolist()
        if include_oov:
            return [words[lo:hi] for lo, hi in itertools.pairwise(bounds)]
        return [[w for w, k in zip(words[lo:hi], keep[lo:hi]) if k] for lo, hi in itertools.pairwise(bounds)]

    def slice(self, start: int, stop: int) -> OrderedBlock:
        """Documents ``start`` to ``stop`` (exclusive) of the block, as a new block (same ``oov_terms``)."""
        start, stop = max(0, start), min(self.n_docs, stop)
        lo, hi = int(self.indptr[start]), int(self.indptr[stop])
        return OrderedBlock(
            indptr=self.indptr[start : stop + 1] - lo,
            tokens=self.tokens[lo:hi],
            oov_terms=self.oov_terms,
            doc_ids=self.doc_ids[start:stop],
            first_doc=self.first_doc + start,
            n_terms=self.n_terms,
            language=self.language,
        )


def concat_blocks(blocks: list[DocBlock]) -> DocBlock:
    """Join blocks of consecutive documents (same language and vocabulary) into one block."""
    if not blocks:
        raise ValueError("concat_blocks needs at least one block")
    first = blocks[0]
    for prev, nxt in zip(blocks, blocks[1:]):
        if nxt.first_doc != prev.first_doc + prev.n_docs or nxt.language != prev.language:
            raise ValueError("concat_blocks joins consecutive blocks of one language only")
    offsets = np.cumsum([0] + [int(b.indptr[-1]) for b in blocks[:-1]])
    indptr = np.concatenate([[0]] + [b.indptr[1:] + off for b, off in zip(blocks, offsets)])

    def join(name: str) -> np.ndarray | None:
        parts = [getattr(b, name) for b in blocks]
        return None if any(p is None for p in parts) else np.concatenate(parts)

    return DocBlock(
        indptr=indptr.astype(np.int64),
        term_ids=np.concatenate([b.term_ids for b in blocks]),
        counts=np.concatenate([b.counts for b in blocks]),
        doc_ids=np.concatenate([b.doc_ids for b in blocks]),
        first_doc=first.first_doc,
        n_terms=max(b.n_terms for b in blocks),
        language=first.language,
        labels=join("labels"),
        timestamps=join("timestamps"),
    )


def block_from_csr(
    matrix: sp.csr_matrix,
    *,
    doc_ids: np.ndarray | None = None,
    first_doc: int = 0,
    language: str = "default",
    labels: np.ndarray | None = None,
) -> DocBlock:
    """Build a :class:`DocBlock` from any scipy sparse matrix of nonnegative integer counts."""
    import scipy.sparse as sp

    csr = sp.csr_matrix(matrix, copy=True)
    csr.sum_duplicates()
    csr.eliminate_zeros()
    csr.sort_indices()
    n_docs = csr.shape[0]
    if doc_ids is None:
        doc_ids = np.array([str(first_doc + i) for i in range(n_docs)], dtype=object)
    return DocBlock(
        indptr=csr.indptr.astype(np.int64),
        term_ids=csr.indices.astype(np.int32),
        counts=csr.data.astype(np.int32),
        doc_ids=np.asarray(doc_ids, dtype=object),
        first_doc=first_doc,
        n_terms=int(csr.shape[1]),
        language=language,
        labels=labels,
    )


#: A multilingual block: one DocBlock per language, all with the same doc_ids and first_doc.
MultiBlock = Mapping[str, DocBlock]


def remap_terms(block: DocBlock, term_map: IntArray, n_terms: int) -> DocBlock:
    """Translate the block's term ids through ``term_map``; ids mapped to -1 are dropped.

    Used to read a store with a model whose vocabulary differs (another store, or a grown one).
    NumPy equivalent: ``csr[:, term_map >= 0]`` with the columns permuted to ``term_map``.
    """
    import scipy.sparse as sp

    mapped = term_map[block.term_ids]
    keep = mapped >= 0
    rows = np.repeat(np.arange(block.n_docs), np.diff(block.indptr))[keep]
    csr = sp.csr_matrix(
        (block.counts[keep], (rows, mapped[keep])), shape=(block.n_docs, n_terms), dtype=np.int64
    )
    csr.sort_indices()
    return DocBlock(
        indptr=csr.indptr.astype(np.int64),
        term_ids=csr.indices.astype(np.int32),
        counts=csr.data.astype(np.int32),
        doc_ids=block.doc_ids,
        first_doc=block.first_doc,
        n_terms=n_terms,
        language=block.language,
        labels=block.labels,
        timestamps=block.timestamps,
    )


def present_terms(term_ids: np.ndarray, n_terms: int) -> tuple[IntArray, IntArray]:
    """The distinct term ids (ascending) and each entry's position among them.

    Parameters
    ----------
    term_ids : ndarray of shape (n,), int
        Ids in ``[0, n_terms)`` (a block's entries or tokens).
    n_terms : int

    Returns
    -------
    terms : ndarray of shape (n_present,), int64
    columns : ndarray of shape (n,), int64
        ``terms[columns] == term_ids``.

    Notes
    -----
    NumPy equivalent: ``np.unique(term_ids, return_inverse=True)``; here a mark array, O(n_terms + n)
    in one numba pass each, several times faster than sorting for block-sized input.

    Examples
    --------
    >>> terms, columns = present_terms(np.array([4, 1, 4]), 6)
    >>> terms.tolist(), columns.tolist()
    ([1, 4], [1, 0, 1])
    """
    return _present_terms(np.ascontiguousarray(term_ids), int(n_terms))


@numba.njit(nogil=True, cache=True)
def _present_terms(term_ids, n_terms):
    position = np.full(n_terms, -1, dtype=np.int64)
    for i in range(term_ids.shape[0]):
        position[term_ids[i]] = 0
    n = 0
    for w in range(n_terms):
        if position[w] == 0:
            position[w] = n
            n += 1
    terms = np.empty(n, dtype=np.int64)
    for w in range(n_terms):
        if position[w] >= 0:
            terms[position[w]] = w
    columns = np.empty(term_ids.shape[0], dtype=np.int64)
    for i in range(term_ids.shape[0]):
        columns[i] = position[term_ids[i]]
    return terms, columns


# ----------------------------------------------------------------------------- token expansion


def expand_tokens(block: DocBlock) -> tuple[IntArray, Int32Array]:
    """Expand a block's CSR counts into one entry per token.

    Parameters
    ----------
    block : DocBlock

    Returns
    -------
    token_indptr : ndarray of shape (n_docs + 1,), int64
        Tokens of document d are ``token_indptr[d]:token_indptr[d + 1]``.
    token_terms : ndarray of shape (n_tokens,), int32
        Each document's terms in CSR order (ascending term id), each repeated by its count.

    Notes
    -----
    NumPy equivalent: ``np.repeat(block.term_ids, block.counts)``, with the document boundaries
    ``np.cumsum(counts per document)``. Kernels expand one document at a time with
    :func:`expand_entries_into`, which writes the same tokens in the same order.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> indptr, terms = expand_tokens(block_from_csr(sp.csr_matrix(np.array([[2, 0, 1], [0, 0, 0]]))))
    >>> indptr.tolist(), terms.tolist()
    ([0, 3, 3], [0, 0, 2])
    """
    counts = block.counts.astype(np.int64)
    per_entry = np.concatenate([[0], np.cumsum(counts)])
    token_indptr = per_entry[block.indptr.astype(np.int64)]
    token_terms = np.repeat(block.term_ids.astype(np.int32), counts)
    return token_indptr.astype(np.int64), token_terms


def token_docs(token_indptr: IntArray, *, first_doc: int = 0) -> IntArray:
    """Document of every token: ``first_doc + d`` for the tokens of document d.

    Parameters
    ----------
    token_indptr : ndarray of shape (n_docs + 1,), int
        As returned by :func:`expand_tokens`.
    first_doc : int, default 0
        Added to the local document index (0 gives block-local documents, ``block.first_doc``
        global positions).

    Returns
    -------
    ndarray of shape (n_tokens,), int64

    Examples
    --------
    >>> token_docs(np.array([0, 2, 2, 3]), first_doc=10).tolist()
    [10, 10, 12]
    """
    indptr = np.asarray(token_indptr, dtype=np.int64)
    n_docs = indptr.shape[0] - 1
    return np.repeat(np.arange(first_doc, first_doc + n_docs, dtype=np.int64), np.diff(indptr))


@numba.njit(nogil=True, cache=True, inline="always")
def expand_entries_into(values, counts, lo, hi, out, start):
    """Write ``values[j]`` repeated ``counts[j]`` times for the CSR entries ``lo <= j < hi`` into ``out``.

    Parameters
    ----------
    values : ndarray of shape (n_nonzero,)
        One value per CSR entry: the term ids, the entries' local columns, or the entry positions.
    counts : ndarray of shape (n_nonzero,), int
        Positive counts.
    lo, hi : int
        The entries of one document (``indptr[d]``, ``indptr[d + 1]``).
    out : ndarray of shape (>= start + sum(counts[lo:hi]),)
        Written from ``start`` on.
    start : int
        First position of ``out`` to write.

    Returns
    -------
    int
        The position after the last token written.

    Notes
    -----
    The kernels' token expansion (numba, inlined into its caller). NumPy equivalent:
    ``out[start:end] = np.repeat(values[lo:hi], counts[lo:hi])``, as :func:`expand_tokens` does for a
    whole block.
    """
    n = start
    for j in range(lo, hi):
        for _ in range(counts[j]):
            out[n] = values[j]
            n += 1
    return n
