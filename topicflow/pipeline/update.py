"""Nightly incremental updates: continue a saved model with the shards it has not seen.

A model records every shard it has processed (id and checksum) and, for online models, where its
step-size schedule stands. :func:`update_model` takes the model's lock, loads its current version,
grows its vocabulary when the store's has grown (new topic columns from the prior), streams only the
unseen shards through online VB, and commits the result as a new version. The commit is one rename,
so a crashed update leaves the previous version current and rerunning it simply redoes the work.
"""
from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from topicflow.errors import InvalidParameterError, VocabularyMismatchError
from topicflow.io.model_store import SavedModel, load_model
from topicflow.io.model_versions import commit_version, model_lock, prune_versions
from topicflow.io.zarr_shards import Corpus
from topicflow.models.vocab_growth import check_vocabulary_prefix, grow_state
from topicflow.pipeline.fit import VBConfig
from topicflow.pipeline.online import OnlineConfig, OnlineResult, fit_online
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class UpdateResult:
    """What one update did."""

    version: int | None  #: the new version, or None when there was nothing to do
    new_shards: tuple[str, ...]
    new_docs: int
    new_terms: dict[str, int]
    minibatches: int
    seconds: float
    pruned: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def unseen_shards(model: SavedModel, corpus: Corpus) -> list[int]:
    """Store indices of the shards the model has not processed, in store order.

    Raises
    ------
    VocabularyMismatchError
        A shard the model processed has different content now (the store was rebuilt, or it is
        another store with the same shard ids).
    """
    seen = {entry["id"]: entry["checksum"] for entry in model.info.get("corpus", {}).get("shards", [])}
    new = []
    for index, shard in enumerate(corpus.shards):
        if shard.shard_id not in seen:
            new.append(index)
        elif seen[shard.shard_id] != shard.checksum:
            raise VocabularyMismatchError(
                f"shard {shard.shard_id} of store {str(corpus.path)!r} differs from the shard of that id the model "
                "was trained on: the store was rebuilt, or it is another store. Update the model only with the store "
                "it was fitted on (grown by `topicflow append`), or fit a new model on this store.",
                path=str(corpus.path),
            )
    return new


def schedule_position(model: SavedModel, online: OnlineConfig) -> tuple[int, int]:
    """(t, documents seen) of the model's step-size schedule.

    A batch-fitted model has seen its whole corpus; it continues as if that corpus had been streamed
    once in minibatches of ``online.batch_size``, so the first update does not overwrite it.
    """
    if "online" in model.info:
        return int(model.info["online"]["t"]), int(model.info["online"]["docs_seen"])
    n_docs = int(model.info.get("corpus", {}).get("n_docs", 0))
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
    state = grow_state(model.state, corpus.vocab_sizes(), base_prior=config.eta)
    return state, new_terms


def continue_online(
    model: SavedModel, corpus: Corpus, config: VBConfig, online: OnlineConfig, *, client: Any = None,
    shards: Sequence[int] | None = None, split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
    model_path: str = "the model",
) -> tuple[SavedModel, OnlineResult, dict[str, int]]:
    """Online VB over ``shards`` (default: the unseen ones), continuing ``model``.

    Returns the new model, the run's result and the number of new vocabulary terms per language.
    """
    from topicflow.pipeline.estimators import online_info

    state, new_terms = grown_state(model, corpus, config, model_path=model_path)
    shards = unseen_shards(model, corpus) if shards is None else list(shards)
    t, docs_seen = schedule_position(model, online)
    result = fit_online(corpus, config, online, state=state, t=t, docs_seen=docs_seen, shards=shards,
                        client=client, split_every=split_every, progress=progress)
    info = online_info(corpus, config, online, result, seen=model.info.get("corpus", {}).get("shards", []),
                       shards=shards)
    info["unknown_seed_words"] = model.info.get("unknown_seed_words", {})
    vocabularies = {lang: corpus.vocabulary(lang) for lang in result.state.languages}
    return SavedModel(result.state, vocabularies, info), result, new_terms


