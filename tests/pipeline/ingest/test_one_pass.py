"""``ingest_corpus`` reads the input once; its store equals, byte for byte, the two-pass store.

The two-pass route (count, then re-read and re-tokenize while writing: what ingest did before and
append still does) is rebuilt here by swapping the two one-pass graph builders for the two-pass
ones; both stores must hold the same files with the same bytes, and the same manifest apart from
its times.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import topicflow.pipeline.ingest.ingest as ingest_module
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.tasks.ingest import map_count, map_write_shards

TEXTS = [
    "The quick brown fox jumps over the lazy dog.", "A lazy dog sleeps; the fox runs away quickly!",
    "the of and", "Tax policy: taxes, TAX rates and the economy.", "zebra quokka", "",
    "ΟΔΟΣ οδος Straße STRASSE İstanbul 東京 東京", "Dog days of summer, dog DOG dog; fox news on tax.",
    "Economy grows as tax rates fall; the quick fox.", "fox dog tax economy",
]


def files(root: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and path.name != ".lock":
            out[str(path.relative_to(root))] = path.read_bytes()
    manifest = json.loads(out.pop("manifest.json"))
    manifest.pop("created", None)
    for event in manifest.get("history", []):
        event.pop("time", None)
    out["manifest.json"] = manifest
    return out


@pytest.mark.parametrize("keep_order", [False, True])
def test_store_equals_the_two_pass_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_order: bool) -> None:
    rows = [{"id": f"d{i % 12}", "text": t, "label": f"L{i % 2}"} for i, t in enumerate(TEXTS * 2)]
    src = tmp_path / "in.jsonl"            # ids d0, d1 repeat: duplicates skipped with on_error="skip"
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    options: dict[str, Any] = dict(fields=FieldSpec(label_field="label"), tokenizer=TokenizerConfig(),
                                   prune=PruneConfig(min_df=2, max_df_fraction=0.9), shard_size=3,
                                   on_error="skip", keep_order=keep_order)
    one = ingest_corpus([src], tmp_path / "one.zarr", **options)
    assert one.skipped == {"duplicate_id": 8} and one.dropped

    def count_instead(partitions: Any, fields: Any, tokenizer: Any, on_error: Any, *, paths: Any) -> Any:
        return map_count(partitions, fields, tokenizer, on_error)

    def retokenize_instead(partitions: Any, fields: Any, *, store: Any, paths: Any, **kwargs: Any) -> Any:
        return map_write_shards(partitions, fields, options["tokenizer"], "skip", store=store, **kwargs)

    monkeypatch.setattr(ingest_module, "map_tokenize", count_instead)
    monkeypatch.setattr(ingest_module, "map_write_tokenized", retokenize_instead)
    two = ingest_corpus([src], tmp_path / "two.zarr", **options)
    assert files(tmp_path / "one.zarr") == files(tmp_path / "two.zarr")
    assert (one.n_kept, one.n_tokens, one.vocab_sizes, one.dropped) == (two.n_kept, two.n_tokens,
                                                                         two.vocab_sizes, two.dropped)


@pytest.mark.parametrize("keep_order", [False, True])
def test_append_equals_the_two_pass_append(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_order: bool) -> None:
    import shutil

    import topicflow.pipeline.ingest.append as append_module
    from topicflow.pipeline.ingest.append import append_corpus

    def write(name: str, rows: list[dict[str, str]]) -> Path:
        path = tmp_path / name
        path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        return path

    base = write("base.jsonl", [{"id": f"b{i}", "text": t, "label": "L0"} for i, t in enumerate(TEXTS)])
    more = write("more.jsonl", [{"id": f"m{i % 9}" if i != 3 else "b1", "text": t + " newword", "label": "L1"}
                                for i, t in enumerate(reversed(TEXTS * 2))])   # m0..m8 repeat, b1 is in the store
    fields = FieldSpec(label_field="label")
    ingest_corpus([base], tmp_path / "one.zarr", fields=fields, prune=PruneConfig(min_df=2), shard_size=3,
                  keep_order=keep_order)
    shutil.copytree(tmp_path / "one.zarr", tmp_path / "two.zarr")
    options: dict[str, Any] = dict(fields=fields, on_error="skip", promote_min_df=2)
    one = append_corpus(tmp_path / "one.zarr", [more], **options)
    assert one.skipped == {"duplicate_id": 11} and one.promoted["default"] > 0 and one.oov_tokens["default"] > 0
    assert not list((tmp_path / "one.zarr" / "shards").glob(".tokens-*"))

    def count_instead(partitions: Any, fields: Any, tokenizer: Any, on_error: Any, *, paths: Any) -> Any:
        return map_count(partitions, fields, tokenizer, on_error)

    def retokenize_instead(partitions: Any, fields: Any, *, store: Any, paths: Any, **kwargs: Any) -> Any:
        return map_write_shards(partitions, fields, TokenizerConfig(), "skip", store=store, **kwargs)

    monkeypatch.setattr(append_module, "map_tokenize", count_instead)
    monkeypatch.setattr(append_module, "map_write_tokenized", retokenize_instead)
    two = append_corpus(tmp_path / "two.zarr", [more], **options)
    assert files(tmp_path / "one.zarr") == files(tmp_path / "two.zarr")
    assert (one.n_kept, one.n_tokens, one.vocab_sizes, one.dropped, one.promoted, one.n_candidates) == (
        two.n_kept, two.n_tokens, two.vocab_sizes, two.dropped, two.promoted, two.n_candidates)


def test_debris_removal_deletes_token_files_of_a_killed_append(tmp_path: Path) -> None:
    from topicflow.io.corpus.reader import read_manifest
    from topicflow.io.corpus.writer import remove_store_debris

    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)), encoding="utf-8")
    ingest_corpus([src], tmp_path / "s.zarr", shard_size=4)
    (tmp_path / "s.zarr" / "shards" / ".tokens-abc-000000").write_bytes(b"left by a killed append")
    removed = remove_store_debris(tmp_path / "s.zarr", read_manifest(tmp_path / "s.zarr"))
    assert removed == ["shards/.tokens-abc-000000"]
    assert sorted(p.name for p in (tmp_path / "s.zarr" / "shards").iterdir()) == ["000000", "000001", "000002",
                                                                              "zarr.json"]
