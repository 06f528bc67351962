"""exp(E[log beta]) laid out for the E-step kernels: prepared topics per language and term."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numba
import numpy as np

from topicflow._typing import FloatArray, IndexArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock
from topicflow.models.common.dirichlet import (
    digamma_of_row_sums,
    exp_dirichlet_expectation_columns,
    exp_dirichlet_expectation_rows,
)
from topicflow.models.lda.vb.stats import TopicTermStats


@dataclass(frozen=True, slots=True)
class PreparedTopics:
    """Hold exp(E[log beta]) of all languages in the kernel's layout; build once per iteration.

    Attributes
    ----------
    languages : tuple of str
        Language order of the stacked terms.
    offsets : ndarray of shape (n_langs + 1,), int64
        Rows ``offsets[l]:offsets[l + 1]`` of ``term_topic`` belong to ``languages[l]``.
    term_topic : ndarray of shape (n_terms_total, n_topics), float64 or float32
        C-contiguous transpose of the stacked ``exp_elog_topic_word`` arrays.
    """

    languages: tuple[str, ...]
    offsets: IntArray
    term_topic: np.ndarray

    @property
    def n_topics(self) -> int:
        return int(self.term_topic.shape[1])

    def n_terms(self, language: str) -> int:
        """Vocabulary size of ``language``."""
        i = self.languages.index(language)
        return int(self.offsets[i + 1] - self.offsets[i])


def prepare_topics(
    exp_elog_topic_word: Mapping[str, FloatArray], *, dtype: type = np.float64
) -> PreparedTopics:
    """Stack and transpose exp(E[log beta]) for :func:`estep_block`; call once per iteration on the driver.

    Parameters
    ----------
    exp_elog_topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang)
        One array per language (one entry for monolingual LDA).
    dtype : {numpy.float64, numpy.float32}, default float64
        float32 halves the memory traffic of the kernel; gamma and the statistics stay float64.

    Returns
    -------
    PreparedTopics

    Raises
    ------
    InvalidParameterError
        No language, arrays not 2-d, differing numbers of topics, or an unsupported dtype.

    Notes
    -----
    NumPy equivalent: ``np.ascontiguousarray(np.concatenate(list(arrays.values()), axis=1).T)``.

    Examples
    --------
    >>> prepared = prepare_topics({"en": np.ones((2, 3))})
    >>> prepared.term_topic.shape
    (3, 2)
    """
    if dtype not in (np.float64, np.float32):
        raise InvalidParameterError(f"dtype must be numpy.float64 or numpy.float32, got {dtype!r}")
    if not exp_elog_topic_word:
        raise InvalidParameterError("exp_elog_topic_word needs at least one language")
    arrays = {lang: np.asarray(arr) for lang, arr in exp_elog_topic_word.items()}
    shapes = {lang: arr.shape for lang, arr in arrays.items()}
    if any(arr.ndim != 2 for arr in arrays.values()) or len({s[0] for s in shapes.values()}) != 1:
        raise InvalidParameterError(
            f"exp_elog_topic_word arrays must be 2-d (n_topics, n_terms) with equal n_topics, got {shapes!r}"
        )
    languages = tuple(arrays)
    offsets = np.concatenate([[0], np.cumsum([arrays[lang].shape[1] for lang in languages])]).astype(np.int64)
    stacked = np.concatenate([arrays[lang] for lang in languages], axis=1)
    return PreparedTopics(languages, offsets, np.ascontiguousarray(stacked.T, dtype=dtype))


def prepare_topics_from_var(
    topic_word_var: Mapping[str, FloatArray], *, dtype: type = np.float64
) -> PreparedTopics:
    """Compute exp(E[log beta]) of each language's lambda, prepared for :func:`estep_block`.

    Parameters
    ----------
    topic_word_var : mapping of str to ndarray of shape (n_topics, n_terms_lang), float64
    dtype : {numpy.float64, numpy.float32}, default float64

    Returns
    -------
    PreparedTopics

    Notes
    -----
    NumPy equivalent: ``prepare_topics({l: np.exp(dirichlet_expectation(lam)) for l, lam in ...})``.

    Examples
    --------
    >>> prepare_topics_from_var({"en": np.ones((2, 3))}).term_topic.shape
    (3, 2)
    """
    return prepare_topics(
        {lang: exp_dirichlet_expectation_rows(lam) for lang, lam in topic_word_var.items()}, dtype=dtype
    )


@dataclass(frozen=True)
class TopicWordVar:
    """Hold lambda of every language with the digamma of its row sums.

    It gives exp(E[log beta]) of any terms on demand.

    Online minibatches touch a small part of the vocabulary. Shipping this instead of
    :class:`PreparedTopics` lets each E-step compute exp(E[log beta]) for its own documents' terms
    only (:func:`prepare_topics_for_blocks`), in parallel, instead of the driver computing all
    n_topics x n_terms values for every minibatch.

    Attributes
    ----------
    languages : tuple of str
    offsets : ndarray of shape (n_langs + 1,), int64
        Stacked term offsets, as in :class:`PreparedTopics`.
    topic_word_var : tuple of ndarray of shape (n_topics, n_terms_lang), float64
        lambda per language, C-contiguous, in ``languages`` order.
    psi_totals : tuple of ndarray of shape (n_topics,), float64
        psi(sum_w lambda_kw) per language.
    """

    languages: tuple[str, ...]
    offsets: IntArray
    topic_word_var: tuple[FloatArray, ...]
    psi_totals: tuple[FloatArray, ...]

    @property
    def n_topics(self) -> int:
        return int(self.topic_word_var[0].shape[0])


def topic_word_var_source(topic_word_var: Mapping[str, FloatArray]) -> TopicWordVar:
    """Package lambda for :func:`prepare_topics_for_blocks` (O(n_topics x n_terms) additions, no digamma)."""
    languages = tuple(topic_word_var)
    arrays = tuple(np.ascontiguousarray(topic_word_var[lang], dtype=np.float64) for lang in languages)
    offsets = np.concatenate([[0], np.cumsum([a.shape[1] for a in arrays])]).astype(np.int64)
    return TopicWordVar(languages, offsets, arrays, tuple(digamma_of_row_sums(a) for a in arrays))


def prepare_topics_for_blocks(source: TopicWordVar, blocks: Sequence[Mapping[str, DocBlock]]) -> PreparedTopics:
    """Compute exp(E[log beta]) in the E-step layout, only for the terms these blocks contain.

    Rows of other terms are zero and must not be read: every E-step reads the rows of its
    documents' terms only. The rows it reads have the same bits as :func:`prepare_topics_from_var`
    gives them, so statistics do not depend on which blocks were prepared together.

    Parameters
    ----------
    source : TopicWordVar
    blocks : sequence of mapping of str to DocBlock
        The blocks the prepared topics will serve (any of ``source.languages``).

    Returns
    -------
    PreparedTopics
    """
    topics = empty_prepared_topics(source)
    fill_prepared_terms(source, terms_of_blocks(source, blocks), topics)
    return topics


def terms_of_blocks(source: TopicWordVar, blocks: Sequence[Mapping[str, DocBlock]]) -> tuple[IntArray, ...]:
    """Per language of ``source``, the sorted ids of the terms the blocks contain (a mark array, no sort)."""
    terms = []
    for i, lang in enumerate(source.languages):
        mark = np.zeros(int(source.offsets[i + 1] - source.offsets[i]), dtype=np.bool_)
        for block in blocks:
            if lang in block:
                _mark(mark, block[lang].term_ids)
        terms.append(np.flatnonzero(mark).astype(np.int64))
    return tuple(terms)


@numba.njit(nogil=True, cache=True)
def _mark(mark: np.ndarray, ids: IndexArray) -> None:
    for i in range(ids.shape[0]):
        mark[ids[i]] = True


def empty_prepared_topics(source: TopicWordVar) -> PreparedTopics:
    """All-zero exp(E[log beta]) in the E-step layout, for :func:`fill_prepared_terms` to fill."""
    return PreparedTopics(source.languages, source.offsets,
                          np.zeros((int(source.offsets[-1]), source.n_topics), dtype=np.float64))


def fill_prepared_terms(source: TopicWordVar, terms: Sequence[IntArray], topics: PreparedTopics,
                        part: int = 0, n_parts: int = 1) -> None:
    """Write the exp(E[log beta]) rows of ``terms`` (per language) into ``topics``, in place.

    With ``n_parts`` > 1 only the ``part``-th contiguous slice of each language's terms is written,
    so threads can share the work on one array; each value has the same bits however it is split.
    """
    for i, present in enumerate(terms):
        lo, hi = (len(present) * part) // n_parts, (len(present) * (part + 1)) // n_parts
        if hi > lo:
            exp_dirichlet_expectation_columns(source.topic_word_var[i], source.psi_totals[i], present[lo:hi],
                                              topics.term_topic, row_offset=int(source.offsets[i]))


def as_block_mapping(blocks: Mapping[str, DocBlock] | DocBlock) -> Mapping[str, DocBlock]:
    """Return ``blocks`` as a mapping of language to DocBlock (a single DocBlock is keyed by its language)."""
    return {blocks.language: blocks} if isinstance(blocks, DocBlock) else blocks


def as_prepared_topics(exp_elog_topic_word: Mapping[str, FloatArray] | PreparedTopics) -> PreparedTopics:
    """Return ``exp_elog_topic_word`` as PreparedTopics, stacking a mapping with :func:`prepare_topics`."""
    if isinstance(exp_elog_topic_word, PreparedTopics):
        return exp_elog_topic_word
    return prepare_topics(exp_elog_topic_word)


def check_blocks(blocks: Mapping[str, DocBlock], topics: PreparedTopics) -> int:
    """Validate languages, document alignment and term ids; return n_docs."""
    if not blocks:
        raise InvalidParameterError("blocks needs at least one language")
    unknown = sorted(set(blocks) - set(topics.languages))
    if unknown:
        raise InvalidParameterError(
            f"block languages {unknown!r} have no topics; topics exist for {list(topics.languages)!r}"
        )
    first = next(iter(blocks.values()))
    for lang, block in blocks.items():
        if block.n_docs != first.n_docs or block.first_doc != first.first_doc:
            raise InvalidParameterError(
                f"language {lang!r} block has {block.n_docs} documents from position {block.first_doc}, "
                f"expected {first.n_docs} from {first.first_doc}; all languages must hold the same documents"
            )
        n_terms = topics.n_terms(lang)
        if block.term_ids.shape[0] and int(block.term_ids.max()) >= n_terms:
            raise InvalidParameterError(
                f"language {lang!r} block (first doc {block.first_doc}) has term id "
                f"{int(block.term_ids.max())}, but its topics cover {n_terms} terms"
            )
    return first.n_docs


def _stack_languages(
    blocks: Mapping[str, DocBlock], topics: PreparedTopics, n_docs: int
) -> tuple[IntArray, np.ndarray, np.ndarray]:
    """One CSR over the stacked vocabulary: each document's terms of every language, in order."""
    present = [(i, lang) for i, lang in enumerate(topics.languages) if lang in blocks]
    if len(present) == 1 and present[0][0] == 0:
        block = blocks[present[0][1]]
        return block.indptr.astype(np.int64, copy=False), _int32_ids(block.term_ids), block.counts
    doc_rows, term_ids, counts = [], [], []
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    for i, lang in present:
        block = blocks[lang]
        doc_rows.append(np.repeat(np.arange(n_docs), np.diff(block.indptr)))
        term_ids.append(block.term_ids.astype(np.int64) + topics.offsets[i])
        counts.append(block.counts)
        indptr += block.indptr
    order = np.argsort(np.concatenate(doc_rows), kind="stable")
    return indptr, _int32_ids(np.concatenate(term_ids)[order]), np.concatenate(counts)[order]


def _int32_ids(term_ids: np.ndarray) -> np.ndarray:
    """``term_ids`` as int32 when they fit (the dtype of the store's blocks).

    The E-step kernels then always run in the one specialization numba compiled for int32 ids, not a
    second one for int64 ids (a block built from an int64 CSR, or the stacked polylingual ids): about
    4.5 s of compiling per kernel and fresh cache.
    """
    if term_ids.dtype == np.int32 or (term_ids.size and int(term_ids.max()) > np.iinfo(np.int32).max):
        return term_ids
    return term_ids.astype(np.int32)


def _split_stats(
    term_ids: np.ndarray, stats: FloatArray, topics: PreparedTopics
) -> dict[str, TopicTermStats]:
    """Split stacked-vocabulary statistics back into per-language TopicTermStats."""
    bounds = np.searchsorted(term_ids, topics.offsets)
    out = {}
    for i, lang in enumerate(topics.languages):
        lo, hi = bounds[i], bounds[i + 1]
        out[lang] = TopicTermStats(
            (term_ids[lo:hi] - topics.offsets[i]).astype(np.int64), np.ascontiguousarray(stats[lo:hi].T)
        )
    return out
