"""Coherence of saved models against corpus stores: fills the registries of :mod:`topicflow.metrics.topic_coherence`.

:func:`topicflow.metrics.coherence` is pure math; it looks up here how to read a model's top words
(:data:`~topicflow.metrics.topic_coherence.TOPIC_SOURCES`: a model directory, a ``SavedModel``, or a
fitted estimator holding one in ``model_``) and how to count a corpus store
(:data:`~topicflow.metrics.topic_coherence.REFERENCE_COUNTERS`: one task per shard, tree-reduced, computed
on the given or current Dask client). Importing this module registers both; :func:`~topicflow.metrics.coherence` imports it on its first lookup.
"""
from __future__ import annotations

import logging
import os
from typing import Any

from topicflow import config as tf_config
from topicflow.errors import (
    InvalidParameterError,
    OrderNotKeptError,
    VocabularyMismatchError,
)
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel, load_model
from topicflow.metrics.cooccurrence import CooccurrenceCounts, RelevantWords
from topicflow.metrics.topic_coherence import (
    DEFAULT_TOP_N,
    CoherenceResult,
    CountRequest,
    ReferenceCounter,
    ReferenceCounts,
    TopicSource,
    TopicWords,
    coherence,
    register_reference_counter,
    register_topic_source,
)
from topicflow.metrics.topic_summary import top_terms
from topicflow.pipeline.cluster import compute
from topicflow.tasks.coherence import (
    map_document_counts,
    map_window_counts,
    reduce_counts,
)
from topicflow.tasks.estep import graph_token

log = logging.getLogger(__name__)


def top_words(model: SavedModel, top_n: int, language: str | None = None) -> TopicWords:
    """Each topic's ``top_n`` most probable words in one language, in the model's topic order.

    Parameters
    ----------
    model : SavedModel
    top_n : int
        Words per topic (all of them if the vocabulary is smaller).
    language : str, optional
        A language of the model; default its first.

    Returns
    -------
    TopicWords

    Raises
    ------
    InvalidParameterError
        The model has no such language.

    Notes
    -----
    Words are ranked by the posterior mean topic-word probabilities; ties go to the lower term id
    (gensim's ``argsort`` may break ties otherwise).
    """
    state = model.state
    lang = state.languages[0] if language is None else language
    if lang not in state.languages:
        raise InvalidParameterError(f"the model has languages {list(state.languages)}; there is no {language!r}.")
    topic_word = state.topic_word()[lang]
    vocabulary = model.vocabularies[lang]
    terms, _ = top_terms(topic_word, top_n)
    words = [tuple(vocabulary.term_of(int(w)) for w in row) for row in terms]
    names = tuple(state.topic_label(k) for k in range(state.n_topics))
    return TopicWords(words=tuple(words), names=names, language=lang)