def update_sgs_model(model: SavedModel, model_path: Path, corpus: Corpus, *, client: Any, keep: int | None,
                     progress: ProgressReporter, started: float) -> UpdateResult:
    """Continue a streaming-Gibbs model (SGS/DSGS) with the documents after the ones it has seen."""
    from topicflow.pipeline.sgs_stream import continue_sgs_model

    shards = unseen_shards(model, corpus)  # also refuses a rebuilt or different store
    if not shards:
        log.info("model %s has seen every shard of %s; nothing to do", model_path, corpus.path)
        pruned = tuple(prune_versions(model_path, keep)) if keep else ()
        return UpdateResult(None, (), 0, {}, 0, time.perf_counter() - started, pruned)
    updated, new_docs, minibatches = continue_sgs_model(model, corpus, client=client, progress=progress)
    new_ids = tuple(corpus.shards[i].shard_id for i in shards)
    grown = len(corpus.vocabulary(corpus.languages[0])) - model.state.n_terms(model.state.languages[0])
    summary = {"store": str(corpus.path), "new_shards": list(new_ids), "new_docs": new_docs,
               "new_terms": {corpus.languages[0]: grown}, "minibatches": minibatches,
               "docs_seen": updated.info["sgs_state"]["docs_seen"]}
    version = commit_version(model_path, updated, kind="update", summary=summary)
    pruned = tuple(prune_versions(model_path, keep)) if keep else ()
    return UpdateResult(version, new_ids, new_docs, {corpus.languages[0]: grown}, minibatches,
                        time.perf_counter() - started, pruned)


def refuse_non_variational(model: SavedModel, model_path: Path) -> None:
    """Nightly updates continue variational models; a streaming sampler continues with its own state."""
    kind = model.info.get("kind", "vb_lda")
    if kind != "vb_lda":
        algorithm = model.info.get("algorithm", kind)
        raise InvalidParameterError(
            f"model {str(model_path)!r} was made by `topicflow stream --algo {algorithm}`, which `topicflow update` "
            "cannot continue; continue that stream with `topicflow stream STORE --out DIR --resume` instead",
            path=str(model_path),
        )


def update_model(
    model_path: Path, store: Path | Corpus, *, online: OnlineConfig | None = None, client: Any = None,
    keep: int | None = None, split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
) -> UpdateResult:
    """Process the shards of ``store`` that the model at ``model_path`` has not seen; commit a new version.

    Parameters
    ----------
    model_path : Path
        A saved model (any method); it is locked for the whole update.
    store : Path or Corpus
        The store the model was fitted on, grown since by ``topicflow append``.
    online : OnlineConfig, optional
        Minibatch size and step sizes; default: the model's own (or defaults for a batch model).
        ``total_docs`` defaults to the store's current size.
    keep : int, optional
        Afterwards, keep only the newest ``keep`` versions.

    Returns
    -------
    UpdateResult

    Raises
    ------
    LockedError
        Another update of this model is running.
    VocabularyMismatchError
        The store is not the one the model was fitted on (see :func:`unseen_shards`).
    """
    model_path = Path(model_path)
    corpus = store if isinstance(store, Corpus) else Corpus.open(store)
    started = time.perf_counter()
    with model_lock(model_path):
        model = load_model(model_path)
        if model.info.get("kind") == "stream" and model.info.get("algorithm") in ("sgs", "dsgs"):
            return update_sgs_model(model, model_path, corpus, client=client, keep=keep, progress=progress,
                                    started=started)
        refuse_non_variational(model, model_path)
        config = VBConfig.from_dict(model.info.get("settings", {"n_topics": model.state.n_topics}))
        if online is None:
            stored = model.info.get("online", {}).get("config")
            online = OnlineConfig.from_dict(stored) if stored else OnlineConfig()
        shards = unseen_shards(model, corpus)
        if not shards:
            _, new_terms = grown_state(model, corpus, config, model_path=str(model_path))  # still explain a mismatch
            log.info("model %s has seen every shard of %s; nothing to do", model_path, corpus.path)
            pruned = tuple(prune_versions(model_path, keep)) if keep else ()
            return UpdateResult(None, (), 0, new_terms, 0, time.perf_counter() - started, pruned)
        updated, result, new_terms = continue_online(model, corpus, config, online, client=client, shards=shards,
                                                     split_every=split_every, progress=progress,
                                                     model_path=str(model_path))
        new_ids = tuple(corpus.shards[i].shard_id for i in shards)
        summary: dict[str, Any] = {
            "store": str(corpus.path), "new_shards": list(new_ids), "new_docs": sum(corpus.shards[i].n_docs for i in shards),
            "new_terms": new_terms, "minibatches": len(result.trace), "t": result.t, "docs_seen": result.docs_seen,
        }
        version = commit_version(model_path, updated, kind="update", summary=summary)
        pruned = tuple(prune_versions(model_path, keep)) if keep else ()
    return UpdateResult(
        version, new_ids, int(summary["new_docs"]), new_terms, len(result.trace), time.perf_counter() - started, pruned,
    )
