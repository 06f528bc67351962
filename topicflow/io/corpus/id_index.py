"""The store's index of document-id hashes: an append checks its ids without reading every shard.

Layout::

    STORE/id_index/<first>-<stop>/   hashes (uint64, sorted), shards (int32: manifest position of the
                                     shard holding each id), for the shards first .. stop-1

The manifest lists the segments (``Manifest.id_index``); like shards, a segment it does not list does
not exist. Segments cover consecutive shard ranges from shard 0; shards past the last one (a store
written before the index existed, or by a writer that does not keep it) are read directly and indexed
by the next append. Each append adds one segment for its own shards and then merges the newest two
while the newer holds at least half as many ids as the older, so a store keeps O(log n) segments and
an id is rewritten O(log n) times over the store's life: the cost of an append follows the new
documents, not the store.

A segment only says which shards hold a matching hash; those shards' ids are then read to name the
matching ids.
"""
from __future__ import annotations

import hashlib
import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from topicflow.errors import CorpusFormatError
from topicflow.io._atomic import fsync_directory
from topicflow.io._zarr import read_arrays, write_arrays
from topicflow.io.corpus.layout import Manifest, corrupt_shard
from topicflow.io.storage import Location, StoragePath, remove_prefix

INDEX_DIR = "id_index"


def hash_ids(doc_ids: Iterable[str]) -> np.ndarray:
    """64-bit blake2b hashes of document ids, shape (n_docs,), uint64 (equal ids, equal hashes)."""
    digest = b"".join(hashlib.blake2b(str(d).encode("utf-8"), digest_size=8).digest() for d in doc_ids)
    return np.frombuffer(digest, dtype="<u8").astype(np.uint64)


@dataclass(frozen=True, slots=True)
class Segment:
    """One listed segment: the ids of shards ``first`` .. ``stop - 1``."""

    first: int
    stop: int
    n_ids: int

    @property
    def name(self) -> str:
        return f"{self.first:06d}-{self.stop:06d}"

    def to_dict(self) -> dict[str, Any]:
        return {"first": self.first, "stop": self.stop, "n_ids": self.n_ids}

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> Segment:
        return cls(int(payload["first"]), int(payload["stop"]), int(payload["n_ids"]))


def listed_segments(manifest: Manifest) -> list[Segment]:
    """The manifest's segments that tile shards 0 .. k without a gap (the rest are ignored)."""
    segments, covered = [], 0
    for segment in sorted((Segment.from_dict(s) for s in manifest.id_index), key=lambda s: s.first):
        if segment.first != covered or segment.stop > len(manifest.shards):
            break
        segments.append(segment)
        covered = segment.stop
    return segments


def _covered(segments: Sequence[Segment]) -> int:
    return segments[-1].stop if segments else 0


def _read_segment(store: Location, segment: Segment) -> tuple[np.ndarray, np.ndarray]:
    try:
        arrays = read_arrays(store / INDEX_DIR / segment.name, ["hashes", "shards"])
    except CorpusFormatError as exc:
        raise CorpusFormatError(
            f"document-id index segment {segment.name} of {str(store)!r} is damaged: {exc}; re-ingest the store "
            "or restore it from a backup.",
            path=str(store),
        ) from exc
    if arrays["hashes"].shape != (segment.n_ids,) or arrays["shards"].shape != (segment.n_ids,):
        raise CorpusFormatError(
            f"document-id index segment {segment.name} of {str(store)!r} is damaged: it holds "
            f"{arrays['hashes'].shape} hashes and {arrays['shards'].shape} shard numbers but the manifest says "
            f"{segment.n_ids} ids; re-ingest the store or restore it from a backup.",
            path=str(store),
        )
    return arrays["hashes"], arrays["shards"]


def _shard_doc_ids(store: Location, manifest: Manifest, position: int) -> list[str]:
    shard = manifest.shards[position]
    try:
        doc_ids = read_arrays(store / "shards" / shard.shard_id, ["doc_ids"])["doc_ids"]
    except CorpusFormatError as exc:
        raise corrupt_shard(str(store), shard.shard_id, str(exc)) from exc
    if doc_ids.shape != (shard.n_docs,):
        raise corrupt_shard(str(store), shard.shard_id,
                            f"doc_ids holds {doc_ids.shape} entries but the manifest says {shard.n_docs} documents")
    return [str(d) for d in doc_ids]


