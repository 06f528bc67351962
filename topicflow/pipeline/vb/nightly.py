"""Nightly continuation of a variational model with the shards it has not seen.

Online VB continues batch and online models from their step-size schedule; a streaming-VB (svb) model
continues by streaming VB, adding the new documents' statistics to its posterior.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable, Sequence

from topicflow.errors import VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import unseen_shards
from topicflow.io.models.store import SavedModel
from topicflow.models.lda.vocab_growth import check_vocabulary_prefix, grow_state
from topicflow.pipeline.continuation import Continuation, Continuer, register_continuer
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb.batch import VBConfig
from topicflow.pipeline.vb.online import (
    OnlineConfig,
    OnlineResult,
    fit_online,
    online_info,
)
from topicflow.pipeline.vb.svb import SVBConfig, SVBResult, fit_svb, svb_info


def schedule_position(model: SavedModel, online: OnlineConfig) -> tuple[int, int]:
    """(t, documents seen) of the model's step-size schedule.

    A batch-fitted model has seen its whole corpus; it continues as if that corpus had been streamed
    once in minibatches of ``online.batch_size``, so the first update does not overwrite it.
    """
    if model.info.online is not None:
        return int(model.info.online["t"]), int(model.info.online["docs_seen"])
    n_docs = int(model.info.corpus.get("n_docs", 0))
    return math.ceil(n_docs / online.batch_size), n_docs


def grown_state(model: SavedModel, corpus: Corpus, config: VBConfig, *, model_path: str = "the model") -> tuple[Any, dict[str, int]]:
    """The model's state with its vocabulary extended to the store's; new terms per language."""
    new_terms = {}
    for lang in model.state.languages:
        if lang not in corpus.languages:
            raise VocabularyMismatchError(
                f"the model has language {lang!r} but store {str(corpus.path)!r} has {list(corpus.languages)}; "
                "update a model only with the store it was fitted on.",
                path=str(corpus.path),
            )
        new_terms[lang] = check_vocabulary_prefix(
            model.vocabularies[lang].terms, corpus.vocabulary(lang).terms, language=lang,
            model_path=model_path, store_path=str(corpus.path),
        )
    state = grow_state(model.state, corpus.vocab_sizes(), base_prior=config.topic_word_prior)
    return state, new_terms


def continue_online(
    model: SavedModel, corpus: Corpus, config: VBConfig, online: OnlineConfig, *, client: Any = None,
    shards: Sequence[int] | None = None, split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
    model_path: str = "the model",
) -> tuple[SavedModel, OnlineResult, dict[str, int]]:
    """Online VB over ``shards`` (default: the unseen ones), continuing ``model``.

    Returns the new model, the run's result and the number of new vocabulary terms per language.
    """
    state, new_terms = grown_state(model, corpus, config, model_path=model_path)
    shards = unseen_shards(model, corpus) if shards is None else list(shards)
    t, docs_seen = schedule_position(model, online)
    result = fit_online(corpus, config, online, state=state, t=t, docs_seen=docs_seen, shards=shards,
                        client=client, split_every=split_every, progress=progress)
    info = online_info(corpus, config, online, result, seen=model.info.corpus.get("shards", []),
                       shards=shards)
    info = info.with_changes(unknown_seed_words=model.info.unknown_seed_words)
    vocabularies = {lang: corpus.vocabulary(lang) for lang in result.state.languages}
    return SavedModel(result.state, vocabularies, info), result, new_terms


def svb_position(model: SavedModel) -> tuple[int, int, int]:
    """(minibatches, documents, local iterations) a streaming-VB model has absorbed.

    Parameters
    ----------
    model : SavedModel
        A model saved with ``method="svb"``.

    Returns
    -------
    tuple of int
    """
    position = model.info.online or {}
    return int(position.get("t", 0)), int(position.get("docs_seen", 0)), int(position.get("iterations", 0))


def continue_svb(
    model: SavedModel, corpus: Corpus, config: VBConfig, svb: SVBConfig, *, client: Any = None,
    shards: Sequence[int] | None = None, split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
    model_path: str = "the model",
) -> tuple[SavedModel, SVBResult, dict[str, int]]:
    """Streaming VB over ``shards`` (default: the unseen ones), continuing ``model``: their statistics join its lambda.

    Parameters
    ----------
    model : SavedModel
        A streaming-VB model (its lambda is the posterior of everything it has seen).
    corpus : Corpus
        Its store, grown since.
    config : VBConfig
        The model's hyperparameters.
    svb : SVBConfig
        Minibatch settings.
    client : distributed.Client, optional
        Cluster to run on.
    shards : sequence of int, optional
        Store indices to stream (default: the shards the model has not seen).
    split_every : int, optional
        Fan-in of the statistics merge.
    progress : ProgressReporter, optional
        Receives per-minibatch progress.
    model_path : str, default "the model"
        How messages name the model.

    Returns
    -------
    model : SavedModel
    result : SVBResult
    new_terms : dict of str to int
        New vocabulary terms per language (their columns start at the prior eta: no data seen yet).
    """
    state, new_terms = grown_state(model, corpus, config, model_path=model_path)
    shards = unseen_shards(model, corpus) if shards is None else list(shards)
    t, docs_seen, iterations = svb_position(model)
    result = fit_svb(corpus, config, svb, state=state, t=t, docs_seen=docs_seen, iterations=iterations,
                     shards=shards, client=client, split_every=split_every, progress=progress)
    info = svb_info(corpus, config, svb, result, seen=model.info.corpus.get("shards", []), shards=shards)
    info = info.with_changes(unknown_seed_words=model.info.unknown_seed_words)
    vocabularies = {lang: corpus.vocabulary(lang) for lang in result.state.languages}
    return SavedModel(result.state, vocabularies, info), result, new_terms


def _check_vb(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    """New terms per language; refuses a store whose vocabulary does not extend the model's."""
    config = VBConfig.from_dict(model.info.settings or {"n_topics": model.state.n_topics})
    return grown_state(model, corpus, config, model_path=str(model_path))[1]


