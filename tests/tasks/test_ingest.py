"""Graph builders of ingest: laziness, readable deterministic keys, tree shape, task bodies."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import dask
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from topicflow.io.corpus.id_index import hash_ids
from topicflow.io.sources.base import FieldSpec
from topicflow.io.sources import discover_partitions
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.io.corpus.writer import init_store, write_vocabulary
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.tasks.ingest import (
    IdHashes,
    PartitionSummary,
    count_partition,
    map_count,
    map_locate_ids,
    map_write_shards,
    merge_summaries,
    tree_merge,
    write_partition,
)

TOKENIZER = TokenizerConfig(stop_words_name="none", stop_words=())
FIELDS = FieldSpec()


def make_input(tmp_path: Path, n: int = 10) -> Path:
    rows = [{"id": f"d{i}", "text": f"alpha beta{i % 3} gamma gamma"} for i in range(n)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def raise_on_compute(*args: Any, **kwargs: Any) -> None:
    raise AssertionError("a graph builder computed")


def test_builders_do_not_compute(tmp_path: Path) -> None:
    _, partitions = discover_partitions([make_input(tmp_path)], FIELDS, 3)
    with dask.config.set(scheduler=raise_on_compute):
        counts = map_count(partitions, FIELDS, TOKENIZER, "raise")
        root = tree_merge(counts, split_every=2)
        located = map_locate_ids(partitions, FIELDS, TOKENIZER, "raise", np.zeros(1, np.uint64))
        written = map_write_shards(partitions, FIELDS, TOKENIZER, "raise", store=str(tmp_path / "s"),
                                   shard_dirs={p.index: f"x{p.index}" for p in partitions}, skip={},
                                   drop_reason="all_terms_pruned")
    assert len(counts) == len(located) == len(written) == 4
    assert root.key.startswith("ingest-merge-")


def test_keys_are_readable_and_deterministic(tmp_path: Path) -> None:
    _, partitions = discover_partitions([make_input(tmp_path)], FIELDS, 3)
    first = [d.key for d in map_count(partitions, FIELDS, TOKENIZER, "raise")]
    again = [d.key for d in map_count(partitions, FIELDS, TOKENIZER, "raise")]
    other = [d.key for d in map_count(partitions, FIELDS, TOKENIZER, "skip")]
    assert first == again and first != other
    assert [k.rsplit("-", 1)[1] for k in first] == ["0", "1", "2", "3"]
    assert all(k.startswith("ingest-count-") for k in first)


def test_tree_merge_sums_partition_summaries() -> None:
    parts = [dask.delayed(PartitionSummary, pure=True)(n_records=i, dask_key_name=f"p-{i}") for i in range(9)]
    root = tree_merge(parts, split_every=3)
    assert root.compute(scheduler="sync").n_records == sum(range(9))


@given(ids=st.lists(st.sampled_from([f"id{i}" for i in range(8)]), max_size=20),
       cut=st.integers(0, 20))
def test_id_hashes_merge_finds_exactly_the_repeated_ids(ids: list[str], cut: int) -> None:
    merged = IdHashes.of(hash_ids(ids[:cut])).merge(IdHashes.of(hash_ids(ids[cut:])))
    repeated = sorted({i for i, n in Counter(ids).items() if n > 1})
    assert merged.repeated.tolist() == sorted(hash_ids(repeated).tolist())
    assert merged.unique.tolist() == sorted(hash_ids(sorted(set(ids))).tolist())


def test_count_then_write_one_partition(tmp_path: Path) -> None:
    _, partitions = discover_partitions([make_input(tmp_path, 4)], FIELDS, 10)
    summary = merge_summaries(count_partition(partitions[0], FIELDS, TOKENIZER, "raise"))
    counts = summary.counts.get("default")
    assert counts.n_docs == 4 and summary.n_records == 4
    assert counts.corpus_freq == Counter({"gamma": 8, "alpha": 4, "beta0": 2, "beta1": 1, "beta2": 1})
    assert counts.doc_freq["gamma"] == 4
    store = tmp_path / "s.zarr"
    init_store(store)
    vocab = Vocabulary.from_counts({"gamma": 4, "beta0": 2}, {"gamma": 8, "beta0": 2})
    write_vocabulary(store / "vocab" / "default", vocab)
    index = {"default": dict(vocab.index)}
    written = write_partition(partitions[0], FIELDS, TOKENIZER, "raise", index,
                              str(store / "shards" / "p0"), frozenset({1}), "all_terms_pruned")
    assert written.n_docs == 3 and written.n_tokens == {"default": 3 + 2 + 3}  # d0, d2, d3 (d1 skipped)
    assert written.dropped == {} and written.checksum.startswith("sha256:")
