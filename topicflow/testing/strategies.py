"""Hypothesis strategies shared by the tests of every model family.

Test support only: this module imports hypothesis, which the library itself never needs. It owns the
random inputs the conformance suites (:mod:`topicflow.testing.conformance`) and the family tests draw:
count matrices, :class:`~topicflow.models.common.blocks.DocBlock` values (one language or several),
ways to cut a block into consecutive pieces, positive prior vectors and topic parameters, and the
mergeable E-step statistics of the variational LDA family. Everything is small on purpose (a few
documents, a dozen terms) so the slow NumPy references stay fast.

Every size argument takes an ``int`` or a strategy of ints. Floats are finite, never subnormal and never
``-0.0`` (``-0.0 + 0.0`` is ``+0.0``, so a negative zero would make "zeros is the identity" fail on a
value no kernel produces).

Usage::

    @settings(max_examples=30, deadline=None)
    @given(block=doc_blocks(n_terms=12, empty_docs=True), data=st.data())
    def test_split(block, data):
        pieces = cut_documents(block, data.draw(document_cuts(block.n_docs)))

Glossary: ``n_docs``, ``n_terms``, ``n_topics`` as everywhere; a *cut* is a document index where a block
is split, so ``cuts = [2, 5]`` splits documents ``[0, 2), [2, 5), [5, n_docs)``.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence, TypeVar, cast

import numpy as np
import scipy.sparse as sp
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from hypothesis.strategies import DrawFn, SearchStrategy

from topicflow.models.common.blocks import DocBlock, block_from_csr
from topicflow.models.lda.vb.stats import EStepStats, TopicTermStats

_Blocks = TypeVar("_Blocks", DocBlock, Mapping[str, DocBlock])

#: Characters of drawn document ids (printable, no separators that a reader might split on).
DOC_ID_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.é"


def _ints(value: int | SearchStrategy[int]) -> SearchStrategy[int]:
    return st.just(value) if isinstance(value, int) else value


def _finite_floats(min_value: float, max_value: float) -> SearchStrategy[float]:
    # + 0.0 turns a negative zero into a positive one (see the module docstring).
    return st.floats(min_value, max_value, allow_nan=False, allow_infinity=False,
                     allow_subnormal=False).map(lambda x: x + 0.0)


@st.composite
def count_matrices(
    draw: DrawFn,
    n_docs: int | SearchStrategy[int] = st.integers(0, 8),
    n_terms: int | SearchStrategy[int] = st.integers(1, 12),
    *,
    max_count: int = 3,
    empty_docs: bool | None = None,
    max_terms_per_doc: int | None = None,
) -> np.ndarray:
    """Draw a dense bag-of-words count matrix.

    Parameters
    ----------
    n_docs : int or SearchStrategy of int, default integers(0, 8)
        Rows.
    n_terms : int or SearchStrategy of int, default integers(1, 12)
        Columns, at least 1.
    max_count : int, default 3
        Largest count of one term in one document.
    empty_docs : bool or None, default None
        None: rows may or may not be empty; False: every row has a token; True: at least one row is
        empty (when there is a row).
    max_terms_per_doc : int, optional
        At most this many distinct terms per row (1 gives single-term documents).

    Returns
    -------
    ndarray of shape (n_docs, n_terms), int64
        Counts in ``[0, max_count]``.
    """
    rows, cols = draw(_ints(n_docs)), draw(_ints(n_terms))
    dense = draw(arrays(np.int64, (rows, cols), elements=st.integers(0, max_count)))
    if max_terms_per_doc is not None:
        for row in range(rows):
            keep = draw(st.lists(st.integers(0, cols - 1), unique=True, max_size=max_terms_per_doc))
            mask = np.zeros(cols, dtype=bool)
            mask[keep] = True
            dense[row, ~mask] = 0
    if empty_docs is False:
        for empty in np.flatnonzero(dense.sum(axis=1) == 0):
            dense[empty, draw(st.integers(0, cols - 1))] = draw(st.integers(1, max(1, max_count)))
    elif empty_docs is True and rows:
        dense[draw(st.integers(0, rows - 1))] = 0
    return dense


@st.composite
def doc_ids(draw: DrawFn, n_docs: int) -> np.ndarray:
    """Draw ``n_docs`` distinct document ids as an object array of str.

    Parameters
    ----------
    n_docs : int
        Number of ids.

    Returns
    -------
    ndarray of shape (n_docs,), object (str)
    """
    ids = draw(st.lists(st.text(DOC_ID_ALPHABET, min_size=1, max_size=8), min_size=n_docs, max_size=n_docs,
                        unique=True))
    return np.array(ids, dtype=object).reshape(n_docs)


def _block(matrix: np.ndarray, ids: np.ndarray, first_doc: int, language: str) -> DocBlock:
    return block_from_csr(sp.csr_matrix(matrix, shape=matrix.shape), doc_ids=ids, first_doc=first_doc,
                          language=language)


@st.composite
def doc_blocks(
    draw: DrawFn,
    n_docs: int | SearchStrategy[int] = st.integers(0, 8),
    n_terms: int | SearchStrategy[int] = st.integers(1, 12),
    *,
    first_doc: int | SearchStrategy[int] = st.integers(0, 1000),
    language: str = "default",
    max_count: int = 3,
    empty_docs: bool | None = None,
    max_terms_per_doc: int | None = None,
) -> DocBlock:
    """Draw a :class:`DocBlock` of one language with random CSR counts and random distinct doc ids.

    Parameters
    ----------
    n_docs, n_terms : int or SearchStrategy of int
        As in :func:`count_matrices`.
    first_doc : int or SearchStrategy of int, default integers(0, 1000)
        Global position of the block's first document.
    language : str, default "default"
    max_count : int, default 3
        As in :func:`count_matrices`.
    empty_docs : bool or None, default None
        As in :func:`count_matrices`.
    max_terms_per_doc : int, optional
        As in :func:`count_matrices`.

    Returns
    -------
    DocBlock
        Sorted unique term ids per document, positive int32 counts, ``n_terms`` columns.
    """
    dense = draw(count_matrices(n_docs, n_terms, max_count=max_count, empty_docs=empty_docs,
                                max_terms_per_doc=max_terms_per_doc))
    return _block(dense, draw(doc_ids(dense.shape[0])), draw(_ints(first_doc)), language)


@st.composite
def multilingual_blocks(
    draw: DrawFn,
    languages: Sequence[str] = ("en", "de"),
    n_docs: int | SearchStrategy[int] = st.integers(0, 8),
    n_terms: int | SearchStrategy[int] | Mapping[str, int] = st.integers(1, 12),
    *,
    first_doc: int | SearchStrategy[int] = st.integers(0, 1000),
    max_count: int = 3,
    empty_docs: bool | None = None,
    max_terms_per_doc: int | None = None,
) -> dict[str, DocBlock]:
    """Draw a multilingual block: one :class:`DocBlock` per language for the same documents.

    Parameters
    ----------
    languages : sequence of str, default ("en", "de")
        Languages, in the order of the returned mapping (one language gives a monolingual mapping).
    n_docs : int or SearchStrategy of int, default integers(0, 8)
    n_terms : int, SearchStrategy of int, or mapping of str to int
        Vocabulary size of each language (drawn separately per language unless a mapping is given).
    first_doc : int or SearchStrategy of int, default integers(0, 1000)
    max_count : int, default 3
        As in :func:`count_matrices`, per language.
    empty_docs : bool or None, default None
        None: documents may be empty in any language; False: every document has a token in every
        language; True: at least one document is empty in every language.
    max_terms_per_doc : int, optional
        As in :func:`count_matrices`, per language.

    Returns
    -------
    dict of str to DocBlock
        Same ``doc_ids`` and ``first_doc`` in every language; a document may be empty in one language only.
    """
    rows = draw(_ints(n_docs))
    first = draw(_ints(first_doc))
    ids = draw(doc_ids(rows))
    matrices = {}
    for lang in languages:
        cols = n_terms[lang] if isinstance(n_terms, Mapping) else draw(_ints(n_terms))
        matrices[lang] = draw(count_matrices(rows, cols, max_count=max_count,
                                             empty_docs=False if empty_docs is False else None,
                                             max_terms_per_doc=max_terms_per_doc))
    if empty_docs is True and rows:
        empty = draw(st.integers(0, rows - 1))
        for matrix in matrices.values():
            matrix[empty] = 0
    return {lang: _block(matrix, ids, first, lang) for lang, matrix in matrices.items()}


def document_cuts(n_docs: int, *, max_parts: int = 4) -> SearchStrategy[list[int]]:
    """Draw cut points splitting ``n_docs`` documents into up to ``max_parts`` consecutive pieces.

    Parameters
    ----------
    n_docs : int
        Documents to split.
    max_parts : int, default 4
        Most pieces (at least 1).

    Returns
    -------
    SearchStrategy of list of int
        Sorted cut points in ``[0, n_docs]``; repeats and the ends are allowed, so pieces may be empty.
    """
    return st.lists(st.integers(0, n_docs), max_size=max_parts - 1).map(sorted)


def slice_documents(blocks: _Blocks, start: int, stop: int) -> _Blocks:
    """Return documents ``start`` to ``stop`` (exclusive) of a block or of every language of a multilingual block.

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock
    start, stop : int
        Document range within the block.

    Returns
    -------
    DocBlock or dict of str to DocBlock
        The same form as ``blocks``.
    """
    if isinstance(blocks, DocBlock):
        return cast(Any, blocks.slice(start, stop))  # one branch per constraint of _Blocks
    return cast(Any, {lang: block.slice(start, stop) for lang, block in blocks.items()})


def n_docs_of(blocks: DocBlock | Mapping[str, DocBlock]) -> int:
    """Return the number of documents of a block or of a multilingual block.

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock

    Returns
    -------
    int
    """
    if isinstance(blocks, DocBlock):
        return blocks.n_docs
    return next(iter(blocks.values())).n_docs if blocks else 0


def cut_documents(blocks: _Blocks, cuts: Sequence[int]) -> list[_Blocks]:
    """Split a (multilingual) block at ``cuts`` into consecutive pieces (see :func:`document_cuts`).

    Parameters
    ----------
    blocks : DocBlock or mapping of str to DocBlock
    cuts : sequence of int
        Sorted document indices.

    Returns
    -------
    list
        ``len(cuts) + 1`` pieces in document order, of the same form as ``blocks``.
    """
    edges = [0, *cuts, n_docs_of(blocks)]
    return [slice_documents(blocks, a, b) for a, b in zip(edges, edges[1:])]


def positive_arrays(
    shape: int | tuple[int, ...], *, min_value: float = 0.05, max_value: float = 5.0,
) -> SearchStrategy[np.ndarray]:
    """Draw float64 arrays of values in ``[min_value, max_value]`` (Dirichlet parameters such as lambda).

    Parameters
    ----------
    shape : int or tuple of int
    min_value : float, default 0.05
        Positive lower bound.
    max_value : float, default 5.0

    Returns
    -------
    SearchStrategy of ndarray of the given shape, float64
    """
    return arrays(np.float64, shape, elements=_finite_floats(min_value, max_value))


def positive_vectors(size: int, *, min_value: float = 0.01, max_value: float = 2.0) -> SearchStrategy[np.ndarray]:
    """Draw positive prior vectors such as alpha: float64 of shape ``(size,)``, values in ``[min_value, max_value]``.

    Parameters
    ----------
    size : int
    min_value : float, default 0.01
    max_value : float, default 2.0

    Returns
    -------
    SearchStrategy of ndarray of shape (size,), float64
    """
    return positive_arrays(size, min_value=min_value, max_value=max_value)


@st.composite
def topic_term_stats(
    draw: DrawFn, n_topics: int | SearchStrategy[int] = st.integers(1, 4), *, n_terms: int = 30,
    max_present: int = 12, max_value: float = 1e3,
) -> TopicTermStats:
    """Draw :class:`~topicflow.models.lda.vb.stats.TopicTermStats`: expected counts over a random set of terms.

    Parameters
    ----------
    n_topics : int or SearchStrategy of int, default integers(1, 4)
    n_terms : int, default 30
        Term ids are drawn from ``range(n_terms)``.
    max_present : int, default 12
        Most terms present (0 gives the empty value of :meth:`TopicTermStats.zeros`).
    max_value : float, default 1e3
        Values lie in ``[0, max_value]``.

    Returns
    -------
    TopicTermStats
        Sorted unique int64 term ids and float64 values of shape (n_topics, n_present).
    """
    topics = draw(_ints(n_topics))
    ids = sorted(draw(st.sets(st.integers(0, n_terms - 1), max_size=min(max_present, n_terms))))
    values = draw(arrays(np.float64, (topics, len(ids)), elements=_finite_floats(0.0, max_value)))
    return TopicTermStats(np.array(ids, dtype=np.int64), values)


@st.composite
def estep_stats(
    draw: DrawFn, n_topics: int | SearchStrategy[int] = st.integers(1, 4),
    languages: Sequence[str] = ("default",), *, n_terms: int = 30, max_present: int = 12,
) -> EStepStats:
    """Draw :class:`~topicflow.models.lda.vb.stats.EStepStats` with statistics for every language given.

    Parameters
    ----------
    n_topics : int or SearchStrategy of int, default integers(1, 4)
    languages : sequence of str, default ("default",)
    n_terms : int, default 30
        As in :func:`topic_term_stats`.
    max_present : int, default 12
        As in :func:`topic_term_stats`.

    Returns
    -------
    EStepStats
        ``alpha_suff`` in [-50, 0] (sums of E[log theta]), ``doc_elbo`` in [-1e4, 1e4], counters
        consistent with each other (``n_capped <= n_docs``).
    """
    topics = draw(_ints(n_topics))
    n_docs = draw(st.integers(0, 50))
    return EStepStats(
        topic_terms={lang: draw(topic_term_stats(topics, n_terms=n_terms, max_present=max_present))
                     for lang in languages},
        alpha_suff=draw(arrays(np.float64, topics, elements=_finite_floats(-50.0, 0.0))),
        doc_elbo=draw(_finite_floats(-1e4, 1e4)),
        n_docs=n_docs,
        n_tokens=draw(st.integers(0, 10 * n_docs)),
        n_capped=draw(st.integers(0, n_docs)),
        n_doc_iter=draw(st.integers(0, 100 * n_docs)),
    )
