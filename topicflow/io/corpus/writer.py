"""Writing corpus stores: shards, vocabularies, manifests, debris removal."""
from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import zarr

from topicflow.io._atomic import atomic_write_json
from topicflow.io._zarr import _write_array
from topicflow.io.corpus.layout import (
    BASE_FORMAT_VERSION,
    FORMAT_NAME,
    MANIFEST,
    ORDER_ARRAYS,
    CsrArrays,
    Manifest,
    OrderArrays,
    ShardInfo,
    shard_checksum,
)
from topicflow.models.common.vocabulary import Vocabulary


def write_shard(
    shard_dir: Path,
    bags: Mapping[str, CsrArrays],
    doc_ids: np.ndarray,
    *,
    labels: np.ndarray | None = None,
    timestamps: np.ndarray | None = None,
    orders: Mapping[str, OrderArrays] | None = None,
) -> tuple[str, dict[str, int]]:
    """Write one shard's arrays under ``shard_dir`` (which must not exist).

    Parameters
    ----------
    shard_dir : Path
        The shard's directory; created here.
    bags : mapping of str to tuple of ndarray
        ``(indptr, term_ids, counts)`` per language, written to ``<lang>/``.
    doc_ids : ndarray of shape (n_docs,), object (str)
    labels : ndarray of shape (n_docs,), object (str), optional
    timestamps : ndarray of shape (n_docs,), int64, optional
    orders : mapping of str to tuple of ndarray, optional
        ``(indptr, tokens, oov_terms)`` per language of ``bags`` (a store that keeps token order),
        written to ``<lang>/order/`` and covered by the checksum.

    Returns
    -------
    checksum : str
    n_tokens : dict of str to int
        Tokens per language (of the bags: in-vocabulary tokens).
    """
    group = zarr.open_group(str(shard_dir), mode="w-")
    _write_array(group, "doc_ids", np.asarray(doc_ids, dtype=object))
    if labels is not None:
        _write_array(group, "labels", np.asarray(labels, dtype=object))
    if timestamps is not None:
        _write_array(group, "timestamps", np.asarray(timestamps, dtype=np.int64))
    n_tokens = {}
    for lang, (indptr, term_ids, counts) in sorted(bags.items()):
        sub = group.create_group(lang)
        _write_array(sub, "indptr", np.asarray(indptr, dtype=np.int64))
        _write_array(sub, "term_ids", np.asarray(term_ids, dtype=np.int32))
        _write_array(sub, "counts", np.asarray(counts, dtype=np.int32))
        n_tokens[lang] = int(np.asarray(counts, dtype=np.int64).sum())
        if orders is not None:
            order = sub.create_group("order")
            for name, data, dtype in zip(ORDER_ARRAYS, orders[lang], (np.int64, np.int32, object)):
                _write_array(order, name, np.asarray(data, dtype=dtype))
    return shard_checksum(bags, doc_ids, labels, timestamps, orders), n_tokens


def write_vocabulary(directory: Path, vocab: Vocabulary) -> None:
    """Write a vocabulary's three arrays as a zarr group at ``directory``."""
    group = zarr.open_group(str(directory), mode="w")
    _write_array(group, "terms", np.asarray(vocab.terms, dtype=object))
    _write_array(group, "doc_freq", np.asarray(vocab.doc_freq, dtype=np.int64))
    _write_array(group, "corpus_freq", np.asarray(vocab.corpus_freq, dtype=np.int64))


def init_store(path: Path, *, format_version: int = BASE_FORMAT_VERSION) -> None:
    """Create the root zarr group and its fixed subgroups at ``path`` (a fresh directory).

    ``format_version`` is recorded in the root group's attributes (the manifest's is authoritative).
    """
    root = zarr.open_group(str(path), mode="w-")
    root.attrs["topicflow"] = {"kind": FORMAT_NAME, "format_version": format_version}
    for name in ("vocab", "shards", "candidates"):
        root.create_group(name)


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Commit point of every store change: atomically replace ``manifest.json``."""
    atomic_write_json(Path(path) / MANIFEST, manifest.to_dict())


def remove_unlisted_shards(path: Path, manifest: Manifest) -> list[str]:
    """Delete shard directories that the manifest does not list (left by an interrupted append)."""
    listed = {s.shard_id for s in manifest.shards}
    removed = []
    for child in sorted((Path(path) / "shards").iterdir()):
        if child.is_dir() and child.name not in listed:
            shutil.rmtree(child)
            removed.append(child.name)
    return removed


def remove_store_debris(path: Path, manifest: Manifest) -> list[str]:
    """Delete what an interrupted append may have left and ``manifest`` does not reference.

    That is: shard directories it does not list, and under ``candidates/`` and ``vocabs/`` hidden
    temporary directories and numbered ones newer than the current candidate set / vocabulary
    version (older candidate sets are kept: they are the store's history). Returns the removed
    paths, relative to the store.
    """
    path = Path(path)
    removed = [f"shards/{name}" for name in remove_unlisted_shards(path, manifest)]
    current_candidates = int(manifest.candidates) if manifest.candidates and manifest.candidates.isdigit() else 0
    for folder, current in (("candidates", current_candidates), ("vocabs", manifest.vocab_version)):
        directory = path / folder
        if not directory.is_dir():
            continue
        for child in sorted(directory.iterdir()):
            stale = child.name.startswith(".") or (child.name.isdigit() and int(child.name) > current)
            if child.is_dir() and stale and child.name != manifest.candidates:
                shutil.rmtree(child)
                removed.append(f"{folder}/{child.name}")
    return removed


def with_shards(manifest: Manifest, new: Sequence[ShardInfo], event: dict[str, Any]) -> Manifest:
    """The manifest after appending ``new`` shards (their ``first_doc`` is assigned here)."""
    first = manifest.n_docs
    placed = []
    for info in new:
        placed.append(replace(info, first_doc=first))
        first += info.n_docs
    return replace(manifest, shards=manifest.shards + tuple(placed), history=manifest.history + (event,))