def _continue_vb(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, options: OnlineConfig | None,
                 client: Any, split_every: int | None, progress: ProgressReporter,
                 model_path: Path) -> Continuation:
    """Online VB over ``shards``, from the model's schedule position (its own settings by default).

    A streaming-VB model continues by streaming VB instead (:func:`_continue_svb`).
    """
    config = VBConfig.from_dict(model.info.settings or {"n_topics": model.state.n_topics})
    if model.info.method in _BY_METHOD:
        return _BY_METHOD[model.info.method](model, corpus, shards, config=config, options=options, client=client,
                                            split_every=split_every, progress=progress, model_path=model_path)
    online = options
    if online is None:
        stored = (model.info.online or {}).get("config")
        online = OnlineConfig.from_dict(stored) if stored else OnlineConfig()
    updated, result, new_terms = continue_online(model, corpus, config, online, client=client, shards=shards,
                                                 split_every=split_every, progress=progress,
                                                 model_path=str(model_path))
    return Continuation(updated, sum(corpus.shards[i].n_docs for i in shards), new_terms, len(result.trace),
                        {"t": result.t, "docs_seen": result.docs_seen})


def _continue_svb(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, config: VBConfig,
                  options: OnlineConfig | SVBConfig | None, client: Any, split_every: int | None,
                  progress: ProgressReporter, model_path: Path) -> Continuation:
    """Streaming VB over ``shards`` from the model's posterior (its own minibatch settings by default)."""
    if isinstance(options, SVBConfig):
        svb = options
    elif options is not None:
        svb = SVBConfig.from_online(options)  # `topicflow update` passes an OnlineConfig to every continuer
    else:
        svb = SVBConfig.from_dict((model.info.online or {}).get("config") or {})
    updated, result, new_terms = continue_svb(model, corpus, config, svb, client=client, shards=shards,
                                              split_every=split_every, progress=progress, model_path=str(model_path))
    return Continuation(updated, sum(corpus.shards[i].n_docs for i in shards), new_terms, len(result.trace),
                        {"t": result.t, "docs_seen": result.docs_seen, "iterations": result.iterations})


#: Variational methods that continue by their own rule rather than by online VB.
_BY_METHOD: dict[str, Callable[..., Continuation]] = {"svb": _continue_svb}

register_continuer("vb_lda", Continuer(check=_check_vb, run=_continue_vb))
