"""Drawing corpora from a true LDA model: topics, one shard of documents, and term frequencies.

This module owns the generative process only. It is pure: it does no I/O, imports no Dask or zarr,
and every random draw comes from :func:`topicflow.models.common.rng.doc_generator`, so a document depends
only on ``(seed, global document index)`` and never on which worker or shard draws it.

Generative process (Blei et al. 2003, section 3), for every language ``l`` and document ``d``::

    topic_word[l][k] ~ Dirichlet(topic_word_prior)        k = 0 .. n_topics - 1
    doc_topic[d]     ~ Dirichlet(doc_topic_prior)         shared by all languages of d
    n_tokens[d, l]   ~ max(1, Poisson(doc_length))        one draw per language
    z                ~ Categorical(doc_topic[d])          per token
    w                ~ Categorical(topic_word[l][z])      per token

Glossary:
    topic_word (beta, (n_topics, n_terms)): rows sum to 1
    doc_topic (theta, (n_docs, n_topics)): rows sum to 1
    doc_topic_prior (alpha, (n_topics,)): symmetric when all values are equal
    topic_word_prior (eta): scalar, symmetric
    doc_length (xi): Poisson mean of the tokens per document and language

Random streams: topic ``k`` of the ``i``-th language is drawn from
``doc_generator(seed, STREAM_TOPIC_INIT, i, k)``; document ``d`` (all its languages, in language
order) from ``doc_generator(seed, STREAM_SYNTH, 0, d)``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.rng import STREAM_SYNTH, STREAM_TOPIC_INIT, doc_generator
from topicflow.models.common.validation import parse_dirichlet_prior, parse_positive_float

#: Name of the only language of a monolingual synthetic corpus (the store's default language).
MONOLINGUAL = "default"

#: (indptr int64, term_ids int32, counts int32) of one language of one shard.
CsrArrays = tuple[IntArray, np.ndarray, np.ndarray]


def language_names(n_langs: int) -> tuple[str, ...]:
    """Language names of a synthetic corpus: ``("default",)`` or ``("l0", "l1", ...)``.

    Examples
    --------
    >>> language_names(1), language_names(2)
    (('default',), ('l0', 'l1'))
    """
    if n_langs == 1:
        return (MONOLINGUAL,)
    return tuple(f"l{i}" for i in range(n_langs))


def term_names(n_terms: int, language: str) -> np.ndarray:
    """Return the terms ``w00000, w00001, ...`` (prefixed ``l1-`` etc. for a multilingual language).

    Term id ``j`` is column ``j`` of the language's true ``topic_word``: synthetic vocabularies are
    in generation order, not in the frequency order of ingested stores.

    Examples
    --------
    >>> list(term_names(3, "default")), list(term_names(2, "l1"))
    (['w00000', 'w00001', 'w00002'], ['l1-w00000', 'l1-w00001'])
    """
    width = max(5, len(str(max(n_terms - 1, 0))))
    prefix = "" if language == MONOLINGUAL else f"{language}-"
    return np.array([f"{prefix}w{j:0{width}d}" for j in range(n_terms)], dtype=object)


def doc_id_of(doc: int) -> str:
    """Identifier of the ``doc``-th synthetic document, e.g. ``doc-00000042``."""
    return f"doc-{doc:08d}"


def parse_doc_topic_prior(value: float | str | Sequence[float], n_topics: int) -> tuple[float, ...]:
    """Alpha as ``n_topics`` positive floats, from a scalar, a comma list or a sequence.

    Raises
    ------
    InvalidParameterError
        If a value is not a positive finite number, or a list does not have 1 or ``n_topics`` values.

    Examples
    --------
    >>> parse_doc_topic_prior("0.5", 3)
    (0.5, 0.5, 0.5)
    >>> parse_doc_topic_prior("1,2,3", 3)
    (1.0, 2.0, 3.0)
    """
    return tuple(parse_dirichlet_prior("alpha", value, n_topics).tolist())


def _positive(name: str, value: float, *, integer: bool) -> None:
    ok = math.isfinite(value) and value > 0 and (not integer or float(value).is_integer())
    if not ok:
        kind = "a positive integer" if integer else "a positive finite number"
        raise InvalidParameterError(f"{name} must be {kind}, got {value!r}.")


@dataclass(frozen=True, slots=True)
class SynthParams:
    """Parameters of the true model a synthetic corpus is drawn from.

    Attributes
    ----------
    n_docs, n_topics, n_terms : int
        ``n_terms`` is the vocabulary size of every language.
    doc_length : float
        Poisson mean of the tokens per document and language (each draw is at least 1).
    doc_topic_prior : tuple of float, length n_topics
        Alpha; a scalar or comma list is accepted and normalized by :func:`parse_doc_topic_prior`.
    topic_word_prior : float
        Eta.
    seed : int
        Non-negative, below ``2**63``.
    n_langs : int
        Number of aligned languages; they share ``doc_topic`` but not ``topic_word``.
    labels : bool
        Label each document with its dominant true topic, ``topic-<k>``.

    Raises
    ------
    InvalidParameterError
        From ``__post_init__`` when a value is out of range.
    """

    n_docs: int
    n_topics: int
    n_terms: int
    doc_length: float
    doc_topic_prior: tuple[float, ...]
    topic_word_prior: float
    seed: int = 0
    n_langs: int = 1
    labels: bool = False
    languages: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        for name in ("n_docs", "n_topics", "n_terms", "n_langs"):
            _positive(name, getattr(self, name), integer=True)
            object.__setattr__(self, name, int(getattr(self, name)))
        _positive("doc_length", self.doc_length, integer=False)
        parse_positive_float("topic_word_prior (eta)", self.topic_word_prior)
        if not (isinstance(self.seed, (int, np.integer)) and 0 <= self.seed < 2**63):
            raise InvalidParameterError(f"seed must be an integer in [0, 2**63), got {self.seed!r}.")
        alpha = parse_doc_topic_prior(self.doc_topic_prior, int(self.n_topics))
        object.__setattr__(self, "doc_topic_prior", alpha)
        object.__setattr__(self, "languages", language_names(int(self.n_langs)))

    def to_dict(self) -> dict[str, object]:
        return {
            "n_docs": int(self.n_docs),
            "n_topics": int(self.n_topics),
            "n_terms": int(self.n_terms),
            "doc_length": float(self.doc_length),
            "doc_topic_prior": list(self.doc_topic_prior),
            "topic_word_prior": float(self.topic_word_prior),
            "seed": int(self.seed),
            "n_langs": int(self.n_langs),
            "labels": bool(self.labels),
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, object]) -> SynthParams:
        return cls(
            n_docs=int(payload["n_docs"]),  # type: ignore[call-overload]
            n_topics=int(payload["n_topics"]),  # type: ignore[call-overload]
            n_terms=int(payload["n_terms"]),  # type: ignore[call-overload]
            doc_length=float(payload["doc_length"]),  # type: ignore[arg-type]
            doc_topic_prior=tuple(payload["doc_topic_prior"]),  # type: ignore[arg-type]
            topic_word_prior=float(payload["topic_word_prior"]),  # type: ignore[arg-type]
            seed=int(payload["seed"]),  # type: ignore[call-overload]
            n_langs=int(payload["n_langs"]),  # type: ignore[call-overload]
            labels=bool(payload["labels"]),
        )


def draw_topic_word(params: SynthParams, language: str) -> FloatArray:
    """The true topic-word distributions of one language.

    Parameters
    ----------
    params : SynthParams
    language : str
        One of ``params.languages``; its position selects the random stream.

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64
        The topic-word matrix: row ``k`` ~ Dirichlet(topic_word_prior); rows sum to 1.

    Examples
    --------
    >>> p = SynthParams(n_docs=1, n_topics=2, n_terms=4, doc_length=5, doc_topic_prior=(1.0,),
    ...                 topic_word_prior=1.0)
    >>> draw_topic_word(p, "default").sum(axis=1)
    array([1., 1.])
    """
    lang_index = params.languages.index(language)
    eta = np.full(params.n_terms, params.topic_word_prior)
    rows = [
        doc_generator(params.seed, STREAM_TOPIC_INIT, lang_index, k).dirichlet(eta)
        for k in range(params.n_topics)
    ]
    topic_word = np.asarray(rows, dtype=np.float64).reshape(params.n_topics, params.n_terms)
    # Dirichlet draws with tiny eta can round to a row sum a few ulps away from 1.
    normalized: FloatArray = topic_word / topic_word.sum(axis=1, keepdims=True)
    return normalized


def block_topic_word(n_topics: int, n_terms: int, *, background: float = 1e-3) -> FloatArray:
    """Planted topics that do not overlap: topic k owns the k-th block of ``n_terms // n_topics`` terms.

    Parameters
    ----------
    n_topics, n_terms : int
    background : float, default 1e-3
        Weight of every term outside a topic's block, before normalization (an owned term weighs 1).

    Returns
    -------
    ndarray of shape (n_topics, n_terms), float64
        Rows sum to 1. The recovery test of sklearn's LDA generalized: topics a fit must find.

    Examples
    --------
    >>> block_topic_word(2, 4, background=0.0).tolist()
    [[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.5, 0.5]]
    """
    topic_word = np.full((n_topics, n_terms), background)
    width = n_terms // n_topics
    for k in range(n_topics):
        topic_word[k, k * width : (k + 1) * width] = 1.0
    out: FloatArray = topic_word / topic_word.sum(axis=1, keepdims=True)
    return out


def draw_doc_lengths(rng: np.random.Generator, doc_length: float, size: int | None = None) -> IntArray:
    """Draw the tokens of documents: ``max(1, Poisson(doc_length))`` each.

    Parameters
    ----------
    rng : numpy.random.Generator
    doc_length : float
        Poisson mean xi.
    size : int, optional
        Number of documents; one length (a 0-d array) when None.

    Returns
    -------
    ndarray of shape (size,) or (), int64

    Examples
    --------
    >>> int(draw_doc_lengths(np.random.default_rng(0), 1e-9))  # never an empty document
    1
    """
    out: IntArray = np.maximum(1, rng.poisson(doc_length, size=size)).astype(np.int64)
    return out


def draw_mixture_counts(
    rng: np.random.Generator, doc_topic: FloatArray, topic_word: FloatArray, doc_lengths: IntArray
) -> IntArray:
    """Draw each document's bag of words with its topics summed out: ``Multinomial(N_d, theta_d beta)``.

    Parameters
    ----------
    rng : numpy.random.Generator
        Drawn from document by document, in order.
    doc_topic : ndarray of shape (n_docs, n_topics), float64
        The proportions theta; rows sum to 1.
    topic_word : ndarray of shape (n_topics, n_terms), float64
        The topics beta; rows sum to 1.
    doc_lengths : ndarray of shape (n_docs,), int
        The lengths N_d.

    Returns
    -------
    ndarray of shape (n_docs, n_terms), int64
        Dense counts.

    Notes
    -----
    The generative process of the module docstring with z marginalized (equal in distribution,
    O(n_terms) per document); :func:`draw_shard` draws each token's topic instead, which is cheaper
    for long vocabularies. NumPy equivalent: ``[rng.multinomial(n, t @ topic_word) for n, t in ...]``.

    Examples
    --------
    >>> counts = draw_mixture_counts(np.random.default_rng(0), np.array([[1.0, 0.0]]),
    ...                              np.array([[0.0, 1.0], [1.0, 0.0]]), np.array([3]))
    >>> counts.tolist()
    [[0, 3]]
    """
    rows = [rng.multinomial(int(n), theta @ topic_word) for n, theta in zip(doc_lengths, doc_topic)]
    return np.array(rows, dtype=np.int64).reshape(len(rows), topic_word.shape[1])


@dataclass(frozen=True, slots=True)
class SynthShard:
    """Consecutive synthetic documents, ready to be written as one shard.

    Attributes
    ----------
    first_doc : int
    doc_ids : ndarray of shape (n_docs,), object (str)
    bags : dict of str to (indptr, term_ids, counts)
        CSR counts per language; term ids ascending within each document.
    doc_topic : ndarray of shape (n_docs, n_topics), float64
        The true theta of every document.
    labels : ndarray of shape (n_docs,), object (str) or None
        ``topic-<argmax theta>`` when the parameters ask for labels.
    """

    first_doc: int
    doc_ids: np.ndarray
    bags: dict[str, CsrArrays]
    doc_topic: FloatArray
    labels: np.ndarray | None

    @property
    def n_docs(self) -> int:
        return int(self.doc_topic.shape[0])


def _draw_words(
    rng: np.random.Generator, n_tokens: int, theta: FloatArray, topic_word_cdf: FloatArray
) -> tuple[np.ndarray, np.ndarray]:
    """One document's distinct term ids (ascending) and their counts."""
    per_topic = rng.multinomial(n_tokens, theta)
    words = []
    for k in np.flatnonzero(per_topic):
        cdf = topic_word_cdf[k]
        uniforms = rng.random(int(per_topic[k])) * cdf[-1]
        words.append(np.minimum(np.searchsorted(cdf, uniforms, side="right"), len(cdf) - 1))
    return np.unique(np.concatenate(words), return_counts=True)


