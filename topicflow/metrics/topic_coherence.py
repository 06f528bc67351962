"""Topic coherence of a model against a reference corpus: the public function and its two registries.

:func:`coherence` runs gensim's pipeline (top words, segmentation, probability estimation,
confirmation, aggregation) with the math of :mod:`topicflow.metrics.confirmation` and the counts of
:mod:`topicflow.metrics.cooccurrence`. This layer is pure math and cannot open a model file or a
corpus store, nor run a Dask graph, so both ends are looked up in registries filled by the modules
that can:

* :data:`TOPIC_SOURCES` turn a ``model`` argument into each topic's top words. This module registers
  explicit topics (a sequence of word lists); :mod:`topicflow.pipeline.evaluation.coherence` registers
  saved models (a model directory, a ``SavedModel``, or a fitted estimator holding one in ``model_``).
* :data:`REFERENCE_COUNTERS` count the relevant words and pairs in a ``store`` argument. This module
  registers in-memory tokenized texts (a sequence of token lists, as gensim's ``texts``);
  :mod:`topicflow.pipeline.evaluation.coherence` registers corpus stores (a path or a ``Corpus``),
  counted one shard at a time on the Dask cluster and tree-reduced.

The first lookup imports the modules :data:`topicflow._registries.PROVIDERS` names for "coherence"
(this layer names them as strings, it does not import the pipeline), so the registries are full
whenever :func:`coherence` looks in them.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np

from topicflow._registries import load_providers
from topicflow._typing import CoherenceMeasure, WindowSets, choices
from topicflow.errors import InvalidParameterError
from topicflow.metrics.confirmation import (
    MEASURES,
    Measure,
    arithmetic_mean,
    topic_values,
)
from topicflow.metrics.cooccurrence import (
    CooccurrenceCounts,
    PairIndex,
    RelevantWords,
    count_documents,
    count_windows,
)
from topicflow.models.common.blocks import OrderedBlock

#: Default number of top words per topic.
DEFAULT_TOP_N = 10


@dataclass(frozen=True, slots=True)
class TopicWords:
    """Each topic's top words, in the model's topic order, most probable first.

    Attributes
    ----------
    words : tuple of tuple of str
    names : tuple of str
        One label per topic.
    language : str or None
        The model language the words are from (None when the topics were given as word lists).
    """

    words: tuple[tuple[str, ...], ...]
    names: tuple[str, ...]
    language: str | None = None


@dataclass(frozen=True, slots=True)
class TopicSource:
    """How one kind of ``model`` argument gives its topics' top words.

    Attributes
    ----------
    name : str
    accepts : callable
        ``accepts(model) -> bool``.
    read : callable
        ``read(model, top_n, language) -> TopicWords``; ``language`` None picks the model's first.
    """

    name: str
    accepts: Callable[[Any], bool]
    read: Callable[[Any, int, str | None], TopicWords]


@dataclass(frozen=True, slots=True)
class CountRequest:
    """What to count in a reference: the relevant words, their pairs and the probability estimation.

    Attributes
    ----------
    words : tuple of str
        The relevant words (union of the topics' top words); word r is number r.
    pairs : PairIndex
        Pairs of relevant words sharing a topic.
    measure : Measure
        Gives the probability estimation (boolean document or sliding window).
    window : int or None
        Window width for window measures.
    exact_windows : bool
        Exact window sets instead of gensim's incremental ones.
    language : str or None
        The model language; a reference resolves it to one of its own.
    split_every : int or None
        Fan-in of the reduction of per-part counts (None: the reference's default).
    """

    words: tuple[str, ...]
    pairs: PairIndex
    measure: Measure
    window: int | None
    exact_windows: bool
    language: str | None
    split_every: int | None = None


@dataclass(frozen=True, slots=True)
class ReferenceCounts:
    """A reference's answer to a :class:`CountRequest`.

    Attributes
    ----------
    counts : CooccurrenceCounts
    known : ndarray of shape (n_words,), bool
        Whether each relevant word is in the reference's vocabulary (gensim's dictionary).
    reference : str
        What was counted, for messages and reports (a store path, ``"texts"``).
    language : str or None
        The reference language counted.
    """

    counts: CooccurrenceCounts
    known: np.ndarray
    reference: str
    language: str | None = None


@dataclass(frozen=True, slots=True)
class ReferenceCounter:
    """How one kind of ``store`` argument is counted.

    Attributes
    ----------
    name : str
    accepts : callable
        ``accepts(store) -> bool``.
    count : callable
        ``count(store, request, client) -> ReferenceCounts``; raises a clear error when the store
        cannot give what the measure needs (e.g. no token order for a window measure).
    """

    name: str
    accepts: Callable[[Any], bool]
    count: Callable[[Any, CountRequest, Any], ReferenceCounts]


#: Kinds of ``model`` argument, in lookup order; filled by :func:`register_topic_source`.
TOPIC_SOURCES: dict[str, TopicSource] = {}
#: Kinds of ``store`` argument, in lookup order; filled by :func:`register_reference_counter`.
REFERENCE_COUNTERS: dict[str, ReferenceCounter] = {}


def register_topic_source(source: TopicSource) -> TopicSource:
    """Register a kind of ``model`` argument of :func:`coherence`.

    Parameters
    ----------
    source : TopicSource

    Returns
    -------
    TopicSource
        ``source`` itself.
    """
    TOPIC_SOURCES[source.name] = source
    return source


def register_reference_counter(counter: ReferenceCounter) -> ReferenceCounter:
    """Register a kind of ``store`` argument of :func:`coherence`.

    Parameters
    ----------
    counter : ReferenceCounter

    Returns
    -------
    ReferenceCounter
        ``counter`` itself.
    """
    REFERENCE_COUNTERS[counter.name] = counter
    return counter


@dataclass(frozen=True, slots=True)
class CoherenceResult:
    """Coherence of each topic and their mean.

    Attributes
    ----------
    measure : str
        ``u_mass``, ``c_uci``, ``c_npmi`` or ``c_v``.
    top_n : int
        Top words per topic asked for.
    window : int or None
        Sliding-window width (None for ``u_mass``).
    per_topic : tuple of float
        In the model's topic order; NaN where gensim gives NaN (e.g. a topic left with one word).
    mean : float
        Arithmetic mean of ``per_topic``.
    topics : tuple of tuple of str
        The words each value was computed from (top words found in the reference).
    missing : tuple of tuple of str
        Top words left out because the reference vocabulary lacks them (gensim drops them too).
    topic_names : tuple of str
    language : str or None
        Model language of the top words.
    reference : str
        The reference counted.
    n_units : int
        Documents (``u_mass``) or sliding windows counted: gensim's ``num_docs``.
    windows : str or None
        ``gensim`` or ``exact`` window sets (None for ``u_mass``).
    """

    measure: str
    top_n: int
    window: int | None
    per_topic: tuple[float, ...]
    mean: float
    topics: tuple[tuple[str, ...], ...]
    missing: tuple[tuple[str, ...], ...] = ()
    topic_names: tuple[str, ...] = ()
    language: str | None = None
    reference: str = ""
    n_units: int = 0
    windows: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form; NaN and infinite values become None (JSON has no NaN).

        Returns
        -------
        dict
            ``measure``, ``top_n``, ``window``, ``windows``, ``language``, ``reference``, ``n_units``,
            ``per_topic``, ``mean`` and ``topics`` (one entry per topic: index, name, words, missing
            words, coherence).
        """
        return {
            "measure": self.measure,
            "top_n": self.top_n,
            "window": self.window,
            "windows": self.windows,
            "language": self.language,
            "reference": self.reference,
            "n_units": self.n_units,
            "per_topic": [_json_float(v) for v in self.per_topic],
            "mean": _json_float(self.mean),
            "topics": [
                {"topic": k, "name": name, "words": list(words), "missing": list(missing),
                 "coherence": _json_float(value)}
                for k, (name, words, missing, value) in enumerate(
                    zip(self.topic_names, self.topics, self.missing, self.per_topic))
            ],
        }


def _json_float(value: float) -> float | None:
    return float(value) if math.isfinite(value) else None


# ----------------------------------------------------------------------------- built-in kinds


def _is_word_lists(model: Any) -> bool:
    if isinstance(model, (str, bytes, os.PathLike)) or not isinstance(model, Sequence) or not model:
        return False
    return all(not isinstance(t, (str, bytes)) and isinstance(t, Sequence) and all(isinstance(w, str) for w in t)
               for t in model)


def _read_word_lists(model: Sequence[Sequence[str]], top_n: int, language: str | None) -> TopicWords:
    words = tuple(tuple(topic[:top_n]) for topic in model)
    return TopicWords(words=words, names=tuple(f"topic-{k}" for k in range(len(words))), language=language)


register_topic_source(TopicSource("word-lists", _is_word_lists, _read_word_lists))


def _is_texts(store: Any) -> bool:
    return (isinstance(store, Sequence) and not isinstance(store, (str, bytes)) and all(
        isinstance(text, Sequence) and not isinstance(text, (str, bytes)) for text in store))


def texts_block(texts: Sequence[Sequence[str]], vocabulary: Sequence[str] | None = None) -> tuple[OrderedBlock, list[str]]:
    """Tokenized texts as one :class:`OrderedBlock` over their own vocabulary (first-seen order).

    Parameters
    ----------
    texts : sequence of sequences of str
        The texts, as gensim's ``texts``.
    vocabulary : sequence of str, optional
        The reference vocabulary (gensim's dictionary); tokens outside it become out-of-vocabulary
        codes. Default: every token of ``texts``.

    Returns
    -------
    block : OrderedBlock
    terms : list of str
        The vocabulary, term id = position.
    """
    terms = list(dict.fromkeys(vocabulary if vocabulary is not None else (w for text in texts for w in text)))
    ids = {w: i for i, w in enumerate(terms)}
    oov: dict[str, int] = {}
    codes = []
    for text in texts:
        for w in text:
            i = ids.get(w)
            codes.append(i if i is not None else -(oov.setdefault(w, len(oov)) + 1))
    indptr = np.zeros(len(texts) + 1, dtype=np.int64)
    indptr[1:] = np.cumsum([len(t) for t in texts])
    block = OrderedBlock(indptr=indptr, tokens=np.asarray(codes, dtype=np.int32).reshape(-1),
                         oov_terms=np.array(list(oov), dtype=object), doc_ids=np.arange(len(texts)).astype(str).astype(object),
                         first_doc=0, n_terms=len(terms))
    return block, terms


def _count_texts(texts: Sequence[Sequence[str]], request: CountRequest, client: Any) -> ReferenceCounts:
    block, terms = texts_block(texts)
    relevant = RelevantWords.in_vocabulary(request.words, terms)
    if request.measure.uses_windows:
        counts = count_windows(block, relevant, request.pairs, window=int(request.window or 0),
                               exact=request.exact_windows)
    else:
        counts = count_documents(block, relevant, request.pairs)
    return ReferenceCounts(counts=counts, known=relevant.known, reference="texts", language=request.language)


register_reference_counter(ReferenceCounter("texts", _is_texts, _count_texts))


# ----------------------------------------------------------------------------- the public function


def resolve_measure(measure: str, window: int | None) -> tuple[Measure, int | None]:
    """The measure named ``measure`` and its window (gensim's default when ``window`` is None).

    Parameters
    ----------
    measure : str
    window : int or None

    Returns
    -------
    measure : Measure
    window : int or None
        None for document measures.

    Raises
    ------
    InvalidParameterError
        Unknown measure, a window for ``u_mass``, or a window that is not a positive integer.
    """
    if measure not in MEASURES:
        raise InvalidParameterError(f"unknown coherence measure {measure!r}; choose one of {list(choices(CoherenceMeasure))}.")
    found = MEASURES[measure]
    if not found.uses_windows:
        if window is not None:
            raise InvalidParameterError(f"{measure} counts documents, not sliding windows: leave out the window "
                                        f"(got {window!r}).")
        return found, None
    if window is None:
        return found, found.default_window
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 1:
        raise InvalidParameterError(f"the sliding window must be a positive number of tokens, got {window!r}.")
    return found, int(window)


def _lookup(registry: dict[str, Any], value: Any, what: str, expected: str) -> Any:
    load_providers("coherence")  # saved models and corpus stores, registered by the pipeline
    for entry in registry.values():
        if entry.accepts(value):
            return entry
    raise InvalidParameterError(
        f"cannot use a {type(value).__name__} as the {what} of coherence; expected {expected} "
        f"(known kinds: {list(registry)})."
    )


def coherence(
    model: Any,
    store: Any,
    *,
    measure: str = "c_v",
    top_n: int = DEFAULT_TOP_N,
    window: int | None = None,
    language: str | None = None,
    windows: str = "gensim",
    client: Any = None,
    split_every: int | None = None,
) -> CoherenceResult:
    """Topic coherence of ``model``'s top words against the reference ``store``, as gensim defines it.

    Parameters
    ----------
    model : str, os.PathLike, SavedModel, fitted LDA or StreamingLDA, or sequence of word lists
        The topics: a model directory, a loaded model, a fitted estimator, or each topic's words
        (most probable first).
    store : str, os.PathLike, Corpus, or sequence of token lists
        The reference corpus: any corpus store (the training one, a held-out one, an external one;
        its vocabulary may differ from the model's: words are matched by their strings), or
        tokenized texts in memory.
    measure : {"c_v", "u_mass", "c_uci", "c_npmi"}, default "c_v"
        gensim's default is ``c_v``. Window measures need a store ingested with ``--keep-order``.
    top_n : int, default 10
        Top words per topic.
    window : int, optional
        Sliding-window width; default 10 for ``c_uci`` and ``c_npmi``, 110 for ``c_v`` (gensim's).
        Not allowed for ``u_mass``.
    language : str, optional
        Language of a multilingual model (default its first); the reference's language of the same
        name is counted, or its only language.
    windows : {"gensim", "exact"}, default "gensim"
        Which words a sliding window holds: gensim's incremental set (what gensim computes) or the
        exact set (the papers' definition); see docs/evaluation.md.
    client : distributed.Client, optional
        Where a store is counted; default the current client, else Dask's threaded scheduler.
    split_every : int, optional
        Fan-in of the tree reduction of the per-shard counts.

    Returns
    -------
    CoherenceResult
        ``measure``, ``top_n``, ``window``, ``per_topic`` (model topic order), ``mean``, the words
        used and the words missing from the reference.

    Raises
    ------
    InvalidParameterError
        Unknown measure or kind of argument, bad ``top_n``, ``window`` or ``windows``, duplicate
        words in a topic, or a topic none of whose words is in the reference vocabulary.
    OrderNotKeptError
        A window measure on a store ingested without ``--keep-order``.

    Examples
    --------
    >>> texts = [["apple", "pear", "fig"], ["apple", "pear"], ["fig", "plum"]]
    >>> result = coherence([["apple", "pear"], ["fig", "plum"]], texts, measure="u_mass")
    >>> [round(v, 4) for v in result.per_topic]
    [0.0, -0.6931]
    """
    found, window = resolve_measure(measure, window)
    if isinstance(top_n, bool) or not isinstance(top_n, (int, np.integer)) or top_n < 1:
        raise InvalidParameterError(f"top_n must be a positive integer, got {top_n!r}.")
    if windows not in choices(WindowSets):
        raise InvalidParameterError(f"windows must be one of {list(choices(WindowSets))}, got {windows!r}.")
    source = _lookup(TOPIC_SOURCES, model, "model",
                     "a model directory, a SavedModel, a fitted topicflow estimator or a list of word lists")
    counter = _lookup(REFERENCE_COUNTERS, store, "reference",
                      "a corpus store path, a topicflow.Corpus or a list of token lists")
    topics: TopicWords = source.read(model, int(top_n), language)
    if not topics.words:
        raise InvalidParameterError("coherence needs at least one topic.")
    for k, words in enumerate(topics.words):
        if len(set(words)) != len(words):
            raise InvalidParameterError(f"topic {k} ({topics.names[k]}) lists a word twice: {list(words)}.")
    relevant = tuple(dict.fromkeys(w for words in topics.words for w in words))
    number = {w: r for r, w in enumerate(relevant)}
    ids = [np.array([number[w] for w in words], dtype=np.int64) for words in topics.words]
    pairs = PairIndex.from_topics(ids, len(relevant))
    request = CountRequest(words=relevant, pairs=pairs, measure=found, window=window,
                           exact_windows=windows == "exact", language=topics.language, split_every=split_every)
    counted: ReferenceCounts = counter.count(store, request, client)
    kept = [t[counted.known[t]] for t in ids]
    for k, t in enumerate(kept):
        if t.size == 0:
            raise InvalidParameterError(
                f"none of the top words of topic {k} ({topics.names[k]}: {list(topics.words[k])}) is in the "
                f"vocabulary of the reference {counted.reference}; coherence is undefined for it (gensim raises "
                "too). Use a reference that shares the model's vocabulary."
            )
    counts = counted.counts
    per_topic = topic_values(found, kept, lambda t: counts.topic_matrix(t, pairs), counts.n_units)
    return CoherenceResult(
        measure=found.name, top_n=int(top_n), window=window, per_topic=tuple(per_topic),
        mean=arithmetic_mean(per_topic),
        topics=tuple(tuple(relevant[r] for r in t) for t in kept),
        missing=tuple(tuple(relevant[r] for r in t if not counted.known[r]) for t in ids),
        topic_names=topics.names, language=topics.language, reference=counted.reference,
        n_units=counts.n_units, windows=windows if found.uses_windows else None,
    )
