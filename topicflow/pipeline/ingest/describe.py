"""A summary of a corpus store."""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, cast

import numpy as np
import zarr

from topicflow.io._atomic import (
    read_json,
)
from topicflow.io._zarr import group_array
from topicflow.io.corpus.layout import BASE_FORMAT_VERSION, MANIFEST
from topicflow.io.corpus.reader import Corpus
from topicflow.io.storage import zarr_store

# ----------------------------------------------------------------------------- info


def describe_store(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON-able summary of a store (what ``topicflow info`` shows); streams labels shard by shard."""
    corpus = Corpus.open(path)
    manifest = corpus.manifest
    labels: Counter[str] = Counter()
    if manifest.has_labels:
        for shard in corpus.shards:
            group = zarr.open_group(zarr_store(corpus.path / "shards" / shard.shard_id, read_only=True), mode="r")
            labels.update(str(v) for v in cast(np.ndarray, group_array(group, "labels")[:]))
    tokenizer = dict(manifest.tokenizer)
    tokenizer["stop_words"] = len(tokenizer.get("stop_words", ()))
    if "language_stop_words" in tokenizer:
        tokenizer["language_stop_words"] = {lang: {"name": entry["name"], "stop_words": len(entry["stop_words"])}
                                            for lang, entry in tokenizer["language_stop_words"].items()}
    return {
        "path": str(corpus.path),
        "format_version": int(read_json(corpus.path / MANIFEST).get("format_version", BASE_FORMAT_VERSION)),
        "created": manifest.created,
        "n_docs": len(corpus),
        "n_tokens": corpus.tokens_by_language(),
        "languages": list(corpus.languages),
        "vocab_sizes": corpus.vocab_sizes(),
        "vocab_version": corpus.vocab_version,
        "n_shards": corpus.n_shards,
        "shard_size": manifest.shard_size,
        "has_labels": manifest.has_labels,
        "labels": dict(sorted(labels.items())),
        "has_timestamps": manifest.has_timestamps,
        "has_order": manifest.has_order,
        "candidates": manifest.candidates,
        "n_candidates": {lang: len(corpus.candidates(lang)) for lang in corpus.languages},
        "tokenizer": tokenizer,
        "n_appends": sum(1 for e in manifest.history if e.get("action") == "append"),
    }
