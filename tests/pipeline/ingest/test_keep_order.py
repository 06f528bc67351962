"""``ingest --keep-order`` and ``append`` on such stores, checked against a plain-Python tokenizer.

The reference tokenizer below is written from the documented settings (lowercase, ``\\b\\w+\\b``,
min length 2, English stop words), not from topicflow's; every test also compares with
``topicflow.io.tokenizer.tokenize``, the tokenizer's own output.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import dask
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from topicflow import Corpus
from topicflow.io.corpus.layout import ORDERED_FORMAT_VERSION
from topicflow.io.corpus.reader import read_manifest
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig, tokenize
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.describe import describe_store
from topicflow.pipeline.ingest.ingest import ingest_corpus

STOP_FILE = Path(__file__).parents[3] / "topicflow" / "data" / "stopwords_en.txt"
STOP_WORDS = {w.strip() for w in STOP_FILE.read_text().splitlines() if w.strip() and not w.startswith("#")}

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "A lazy dog sleeps; the fox runs away quickly!",
    "Tax policy: taxes, TAX rates and the economy.",
    "the of and",                                     # only stop words: dropped as no_tokens
    "Economy grows as tax rates fall; fox news reports.",
    "Dog days of summer, dog DOG dog.",
    "Ünïcode wörds straße straße 東京 東京",
    "zebra quokka",                                    # every token pruned by min_df=2: dropped
    "Fox and dog, dog and fox: the lazy economy of tax.",
]

#: The golden checksums of the store built by ``golden_store`` without --keep-order, computed with
#: topicflow before the ordered-token layer existed: stores without the layer must not change a byte.
GOLDEN_CHECKSUMS = [
    "sha256:90ea1a3b42ecde18c1b0667259184c99a471ccb5e3f5d7f8a3ba790fdecb5c55",
    "sha256:8de3eb551074544618f1ef9de70ed6ec508b9333995c9f84502bd42a73b94d81",
    "sha256:92ca2622afd206f5e7105187e63f020a87bc77b3b2a8c0f52200de904315125b",
]


def reference_tokens(text: str) -> list[str]:
    """Plain-Python equivalent of the default TokenizerConfig: the tokens in reading order."""
    return [t for t in re.findall(r"\b\w+\b", text.lower()) if len(t) >= 2 and t not in STOP_WORDS]


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def rows_of(texts: list[str], prefix: str = "doc") -> list[dict[str, Any]]:
    return [{"id": f"{prefix}-{i}", "text": t, "label": f"L{i % 2}"} for i, t in enumerate(texts)]


def ordered_texts(store: Path, language: str | None = None, *, include_oov: bool = True) -> dict[str, list[str]]:
    """Every document's tokens as strings, read through the ordered-token layer."""
    corpus = Corpus.open(store)
    vocab = corpus.vocabulary(language)
    out = {}
    for block in corpus.iter_ordered(language):
        for doc_id, text in zip(block.doc_ids, block.texts(vocab, include_oov=include_oov)):
            out[str(doc_id)] = text
    return out


def bags(store: Path, language: str | None = None) -> dict[str, dict[str, int]]:
    corpus = Corpus.open(store)
    terms = corpus.vocabulary(language).terms
    return {str(block.doc_ids[row]): {str(terms[t]): c for t, c in block.doc_bag(row).items()}
            for block in corpus.iter_blocks(language) for row in range(block.n_docs)}


def check_against_reference(store: Path, texts: dict[str, str], language: str | None = None) -> None:
    """Brute force: each stored document's ordered tokens are the reference tokenizer's output, its
    in-vocabulary ones are the vocabulary's terms, and their counts are its bag of words."""
    corpus = Corpus.open(store)
    # A shard's term ids are those of the vocabulary version it was encoded with.
    vocab_of = {str(doc_id): {str(t) for t in corpus.vocabulary_version(language, shard.vocab_version).terms}
                for index, shard in enumerate(corpus.shards) for doc_id in corpus.read_block(index, language).doc_ids}
    ordered = ordered_texts(store, language)
    in_vocab = ordered_texts(store, language, include_oov=False)
    stored_bags = bags(store, language)
    assert set(ordered) == set(stored_bags)
    for doc_id, tokens in ordered.items():
        expected = reference_tokens(texts[doc_id])
        assert tokens == expected == tokenize(texts[doc_id], TokenizerConfig())
        assert in_vocab[doc_id] == [t for t in expected if t in vocab_of[doc_id]]
        assert dict(Counter(in_vocab[doc_id])) == stored_bags[doc_id]


# ----------------------------------------------------------------------------- round trips


