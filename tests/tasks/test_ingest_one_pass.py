"""One-pass ingest (tokenize once, remap provisional ids) against the two-pass route it replaces.

The two-pass task bodies (``count_partition``, then ``write_partition`` re-reading and
re-tokenizing with the Python tokenizer) are the reference: append still runs them, and stores
built by them are the historical format. The one-pass bodies must give the same counts and write
the same shards, byte for byte, with and without the ordered-token layer.
"""
from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow.io.corpus.writer import init_store, write_vocabulary
from topicflow.io.sources import discover_partitions
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig, prune_vocabulary
from topicflow.tasks.ingest import (
    count_partition,
    load_vocab_index,
    merge_summaries,
    tokenize_partition,
    write_partition,
    write_tokenized,
)

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A lazy dog sleeps; the fox runs away quickly!",
    "the of and",                                       # only stop words
    "Tax policy: taxes, TAX rates and the economy.",
    "zebra quokka",                                     # every term pruned by min_df=2
    "ΟΔΟΣ οδος Straße STRASSE İstanbul istanbul 東京 東京 e\u0301cole",
    "",
    "Dog days of summer, dog DOG dog; fox news on tax.",
    "Economy grows as tax rates fall; the quick fox.",
]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def write_input(tmp_path: Path, multilingual: bool) -> Path:
    rows: list[dict[str, Any]] = []
    for i, text in enumerate(TEXTS):
        row: dict[str, Any] = {"id": f"d{i}", "label": f"L{i % 3}", "ts": 1_700_000_000 + i}
        if multilingual:
            row["en"] = text
            if i % 3:
                row["de"] = TEXTS[-1 - i]                  # every third document lacks "de"
        else:
            row["text"] = text
        rows.append(row)
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.mark.parametrize("multilingual", [False, True])
@pytest.mark.parametrize("keep_order", [False, True])
def test_one_pass_counts_and_shards_equal_the_two_pass_ones(tmp_path: Path, multilingual: bool,
                                                            keep_order: bool) -> None:
    fields = FieldSpec(label_field="label", timestamp_field="ts",
                       lang_fields=(("en", "en"), ("de", "de")) if multilingual else ())
    tokenizer = TokenizerConfig()
    _, partitions = discover_partitions([write_input(tmp_path, multilingual)], fields, 4)
    store = tmp_path / "s.zarr"
    init_store(store)
    saved = {p.index: str(tmp_path / f"tokens-{p.index}") for p in partitions}
    one_pass = merge_summaries(*(tokenize_partition(p, fields, tokenizer, "raise", saved[p.index])
                                 for p in partitions))
    two_pass = merge_summaries(*(count_partition(p, fields, tokenizer, "raise") for p in partitions))
    one_pass, two_pass = one_pass.with_counters(), two_pass.with_counters()
    assert one_pass.counts == two_pass.counts and one_pass.counts.get(fields.languages[0]).n_docs > 0
    assert (one_pass.n_records, one_pass.skipped) == (two_pass.n_records, two_pass.skipped)
    np.testing.assert_array_equal(one_pass.ids.unique, two_pass.ids.unique)
    for lang in fields.languages:
        write_vocabulary(store / "vocab" / lang, prune_vocabulary(two_pass.counts.get(lang), PruneConfig(min_df=2)))
    index = load_vocab_index(str(store), fields.languages)
    skip = {0: frozenset({1}), 2: frozenset({0})}          # e.g. duplicate ids left out
    for p in partitions:
        old = write_partition(p, fields, tokenizer, "raise", index, str(tmp_path / "old" / str(p.index)),
                              skip.get(p.index, frozenset()), "all_terms_pruned", keep_order)
        new = write_tokenized(saved[p.index], fields, index, str(tmp_path / "new" / str(p.index)), p.index,
                              skip.get(p.index, frozenset()), "all_terms_pruned", keep_order)
        assert new == replace(old, shard_dir=new.shard_dir)
    assert snapshot(tmp_path / "new") == snapshot(tmp_path / "old")
    assert len(snapshot(tmp_path / "new")) > 10
