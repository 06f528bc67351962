"""The document-id hash index: same answers as reading every shard, and appends read only new shards."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow import Corpus
from topicflow.errors import InputError
from topicflow.io.corpus import id_index
from topicflow.io.corpus.id_index import extend_index, hash_ids, ids_in_store, listed_segments
from topicflow.io.corpus.reader import read_manifest
from topicflow.io.corpus.writer import write_manifest
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus


def write_jsonl(path: Path, ids: list[str]) -> Path:
    path.write_text("".join(f'{{"id": "{i}", "text": "alpha beta gamma {i}"}}\n' for i in ids))
    return path


def every_stored_id(store: Path) -> dict[str, str]:
    """Brute force: every id with its shard, reading every shard."""
    corpus = Corpus.open(store)
    found = {}
    for index, shard in enumerate(corpus.shards):
        for doc_id in corpus.read_block(index).doc_ids:
            found[str(doc_id)] = shard.shard_id
    return found


def matching(store: Path, ids: list[str]) -> dict[str, str]:
    return {i: s for i, s in every_stored_id(store).items() if i in set(ids)}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    ingest_corpus([write_jsonl(tmp_path / "base.jsonl", [f"b{i}" for i in range(40)])], tmp_path / "s.zarr",
                  shard_size=8)
    return tmp_path / "s.zarr"


def test_ingest_indexes_every_shard_and_lookup_matches_brute_force(store: Path) -> None:
    manifest = read_manifest(store)
    assert [(s.first, s.stop) for s in listed_segments(manifest)] == [(0, 5)]
    # The segment, built from the hashes the write tasks returned, equals hashing every stored id read back.
    hashes, shards = id_index._read_segment(store, listed_segments(manifest)[0])
    stored = every_stored_id(store)
    positions = {s.shard_id: i for i, s in enumerate(manifest.shards)}
    expected = sorted(zip(hash_ids(list(stored)).tolist(), (positions[s] for s in stored.values())))
    assert list(zip(hashes.tolist(), shards.tolist())) == expected
    assert extend_index(store, replace(manifest, id_index=())) == manifest.id_index  # read back: the same
    query = ["b3", "b17", "b39", "nope", "b0"]
    assert ids_in_store(store, manifest, np.unique(hash_ids(query))) == matching(store, query)
    assert ids_in_store(store, manifest, np.zeros(0, np.uint64)) == {}


def test_appends_keep_few_segments_and_the_same_answers(store: Path, tmp_path: Path) -> None:
    for day in range(12):
        append_corpus(store, [write_jsonl(tmp_path / f"d{day}.jsonl", [f"d{day}-{i}" for i in range(6)])])
    manifest = read_manifest(store)
    segments = listed_segments(manifest)
    assert [s.first for s in segments][0] == 0 and segments[-1].stop == len(manifest.shards)
    assert all(a.stop == b.first for a, b in zip(segments, segments[1:]))
    assert sum(s.n_ids for s in segments) == manifest.n_docs
    assert len(segments) <= math.log2(manifest.n_docs / 6) + 2
    # Only listed segments are left on disk.
    assert sorted(p.name for p in (store / "id_index").iterdir()) == sorted(s.name for s in segments)
    query = ["b5", "d0-0", "d7-5", "d11-3", "x"]
    assert ids_in_store(store, manifest, np.unique(hash_ids(query))) == matching(store, query)


def test_append_reads_only_new_shards_and_shards_with_a_match(store: Path, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    read: list[int] = []
    original = id_index._shard_doc_ids

    def counting(store_path: Path, manifest: Any, position: int) -> list[str]:
        read.append(position)
        return original(store_path, manifest, position)

    monkeypatch.setattr(id_index, "_shard_doc_ids", counting)
    n_old = len(read_manifest(store).shards)
    append_corpus(store, [write_jsonl(tmp_path / "new.jsonl", [f"n{i}" for i in range(10)])])
    # Indexing the two new shards reads no shard (the write tasks return their id hashes); no old shard.
    assert read == [] and len(read_manifest(store).shards) == n_old + 2
    read.clear()
    again = write_jsonl(tmp_path / "again.jsonl", ["b20", "m1"])
    with pytest.raises(InputError, match="'b20'.*already in store"):
        append_corpus(store, [again])
    assert read == [20 // 8]


def test_store_without_index_is_indexed_by_its_next_append(store: Path, tmp_path: Path) -> None:
    write_manifest(store, replace(read_manifest(store), id_index=()))
    with pytest.raises(InputError, match="'b33'.*already in store"):
        append_corpus(store, [write_jsonl(tmp_path / "dup.jsonl", ["b33"])])
    append_corpus(store, [write_jsonl(tmp_path / "new.jsonl", ["n1", "n2"])])
    manifest = read_manifest(store)
    assert listed_segments(manifest)[-1].stop == len(manifest.shards)
    assert ids_in_store(store, manifest, np.unique(hash_ids(["b33", "n2"]))) == matching(store, ["b33", "n2"])


def test_segment_listed_but_out_of_order_is_ignored_not_trusted(store: Path) -> None:
    manifest = read_manifest(store)
    broken = replace(manifest, id_index=({"first": 2, "stop": 5, "n_ids": 24},))
    assert listed_segments(broken) == []
    # Every shard is then uncovered, so the lookup still answers correctly by reading them.
    assert ids_in_store(store, broken, np.unique(hash_ids(["b1", "b38"]))) == matching(store, ["b1", "b38"])
    assert [(s["first"], s["stop"]) for s in extend_index(store, broken)] == [(0, 5)]