def test_jsonl_round_trip_keeps_every_token_in_order(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows_of(TEXTS))
    result = ingest_corpus([src], tmp_path / "s.zarr", fields=FieldSpec(label_field="label"), shard_size=3,
                           prune=PruneConfig(min_df=2), keep_order=True)
    assert result.dropped == {"no_tokens": 1, "all_terms_pruned": 2}  # zebra quokka, and the Unicode one
    check_against_reference(tmp_path / "s.zarr", {f"doc-{i}": t for i, t in enumerate(TEXTS)})
    corpus = Corpus.open(tmp_path / "s.zarr")
    assert corpus.has_order and corpus.n_shards == 3
    # Pruned terms are out-of-vocabulary entries with their strings, shard-local, first appearance first.
    first = corpus.read_ordered(0)
    assert first.oov_terms.tolist() == ["quick", "brown", "jumps", "sleeps", "runs", "away", "quickly", "policy",
                                        "taxes"]
    assert first.doc_tokens(0)[:2].tolist() == [-1, -2]
    assert [b.first_doc for b in corpus.iter_ordered()] == [b.first_doc for b in corpus.iter_blocks()]


def test_text_directory_round_trip(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    texts = {}
    for i, text in enumerate(TEXTS):
        path = root / ("a" if i % 2 else "b") / f"{i:02d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    ingest_corpus([root], tmp_path / "s.zarr", shard_size=4, keep_order=True)
    for doc_id in Corpus.open(tmp_path / "s.zarr").doc_ids():
        texts[doc_id] = (tmp_path / doc_id).read_text(encoding="utf-8")
    assert len(texts) == len(TEXTS) - 1
    check_against_reference(tmp_path / "s.zarr", texts)


def test_parquet_round_trip(tmp_path: Path) -> None:
    table = pa.table({"id": [f"doc-{i}" for i in range(len(TEXTS))], "text": TEXTS})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=4)
    ingest_corpus([tmp_path / "in.parquet"], tmp_path / "s.zarr", shard_size=4, prune=PruneConfig(min_df=2),
                  keep_order=True)
    check_against_reference(tmp_path / "s.zarr", {f"doc-{i}": t for i, t in enumerate(TEXTS)})


def test_order_does_not_change_the_bags_and_stores_without_it_are_unchanged(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows_of(TEXTS[:7]))
    fields = FieldSpec(label_field="label")
    ingest_corpus([src], tmp_path / "plain.zarr", fields=fields, shard_size=3)
    ingest_corpus([src], tmp_path / "ordered.zarr", fields=fields, shard_size=3, keep_order=True)
    plain, ordered = Corpus.open(tmp_path / "plain.zarr"), Corpus.open(tmp_path / "ordered.zarr")
    # Same bytes as before the layer existed, same format version, no new manifest key, no order/ group.
    assert [s.checksum for s in plain.shards] == GOLDEN_CHECKSUMS
    payload = json.loads((tmp_path / "plain.zarr" / "manifest.json").read_text())
    assert payload["format_version"] == 1 and "has_order" not in payload
    assert all("has_order" not in s for s in payload["shards"])
    assert not list((tmp_path / "plain.zarr" / "shards").rglob("order"))
    assert not plain.has_order and describe_store(tmp_path / "plain.zarr")["has_order"] is False
    # The ordered store: format 3, and exactly the same bags and vocabulary (models compute the same).
    payload = json.loads((tmp_path / "ordered.zarr" / "manifest.json").read_text())
    assert payload["format_version"] == ORDERED_FORMAT_VERSION == 3 and payload["has_order"] is True
    assert describe_store(tmp_path / "ordered.zarr")["format_version"] == 3
    assert plain.vocabulary().terms.tolist() == ordered.vocabulary().terms.tolist()
    for a, b in zip(plain.iter_blocks(), ordered.iter_blocks()):
        for name in ("indptr", "term_ids", "counts", "doc_ids", "labels"):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert [s.n_tokens for s in plain.shards] == [s.n_tokens for s in ordered.shards]


def test_same_store_whatever_the_workers_and_partitions(tmp_path: Path, client: Any) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows_of(TEXTS * 3))
    with dask.config.set(scheduler="synchronous"):
        ingest_corpus([src], tmp_path / "ref.zarr", shard_size=4, prune=PruneConfig(min_df=2), keep_order=True)
    reference = read_manifest(tmp_path / "ref.zarr")
    ingest_corpus([src], tmp_path / "s.zarr", shard_size=4, prune=PruneConfig(min_df=2), keep_order=True,
                  client=client)
    assert [s.checksum for s in read_manifest(tmp_path / "s.zarr").shards] == [s.checksum for s in reference.shards]
    texts = ordered_texts(tmp_path / "ref.zarr")
    for shard_size in (5, 100):  # other partitions: other shards and shard-local OOV lists, same texts
        out = tmp_path / f"s{shard_size}.zarr"
        ingest_corpus([src], out, shard_size=shard_size, prune=PruneConfig(min_df=2), keep_order=True, client=client)
        assert ordered_texts(out) == texts
        assert Corpus.open(out).verify() == []


