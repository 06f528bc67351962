"""Writing corpus stores: shards, vocabularies, manifests, debris removal.

Every writer here takes a local path or a URL on object storage (:mod:`topicflow.io.storage`): a
worker writes its shard straight into the target store wherever that is, local paths exactly as
before (zarr's LocalStore), URLs through zarr's FsspecStore.
"""
from __future__ import annotations

import asyncio
import copy
import functools
import json
import shutil
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
import zarr
import zarr.api.asynchronous as zarr_async
from numcodecs import VLenUTF8, Zstd
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync as zarr_sync

from topicflow.io import storage
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
from topicflow.io.storage import Location, is_url, zarr_store
from topicflow.models.common.vocabulary import Vocabulary


def write_shard(
    shard_dir: Location,
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
    shard_dir : Path or StoragePath
        The shard's directory (local, or a prefix on object storage); created here.
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
    arrays: dict[str, np.ndarray] = {"doc_ids": np.asarray(doc_ids, dtype=object)}
    if labels is not None:
        arrays["labels"] = np.asarray(labels, dtype=object)
    if timestamps is not None:
        arrays["timestamps"] = np.asarray(timestamps, dtype=np.int64)
    groups = []
    n_tokens = {}
    for lang, (indptr, term_ids, counts) in sorted(bags.items()):
        groups.append(lang)
        arrays[f"{lang}/indptr"] = np.asarray(indptr, dtype=np.int64)
        arrays[f"{lang}/term_ids"] = np.asarray(term_ids, dtype=np.int32)
        arrays[f"{lang}/counts"] = np.asarray(counts, dtype=np.int32)
        n_tokens[lang] = int(np.asarray(counts, dtype=np.int64).sum())
        if orders is not None:
            groups.append(f"{lang}/order")
            for name, data, dtype in zip(ORDER_ARRAYS, orders[lang], (np.int64, np.int32, object)):
                arrays[f"{lang}/order/{name}"] = np.asarray(data, dtype=dtype)
    _write_group(shard_dir, groups, arrays)
    return shard_checksum(bags, doc_ids, labels, timestamps, orders), n_tokens


@dataclass(frozen=True)
class _ArrayFormat:
    """How zarr writes a one-chunk array of one dtype, learned from zarr itself (see :func:`_array_format`)."""

    metadata: dict[str, Any]        #: the array's ``zarr.json``, its shape and chunk shape to be filled in
    string: bool                    #: variable-length UTF-8 strings, else little-endian integers

    def files(self, data: np.ndarray) -> dict[str, bytes]:
        """``zarr.json`` and, unless zarr would skip it, the chunk ``c/0`` of ``data`` (one chunk)."""
        metadata = copy.deepcopy(self.metadata)
        metadata["shape"] = [len(data)]
        metadata["chunk_grid"]["configuration"]["chunk_shape"] = [max(1, len(data))]
        out = {"zarr.json": _dump_metadata(metadata)}
        # zarr's write_empty_chunks=False: a chunk holding only the fill value is not written.
        if len(data) and not np.all(data == self.metadata["fill_value"]):
            out["c/0"] = _encode_chunk(data, self.string)
        return out


def _dump_metadata(metadata: Mapping[str, Any]) -> bytes:
    """``zarr.json`` bytes as zarr v3 serializes array metadata (``ArrayV3Metadata.to_buffer_dict``)."""
    return json.dumps(metadata, allow_nan=True, indent=zarr.config.get("json_indent")).encode()


def _encode_chunk(data: np.ndarray, string: bool) -> bytes:
    """The codec pipeline of :func:`topicflow.io._zarr._write_array`'s arrays: ``bytes``/``vlen-utf8``, ``zstd``."""
    raw = _VLEN_UTF8.encode(np.asarray(data, dtype=object)) if string else np.ascontiguousarray(
        data, dtype=data.dtype.newbyteorder("<")).tobytes()
    return bytes(_ZSTD.encode(raw))


_VLEN_UTF8 = VLenUTF8()
_ZSTD = Zstd(level=0, checksum=False)
#: A sample of each kind of array a shard holds, to learn zarr's files from.
_SAMPLES: dict[str, np.ndarray] = {
    "int64": np.array([0, 7, -3], np.int64),
    "int32": np.array([5, 0, 2**31 - 1], np.int32),
    "string": np.array(["a", "", "é\u20ac"], dtype=object),
}


@functools.lru_cache(maxsize=None)
def _array_format(kind: str) -> _ArrayFormat | None:
    """The files of a ``kind`` array as :func:`~topicflow.io._zarr._write_array` makes zarr write them.

    Learned once per process by letting zarr write a sample array into memory; None (write through
    zarr's API) unless re-serializing its metadata and encoding its chunk here give exactly zarr's
    bytes, so the store's files never depend on which path wrote them.
    """
    if kind not in _SAMPLES:
        return None
    sample = _SAMPLES[kind]
    store = zarr.storage.MemoryStore()
    _write_array(zarr.open_group(store, mode="w-"), "x", sample)
    files = {key: _stored_bytes(store, key) for key in ("x/zarr.json", "x/c/0")}
    metadata = json.loads(files["x/zarr.json"])
    found = _ArrayFormat(metadata, kind == "string")
    if found.files(sample) != {"zarr.json": files["x/zarr.json"], "c/0": files["x/c/0"]}:
        return None
    return found


@functools.lru_cache(maxsize=None)
def _group_metadata() -> bytes:
    """``zarr.json`` of an empty zarr v3 group without attributes (as ``create_group`` writes it)."""
    store = zarr.storage.MemoryStore()
    zarr.open_group(store, mode="w-").create_group("g")
    return _stored_bytes(store, "g/zarr.json")


def _stored_bytes(store: zarr.storage.MemoryStore, key: str) -> bytes:
    buffer = zarr_sync(store.get(key, default_buffer_prototype()))
    if buffer is None:
        raise KeyError(key)
    return buffer.to_bytes()


def _kind(data: np.ndarray) -> str:
    return "string" if data.dtype == object or data.dtype.kind in "UT" else data.dtype.name


def _write_group(directory: Location, groups: Sequence[str], arrays: Mapping[str, np.ndarray]) -> None:
    """A new zarr group at ``directory`` with subgroups ``groups`` and one-chunk ``arrays``.

    The files are those :func:`topicflow.io._zarr._write_array` writes array by array, byte for
    byte (checked by :func:`_array_format`), but encoded here and stored concurrently through the
    group's store: zarr v3's ``create_array`` costs about 5 ms of CPU per array (existence checks,
    metadata parsing, codec pipeline set-up), which for the small arrays of a shard was most of its
    write time. Arrays of a kind whose bytes cannot be reproduced go through zarr's API.
    """
    files = {f"{name}/zarr.json": _group_metadata() for name in groups}
    through_zarr = {}
    for path, data in arrays.items():
        found = _array_format(_kind(data))
        if found is None:
            through_zarr[path] = data
            continue
        files.update({f"{path}/{key}": value for key, value in found.files(data).items()})
    if is_url(directory) and storage.before_write is not None:  # the tests' failure injection, per object
        for key in sorted(files):
            storage.before_write(f"{directory}/{key}")
    zarr_sync(_store_group_async(zarr_store(directory), files, through_zarr))


async def _store_group_async(directory: Any, files: Mapping[str, bytes], arrays: Mapping[str, np.ndarray]) -> None:
    root = await zarr_async.open_group(directory, mode="w-")
    prototype = default_buffer_prototype()
    await asyncio.gather(*((root.store_path / key).set(prototype.buffer.from_bytes(value))
                           for key, value in files.items()))
    for path, data in arrays.items():
        parent, _, leaf = path.rpartition("/")
        await _write_array_async(await root.getitem(parent) if parent else root, leaf, data)


async def _write_array_async(group: Any, name: str, data: np.ndarray) -> None:
    """:func:`topicflow.io._zarr._write_array` on an asynchronous group."""
    chunks = (max(1, len(data)),)
    if _kind(data) == "string":
        array = await group.create_array(name, shape=data.shape, dtype=str, chunks=chunks)
        if len(data):
            await array.setitem(slice(None), np.asarray(data, dtype=object))
        return
    await group.create_array(name, data=data, chunks=chunks)


def write_vocabulary(directory: Location, vocab: Vocabulary) -> None:
    """Write a vocabulary's three arrays as a zarr group at ``directory`` (a path or URL)."""
    group = zarr.open_group(zarr_store(directory), mode="w")
    _write_array(group, "terms", np.asarray(vocab.terms, dtype=object))
    _write_array(group, "doc_freq", np.asarray(vocab.doc_freq, dtype=np.int64))
    _write_array(group, "corpus_freq", np.asarray(vocab.corpus_freq, dtype=np.int64))


def init_store(path: Location, *, format_version: int = BASE_FORMAT_VERSION) -> None:
    """Create the root zarr group and its fixed subgroups at ``path`` (a fresh directory, or an empty prefix).

    ``format_version`` is recorded in the root group's attributes (the manifest's is authoritative).
    """
    root = zarr.open_group(zarr_store(path), mode="w-")
    root.attrs["topicflow"] = {"kind": FORMAT_NAME, "format_version": format_version}
    for name in ("vocab", "shards", "candidates"):
        root.create_group(name)


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Commit point of every store change: atomically replace ``manifest.json``."""
    atomic_write_json(Path(path) / MANIFEST, manifest.to_dict())


def manifest_bytes(manifest: Manifest) -> bytes:
    """``manifest.json`` as :func:`write_manifest` writes it (indented, key-sorted JSON).

    Parameters
    ----------
    manifest : Manifest

    Returns
    -------
    bytes
        What a store on object storage gets as its commit object.
    """
    return (json.dumps(manifest.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def remove_unlisted_shards(path: Path, manifest: Manifest) -> list[str]:
    """Delete shard directories that the manifest does not list (left by an interrupted append).

    Also deletes the hidden ``.tokens-*`` files in which an append keeps each partition's tokens
    between its two stages (:mod:`topicflow.tasks.ingest`), when the append was killed before it
    could remove them.
    """
    listed = {s.shard_id for s in manifest.shards}
    removed = []
    for child in sorted((Path(path) / "shards").iterdir()):
        if child.is_dir() and child.name not in listed:
            shutil.rmtree(child)
            removed.append(child.name)
        elif child.is_file() and child.name.startswith(".tokens-"):
            child.unlink()
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
