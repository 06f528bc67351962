"""Driver of the pyLDAvis export: what ``pyLDAvis.prepare`` needs, from any saved model and a corpus store.

Topic-term distributions are the model's (posterior mean); document topics come from the inference
path every model shares (fold-in with the topics held fixed, as ``topicflow infer``); document lengths
and term frequencies are counted from the store shard by shard, the term counts summed in a tree
(:mod:`topicflow.tasks.report`). Topics keep the model's order, so pass ``sort_topics=False`` to
``pyLDAvis.prepare`` (its default re-sorts them by size and renumbers them).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from topicflow import config as tf_config
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.store import SavedModel, load_model
from topicflow.io.outputs.pyldavis import write_pyldavis
from topicflow.pipeline.cluster import compute_list, current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb import fold_in_params, model_blocks, model_token, share
from topicflow.tasks.estep import graph_token
from topicflow.tasks.evaluate import map_fold_in
from topicflow.tasks.report import map_doc_lengths, term_frequencies


def pyldavis_data(model: SavedModel | str | Path, store: Corpus | str | Path, client: Any = None, *,
                  language: str | None = None, split_every: int | None = None,
                  progress: ProgressReporter = NO_PROGRESS) -> dict[str, Any]:
    """Return the arguments of ``pyLDAvis.prepare`` for a model and a corpus store.

    Parameters
    ----------
    model : SavedModel, str or Path
        A saved model (any family) or its directory (its current version).
    store : Corpus, str or Path
        The documents to visualize (usually the training store).
    client : distributed.Client, optional
        Where the per-shard work runs; default the current client, else threads.
    language : str, optional
        The language shown; required for a polylingual model (the document topics use every
        language the store shares with the model).
    split_every : int, optional
        Fan-in of the term-count tree (default ``topicflow.split-every``).
    progress : ProgressReporter, optional
        One item per shard.

    Returns
    -------
    dict
        ``topic_term_dists`` ((n_topics, n_terms) float64, rows sum to 1), ``doc_topic_dists``
        ((n_docs, n_topics) float64, rows sum to 1, store order), ``doc_lengths`` ((n_docs,) int64,
        tokens in the model's vocabulary), ``vocab`` (list of n_terms str) and ``term_frequency``
        ((n_terms,) int64, the store's token count of each model term; 0 for terms the store lacks).
        ``term_frequency.sum() == doc_lengths.sum()``. Pass it as
        ``pyLDAvis.prepare(**data, sort_topics=False)`` to keep the model's topic order.

    Raises
    ------
    InvalidParameterError
        A polylingual model without ``language``, or a language the model or store lacks.
    VocabularyMismatchError
        The store shares no language with the model.

    Examples
    --------
    >>> import pyLDAvis                                                       # doctest: +SKIP
    >>> data = pyldavis_data("model", "corpus.zarr")                          # doctest: +SKIP
    >>> vis = pyLDAvis.prepare(**data, sort_topics=False)                     # doctest: +SKIP
    """
    model = model if isinstance(model, SavedModel) else load_model(model)
    corpus = as_corpus(store)
    lang = shown_language(model, corpus, language)
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    token = graph_token(corpus.token(), model_token(model), "pyldavis", lang)
    blocks, maps = model_blocks(model, corpus, token=token)
    state = model.state
    topics = share(state.prepared_topics(list(maps)), client, name=f"topics-{token}")
    thetas = map_fold_in(blocks, topics, state.doc_topic_prior, fold_in_params(model), token=token)
    lengths = map_doc_lengths(blocks, lang, token=token)
    frequencies = term_frequencies(blocks, lang, split_every=split_every, token=token)
    n = len(blocks)
    results = compute_list([*thetas, *lengths, frequencies], client=client, progress=progress, desc="pyldavis",
                           unit="task")
    return {
        "topic_term_dists": state.topic_word()[lang],
        "doc_topic_dists": np.concatenate(results[:n], axis=0) if n else np.zeros((0, state.n_topics)),
        "doc_lengths": np.concatenate(results[n:2 * n]).astype(np.int64) if n else np.zeros(0, dtype=np.int64),
        "vocab": [str(t) for t in model.vocabularies[lang].terms],
        "term_frequency": np.asarray(results[-1], dtype=np.int64),
    }


def shown_language(model: SavedModel, corpus: Corpus, language: str | None) -> str:
    """Return the language a pyLDAvis export shows, checked against the model and the store.

    Parameters
    ----------
    model : SavedModel
        The model.
    corpus : Corpus
        The store.
    language : str or None
        The language asked for; None for a monolingual model.

    Returns
    -------
    str

    Raises
    ------
    InvalidParameterError
        None for a polylingual model, or a language the model or the store lacks.
    """
    languages = model.state.languages
    if language is None:
        if len(languages) > 1:
            raise InvalidParameterError(
                f"the model has languages {list(languages)}; pyLDAvis shows one vocabulary, so name the language "
                "to show (--language / language=)")
        language = languages[0]
    if language not in languages:
        raise InvalidParameterError(f"the model has no language {language!r}; it has {list(languages)}")
    if language not in corpus.languages:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} has no language {language!r}; it has {list(corpus.languages)}",
            path=str(corpus.path))
    return language


def export_pyldavis(model: SavedModel | str | Path, store: Corpus | str | Path, out: str | Path, *,
                    client: Any = None, language: str | None = None,
                    progress: ProgressReporter = NO_PROGRESS) -> dict[str, Any]:
    """Write :func:`pyldavis_data` to a JSON file (see :mod:`topicflow.io.outputs.pyldavis`).

    Parameters
    ----------
    model : SavedModel, str or Path
        As in :func:`pyldavis_data`.
    store : Corpus, str or Path
        As in :func:`pyldavis_data`.
    out : str or Path
        The ``.json`` file, written atomically.
    client : distributed.Client, optional
        As in :func:`pyldavis_data`.
    language : str, optional
        As in :func:`pyldavis_data`.
    progress : ProgressReporter, optional
        As in :func:`pyldavis_data`.

    Returns
    -------
    dict
        What was written (as :func:`pyldavis_data` returns it).
    """
    data = pyldavis_data(model, store, client, language=language, progress=progress)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_pyldavis(out, data)
    return data