def test_multilingual_store_keeps_one_order_layer_per_language(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "en": "The dog and the fox", "de": "Der Hund und der Fuchs Hund"},
        {"id": "b", "en": "Fox news today", "de": None},
        {"id": "c", "en": "", "de": "Fuchs Fuchs Katze"},
        {"id": "d", "en": "dog dog fox cat", "de": "Hund"},
    ]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    fields = FieldSpec(lang_fields=(("en", "en"), ("de", "de")))
    ingest_corpus([src], tmp_path / "s.zarr", fields=fields, shard_size=3, prune=PruneConfig(min_df=2),
                  keep_order=True)
    corpus = Corpus.open(tmp_path / "s.zarr")
    assert corpus.has_order and corpus.languages == ("en", "de")
    for lang in ("en", "de"):
        texts = {r["id"]: r[lang] or "" for r in rows}
        ordered = ordered_texts(tmp_path / "s.zarr", lang)
        stored_bags = bags(tmp_path / "s.zarr", lang)
        vocab = {str(t) for t in corpus.vocabulary(lang).terms}
        assert set(ordered) == {"a", "b", "c", "d"}
        for doc_id, tokens in ordered.items():
            # "der"/"und" are not English stop words: the default tokenizer keeps them.
            assert tokens == reference_tokens(texts[doc_id])
            assert dict(Counter(t for t in tokens if t in vocab)) == stored_bags[doc_id]
    assert ordered_texts(tmp_path / "s.zarr", "de")["b"] == []        # no German text: an empty row
    assert corpus.verify() == []
    # Every language of every shard has its own layer and its own out-of-vocabulary strings.
    blocks = [corpus.read_ordered(0, lang) for lang in ("en", "de")]
    assert blocks[0].oov_terms.tolist() == ["news", "today"] and blocks[1].oov_terms.tolist() == ["der", "und", "katze"]
    with pytest.raises(ValueError, match="name one"):
        corpus.read_ordered(0)


# ----------------------------------------------------------------------------- append


def test_append_keeps_the_layer_with_candidates_as_oov_and_grown_ids(tmp_path: Path) -> None:
    first = TEXTS[:6]
    src = write_jsonl(tmp_path / "in.jsonl", rows_of(first))
    store = tmp_path / "s.zarr"
    ingest_corpus([src], store, shard_size=3, prune=PruneConfig(min_df=2), keep_order=True)
    more = ["zebra zebra lazy fox", "Zebra crossing near the dog", "crossing economy zebra"]
    append_corpus(store, [write_jsonl(tmp_path / "more.jsonl", rows_of(more, "new"))])
    corpus = Corpus.open(store)
    assert corpus.has_order and corpus.vocab_version == 1 and corpus.n_shards == 3
    new = corpus.read_ordered(2)
    assert new.oov_terms.tolist() == ["zebra", "crossing", "near"]    # candidate terms: OOV entries
    all_texts = {**{f"doc-{i}": t for i, t in enumerate(first)}, **{f"new-{i}": t for i, t in enumerate(more)}}
    check_against_reference(store, all_texts)
    # Promotion: the next shard is encoded with version 2, where zebra and crossing have ids.
    again = ["zebra crossing fox", "quokka zebra"]
    append_corpus(store, [write_jsonl(tmp_path / "again.jsonl", rows_of(again, "again"))], promote_min_df=2)
    corpus = Corpus.open(store)
    assert corpus.vocab_version == 2 and corpus.shards[-1].vocab_version == 2
    payload = json.loads((store / "manifest.json").read_text())
    assert payload["format_version"] == 3 and payload["has_order"] is True
    last = corpus.read_ordered(corpus.n_shards - 1)
    vocab = corpus.vocabulary()
    assert last.oov_terms.tolist() == ["quokka"]
    assert [vocab.terms[t] for t in last.doc_tokens(0)] == ["zebra", "crossing", "fox"]
    # Older shards keep their encoding: zebra stays an OOV string there (as it is absent from their bags).
    assert "zebra" in corpus.read_ordered(2).oov_terms.tolist()
    all_texts.update({f"again-{i}": t for i, t in enumerate(again)})
    check_against_reference(store, all_texts)
    assert corpus.verify() == []


def test_append_to_a_store_without_order_does_not_add_it(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", rows_of(TEXTS[:3]))
    store = tmp_path / "s.zarr"
    ingest_corpus([src], store)
    append_corpus(store, [write_jsonl(tmp_path / "more.jsonl", rows_of(["fox dog zebra"], "new"))])
    payload = json.loads((store / "manifest.json").read_text())
    assert payload["format_version"] == 1 and "has_order" not in payload
    assert not Corpus.open(store).has_order and not list((store / "shards").rglob("order"))


def test_multilingual_append_keeps_the_layer(tmp_path: Path) -> None:
    fields = FieldSpec(lang_fields=(("en", "en"), ("de", "de")))
    store = tmp_path / "s.zarr"
    ingest_corpus([write_jsonl(tmp_path / "in.jsonl", [{"id": "a", "en": "dog fox", "de": "Hund Fuchs"}])],
                  store, fields=fields, keep_order=True)
    append_corpus(store, [write_jsonl(tmp_path / "more.jsonl", [{"id": "b", "en": "fox owl", "de": "Eule"}])],
                  fields=fields)
    corpus = Corpus.open(store)
    assert ordered_texts(store, "en") == {"a": ["dog", "fox"], "b": ["fox", "owl"]}
    assert ordered_texts(store, "de") == {"a": ["hund", "fuchs"], "b": ["eule"]}
    assert corpus.read_ordered(1, "de").oov_terms.tolist() == ["eule"]
    assert corpus.verify() == []