def ids_in_store(store: Location, manifest: Manifest, hashes: np.ndarray) -> dict[str, str]:
    """Return the ids already in the store whose hash is in ``hashes`` (sorted uint64), with their shards.

    Reads the index segments, then only the shards with a candidate match and the shards no segment
    covers yet.
    """
    segments = listed_segments(manifest)
    candidates: set[int] = set(range(_covered(segments), len(manifest.shards)))
    for segment in segments:
        seg_hashes, seg_shards = _read_segment(store, segment)
        candidates.update(np.unique(seg_shards[np.isin(seg_hashes, hashes)]).tolist())
    found: dict[str, str] = {}
    for position in sorted(candidates):
        ids = _shard_doc_ids(store, manifest, position)
        for i in np.flatnonzero(np.isin(hash_ids(ids), hashes)):
            found[ids[i]] = manifest.shards[position].shard_id
    return found


def _write_segment(store: Location, segment: Segment, hashes: np.ndarray, shards: np.ndarray) -> None:
    """Write under a hidden name, then rename: a listed name only ever holds a whole segment.

    On object storage (no rename) the segment is written under its final name: no listed segment ever
    has that name (a new one ends past every listed one), and none exists to a reader before the
    manifest that lists it is written.
    """
    order = np.argsort(hashes, kind="stable")
    arrays: dict[str, np.ndarray] = {"hashes": hashes[order].astype(np.uint64),
                                     "shards": shards[order].astype(np.int32)}
    if isinstance(store, StoragePath):
        final_url = store / INDEX_DIR / segment.name
        remove_prefix(str(final_url))  # unlisted debris of an interrupted append
        write_arrays(final_url, arrays)
        return
    root = store / INDEX_DIR
    root.mkdir(exist_ok=True)
    hidden = root / f".{segment.name}-{uuid.uuid4().hex[:8]}"
    write_arrays(hidden, arrays)
    final = root / segment.name
    if final.exists():  # unlisted debris of an interrupted append
        shutil.rmtree(final)
    hidden.rename(final)
    fsync_directory(root)


def extend_index(
    store: Location, manifest: Manifest, known: Mapping[str, np.ndarray] | None = None
) -> tuple[dict[str, Any], ...]:
    """Index the shards of ``manifest`` that no segment covers; return the new ``id_index`` entry.

    Call before committing ``manifest``: the segments it writes exist only once a manifest lists
    them. Segments the result no longer lists are removed by :func:`remove_unlisted_segments`.

    ``known`` maps shard ids to the :func:`hash_ids` of their document ids (in shard order), e.g. as
    the writer of the shards computed them; those shards are not read. A hash array whose length is
    not the shard's ``n_docs`` is ignored and the shard is read.
    """
    known = known or {}

    def shard_hashes(position: int) -> np.ndarray:
        shard = manifest.shards[position]
        hashes = known.get(shard.shard_id)
        if hashes is not None and len(hashes) == shard.n_docs:
            return np.asarray(hashes, np.uint64)
        return hash_ids(_shard_doc_ids(store, manifest, position))

    segments = listed_segments(manifest)
    covered = _covered(segments)
    if covered < len(manifest.shards):
        positions = range(covered, len(manifest.shards))
        per_shard = [shard_hashes(p) for p in positions]
        hashes = np.concatenate(per_shard) if per_shard else np.zeros(0, np.uint64)
        shards = np.repeat(np.asarray(positions, np.int32), [len(h) for h in per_shard])
        segment = Segment(covered, len(manifest.shards), len(hashes))
        _write_segment(store, segment, hashes, shards)
        segments.append(segment)
    while len(segments) >= 2 and 2 * segments[-1].n_ids >= segments[-2].n_ids:
        older, newer = segments[-2], segments[-1]
        parts = [_read_segment(store, older), _read_segment(store, newer)]
        merged = Segment(older.first, newer.stop, older.n_ids + newer.n_ids)
        _write_segment(store, merged, np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]))
        segments[-2:] = [merged]
    return tuple(s.to_dict() for s in segments)


def remove_unlisted_segments(store: Location, manifest: Manifest) -> list[str]:
    """Delete segment directories ``manifest`` does not list (merged away, or left by a crash)."""
    root: Location = store / INDEX_DIR if isinstance(store, StoragePath) else Path(store) / INDEX_DIR
    if not root.is_dir():
        return []
    listed = {Segment.from_dict(s).name for s in manifest.id_index}
    removed = []
    children: list[Location] = sorted(root.iterdir(), key=str)
    for child in children:
        if child.name in listed or child.name == "zarr.json":
            continue
        if isinstance(child, StoragePath):
            remove_prefix(child.url)
        elif child.is_dir():
            shutil.rmtree(child)
        else:
            continue
        removed.append(f"{INDEX_DIR}/{child.name}")
    return removed
