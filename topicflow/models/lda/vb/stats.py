"""Mergeable sufficient statistics of the variational E-step (a monoid under merge)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numba
import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError


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
