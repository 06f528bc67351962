"""Nightly continuation of a variational model with the shards it has not seen."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Sequence

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


def _check_vb(model: SavedModel, corpus: Corpus, model_path: Path) -> dict[str, int]:
    """New terms per language; refuses a store whose vocabulary does not extend the model's."""
    config = VBConfig.from_dict(model.info.settings or {"n_topics": model.state.n_topics})
    return grown_state(model, corpus, config, model_path=str(model_path))[1]


def _continue_vb(model: SavedModel, corpus: Corpus, shards: Sequence[int], *, options: OnlineConfig | None,
                 client: Any, split_every: int | None, progress: ProgressReporter,
                 model_path: Path) -> Continuation:
    """Online VB over ``shards``, from the model's schedule position (its own settings by default)."""
    config = VBConfig.from_dict(model.info.settings or {"n_topics": model.state.n_topics})
    online = options
    if online is None:
        stored = (model.info.online or {}).get("config")
        online = OnlineConfig.from_dict(stored) if stored else OnlineConfig()
    updated, result, new_terms = continue_online(model, corpus, config, online, client=client, shards=shards,
                                                 split_every=split_every, progress=progress,
                                                 model_path=str(model_path))
    return Continuation(updated, sum(corpus.shards[i].n_docs for i in shards), new_terms, len(result.trace),
                        {"t": result.t, "docs_seen": result.docs_seen})


register_continuer("vb_lda", Continuer(check=_check_vb, run=_continue_vb))
