"""What a report says about each topic: top terms, size, example documents, evolution across versions.

This module owns the math behind ``topicflow report`` and the pyLDAvis export: the most probable terms
of each topic, topic sizes as shares of tokens (from the model's topic-word mass, or from documents'
topic proportions weighted by their lengths), the mergeable per-partition summary of a corpus's document
topics (token mass per topic and the documents with the highest proportion of each topic), term counts
of a block, and the matching of topics between versions of a model (Hungarian matching on Hellinger
distance, with new and vanished topics). It must not import dask, zarr or logging, and it does no I/O.

Glossary:
    topic_word ((n_topics, n_terms)): topic-word distributions, rows sum to 1
    topic_word_var (lambda), topic_word_prior (eta): as in :mod:`topicflow.models.lda.state`
    doc_topic (theta, (n_docs, n_topics)): documents' topic proportions, rows sum to 1
    doc_lengths (N_d, (n_docs,)): tokens of each document (in the model's vocabulary)
    size of topic k: sum_d N_d theta_dk / sum_d N_d (corpus), or sum_w (lambda_kw - eta_kw) over all
        topics' sum (model): both are the expected share of tokens assigned to topic k
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.metrics.recovery import hellinger, match_topics
from topicflow.models.common.blocks import DocBlock, OrderedBlock


def top_terms(topic_word: np.ndarray, n: int) -> tuple[IntArray, FloatArray]:
    """Return the ``n`` most probable terms of each topic and their probabilities.

    Parameters
    ----------
    topic_word : ndarray of shape (n_topics, n_terms)
        Topic-word distributions (any nonnegative weights rank the same way).
    n : int
        Terms per topic; positive. Fewer are returned when the vocabulary is smaller.

    Returns
    -------
    terms : ndarray of shape (n_topics, min(n, n_terms)), int64
        Term ids by decreasing probability; ties go to the smaller term id.
    probabilities : ndarray of shape (n_topics, min(n, n_terms)), float64
        ``topic_word[k, terms[k]]``.

    Raises
    ------
    InvalidParameterError
        ``n`` is not positive or ``topic_word`` is not 2-d.

    Examples
    --------
    >>> terms, p = top_terms(np.array([[0.1, 0.6, 0.3], [0.5, 0.0, 0.5]]), 2)
    >>> terms.tolist(), p.tolist()
    ([[1, 2], [0, 2]], [[0.6, 0.3], [0.5, 0.5]])
    """
    rows = np.asarray(topic_word, dtype=np.float64)
    if rows.ndim != 2:
        raise InvalidParameterError(f"topic_word must be 2-d (n_topics, n_terms), got shape {rows.shape!r}")
    if n < 1:
        raise InvalidParameterError(f"the number of top terms must be positive, got {n!r}")
    terms = np.argsort(-rows, axis=1, kind="stable")[:, :n].astype(np.int64)
    return terms, np.take_along_axis(rows, terms, axis=1)


def model_topic_shares(topic_word_var: Mapping[str, np.ndarray],
                       topic_word_prior: Mapping[str, float | np.ndarray]) -> FloatArray:
    """Return each topic's share of the tokens the model assigned during training.

    Parameters
    ----------
    topic_word_var : mapping of str to ndarray of shape (n_topics, n_terms)
        Lambda per language.
    topic_word_prior : mapping of str to float or ndarray of shape (n_topics, n_terms)
        Eta per language (a matrix for informed priors).

    Returns
    -------
    ndarray of shape (n_topics,), float64
        ``m_k / sum_j m_j`` with ``m_k = sum_lang sum_w max(lambda_kw - eta_kw, 0)``, the expected
        number of training tokens in topic k (exact for batch VB and for a sampler's counts; scaled by
        the same factor for every topic in online VB). Uniform when the model holds no mass.

    Examples
    --------
    >>> model_topic_shares({"en": np.array([[1.5, 0.5], [0.5, 2.5]])}, {"en": 0.5}).tolist()
    [0.25, 0.75]
    """
    mass: FloatArray | None = None
    for lang, lam in topic_word_var.items():
        counts = np.clip(np.asarray(lam, dtype=np.float64) - np.asarray(topic_word_prior[lang]), 0.0, None)
        mass = counts.sum(axis=1) if mass is None else mass + counts.sum(axis=1)
    if mass is None:
        raise InvalidParameterError("a model needs at least one language")
    total = float(mass.sum())
    if total <= 0.0:
        return np.full(mass.shape[0], 1.0 / mass.shape[0])
    shares: FloatArray = mass / total
    return shares


def term_counts(block: DocBlock) -> IntArray:
    """Count each term's tokens in a block.

    Parameters
    ----------
    block : DocBlock
        CSR counts over ``block.n_terms`` terms.

    Returns
    -------
    ndarray of shape (block.n_terms,), int64
        ``block.to_csr().sum(axis=0)``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> term_counts(block_from_csr(sp.csr_matrix(np.array([[1, 0, 2], [0, 0, 3]])))).tolist()
    [1, 0, 5]
    """
    out: IntArray = np.bincount(block.term_ids, weights=block.counts, minlength=block.n_terms).astype(np.int64)
    return out


def doc_top_terms(block: DocBlock, row: int, n: int) -> IntArray:
    """Return the ``n`` most frequent terms of one document of a block.

    Parameters
    ----------
    block : DocBlock
        The block holding the document.
    row : int
        The document's row in the block.
    n : int
        How many terms; fewer when the document has fewer distinct terms.

    Returns
    -------
    ndarray of shape (min(n, n_distinct),), int64
        Term ids by decreasing count; ties go to the smaller term id.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> doc_top_terms(block_from_csr(sp.csr_matrix(np.array([[1, 3, 0, 3]]))), 0, 2).tolist()
    [1, 3]
    """
    lo, hi = int(block.indptr[row]), int(block.indptr[row + 1])
    terms, counts = block.term_ids[lo:hi], block.counts[lo:hi]
    order = np.lexsort((terms, -counts.astype(np.int64)))[:n]
    out: IntArray = terms[order].astype(np.int64)
    return out


def doc_first_tokens(block: OrderedBlock, row: int, n: int) -> list[int | str]:
    """Return the first ``n`` tokens of one document in reading order.

    Parameters
    ----------
    block : OrderedBlock
        The ordered-token layer of the shard holding the document.
    row : int
        The document's row in the block.
    n : int
        How many tokens; fewer when the document is shorter.

    Returns
    -------
    list of (int or str)
        A term id of the block's vocabulary, or the string of an out-of-vocabulary token.

    Examples
    --------
    >>> block = OrderedBlock(np.array([0, 3]), np.array([1, -1, 0], np.int32), np.array(["cat"], dtype=object),
    ...                      np.array(["a"], dtype=object), 0, 2)
    >>> doc_first_tokens(block, 0, 2)
    [1, 'cat']
    """
    codes = block.doc_tokens(row)[:n].tolist()
    return [code if code >= 0 else str(block.oov_terms[-code - 1]) for code in codes]


@dataclass(frozen=True)
class TopicDocStats:
    """Mergeable summary of documents' topic proportions: token mass per topic and top documents.

    ``merge`` is associative and commutative and :meth:`zeros` is its identity: the top documents
    are ordered by decreasing proportion, ties by global position, so any split of a corpus into
    partitions, merged in any order, gives the same value.

    Attributes
    ----------
    topic_tokens : ndarray of shape (n_topics,), float64
        ``sum_d N_d theta_dk``: expected tokens in topic k.
    n_tokens : int
        ``sum_d N_d``.
    n_docs : int
    top_weight : ndarray of shape (n_topics, n_top), float64
        Row k: the largest ``theta_dk`` seen, decreasing; ``-1.0`` pads unused slots.
    top_position : ndarray of shape (n_topics, n_top), int64
        Global position (store order) of each of those documents; ``-1`` pads.
    top_doc_id : ndarray of shape (n_topics, n_top), object (str)
        Their document ids; ``""`` pads.
    """

    topic_tokens: FloatArray
    n_tokens: int
    n_docs: int
    top_weight: FloatArray
    top_position: IntArray
    top_doc_id: np.ndarray

    @classmethod
    def zeros(cls, n_topics: int, n_top: int) -> TopicDocStats:
        """Return the identity of :meth:`merge`: no documents.

        Parameters
        ----------
        n_topics : int
            Number of topics.
        n_top : int
            Documents kept per topic.

        Returns
        -------
        TopicDocStats
        """
        return cls(topic_tokens=np.zeros(n_topics), n_tokens=0, n_docs=0,
                   top_weight=np.full((n_topics, n_top), -1.0),
                   top_position=np.full((n_topics, n_top), -1, dtype=np.int64),
                   top_doc_id=np.full((n_topics, n_top), "", dtype=object))

    @property
    def n_top(self) -> int:
        """Documents kept per topic."""
        return int(self.top_weight.shape[1])

    def merge(self, other: TopicDocStats) -> TopicDocStats:
        """Return the summary of both sets of documents.

        Parameters
        ----------
        other : TopicDocStats
            Over the same topics and with the same ``n_top``.

        Returns
        -------
        TopicDocStats
        """
        if other.top_weight.shape != self.top_weight.shape:
            raise InvalidParameterError(
                f"cannot merge document summaries of shapes {self.top_weight.shape} and {other.top_weight.shape}")
        weight = np.concatenate([self.top_weight, other.top_weight], axis=1)
        position = np.concatenate([self.top_position, other.top_position], axis=1)
        doc_id = np.concatenate([self.top_doc_id, other.top_doc_id], axis=1)
        keep = _top_slots(weight, position, self.n_top)
        return TopicDocStats(
            topic_tokens=self.topic_tokens + other.topic_tokens, n_tokens=self.n_tokens + other.n_tokens,
            n_docs=self.n_docs + other.n_docs, top_weight=np.take_along_axis(weight, keep, axis=1),
            top_position=np.take_along_axis(position, keep, axis=1),
            top_doc_id=np.take_along_axis(doc_id, keep, axis=1),
        )

    @staticmethod
    def merge_all(parts: Sequence[TopicDocStats]) -> TopicDocStats:
        """Merge summaries left to right.

        Parameters
        ----------
        parts : sequence of TopicDocStats
            At least one.

        Returns
        -------
        TopicDocStats
        """
        if not parts:
            raise InvalidParameterError("merge_all needs at least one summary")
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.merge(part)
        return merged

    def shares(self) -> FloatArray:
        """Return each topic's share of the tokens: ``topic_tokens / n_tokens`` (zeros without tokens).

        Returns
        -------
        ndarray of shape (n_topics,), float64
        """
        out: FloatArray = self.topic_tokens / max(float(self.topic_tokens.sum()), 1e-300)
        return out

    def top_documents(self, k: int) -> list[tuple[int, str, float]]:
        """Return topic ``k``'s top documents as ``(position, doc_id, theta)``, best first.

        Parameters
        ----------
        k : int
            A topic.

        Returns
        -------
        list of tuple of (int, str, float)
            Only filled slots (fewer than ``n_top`` when the corpus has fewer documents).
        """
        return [(int(p), str(d), float(w)) for p, d, w in
                zip(self.top_position[k], self.top_doc_id[k], self.top_weight[k]) if p >= 0]


def _top_slots(weight: FloatArray, position: IntArray, n_top: int) -> IntArray:
    """Per row, the columns of the ``n_top`` best entries: largest weight first, then smallest position.

    Padding (weight -1, position -1) sorts after every real entry because weights are >= 0.
    """
    pad = position < 0
    order = np.lexsort((np.where(pad, np.iinfo(np.int64).max, position), -weight), axis=-1)
    out: IntArray = order[:, :n_top]
    return out


def doc_topic_stats(doc_topic: np.ndarray, doc_lengths: np.ndarray, doc_ids: np.ndarray, first_doc: int,
                    n_top: int) -> TopicDocStats:
    """Summarize the topic proportions of consecutive documents (one partition).

    Parameters
    ----------
    doc_topic : ndarray of shape (n_docs, n_topics), float64
        Theta; rows sum to 1.
    doc_lengths : ndarray of shape (n_docs,), int
        N_d, the tokens of each document the topics were inferred from.
    doc_ids : ndarray of shape (n_docs,), object (str)
    first_doc : int
        Global position of the first document.
    n_top : int
        Documents kept per topic; positive.

    Returns
    -------
    TopicDocStats

    Examples
    --------
    >>> stats = doc_topic_stats(np.array([[0.9, 0.1], [0.2, 0.8]]), np.array([10, 30]),
    ...                         np.array(["a", "b"], dtype=object), 0, 1)
    >>> stats.shares().round(3).tolist(), stats.top_documents(0)
    ([0.375, 0.625], [(0, 'a', 0.9)])
    """
    theta = np.asarray(doc_topic, dtype=np.float64)
    lengths = np.asarray(doc_lengths, dtype=np.float64)
    n_docs, n_topics = theta.shape
    if lengths.shape != (n_docs,) or len(doc_ids) != n_docs:
        raise InvalidParameterError(
            f"doc_topic has {n_docs} rows but doc_lengths has shape {lengths.shape} and doc_ids {len(doc_ids)} entries")
    if n_top < 1:
        raise InvalidParameterError(f"documents per topic must be positive, got {n_top!r}")
    part = TopicDocStats.zeros(n_topics, n_top)
    if n_docs == 0:
        return part
    position = np.broadcast_to(first_doc + np.arange(n_docs, dtype=np.int64), (n_topics, n_docs))
    weight = theta.T
    keep = _top_slots(weight, position, n_top)
    ids = np.broadcast_to(np.asarray(doc_ids, dtype=object), (n_topics, n_docs))
    width = keep.shape[1]
    top_weight, top_position, top_doc_id = part.top_weight.copy(), part.top_position.copy(), part.top_doc_id.copy()
    top_weight[:, :width] = np.take_along_axis(weight, keep, axis=1)
    top_position[:, :width] = np.take_along_axis(position, keep, axis=1)
    top_doc_id[:, :width] = np.take_along_axis(ids, keep, axis=1)
    return TopicDocStats(topic_tokens=theta.T @ lengths, n_tokens=int(lengths.sum()), n_docs=n_docs,
                         top_weight=top_weight, top_position=top_position, top_doc_id=top_doc_id)


# ----------------------------------------------------------------------------- evolution across versions


def align_topics(versions: Sequence[Mapping[str, tuple[np.ndarray, np.ndarray]]]) -> list[FloatArray]:
    """Put the topics of several model versions over one shared vocabulary.

    Parameters
    ----------
    versions : sequence of mapping of str to (ndarray of shape (n_topics, n_terms), ndarray of str)
        Per version and language: the topic-word distributions and the vocabulary's terms.

    Returns
    -------
    list of ndarray of shape (n_topics_v, n_union), float64
        Each version's topics over the union of (language, term) pairs (zeros where a version lacks
        a term). With several languages each language's row is weighted ``1 / n_languages``, so rows
        still sum to 1 and the Hellinger distance of two topics is the root mean of the squared
        per-language distances.

    Examples
    --------
    >>> a = {"en": (np.array([[1.0, 0.0]]), np.array(["x", "y"]))}
    >>> b = {"en": (np.array([[0.5, 0.5]]), np.array(["y", "z"]))}
    >>> [t.tolist() for t in align_topics([a, b])]
    [[[1.0, 0.0, 0.0]], [[0.0, 0.5, 0.5]]]
    """
    languages = sorted({lang for version in versions for lang in version})
    index: dict[tuple[str, str], int] = {}
    for version in versions:
        for lang in languages:
            if lang in version:
                for term in version[lang][1]:
                    index.setdefault((lang, str(term)), len(index))
    out = []
    for version in versions:
        n_topics = next(iter(version.values()))[0].shape[0]
        rows = np.zeros((n_topics, len(index)))
        for lang, (topic_word, terms) in version.items():
            columns = np.array([index[(lang, str(t))] for t in terms], dtype=np.int64)
            rows[:, columns] += np.asarray(topic_word, dtype=np.float64) / len(version)
        out.append(rows)
    return out


@dataclass(frozen=True)
class EvolutionStep:
    """How the topics of one version continue in the next.

    Attributes
    ----------
    matched : ndarray of shape (n_matched, 2), int64
        ``(topic in the earlier version, topic in the later one)`` pairs within the threshold.
    distances : ndarray of shape (n_matched,), float64
        Their Hellinger distances.
    vanished : ndarray of shape (n_vanished,), int64
        Topics of the earlier version with no match within the threshold.
    new : ndarray of shape (n_new,), int64
        Topics of the later version with no match within the threshold.
    distance_matrix : ndarray of shape (n_topics_earlier, n_topics_later), float64
        Every pairwise Hellinger distance.
    """

    matched: IntArray
    distances: FloatArray
    vanished: IntArray
    new: IntArray
    distance_matrix: FloatArray


def evolution_step(earlier: np.ndarray, later: np.ndarray, *, threshold: float) -> EvolutionStep:
    """Match the topics of two versions (Hungarian matching on Hellinger distance).

    Parameters
    ----------
    earlier : ndarray of shape (n_earlier, n_terms)
        Topic-word distributions of the earlier version (over the same terms as ``later``; see
        :func:`align_topics`).
    later : ndarray of shape (n_later, n_terms)
        Those of the later version.
    threshold : float
        In [0, 1]: a matched pair further apart than this is no continuation; its earlier topic
        counts as vanished and its later topic as new. Topics left unmatched because the versions
        have different numbers of topics are vanished or new too.

    Returns
    -------
    EvolutionStep

    Raises
    ------
    InvalidParameterError
        ``threshold`` outside [0, 1], or topics :func:`~topicflow.metrics.recovery.hellinger` refuses.

    Examples
    --------
    >>> step = evolution_step(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [0.5, 0.5]]),
    ...                       threshold=0.3)
    >>> step.matched.tolist(), step.vanished.tolist(), step.new.tolist()
    ([[1, 0]], [0], [1])
    """
    if not 0.0 <= threshold <= 1.0:
        raise InvalidParameterError(f"the evolution threshold is a Hellinger distance in [0, 1], got {threshold!r}")
    matrix = hellinger(earlier, later)
    match = match_topics(earlier, later)
    keep = match.distances <= threshold
    pairs = np.stack([match.estimated[keep], match.true[keep]], axis=1).astype(np.int64)
    order = np.argsort(pairs[:, 1], kind="stable")
    pairs = pairs[order]
    vanished = np.setdiff1d(np.arange(matrix.shape[0]), pairs[:, 0]).astype(np.int64)
    new = np.setdiff1d(np.arange(matrix.shape[1]), pairs[:, 1]).astype(np.int64)
    return EvolutionStep(matched=pairs, distances=match.distances[keep][order], vanished=vanished, new=new,
                         distance_matrix=matrix)


def topic_lineages(steps: Sequence[EvolutionStep], n_topics: Sequence[int]) -> list[list[int | None]]:
    """Follow topics through versions: one lineage per topic from the version it appears in.

    Parameters
    ----------
    steps : sequence of EvolutionStep
        ``steps[i]`` links version ``i`` to version ``i + 1``.
    n_topics : sequence of int
        Topics of each version; ``len(steps) + 1`` entries.

    Returns
    -------
    list of list of (int or None)
        Each lineage gives the topic it is in every version (None before it appears and after it
        vanishes). Lineages alive in the last version come first, by their topic there; then the
        vanished ones, by the version they were last seen in (latest first) and their topic there.

    Examples
    --------
    >>> step = evolution_step(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([[0.0, 1.0], [0.5, 0.5]]),
    ...                       threshold=0.3)
    >>> topic_lineages([step], [2, 2])
    [[1, 0], [None, 1], [0, None]]
    """
    if len(n_topics) != len(steps) + 1:
        raise InvalidParameterError(f"{len(steps)} steps link {len(steps) + 1} versions, got {len(n_topics)} sizes")
    lineages: list[list[int | None]] = [[k] for k in range(n_topics[0])]
    current = {k: lineage for k, lineage in enumerate(lineages)}
    for version, step in enumerate(steps, start=1):
        following = dict(zip(step.matched[:, 0].tolist(), step.matched[:, 1].tolist()))
        upcoming: dict[int, list[int | None]] = {}
        for k, lineage in current.items():
            lineage.append(following.get(k))
            if k in following:
                upcoming[following[k]] = lineage
        for k in step.new.tolist():
            lineage = [None] * version + [k]
            lineages.append(lineage)
            upcoming[k] = lineage
        current = upcoming

    def last_seen(lineage: list[int | None]) -> tuple[int, int]:
        version = max(i for i, k in enumerate(lineage) if k is not None)
        return version, int(lineage[version])  # type: ignore[arg-type]

    alive = sorted((lin for lin in lineages if lin[-1] is not None), key=lambda lin: int(lin[-1]))  # type: ignore[arg-type]
    gone = sorted((lin for lin in lineages if lin[-1] is None),
                  key=lambda lin: (-last_seen(lin)[0], last_seen(lin)[1]))
    return alive + gone
