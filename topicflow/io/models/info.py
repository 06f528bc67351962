"""What a saved model records about the data it has seen: corpus provenance, and the shards still unseen."""
from __future__ import annotations

from typing import Any, Sequence

from topicflow.errors import VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel


def corpus_provenance(corpus: Corpus, shards: Sequence[int], seen: Sequence[dict[str, str]] = ()) -> dict[str, Any]:
    """What a model records about its training data: the store and every shard it has processed."""
    processed = list(seen) + [{"id": corpus.shards[i].shard_id, "checksum": corpus.shards[i].checksum} for i in shards]
    return {
        "path": str(corpus.path), "n_docs": len(corpus), "n_tokens": corpus.n_tokens,
        "vocab_version": getattr(corpus, "vocab_version", 1), "shards": processed,
    }


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