def _saved_model(model: Any) -> SavedModel:
    if isinstance(model, SavedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    return model.model_  # a fitted estimator (checked by _is_model)


def _is_model(model: Any) -> bool:
    return isinstance(model, (SavedModel, str, os.PathLike)) or isinstance(getattr(model, "model_", None), SavedModel)


def _read_model(model: Any, top_n: int, language: str | None) -> TopicWords:
    return top_words(_saved_model(model), top_n, language)


register_topic_source(TopicSource("saved-model", _is_model, _read_model))


def store_language(corpus: Corpus, language: str | None) -> str:
    """The store language to count for the model language ``language``.

    Parameters
    ----------
    corpus : Corpus
    language : str or None
        The model's language (None for topics given as word lists).

    Returns
    -------
    str
        ``language`` if the store has it, else the store's only language.

    Raises
    ------
    VocabularyMismatchError
        A multilingual store without ``language``.
    """
    if language in corpus.languages:
        return str(language)
    if len(corpus.languages) == 1:
        return corpus.languages[0]
    raise VocabularyMismatchError(
        f"store {str(corpus.path)!r} has languages {list(corpus.languages)}; "
        + (f"none is the model's language {language!r}." if language else "name one with --language.")
    )


def count_store(corpus: Corpus, request: CountRequest, client: Any = None) -> ReferenceCounts:
    """Count the relevant words and pairs of ``request`` in a corpus store, one shard per task.

    Parameters
    ----------
    corpus : Corpus
        The reference store.
    request : CountRequest
        Words, pairs, measure, window.
    client : distributed.Client, optional
        Default the current client, else Dask's threaded scheduler.

    Returns
    -------
    ReferenceCounts

    Raises
    ------
    OrderNotKeptError
        A window measure on a store without the ordered-token layer.
    """
    lang = store_language(corpus, request.language)
    relevant = RelevantWords.in_vocabulary(request.words, corpus.vocabulary(lang).terms)
    split_every = request.split_every or int(tf_config.get("split-every", 8))
    measure = request.measure
    token = graph_token(corpus.token(), lang, request.words, measure.name, request.window, request.exact_windows)
    if measure.uses_windows:
        require_order(corpus, measure.name)
        parts = map_window_counts(corpus.to_delayed_ordered(lang), relevant, request.pairs,
                                  window=int(request.window or 0), exact=request.exact_windows, token=token)
    else:
        parts = map_document_counts(corpus.to_delayed(lang), relevant, request.pairs, token=token)
    if parts:
        (counts,) = compute(reduce_counts(parts, split_every=split_every, token=token), client=client)
    else:
        counts = CooccurrenceCounts.zeros(request.pairs.n_words, request.pairs.n_pairs)
    log.info("coherence: counted %d %s of %s (language %r)", counts.n_units,
             "windows" if measure.uses_windows else "documents", corpus.path, lang)
    return ReferenceCounts(counts=counts, known=relevant.known, reference=str(corpus.path), language=lang)


def require_order(corpus: Corpus, measure: str) -> None:
    """Raise :class:`OrderNotKeptError` unless ``corpus`` keeps each document's tokens in order.

    Parameters
    ----------
    corpus : Corpus
    measure : str
        The window measure asked for (named in the message).
    """
    if not corpus.has_order:
        raise OrderNotKeptError(
            f"{measure} counts sliding windows, which need each document's tokens in reading order, but "
            f"store {str(corpus.path)!r} was ingested without them. Re-ingest it with `topicflow ingest "
            "--keep-order`, or use --measure u_mass (document co-occurrence, which any store supports).",
            path=str(corpus.path),
        )


def _is_store(store: Any) -> bool:
    return isinstance(store, (Corpus, str, os.PathLike))


def _count_store(store: Any, request: CountRequest, client: Any) -> ReferenceCounts:
    corpus = store if isinstance(store, Corpus) else Corpus.open(store)
    return count_store(corpus, request, client)


register_reference_counter(ReferenceCounter("corpus-store", _is_store, _count_store))


def evaluate_coherence(
    model: Any, store: Any, *, measure: str = "c_v", top_n: int = DEFAULT_TOP_N, window: int | None = None,
    language: str | None = None, windows: str = "gensim", client: Any = None, split_every: int | None = None,
) -> CoherenceResult:
    """Coherence of ``model`` against the reference ``store``: :func:`topicflow.metrics.coherence`.

    The entry point of ``topicflow coherence`` and of reports; importing this module is what makes
    model directories and stores acceptable arguments.

    Parameters
    ----------
    model : str, os.PathLike, SavedModel, fitted estimator, or sequence of word lists
    store : str, os.PathLike, Corpus, or sequence of token lists
    measure : {"c_v", "u_mass", "c_uci", "c_npmi"}, default "c_v"
    top_n : int, default 10
    window : int, optional
    language : str, optional
    windows : {"gensim", "exact"}, default "gensim"
    client : distributed.Client, optional
    split_every : int, optional

    Returns
    -------
    CoherenceResult
    """
    return coherence(model, store, measure=measure, top_n=top_n, window=window, language=language,
                     windows=windows, client=client, split_every=split_every)
