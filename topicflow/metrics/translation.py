"""Topic translation consistency: how many of a topic's top words in one language the dictionary translates into its top words in the other.

This module owns one measure of a polylingual topic model against a bilingual dictionary (used by the
experiments of Zhai 2014, chapter 5, in ``benchmarks/bench_tree_lda.py``). It must not import dask,
zarr or logging, and it does no I/O; the caller maps the dictionary's words to term ids.

Definition. For topic k let ``T_a(k)`` be its ``top_n`` most probable terms in language a and
``T_b(k)`` those in language b (ties broken by the lower term id). With the dictionary ``D`` as a set
of (term of a, term of b) pairs:

- ``a_to_b(k) = |{w in T_a(k) : (w, v) in D for some v in T_b(k)}| / top_n``: the share of a's top words
  that have a translation among b's top words;
- ``b_to_a(k)``, the same from b's side;
- ``consistency(k) = (a_to_b(k) + b_to_a(k)) / 2``, and the model's score is the mean over topics.

Why this form: one direction alone is not symmetric when a word has several translations (three
German top words may all translate one English top word), so both directions are reported and
averaged. The denominator is ``top_n``, not the number of top words the dictionary knows, so the
score of every model is over the same number of words; ``covered_a`` / ``covered_b`` give the share
of top words that have any translation in the whole vocabulary, the ceiling of the score when the
dictionary is small (a model that only ranks dictionary words higher raises the ceiling, not the
score, unless the translations rank high in the same topic).

Glossary:
    topic_word_a ((n_topics, n_terms_a)), topic_word_b ((n_topics, n_terms_b)): any scores whose
        order within a row ranks the words (probabilities, lambda, counts)
    pairs ((n_pairs, 2), int): column 0 a term id of language a, column 1 of language b
    top_n: N, the number of top words per topic and language
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError


def _topic_word(name: str, values: Any) -> FloatArray:
    rows = np.asarray(values, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] == 0:
        raise InvalidParameterError(f"{name} must be 2-d (n_topics, n_terms) with both >= 1, got shape {rows.shape!r}")
    if not np.all(np.isfinite(rows)):
        bad = np.argwhere(~np.isfinite(rows))[0]
        raise InvalidParameterError(f"{name} has a non-finite value at topic {int(bad[0])}, term {int(bad[1])}")
    return rows


def _pairs(values: Any, n_terms_a: int, n_terms_b: int) -> IntArray:
    array = np.asarray(values)
    if array.size == 0:
        return np.zeros((0, 2), dtype=np.int64)
    if array.ndim != 2 or array.shape[1] != 2:
        raise InvalidParameterError(f"pairs must have shape (n_pairs, 2): (term of a, term of b); got {array.shape!r}")
    if not np.issubdtype(array.dtype, np.integer):
        raise InvalidParameterError(f"pairs must hold integer term ids, got dtype {array.dtype}")
    pairs = array.astype(np.int64)
    for column, (side, n_terms) in enumerate((("a", n_terms_a), ("b", n_terms_b))):
        outside = (pairs[:, column] < 0) | (pairs[:, column] >= n_terms)
        if np.any(outside):
            row = int(np.flatnonzero(outside)[0])
            raise InvalidParameterError(
                f"pairs row {row}: term id {int(pairs[row, column])} of language {side} is outside its vocabulary "
                f"[0, {n_terms}); map the dictionary's words with the model's vocabularies")
    return pairs


def top_term_ids(topic_word: Any, top_n: int) -> IntArray:
    """The ``top_n`` highest-scoring terms of every topic, best first, ties by the lower term id.

    Parameters
    ----------
    topic_word : array-like of shape (n_topics, n_terms)
        Finite scores (probabilities, lambda or counts).
    top_n : int
        At least 1 and at most ``n_terms``.

    Returns
    -------
    ndarray of shape (n_topics, top_n), int64

    Raises
    ------
    InvalidParameterError
        Not 2-d, non-finite values, or ``top_n`` outside ``[1, n_terms]``.

    Examples
    --------
    >>> top_term_ids([[0.1, 0.5, 0.5, 0.2]], 3).tolist()
    [[1, 2, 3]]
    """
    rows = _topic_word("topic_word", topic_word)
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or not 1 <= top_n <= rows.shape[1]:
        raise InvalidParameterError(f"top_n must be an integer in [1, {rows.shape[1]}] (the vocabulary size), "
                                    f"got {top_n!r}")
    return np.argsort(-rows, axis=1, kind="stable")[:, : int(top_n)].astype(np.int64)


@dataclass(frozen=True, slots=True)
class TranslationConsistency:
    """Per-topic and mean translation consistency of a bilingual topic model.

    Attributes
    ----------
    a_to_b, b_to_a : tuple of float
        Per topic: share of language a's (b's) top words with a dictionary translation among the other
        language's top words.
    per_topic : tuple of float
        Per topic: the mean of the two directions.
    covered_a, covered_b : tuple of float
        Per topic: share of the top words that have any translation in the dictionary (the ceiling).
    mean_a_to_b, mean_b_to_a, mean : float
        Means over topics.
    top_n : int
    n_pairs : int
        Distinct dictionary pairs used.
    languages : tuple of str
        Names of languages a and b (for the report only).
    """

    a_to_b: tuple[float, ...]
    b_to_a: tuple[float, ...]
    per_topic: tuple[float, ...]
    covered_a: tuple[float, ...]
    covered_b: tuple[float, ...]
    mean_a_to_b: float
    mean_b_to_a: float
    mean: float
    top_n: int
    n_pairs: int
    languages: tuple[str, str]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (the means, the ceilings' means and the settings).

        Returns
        -------
        dict
        """
        a, b = self.languages
        return {"mean": self.mean, f"{a}_to_{b}": self.mean_a_to_b, f"{b}_to_{a}": self.mean_b_to_a,
                f"covered_{a}": float(np.mean(self.covered_a)), f"covered_{b}": float(np.mean(self.covered_b)),
                "top_n": self.top_n, "n_pairs": self.n_pairs}