def draw_shard(
    params: SynthParams, topic_word: Mapping[str, FloatArray], first_doc: int, n_docs: int
) -> SynthShard:
    """Draw documents ``first_doc .. first_doc + n_docs - 1`` of the corpus.

    Parameters
    ----------
    params : SynthParams
    topic_word : dict of str to ndarray of shape (n_topics, n_terms), float64
        The true topics of every language, from :func:`draw_topic_word`.
    first_doc, n_docs : int
        Global position of the first document, and how many to draw.

    Returns
    -------
    SynthShard

    Notes
    -----
    Each token's topic is drawn first (as a multinomial of the document's length over theta), then
    its word by inverse-CDF sampling of that topic's row, which costs O(n_tokens log n_terms) per
    document instead of O(n_terms). NumPy equivalent of one document and language::

        theta = rng.dirichlet(alpha)
        n = max(1, rng.poisson(doc_length))
        counts = rng.multinomial(n, theta @ topic_word)

    (equal in distribution, not draw for draw).

    Examples
    --------
    >>> p = SynthParams(n_docs=5, n_topics=2, n_terms=6, doc_length=10, doc_topic_prior=(0.5,),
    ...                 topic_word_prior=0.5)
    >>> shard = draw_shard(p, {"default": draw_topic_word(p, "default")}, first_doc=2, n_docs=3)
    >>> shard.n_docs, list(shard.doc_ids)
    (3, ['doc-00000002', 'doc-00000003', 'doc-00000004'])
    """
    alpha = np.asarray(params.doc_topic_prior, dtype=np.float64)
    cdfs = {lang: np.cumsum(topic_word[lang], axis=1) for lang in params.languages}
    doc_topic = np.empty((n_docs, params.n_topics), dtype=np.float64)
    terms: dict[str, list[np.ndarray]] = {lang: [] for lang in params.languages}
    counts: dict[str, list[np.ndarray]] = {lang: [] for lang in params.languages}
    for row in range(n_docs):
        rng = doc_generator(params.seed, STREAM_SYNTH, 0, first_doc + row)
        theta = rng.dirichlet(alpha)
        doc_topic[row] = theta
        for lang in params.languages:
            n_tokens = int(draw_doc_lengths(rng, params.doc_length))
            ids, cnt = _draw_words(rng, n_tokens, theta / theta.sum(), cdfs[lang])
            terms[lang].append(ids)
            counts[lang].append(cnt)
    bags = {lang: _to_csr(terms[lang], counts[lang]) for lang in params.languages}
    labels = None
    if params.labels:
        labels = np.array([f"topic-{k}" for k in doc_topic.argmax(axis=1)], dtype=object)
    doc_ids = np.array([doc_id_of(first_doc + row) for row in range(n_docs)], dtype=object)
    return SynthShard(first_doc, doc_ids, bags, doc_topic, labels)


