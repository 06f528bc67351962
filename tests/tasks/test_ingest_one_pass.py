"""One-pass ingest (tokenize once, remap provisional ids) against the two-pass route it replaces.

The two-pass task bodies (``count_partition``, then ``write_partition`` re-reading and
re-tokenizing with the Python tokenizer) are the reference: append still runs them, and stores
built by them are the historical format. The one-pass bodies must give the same counts and write
the same shards, byte for byte, with and without the ordered-token layer.
"""
from __future__ import annotations

import io
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
    TokenizedPartition,
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
        assert (new.id_hashes is None) == (old.id_hashes is None)
        if new.id_hashes is not None:
            np.testing.assert_array_equal(new.id_hashes, old.id_hashes)
        # Each attempt writes under its own name: the planned directory plus a suffix of its own.
        if new.checksum is not None:  # (an empty partition writes nothing)
            assert Path(new.shard_dir).name.startswith(f"{p.index}-") and Path(new.shard_dir).parent == tmp_path / "new"
            assert snapshot(Path(new.shard_dir)) == snapshot(Path(old.shard_dir))
    assert len(snapshot(tmp_path / "new")) > 10


def test_tokenized_partition_survives_npz_without_pickle(tmp_path: Path) -> None:
    """What pass 1 leaves on object storage (an ``.npz`` of plain arrays) reads back equal to the partition."""
    fields = FieldSpec(lang_fields=(("en", "en"), ("de", "de")), label_field="label", timestamp_field="ts")
    _, partitions = discover_partitions([write_input(tmp_path, multilingual=True)], fields, 100)
    path = str(tmp_path / "tokens")
    tokenize_partition(partitions[0], fields, TokenizerConfig(), "raise", path)
    saved = TokenizedPartition.load(path)
    saved = replace(saved, labels=[None, *saved.labels[1:]], timestamps=[*saved.timestamps[:-1], None])
    data = saved.to_npz()
    with np.load(io.BytesIO(data), allow_pickle=False) as arrays:  # no object array needs pickle
        assert all(arrays[name].dtype != object for name in arrays.files)
    back = TokenizedPartition.from_npz(data)
    assert (back.doc_ids, back.labels, back.timestamps) == (saved.doc_ids, saved.labels, saved.timestamps)
    assert back.labels[0] is None and back.timestamps[-1] is None and list(back.languages) == list(saved.languages)
    assert "東京" in back.languages["en"].tokens.terms.tolist() + back.languages["de"].tokens.terms.tolist()
    for lang, tokens in saved.languages.items():
        got = back.languages[lang]
        assert got.tokens.terms.tolist() == tokens.tokens.terms.tolist()
        for a, b in zip((got.has_text, got.tokens.token_ids, got.tokens.indptr, *got.bags),
                        (tokens.has_text, tokens.tokens.token_ids, tokens.tokens.indptr, *tokens.bags)):
            np.testing.assert_array_equal(a, b)
            assert a.dtype == b.dtype