def translation_consistency(
    topic_word_a: Any, topic_word_b: Any, pairs: Any, *, top_n: int = 10,
    languages: tuple[str, str] = ("a", "b"),
) -> TranslationConsistency:
    """Share of each topic's top words in one language that the dictionary pairs with its top words in the other.

    Parameters
    ----------
    topic_word_a : array-like of shape (n_topics, n_terms_a)
        Topic-word scores of language a (only their order within a row matters).
    topic_word_b : array-like of shape (n_topics, n_terms_b)
        The same topics in language b.
    pairs : array-like of shape (n_pairs, 2), int
        Dictionary pairs as (term id in a, term id in b); duplicates are counted once; may be empty.
    top_n : int, default 10
        Top words per topic and language, at most either vocabulary's size.
    languages : tuple of (str, str), default ("a", "b")
        Names used by :meth:`TranslationConsistency.to_dict`.

    Returns
    -------
    TranslationConsistency

    Raises
    ------
    InvalidParameterError
        Bad shapes, different numbers of topics, non-finite scores, ``top_n`` outside
        ``[1, min(n_terms_a, n_terms_b)]``, or a pair whose term id is outside its vocabulary.

    Notes
    -----
    NumPy equivalent (the module docstring gives the definition)::

        top_a, top_b = top_term_ids(a, N), top_term_ids(b, N)
        a_to_b[k] = mean([any((w, v) in D for v in top_b[k]) for w in top_a[k]])
        b_to_a[k] = mean([any((w, v) in D for w in top_a[k]) for v in top_b[k]])

    Examples
    --------
    >>> a = [[0.6, 0.3, 0.1]]          # top 2 of a: terms 0, 1
    >>> b = [[0.1, 0.5, 0.4]]          # top 2 of b: terms 1, 2
    >>> r = translation_consistency(a, b, [[0, 1], [1, 0]], top_n=2)
    >>> r.a_to_b, r.b_to_a, r.mean
    ((0.5,), (0.5,), 0.5)
    """
    rows_a = _topic_word("topic_word_a", topic_word_a)
    rows_b = _topic_word("topic_word_b", topic_word_b)
    if rows_a.shape[0] != rows_b.shape[0]:
        raise InvalidParameterError(f"topic_word_a has {rows_a.shape[0]} topics but topic_word_b {rows_b.shape[0]}; "
                                    "give the same model's topics in both languages")
    n_a, n_b = rows_a.shape[1], rows_b.shape[1]
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or not 1 <= top_n <= min(n_a, n_b):
        raise InvalidParameterError(f"top_n must be an integer in [1, {min(n_a, n_b)}] (the smaller vocabulary), "
                                    f"got {top_n!r}")
    ids = _pairs(pairs, n_a, n_b)
    linked = sp.csr_matrix((np.ones(len(ids), dtype=np.int64), (ids[:, 0], ids[:, 1])), shape=(n_a, n_b))
    linked.sum_duplicates()
    linked.data[:] = 1
    has_a = np.asarray(linked.getnnz(axis=1) > 0)
    has_b = np.asarray(linked.getnnz(axis=0) > 0)
    top_a, top_b = top_term_ids(rows_a, int(top_n)), top_term_ids(rows_b, int(top_n))
    a_to_b, b_to_a = [], []
    for k in range(rows_a.shape[0]):
        block = linked[top_a[k]][:, top_b[k]].toarray() > 0  # (top_n, top_n): pair (i-th of a, j-th of b)
        a_to_b.append(float(block.any(axis=1).mean()))
        b_to_a.append(float(block.any(axis=0).mean()))
    per_topic = [(x + y) / 2.0 for x, y in zip(a_to_b, b_to_a, strict=True)]
    return TranslationConsistency(
        a_to_b=tuple(a_to_b), b_to_a=tuple(b_to_a), per_topic=tuple(per_topic),
        covered_a=tuple(float(v) for v in has_a[top_a].mean(axis=1)),
        covered_b=tuple(float(v) for v in has_b[top_b].mean(axis=1)),
        mean_a_to_b=float(np.mean(a_to_b)), mean_b_to_a=float(np.mean(b_to_a)), mean=float(np.mean(per_topic)),
        top_n=int(top_n), n_pairs=int(linked.nnz), languages=(str(languages[0]), str(languages[1])),
    )
