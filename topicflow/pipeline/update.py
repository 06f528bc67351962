"""Nightly incremental updates: continue a saved model with the shards it has not seen.

A model records every shard it has processed (id and checksum) and, for online models, where its
step-size schedule stands. :func:`update_model` takes the model's lock, loads its current version,
grows its vocabulary when the store's has grown (new topic columns from the prior), streams only the
unseen shards through the continuer registered for the model's kind (online VB for variational models,
streaming VB for those it fitted, the stream itself for SGS and DSGS: see
:mod:`topicflow.pipeline.continuation`), and commits the result as a new version. The commit is one rename, so a crashed update leaves the previous version current and rerunning it simply redoes the work.

A model on object storage (s3://, memory://) is updated the same way: the lock is a lease object
renewed in the background, the new version is uploaded under its own prefix and the commit is a
conditional put of ``versions.json`` (:mod:`topicflow.io.models.versions`, docs/storage.md).
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import topicflow.pipeline.adaptor_grammar  # noqa: F401  (registers the "adaptor_grammar" continuation)
import topicflow.pipeline.collapsed  # (registers the "hdp" and "scvb0" continuations)
import topicflow.pipeline.infvoc_lda  # noqa: F401  (registers the "infvoc" continuation)
import topicflow.pipeline.streaming  # noqa: F401  (registers the "sgs" and "dsgs" continuations)
import topicflow.pipeline.tree_lda  # noqa: F401  (registers the "tree_lda" continuation)
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import unseen_shards
from topicflow.io.models.store import SavedModel, load_model
from topicflow.io.models.versions import commit_version, model_lock, prune_versions
from topicflow.io.storage import Location, as_location, url_of
from topicflow.pipeline.continuation import CONTINUERS, Continuer, continuation_key
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb import (  # (importing pipeline.vb registers "vb_lda" continuations)
    OnlineConfig,
    SVBConfig,
)

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


def continuer_for(model: SavedModel, model_path: Path) -> Continuer:
    """The registered continuer of ``model``; a model no continuer handles is refused with what to do.

    Parameters
    ----------
    model : SavedModel
        The model to continue.
    model_path : Path
        Where it is saved (for the message).

    Returns
    -------
    Continuer

    Raises
    ------
    InvalidParameterError
        A streamed model of an algorithm that continues with ``topicflow stream --resume`` instead, or
        a model imported from another library.
    """
    key = continuation_key(model.info)
    if model.info.kind == "imported":
        source = model.info.extra.get("source")
        library = str(source.get("library", "another library")) if isinstance(source, dict) else "another library"
        raise InvalidParameterError(
            f"model {str(model_path)!r} was imported from {library}, which `topicflow update` cannot continue; "
            f"continue it in {library} and import it again, or fit a topicflow model with `topicflow fit`",
            path=str(model_path),
        )
    if key not in CONTINUERS:
        raise InvalidParameterError(
            f"model {str(model_path)!r} was made by `topicflow stream --algo {key}`, which `topicflow update` "
            "cannot continue; continue that stream with `topicflow stream STORE --out DIR --resume` instead",
            path=str(model_path),
        )
    return CONTINUERS[key]


def update_model(
    model_path: Location | str, store: Path | str | Corpus, *, online: OnlineConfig | SVBConfig | None = None, client: Any = None,
    keep: int | None = None, split_every: int | None = None, progress: ProgressReporter = NO_PROGRESS,
) -> UpdateResult:
    """Process the shards of ``store`` that the model at ``model_path`` has not seen; commit a new version.

    Parameters
    ----------
    model_path : Path or URL
        A saved model (any method); it is locked for the whole update (on object storage: by a
        lease, docs/storage.md).
    store : Path, URL or Corpus
        The store the model was fitted on, grown since by ``topicflow append``.
    online : OnlineConfig or SVBConfig, optional
        Minibatch size and step sizes; default: the model's own (or defaults for a batch model).
        ``total_docs`` defaults to the store's current size. A streaming-VB (svb) model continues by
        streaming VB: only the minibatch settings apply (``passes`` must be 1, ``total_docs`` unset).
    keep : int, optional
        Afterwards, keep only the newest ``keep`` versions.

    Returns
    -------
    UpdateResult

    Raises
    ------
    LockedError
        Another update of this model is running (the message says who, and on object storage until when).
    UnsupportedStorageError
        The model is on an object store where topicflow cannot keep a lease (gs://, az://).
    VocabularyMismatchError
        The store is not the one the model was fitted on (see :func:`unseen_shards`).
    """
    url = url_of(model_path)
    model_path = as_location(url) if url is not None else Path(cast(Path, model_path))
    corpus = store if isinstance(store, Corpus) else Corpus.open(store)
    started = time.perf_counter()
    with model_lock(model_path):
        model = load_model(cast(Path, model_path))  # a Path or a StoragePath: load_model takes both
        # Continuers name the model in messages only; a StoragePath prints as its URL.
        continuer = continuer_for(model, cast(Path, model_path))
        shards = unseen_shards(model, corpus)  # also refuses a rebuilt or different store
        if not shards:
            new_terms = continuer.check(model, corpus, cast(Path, model_path))  # still explain a mismatch
            log.info("model %s has seen every shard of %s; nothing to do", model_path, corpus.path)
            pruned = tuple(prune_versions(model_path, keep)) if keep else ()
            return UpdateResult(None, (), 0, new_terms, 0, time.perf_counter() - started, pruned)
        done = continuer.run(model, corpus, shards, options=online, client=client, split_every=split_every,
                             progress=progress, model_path=cast(Path, model_path))
        new_ids = tuple(corpus.shards[i].shard_id for i in shards)
        summary: dict[str, Any] = {
            "store": str(corpus.path), "new_shards": list(new_ids), "new_docs": done.new_docs,
            "new_terms": done.new_terms, "minibatches": done.minibatches, **done.summary,
        }
        version = commit_version(model_path, done.model, kind="update", summary=summary)
        pruned = tuple(prune_versions(model_path, keep)) if keep else ()
    return UpdateResult(version, new_ids, done.new_docs, done.new_terms, done.minibatches,
                        time.perf_counter() - started, pruned)