def _to_csr(terms: list[np.ndarray], counts: list[np.ndarray]) -> CsrArrays:
    indptr = np.zeros(len(terms) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(t) for t in terms])
    if not terms:
        return indptr, np.zeros(0, np.int32), np.zeros(0, np.int32)
    return indptr, np.concatenate(terms).astype(np.int32), np.concatenate(counts).astype(np.int32)


@dataclass(frozen=True, slots=True)
class TermFrequencyStats:
    """Document and corpus frequency of every term, per language; a mergeable monoid.

    ``merge`` is associative and commutative and :meth:`zeros` is its identity, so frequencies of
    shards summed in any tree equal those of the whole corpus.

    Attributes
    ----------
    doc_freq : dict of str to ndarray of shape (n_terms,), int64
        Documents that contain the term.
    corpus_freq : dict of str to ndarray of shape (n_terms,), int64
        Occurrences of the term.
    """

    doc_freq: dict[str, IntArray]
    corpus_freq: dict[str, IntArray]

    @classmethod
    def zeros(cls, n_terms: Mapping[str, int]) -> TermFrequencyStats:
        return cls(
            {lang: np.zeros(n, np.int64) for lang, n in n_terms.items()},
            {lang: np.zeros(n, np.int64) for lang, n in n_terms.items()},
        )

    @classmethod
    def of_shard(cls, shard: SynthShard, n_terms: int) -> TermFrequencyStats:
        """Frequencies of one shard (term ids are distinct within a document)."""
        doc_freq, corpus_freq = {}, {}
        for lang, (_, term_ids, counts) in shard.bags.items():
            doc_freq[lang] = np.bincount(term_ids, minlength=n_terms).astype(np.int64)
            corpus_freq[lang] = np.bincount(term_ids, weights=counts, minlength=n_terms).astype(np.int64)
        return cls(doc_freq, corpus_freq)

    def merge(self, other: TermFrequencyStats) -> TermFrequencyStats:
        return TermFrequencyStats(
            {lang: self.doc_freq[lang] + other.doc_freq[lang] for lang in self.doc_freq},
            {lang: self.corpus_freq[lang] + other.corpus_freq[lang] for lang in self.corpus_freq},
        )
