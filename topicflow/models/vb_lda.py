"""Variational Bayes for LDA and polylingual LDA: block E-step, batch M-step, ELBO terms.

This module owns the math of batch variational LDA (Blei et al. 2003) split the way Mr. LDA splits it
(Zhai et al. 2012): a *mapper* (:func:`estep_block`) fits q(theta_d) for every document of a block and
emits mergeable statistics (:class:`EStepStats`), a *reducer* merges them (:meth:`EStepStats.merge`), and
the *driver* updates the global parameters (:func:`mstep_batch`, :func:`topicflow.models.dirichlet.newton_alpha`)
and sums the ELBO (:func:`full_elbo`). Polylingual LDA (Mimno et al. 2009) is the same kernel: a document's
theta is shared by all its languages, and each word's phi uses its own language's topics. Informed priors
only enter through ``topic_word_prior`` (see :mod:`topicflow.models.priors`).

Pure NumPy + numba; must not import dask, distributed, zarr or logging, and does no I/O.

Glossary (Blei et al. 2003; Hoffman et al. 2010):
    topic_word_var (lambda, (n_topics, n_terms)): Dirichlet parameters of q(beta), one array per language
    doc_topic_var (gamma, (n_docs, n_topics)): Dirichlet parameters of q(theta)
    exp_elog_topic_word (exp E_q[log beta], (n_topics, n_terms)): per language
    term_topic ((n_terms_total, n_topics)): exp_elog_topic_word of all languages, transposed and stacked
    doc_topic_prior (alpha, (n_topics,)); topic_word_prior (eta, scalar or (n_topics, n_terms))
    phi_wk: q(z = k) for the tokens of term w in one document
    alpha_suff ((n_topics,)): sum_d E_q[log theta_dk]

References
----------
Blei, Ng and Jordan (2003). Latent Dirichlet allocation. JMLR 3, 993-1022.
Hoffman, Blei and Bach (2010). Online learning for latent Dirichlet allocation. NIPS.
Mimno, Wallach, Naradowsky, Smith and McCallum (2009). Polylingual topic models. EMNLP.
Zhai, Boyd-Graber, Asadi and Alkhouja (2012). Mr. LDA: a flexible large scale topic modeling package
using variational inference in MapReduce. WWW.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence, cast

import numba
import numpy as np

from topicflow._typing import FloatArray, IndexArray, IntArray
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.blocks import DocBlock
from topicflow.models.dirichlet import (
    digamma_of_row_sums,
    dirichlet_expectation,
    dirichlet_objective,
    exp_dirichlet_expectation_columns,
    exp_dirichlet_expectation_rows,
)
from topicflow.models.rng import STREAM_GAMMA_INIT, STREAM_TOPIC_INIT, doc_generator, gamma_rows_from_keys
from topicflow.models.special import digamma, exp_digamma_minus_into, gammaln_array

#: Added to every phi normalizer sum_k exp(E[log theta_k]) exp(E[log beta_kw]) so a term whose
#: exp(E[log beta]) underflows to 0 in every topic gives phi = 0 instead of 0/0 (as Hoffman's code does).
PHI_NORM_EPS = 1e-100


@dataclass(frozen=True, slots=True)
class VBParams:
    """Hyperparameters of the variational E-step.

    Attributes
    ----------
    n_topics : int
        Number of topics K, at least 1.
    max_doc_iter : int, default 100
        Most phi/gamma alternations per document, at least 1.
    doc_tol : float, default 1e-3
        A document stops when the mean absolute change of gamma falls below this positive value.
    random_init : bool, default False
        Start gamma_dk from Gamma(100, 1/100) draws (Hoffman et al. 2010) keyed by ``seed`` and the
        document's position, instead of alpha_k + N_d / K. The random start breaks the symmetry
        between topics in a single visit of a document, which online VB needs; batch VB, which
        revisits every document, does as well or better from the uniform start.
    seed : int, default 0
        Seed of the random start.

    Raises
    ------
    InvalidParameterError
        A field is outside its allowed values.

    Examples
    --------
    >>> VBParams(n_topics=10).max_doc_iter
    100
    """

    n_topics: int
    max_doc_iter: int = 100
    doc_tol: float = 1e-3
    random_init: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_topics", "max_doc_iter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidParameterError(f"VBParams.{name} must be an integer >= 1, got {value!r}")
            object.__setattr__(self, name, int(value))
        tol = self.doc_tol
        if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) or not (0 < tol < math.inf):
            raise InvalidParameterError(f"VBParams.doc_tol must be a finite float > 0, got {tol!r}")
        object.__setattr__(self, "doc_tol", float(tol))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2**63:
            raise InvalidParameterError(f"VBParams.seed must be an integer in [0, 2**63), got {self.seed!r}")
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "random_init", bool(self.random_init))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, for model files and checkpoints."""
        return {"n_topics": self.n_topics, "max_doc_iter": self.max_doc_iter, "doc_tol": self.doc_tol,
                "random_init": self.random_init, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VBParams:
        """Inverse of :meth:`to_dict`."""
        return cls(n_topics=data["n_topics"], max_doc_iter=data["max_doc_iter"], doc_tol=data["doc_tol"],
                   random_init=bool(data.get("random_init", False)), seed=int(data.get("seed", 0)))


@dataclass(frozen=True, slots=True)
class TopicTermStats:
    """Expected topic-term counts sum_d n_dw phi_dwk of one language, over the terms present.

    A sparse-column value: only terms that occur in the documents seen so far are stored.
    ``merge`` is associative and commutative (exactly commutative, associative up to float rounding)
    and ``zeros`` is its exact identity.

    Attributes
    ----------
    term_ids : ndarray of shape (n_present,), int64
        Sorted unique term ids of the columns of ``values``.
    values : ndarray of shape (n_topics, n_present), float64

    Examples
    --------
    >>> a = TopicTermStats(np.array([1]), np.array([[2.0]]))
    >>> a.merge(TopicTermStats.zeros(1)).to_dense(3).tolist()
    [[0.0, 2.0, 0.0]]
    """

    term_ids: IntArray
    values: FloatArray

    @property
    def n_topics(self) -> int:
        return int(self.values.shape[0])

    @classmethod
    def zeros(cls, n_topics: int) -> TopicTermStats:
        """The identity of :meth:`merge`: no terms."""
        return cls(np.zeros(0, dtype=np.int64), np.zeros((n_topics, 0), dtype=np.float64))

    def merge(self, other: TopicTermStats) -> TopicTermStats:
        """Sum of two statistics over the union of their terms (inputs are not modified)."""
        if other.n_topics != self.n_topics:
            raise InvalidParameterError(
                f"cannot merge TopicTermStats with {self.n_topics} and {other.n_topics} topics"
            )
        if np.array_equal(self.term_ids, other.term_ids):
            return TopicTermStats(self.term_ids, self.values + other.values)
        # A linear merge of the sorted ids: a term on both sides gets a + b, on one side its value,
        # the same bits as scattering both into zeros.
        term_ids, values = _merge_sorted_columns(
            np.ascontiguousarray(self.term_ids, dtype=np.int64), np.ascontiguousarray(self.values),
            np.ascontiguousarray(other.term_ids, dtype=np.int64), np.ascontiguousarray(other.values),
        )
        return TopicTermStats(term_ids, values)

    @classmethod
    def merge_all(cls, parts: Sequence[TopicTermStats]) -> TopicTermStats:
        """``parts[0].merge(parts[1]).merge(parts[2])...`` with the same bits, in one pass.

        Every column is summed in part order starting from its first part's value, exactly as the
        left fold adds it, but without building the intermediate unions.
        """
        if len(parts) <= 2:
            return parts[0] if len(parts) == 1 else parts[0].merge(parts[1])
        n_topics = parts[0].n_topics
        if any(part.n_topics != n_topics for part in parts):
            raise InvalidParameterError("cannot merge TopicTermStats with different numbers of topics")
        ids = [np.ascontiguousarray(part.term_ids, dtype=np.int64) for part in parts]
        top = max((int(i[-1]) for i in ids if i.shape[0]), default=-1)
        mark = np.zeros(top + 1, dtype=np.bool_)
        for part_ids in ids:
            mark[part_ids] = True
        column = np.cumsum(mark, dtype=np.int64) - 1
        values = np.zeros((n_topics, int(column[-1]) + 1 if top >= 0 else 0), dtype=np.float64)
        for part_ids, part in zip(ids, parts):
            _add_columns(values, column[part_ids], np.ascontiguousarray(part.values, dtype=np.float64))
        return TopicTermStats(np.flatnonzero(mark).astype(np.int64), values)

    def to_dense(self, n_terms: int) -> FloatArray:
        """The statistics as a dense ``(n_topics, n_terms)`` float64 array."""
        if self.term_ids.shape[0] and int(self.term_ids[-1]) >= n_terms:
            raise InvalidParameterError(
                f"term id {int(self.term_ids[-1])} does not fit a vocabulary of {n_terms} terms"
            )
        out = np.zeros((self.n_topics, n_terms), dtype=np.float64)
        out[:, self.term_ids] = self.values
        return out


@numba.njit(nogil=True, cache=True)
def _merge_sorted_columns(
    ids_a: IntArray, values_a: FloatArray, ids_b: IntArray, values_b: FloatArray
) -> tuple[IntArray, FloatArray]:
    n_a, n_b = ids_a.shape[0], ids_b.shape[0]
    ids = np.empty(n_a + n_b, dtype=np.int64)
    n = 0
    i = j = 0
    while i < n_a or j < n_b:
        if j == n_b or (i < n_a and ids_a[i] < ids_b[j]):
            ids[n] = ids_a[i]
            i += 1
        elif i == n_a or ids_b[j] < ids_a[i]:
            ids[n] = ids_b[j]
            j += 1
        else:
            ids[n] = ids_a[i]
            i += 1
            j += 1
        n += 1
    n_topics = values_a.shape[0]
    values = np.empty((n_topics, n), dtype=np.float64)
    for k in range(n_topics):
        i = j = 0
        for c in range(n):
            term = ids[c]
            total = 0.0
            if i < n_a and ids_a[i] == term:
                total = values_a[k, i]
                i += 1
            if j < n_b and ids_b[j] == term:
                total += values_b[k, j]
                j += 1
            values[k, c] = total
    return ids[:n].copy(), values


@numba.njit(nogil=True, cache=True)
def _add_columns(values: FloatArray, columns: IntArray, addend: FloatArray) -> None:
    for k in range(values.shape[0]):
        for j in range(columns.shape[0]):
            values[k, columns[j]] += addend[k, j]


@dataclass(frozen=True, slots=True)
class EStepStats:
    """Mergeable output of the E-step for a set of documents.

    Attributes
    ----------
    topic_terms : dict of str to TopicTermStats
        Expected topic-term counts, keyed by language.
    alpha_suff : ndarray of shape (n_topics,), float64
        sum_d E_q[log theta_dk].
    doc_elbo : float
        Sum over documents of the ELBO terms that depend on (gamma_d, phi_d); excludes
        E_q[log p(theta | alpha)] (see :func:`alpha_elbo_terms`) and the topic terms
        (see :func:`topic_elbo_terms`).
    n_docs : int
    n_tokens : int
    n_capped : int
        Documents that stopped at ``max_doc_iter`` before reaching ``doc_tol``.
    n_doc_iter : int, default 0
        phi/gamma sweeps summed over documents (a cost diagnostic; the mean is n_doc_iter / n_docs).

    Examples
    --------
    >>> EStepStats.zeros(2, ["en"]).merge(EStepStats.zeros(2, ["en"])).n_docs
    0
    """

    topic_terms: dict[str, TopicTermStats]
    alpha_suff: FloatArray
    doc_elbo: float
    n_docs: int
    n_tokens: int
    n_capped: int
    n_doc_iter: int = 0

    @classmethod
    def zeros(cls, n_topics: int, languages: Sequence[str]) -> EStepStats:
        """The identity of :meth:`merge` for the given languages."""
        return cls(
            {lang: TopicTermStats.zeros(n_topics) for lang in languages},
            np.zeros(n_topics, dtype=np.float64), 0.0, 0, 0, 0,
        )

    @classmethod
    def merge_all(cls, parts: Sequence[EStepStats]) -> EStepStats:
        """``functools.reduce(EStepStats.merge, parts)`` with the same bits, topic terms in one pass each."""
        if len(parts) <= 2:
            return parts[0] if len(parts) == 1 else parts[0].merge(parts[1])
        if len({part.alpha_suff.shape for part in parts}) > 1:
            raise InvalidParameterError("cannot merge EStepStats of different numbers of topics")
        languages = sorted({lang for part in parts for lang in part.topic_terms})
        alpha_suff = parts[0].alpha_suff
        doc_elbo = parts[0].doc_elbo
        for part in parts[1:]:
            alpha_suff = alpha_suff + part.alpha_suff
            doc_elbo = doc_elbo + part.doc_elbo
        return EStepStats(
            topic_terms={
                lang: TopicTermStats.merge_all([p.topic_terms[lang] for p in parts if lang in p.topic_terms])
                for lang in languages
            },
            alpha_suff=alpha_suff,
            doc_elbo=doc_elbo,
            n_docs=sum(p.n_docs for p in parts),
            n_tokens=sum(p.n_tokens for p in parts),
            n_capped=sum(p.n_capped for p in parts),
            n_doc_iter=sum(p.n_doc_iter for p in parts),
        )

    def merge(self, other: EStepStats) -> EStepStats:
        """Sum of two statistics; a language missing on one side counts as zeros."""
        if other.alpha_suff.shape != self.alpha_suff.shape:
            raise InvalidParameterError(
                f"cannot merge EStepStats of shapes {self.alpha_suff.shape!r} and {other.alpha_suff.shape!r}"
            )
        topic_terms = dict(self.topic_terms)
        for lang, stats in other.topic_terms.items():
            topic_terms[lang] = topic_terms[lang].merge(stats) if lang in topic_terms else stats
        return EStepStats(
            topic_terms={lang: topic_terms[lang] for lang in sorted(topic_terms)},
            alpha_suff=self.alpha_suff + other.alpha_suff,
            doc_elbo=self.doc_elbo + other.doc_elbo,
            n_docs=self.n_docs + other.n_docs,
            n_tokens=self.n_tokens + other.n_tokens,
            n_capped=self.n_capped + other.n_capped,
            n_doc_iter=self.n_doc_iter + other.n_doc_iter,
        )


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


@numba.njit(nogil=True, cache=True)
def _gather_doc(term_topic, term_ids, counts, lo, n, rows, cols, cnts):
    """Copy the document's exp(E[log beta]) rows into ``rows`` (n, K) and ``cols`` (K, n)."""
    for j in range(n):
        t = term_ids[lo + j]
        cnts[j] = counts[lo + j]
        for k in range(term_topic.shape[1]):
            value = term_topic[t, k]
            rows[j, k] = value
            cols[k, j] = value


@numba.njit(nogil=True, cache=True)
def _exp_elog_theta(gamma_d, out):
    """out_k = exp(psi(gamma_k) - psi(sum gamma))."""
    total = 0.0
    for k in range(gamma_d.shape[0]):
        total += gamma_d[k]
    exp_digamma_minus_into(gamma_d, digamma(total), out)


@numba.njit(nogil=True, cache=True)
def _phi_norm(cols, n, exp_elog_theta, norm):
    """norm_j = eps + sum_k exp_elog_theta_k * cols[k, j], summed in k order.

    k-outer order vectorizes over j; four k per pass cut the loads/stores of ``norm`` by four
    without changing the order of the additions.
    """
    n_topics = cols.shape[0]
    for j in range(n):
        norm[j] = PHI_NORM_EPS
    k = 0
    while k + 4 <= n_topics:
        e0, e1 = exp_elog_theta[k], exp_elog_theta[k + 1]
        e2, e3 = exp_elog_theta[k + 2], exp_elog_theta[k + 3]
        for j in range(n):
            norm[j] = (((norm[j] + e0 * cols[k, j]) + e1 * cols[k + 1, j])
                       + e2 * cols[k + 2, j]) + e3 * cols[k + 3, j]
        k += 4
    for k in range(k, n_topics):
        e = exp_elog_theta[k]
        for j in range(n):
            norm[j] += e * cols[k, j]


@numba.njit(nogil=True, cache=True)
def _weighted_row_sum(rows, cnts, norm, n, acc):
    """acc_k = sum_j (cnts_j / norm_j) rows[j, k], summed in j order, four rows per pass over acc."""
    n_topics = rows.shape[1]
    acc[:] = 0.0
    j = 0
    while j + 4 <= n:
        r0, r1 = cnts[j] / norm[j], cnts[j + 1] / norm[j + 1]
        r2, r3 = cnts[j + 2] / norm[j + 2], cnts[j + 3] / norm[j + 3]
        for k in range(n_topics):
            acc[k] = (((acc[k] + r0 * rows[j, k]) + r1 * rows[j + 1, k])
                      + r2 * rows[j + 2, k]) + r3 * rows[j + 3, k]
        j += 4
    for j in range(j, n):
        ratio = cnts[j] / norm[j]
        for k in range(n_topics):
            acc[k] += ratio * rows[j, k]


@numba.njit(nogil=True, cache=True)
def _fit_doc(rows, cols, cnts, n, alpha, gamma_d, eth, norm, acc, max_iter, tol):
    """Alternate phi and gamma in place; ``eth`` ends matching the final gamma. Return (converged, sweeps).

    One sweep: phi_jk = eth_k rows[j, k] / norm_j (never stored) and gamma_k = alpha_k + eth_k acc_k
    with acc_k = sum_j n_j rows[j, k] / norm_j.
    """
    n_topics = gamma_d.shape[0]
    _exp_elog_theta(gamma_d, eth)
    for sweep in range(max_iter):
        _phi_norm(cols, n, eth, norm)
        _weighted_row_sum(rows, cnts, norm, n, acc)
        change = 0.0
        for k in range(n_topics):
            new = alpha[k] + eth[k] * acc[k]
            change += abs(new - gamma_d[k])
            gamma_d[k] = new
        _exp_elog_theta(gamma_d, eth)
        if change / n_topics < tol:
            return True, sweep + 1
    return False, max_iter


@numba.njit(nogil=True, cache=True)
def _doc_stats(rows, cols, cnts, n, local_cols,
               gamma_d, eth, norm, stats, alpha_suff):
    """Add n_w phi_wk to ``stats`` and E[log theta] to ``alpha_suff``; return the document's ELBO terms."""
    n_topics = gamma_d.shape[0]
    _phi_norm(cols, n, eth, norm)
    elbo = 0.0
    for j in range(n):
        ratio = cnts[j] / norm[j]
        elbo += cnts[j] * math.log(norm[j])
        c = local_cols[j]
        for k in range(n_topics):
            stats[c, k] += ratio * eth[k] * rows[j, k]
    total = 0.0
    for k in range(n_topics):
        total += gamma_d[k]
    psi_total = digamma(total)
    elbo -= math.lgamma(total)
    for k in range(n_topics):
        elog_theta = digamma(gamma_d[k]) - psi_total
        alpha_suff[k] += elog_theta
        elbo += math.lgamma(gamma_d[k]) - (gamma_d[k] - 1.0) * elog_theta
    return elbo


@numba.njit(nogil=True, cache=True)
def _estep_csr(indptr, term_ids, counts, local_cols,
               term_topic, alpha, max_iter, tol, gamma, stats, alpha_suff, doc_elbo,
               rows, cols, cnts, eth, norm, acc):
    """Coordinate ascent for every document; NumPy equivalent in tests/reference/vb_lda_numpy.py.

    ``gamma`` (n_docs, K) holds the start point on entry and the result on exit; ``stats``
    (n_present, K), ``alpha_suff`` (K,) and ``doc_elbo`` (n_docs,) are accumulated into; the rest
    are scratch buffers sized for the longest document. Returns (capped documents, total sweeps).
    """
    n_capped = 0
    n_sweeps = 0
    for d in range(indptr.shape[0] - 1):
        lo = indptr[d]
        n = indptr[d + 1] - lo
        _gather_doc(term_topic, term_ids, counts, lo, n, rows, cols, cnts)
        converged, sweeps = _fit_doc(rows, cols, cnts, n, alpha, gamma[d], eth, norm, acc, max_iter, tol)
        n_capped += not converged
        n_sweeps += sweeps
        doc_elbo[d] = _doc_stats(rows, cols, cnts, n, local_cols[lo:lo + n], gamma[d], eth, norm,
                                 stats, alpha_suff)
    return n_capped, n_sweeps


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
        return block.indptr.astype(np.int64, copy=False), block.term_ids, block.counts
    doc_rows, term_ids, counts = [], [], []
    indptr = np.zeros(n_docs + 1, dtype=np.int64)
    for i, lang in present:
        block = blocks[lang]
        doc_rows.append(np.repeat(np.arange(n_docs), np.diff(block.indptr)))
        term_ids.append(block.term_ids.astype(np.int64) + topics.offsets[i])
        counts.append(block.counts)
        indptr += block.indptr
    order = np.argsort(np.concatenate(doc_rows), kind="stable")
    return indptr, np.concatenate(term_ids)[order], np.concatenate(counts)[order]


def _parse_prior(doc_topic_prior: FloatArray | float, n_topics: int) -> FloatArray:
    alpha = np.broadcast_to(np.asarray(doc_topic_prior, dtype=np.float64), (n_topics,)).copy()
    if not (np.all(np.isfinite(alpha)) and np.all(alpha > 0)):
        raise InvalidParameterError(f"doc_topic_prior must be finite and positive, got {doc_topic_prior!r}")
    return alpha


def random_initial_gamma(n_docs: int, n_topics: int, *, seed: int, first_doc: int) -> FloatArray:
    """Gamma(100, 1/100) starting values of gamma, row d keyed by (seed, document ``first_doc + d``)."""
    out = np.empty((n_docs, n_topics), dtype=np.float64)
    gamma_rows_from_keys(seed, STREAM_GAMMA_INIT, first_doc, 100.0, 0.01, out)
    return out


def _initial_gamma(
    indptr: IntArray, counts: np.ndarray, alpha: FloatArray, gamma_init: FloatArray | None,
    params: VBParams | None = None, first_doc: int = 0,
) -> FloatArray:
    n_docs, n_topics = indptr.shape[0] - 1, alpha.shape[0]
    if gamma_init is None and params is not None and params.random_init:
        return random_initial_gamma(n_docs, n_topics, seed=params.seed, first_doc=first_doc)
    if gamma_init is not None:
        gamma = np.array(gamma_init, dtype=np.float64, order="C")
        if gamma.shape != (n_docs, n_topics) or not (np.all(np.isfinite(gamma)) and np.all(gamma > 0)):
            raise InvalidParameterError(
                f"gamma_init must be finite, positive, of shape {(n_docs, n_topics)!r}; got shape {gamma.shape!r}"
            )
        return gamma
    cum = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    doc_len = (cum[indptr[1:]] - cum[indptr[:-1]]).astype(np.float64)
    return alpha[None, :] + (doc_len / n_topics)[:, None]


def _present_terms(term_ids: np.ndarray, n_terms_total: int) -> tuple[IntArray, IntArray]:
    """Sorted unique term ids and each entry's column among them (``np.unique(..., return_inverse=True)``).

    A mark array is O(n_terms + n_nonzero), several times faster than sorting for block-sized input.
    """
    mark = np.zeros(n_terms_total, dtype=np.bool_)
    mark[term_ids] = True
    column = np.cumsum(mark, dtype=np.int64) - 1
    return np.flatnonzero(mark).astype(np.int64), column[term_ids]


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


def estep_block(
    blocks: Mapping[str, DocBlock] | DocBlock,
    exp_elog_topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: VBParams,
    *,
    return_gamma: bool = False,
    gamma_init: FloatArray | None = None,
) -> tuple[EStepStats, FloatArray | None]:
    """Fit q(theta_d) for every document of a block and collect the E-step statistics.

    Parameters
    ----------
    blocks : mapping of str to DocBlock, or DocBlock
        The block's documents in each language (same documents, same order); one entry for
        monolingual LDA. A language may be absent, and a document may be empty in a language.
    exp_elog_topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), or PreparedTopics
        Values of exp(E_q[log beta]) per language. Pass :func:`prepare_topics` output (built once per
        iteration) to avoid re-stacking per block; its dtype (float64 or float32) selects the kernel.
    doc_topic_prior : float or ndarray of shape (n_topics,), float64
        The prior alpha, positive.
    params : VBParams
    return_gamma : bool, default False
        Also return gamma.
    gamma_init : ndarray of shape (n_docs, n_topics), float64, optional
        Warm start; by default gamma_dk = alpha_k + N_d / K (Blei et al. 2003, figure 6), or
        :func:`random_initial_gamma` with ``params.random_init``.

    Returns
    -------
    stats : EStepStats
        Statistics for every language of the topics (zeros for a language without documents).
    doc_topic_var : ndarray of shape (n_docs, n_topics), float64, or None
        The variational parameters gamma when ``return_gamma``, else None.

    Raises
    ------
    InvalidParameterError
        Languages, document alignment, term ids, shapes or priors do not fit.
    NumericalError
        The documents' ELBO is not finite.

    Notes
    -----
    Blei et al. (2003), figure 6, with Hoffman et al. (2010)'s exp(E[log beta]) form: per document,
    repeat ``phi_w ∝ exp(E[log theta]) * expElogbeta[:, w]`` and
    ``gamma = alpha + sum_w n_w phi_w`` (over all languages' words) until
    ``mean(|delta gamma|) < doc_tol`` or ``max_doc_iter``; then, from the final gamma, add
    ``n_w phi_w`` to the statistics, ``psi(gamma) - psi(sum gamma)`` to ``alpha_suff`` and
    ``sum_w n_w log(sum_k exp(E[log theta_k]) expElogbeta_kw) - E_q[log q(theta)]`` to ``doc_elbo``.
    NumPy equivalent: ``tests/reference/vb_lda_numpy.py``. Inputs are not modified.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[1, 2, 0], [0, 0, 3]])), language="en")
    >>> stats, gamma = estep_block({"en": block}, {"en": np.full((2, 3), 0.3)}, 0.1,
    ...                            VBParams(n_topics=2), return_gamma=True)
    >>> stats.n_tokens, gamma.shape
    (6, (2, 2))
    """
    blocks = as_block_mapping(blocks)
    topics = as_prepared_topics(exp_elog_topic_word)
    if topics.n_topics != params.n_topics:
        raise InvalidParameterError(
            f"exp_elog_topic_word has {topics.n_topics} topics but params.n_topics is {params.n_topics}"
        )
    n_docs = check_blocks(blocks, topics)
    alpha = _parse_prior(doc_topic_prior, params.n_topics)
    indptr, term_ids, counts = _stack_languages(blocks, topics, n_docs)
    gamma = _initial_gamma(indptr, counts, alpha, gamma_init, params, next(iter(blocks.values())).first_doc)
    present, local_cols = _present_terms(term_ids, int(topics.offsets[-1]))
    stats = np.zeros((present.shape[0], params.n_topics), dtype=np.float64)
    alpha_suff = np.zeros(params.n_topics, dtype=np.float64)
    doc_elbo = np.zeros(n_docs, dtype=np.float64)
    max_len = int(np.max(np.diff(indptr), initial=0))
    dtype = topics.term_topic.dtype
    n_capped, n_sweeps = _estep_csr(
        indptr, term_ids, counts, local_cols, topics.term_topic, alpha,
        params.max_doc_iter, params.doc_tol, gamma, stats, alpha_suff, doc_elbo,
        np.empty((max_len, params.n_topics), dtype=dtype), np.empty((params.n_topics, max_len), dtype=dtype),
        np.empty(max_len, dtype=np.float64), np.empty(params.n_topics), np.empty(max_len),
        np.empty(params.n_topics),
    )
    elbo = float(doc_elbo.sum())
    if not math.isfinite(elbo):
        first_doc = next(iter(blocks.values())).first_doc
        raise NumericalError(
            f"E-step ELBO is not finite for the block starting at document {first_doc}; "
            "check exp_elog_topic_word and doc_topic_prior for zeros, infinities or NaN"
        )
    result = EStepStats(
        topic_terms=_split_stats(present, stats, topics), alpha_suff=alpha_suff, doc_elbo=elbo,
        n_docs=n_docs, n_tokens=int(counts.sum(dtype=np.int64)), n_capped=int(n_capped),
        n_doc_iter=int(n_sweeps),
    )
    return result, (gamma if return_gamma else None)


def fold_in_block(
    blocks: Mapping[str, DocBlock] | DocBlock,
    exp_elog_topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: VBParams,
    *,
    gamma_init: FloatArray | None = None,
) -> FloatArray:
    """Compute topic proportions of new documents with the topics held fixed (``transform``).

    Parameters
    ----------
    blocks : mapping of str to DocBlock, or DocBlock
        As in :func:`estep_block`.
    exp_elog_topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), or PreparedTopics
        As in :func:`estep_block`.
    doc_topic_prior : float or ndarray of shape (n_topics,), float64
        As in :func:`estep_block`.
    params : VBParams
        As in :func:`estep_block`.
    gamma_init : ndarray of shape (n_docs, n_topics), float64, optional
        As in :func:`estep_block`.

    Returns
    -------
    ndarray of shape (n_docs, n_topics), float64
        The variational parameters gamma normalized to rows that sum to 1.

    Notes
    -----
    NumPy equivalent: ``gamma / gamma.sum(1, keepdims=True)`` with gamma from :func:`estep_block`.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[1, 2, 0]])))
    >>> theta = fold_in_block(block, {"default": np.full((2, 3), 0.3)}, 0.1, VBParams(n_topics=2))
    >>> float(theta.sum().round(12))
    1.0
    """
    _, gamma = estep_block(
        blocks, exp_elog_topic_word, doc_topic_prior, params, return_gamma=True, gamma_init=gamma_init
    )
    doc_topic_var = cast(FloatArray, gamma)  # return_gamma=True always returns it
    return doc_topic_var / doc_topic_var.sum(axis=1, keepdims=True)


def alpha_elbo_terms(alpha: FloatArray | float, alpha_suff: FloatArray, n_docs: int) -> float:
    """E_q[log p(theta | alpha)] summed over ``n_docs`` documents.

    Parameters
    ----------
    alpha : float or ndarray of shape (n_topics,), float64
    alpha_suff : ndarray of shape (n_topics,), float64
    n_docs : int

    Returns
    -------
    float
        ``n_docs * (lnG(sum alpha) - sum lnG(alpha)) + sum((alpha - 1) * alpha_suff)``.

    Examples
    --------
    >>> alpha_elbo_terms(1.0, np.array([-1.0, -1.0]), 1)
    0.0
    """
    suff = np.asarray(alpha_suff, dtype=np.float64)
    alpha_arr = np.broadcast_to(np.asarray(alpha, dtype=np.float64), suff.shape)
    return dirichlet_objective(alpha_arr, suff, n_docs)


def topic_elbo_terms(topic_word_var: FloatArray, topic_word_prior: FloatArray | float) -> float:
    """E_q[log p(beta | eta)] - E_q[log q(beta | lambda)] for one language.

    Parameters
    ----------
    topic_word_var : ndarray of shape (n_topics, n_terms), float64
        Variational parameters lambda.
    topic_word_prior : float or ndarray of shape (n_topics, n_terms), float64
        The prior eta (a matrix for informed priors).

    Returns
    -------
    float

    Notes
    -----
    NumPy equivalent, with ``elog = dirichlet_expectation(lam)``::

        (gammaln(eta.sum(1)) - gammaln(eta).sum(1)).sum() + ((eta - lam) * elog).sum()
        + gammaln(lam).sum() - gammaln(lam.sum(1)).sum()

    Examples
    --------
    >>> topic_elbo_terms(np.ones((1, 2)), 1.0)
    0.0
    """
    lam = np.asarray(topic_word_var, dtype=np.float64)
    eta = np.broadcast_to(np.asarray(topic_word_prior, dtype=np.float64), lam.shape)
    elog = dirichlet_expectation(lam)
    if np.ndim(topic_word_prior) == 0:
        n_topics, n_terms = lam.shape
        value = float(topic_word_prior)
        prior_norm = n_topics * (math.lgamma(n_terms * value) - n_terms * math.lgamma(value))
    else:
        prior_norm = float(gammaln_array(eta.sum(axis=1)).sum() - gammaln_array(eta).sum())
    var_norm = float(gammaln_array(lam).sum() - gammaln_array(lam.sum(axis=1)).sum())
    return prior_norm + float(np.sum((eta - lam) * elog)) + var_norm


def mstep_batch(stats_dense: FloatArray, topic_word_prior: FloatArray | float) -> FloatArray:
    """Batch M-step for one language: lambda = eta + sum_d n_dw phi_dwk.

    Parameters
    ----------
    stats_dense : ndarray of shape (n_topics, n_terms), float64
        ``TopicTermStats.to_dense(n_terms)`` of the merged statistics.
    topic_word_prior : float or ndarray of shape (n_topics, n_terms), float64

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64

    Examples
    --------
    >>> mstep_batch(np.zeros((1, 2)), 0.5).tolist()
    [[0.5, 0.5]]
    """
    return np.asarray(topic_word_prior, dtype=np.float64) + np.asarray(stats_dense, dtype=np.float64)


def initial_topic_word_var(
    n_topics: int, n_terms: int, *, seed: int, language_index: int = 0, shape: float = 100.0
) -> FloatArray:
    """Random starting lambda: Gamma(shape, 1/shape) entries (mean 1, variance 1/shape).

    Parameters
    ----------
    n_topics, n_terms : int
    seed : int
    language_index : int, default 0
        Position of the language, so each language gets its own draws.
    shape : float, default 100
        100 is Hoffman et al. (2010)'s start, which gensim and scikit-learn use. A smaller shape
        starts the topics further apart (measured in benchmarks/RESULTS.md).

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64

    Notes
    -----
    Row k is drawn from ``doc_generator(seed, STREAM_TOPIC_INIT, language_index, k)``, so the result
    depends only on its arguments.

    Examples
    --------
    >>> initial_topic_word_var(2, 3, seed=0).shape
    (2, 3)
    """
    rows = [
        doc_generator(seed, STREAM_TOPIC_INIT, language_index, k).gamma(shape, 1.0 / shape, size=n_terms)
        for k in range(n_topics)
    ]
    return np.asarray(rows, dtype=np.float64).reshape(n_topics, n_terms)


def full_elbo(
    stats: EStepStats,
    topic_word_var: Mapping[str, FloatArray],
    doc_topic_prior: FloatArray | float,
    topic_word_prior: Mapping[str, FloatArray | float] | float,
) -> float:
    """The full ELBO of a batch iteration: document terms + alpha terms + topic terms of each language.

    Parameters
    ----------
    stats : EStepStats
        Merged E-step statistics of the whole corpus, computed with ``topic_word_var`` and
        ``doc_topic_prior``.
    topic_word_var : mapping of str to ndarray of shape (n_topics, n_terms_lang)
        The lambda the E-step used.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The alpha the E-step used.
    topic_word_prior : float, or mapping of str to float or ndarray of shape (n_topics, n_terms_lang)

    Returns
    -------
    float

    Raises
    ------
    NumericalError
        The ELBO is not finite.

    Notes
    -----
    ``stats.doc_elbo + alpha_elbo_terms(alpha, stats.alpha_suff, stats.n_docs)
    + sum_l topic_elbo_terms(lambda_l, eta_l)``.

    Examples
    --------
    >>> stats = EStepStats.zeros(1, ["en"])
    >>> full_elbo(stats, {"en": np.ones((1, 2))}, 1.0, 1.0)
    0.0
    """
    value = stats.doc_elbo + alpha_elbo_terms(doc_topic_prior, stats.alpha_suff, stats.n_docs)
    for lang, lam in topic_word_var.items():
        eta = topic_word_prior[lang] if isinstance(topic_word_prior, Mapping) else topic_word_prior
        value += topic_elbo_terms(lam, eta)
    if not math.isfinite(value):
        raise NumericalError(f"ELBO is not finite ({value!r}); doc part {stats.doc_elbo!r}")
    return float(value)
