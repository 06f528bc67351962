"""End-to-end tests of ingest_corpus / append_corpus against a plain-Python reference."""
from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicflow import Corpus
from topicflow.errors import (
    EmptyInputError,
    FormatVersionError,
    InputError,
    StoreExistsError,
    VocabularyMismatchError,
)
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import PruneConfig, TokenizerConfig
from topicflow.io.corpus.reader import read_manifest
from topicflow.pipeline.ingest import append as append_module
from topicflow.pipeline.ingest import ingest as ingest_module
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
]


def reference_bag(text: str) -> Counter[str]:
    """Plain-Python tokenizer equivalent of the default TokenizerConfig."""
    return Counter(t for t in re.findall(r"\b\w+\b", text.lower()) if len(t) >= 2 and t not in STOP_WORDS)


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def stored_docs(store: Path, language: str | None = None) -> Iterator[tuple[str, dict[str, int]]]:
    corpus = Corpus.open(store)
    terms = corpus.vocabulary(language).terms
    for block in corpus.iter_blocks(language):
        for row in range(block.n_docs):
            yield str(block.doc_ids[row]), {str(terms[t]): c for t, c in block.doc_bag(row).items()}


def docs_rows(texts: list[str]) -> list[dict[str, Any]]:
    return [{"id": f"doc-{i}", "text": t, "label": f"L{i % 2}", "ts": 1_700_000_000 + i} for i, t in enumerate(texts)]


def expected_bags(texts: list[str]) -> dict[str, dict[str, int]]:
    return {f"doc-{i}": dict(reference_bag(t)) for i, t in enumerate(texts) if reference_bag(t)}


# ----------------------------------------------------------------------------- round trips


def test_jsonl_round_trip_matches_reference(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", docs_rows(TEXTS))
    fields = FieldSpec(label_field="label", timestamp_field="ts")
    result = ingest_corpus([src], tmp_path / "s.zarr", fields=fields, shard_size=3)
    assert dict(stored_docs(tmp_path / "s.zarr")) == expected_bags(TEXTS)
    assert result.n_read == len(TEXTS) and result.n_kept == len(TEXTS) - 1
    assert result.dropped == {"no_tokens": 1}
    corpus = Corpus.open(tmp_path / "s.zarr")
    assert corpus.verify() == []
    block = corpus.read_block(0)
    assert list(block.labels) == ["L0", "L1", "L0"]
    assert block.timestamps.tolist() == [1_700_000_000, 1_700_000_001, 1_700_000_002]
    # Vocabulary frequencies are those of the stored documents, in canonical order.
    total = Counter()
    doc_freq = Counter()
    for bag in expected_bags(TEXTS).values():
        total.update(bag)
        doc_freq.update(bag.keys())
    vocab = corpus.vocabulary()
    assert dict(zip(vocab.terms, vocab.corpus_freq.tolist())) == dict(total)
    assert dict(zip(vocab.terms, vocab.doc_freq.tolist())) == dict(doc_freq)
    keys = [(-total[t], -doc_freq[t], t) for t in vocab.terms]
    assert keys == sorted(keys)
    assert result.n_tokens == {"default": sum(total.values())}


def test_text_directory_round_trip_with_labels_from_folders(tmp_path: Path) -> None:
    root = tmp_path / "news"
    for i, text in enumerate(TEXTS):
        folder = root / ("sport" if i % 2 else "politics")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{i:02d}.txt").write_text(text, encoding="utf-8")
    (root / ".hidden").write_text("ignored words here")
    fields = FieldSpec(label_from_dir=True)
    ingest_corpus([root], tmp_path / "s.zarr", fields=fields, shard_size=2)
    expected = {f"news/{'sport' if i % 2 else 'politics'}/{i:02d}.txt": dict(reference_bag(t))
                for i, t in enumerate(TEXTS) if reference_bag(t)}
    assert dict(stored_docs(tmp_path / "s.zarr")) == expected
    corpus = Corpus.open(tmp_path / "s.zarr")
    labels = [lab for b in corpus.iter_blocks() for lab in b.labels]
    ids = [d for b in corpus.iter_blocks() for d in b.doc_ids]
    assert labels == [d.split("/")[1] for d in ids]


def test_parquet_round_trip_across_row_groups(tmp_path: Path) -> None:
    texts = TEXTS * 3
    table = pa.table({"id": [f"doc-{i}" for i in range(len(texts))], "body": texts,
                      "ts": pa.array([f"2024-01-{i + 1:02d}T00:00:00Z" for i in range(len(texts))])})
    pq.write_table(table, tmp_path / "in.parquet", row_group_size=4)
    fields = FieldSpec(text_field="body", timestamp_field="ts")
    ingest_corpus([tmp_path / "in.parquet"], tmp_path / "s.zarr", fields=fields, shard_size=5)
    assert dict(stored_docs(tmp_path / "s.zarr")) == expected_bags(texts)
    corpus = Corpus.open(tmp_path / "s.zarr")
    stamps = np.concatenate([b.timestamps for b in corpus.iter_blocks()])
    ids = [int(d.split("-")[1]) for b in corpus.iter_blocks() for d in b.doc_ids]
    assert stamps.tolist() == [1704067200 + 86400 * i for i in ids]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(texts=st.lists(st.text(alphabet="abc XYZ\u00e9,.\n", max_size=40), min_size=1, max_size=12),
       shard_size=st.integers(1, 5))
def test_ingest_loses_no_document_and_no_token(tmp_path_factory: pytest.TempPathFactory,
                                                texts: list[str], shard_size: int) -> None:
    tmp = tmp_path_factory.mktemp("prop")
    src = write_jsonl(tmp / "in.jsonl", [{"id": f"d{i}", "text": t} for i, t in enumerate(texts)])
    tokenizer = TokenizerConfig(stop_words_name="none", stop_words=(), min_length=1)
    expected = {f"d{i}": dict(Counter(re.findall(r"\b\w+\b", t.lower()))) for i, t in enumerate(texts)}
    expected = {k: v for k, v in expected.items() if v}
    if not expected:
        with pytest.raises(EmptyInputError):
            ingest_corpus([src], tmp / "s.zarr", tokenizer=tokenizer, shard_size=shard_size)
        return
    result = ingest_corpus([src], tmp / "s.zarr", tokenizer=tokenizer, shard_size=shard_size)
    assert dict(stored_docs(tmp / "s.zarr")) == expected
    assert result.n_tokens["default"] == sum(sum(b.values()) for b in expected.values())
    assert result.n_kept + result.dropped.get("no_tokens", 0) == len(texts)


def test_multilingual_round_trip_keeps_documents_lacking_a_language(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "en": "Tax policy and the economy", "de": "Steuerpolitik und Wirtschaft"},
        {"id": "b", "en": "Football match tonight"},                     # no German
        {"id": "c", "de": "Fußball heute Abend", "en": None},            # no English
    ]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    fields = FieldSpec(lang_fields=(("en", "en"), ("de", "de")))
    result = ingest_corpus([src], tmp_path / "s.zarr", fields=fields,
                           tokenizer=TokenizerConfig(stop_words_name="none", stop_words=()))
    corpus = Corpus.open(tmp_path / "s.zarr")
    assert corpus.languages == ("en", "de") and corpus.verify() == []
    en, de = dict(stored_docs(tmp_path / "s.zarr", "en")), dict(stored_docs(tmp_path / "s.zarr", "de"))
    assert list(en) == list(de) == ["a", "b", "c"]
    assert en["b"] == {"football": 1, "match": 1, "tonight": 1} and de["b"] == {}
    assert en["c"] == {} and de["c"] == {"fußball": 1, "heute": 1, "abend": 1}
    assert en["a"] == {"tax": 1, "policy": 1, "and": 1, "the": 1, "economy": 1}
    assert set(result.vocab_sizes) == {"en", "de"}


def test_pruning_min_df_max_df_and_max_vocab(tmp_path: Path) -> None:
    rows = [{"id": str(i), "text": t} for i, t in enumerate(
        ["apple banana cherry", "apple banana", "apple cherry date", "apple elder", "zebra"])]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    result = ingest_corpus([src], tmp_path / "s.zarr",
                           prune=PruneConfig(min_df=2, max_df_fraction=0.7, max_vocab=1))
    corpus = Corpus.open(tmp_path / "s.zarr")
    # apple (df 4/5 > 0.7) is cut, banana and cherry (df 2) tie; banana wins on the term order.
    assert corpus.vocabulary().terms.tolist() == ["banana"]
    assert result.dropped == {"all_terms_pruned": 3}
    assert dict(stored_docs(tmp_path / "s.zarr")) == {"0": {"banana": 1}, "1": {"banana": 1}}


# ----------------------------------------------------------------------------- bad input


def test_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(b'{"id": "a", "text": "fine words"}\n{"id": "b", "text": "caf\xe9 bad"}\n')
    with pytest.raises(InputError, match=r"line 2 of '.*in\.jsonl'.*invalid UTF-8.*--on-error skip"):
        ingest_corpus([src], tmp_path / "s.zarr")
    assert not (tmp_path / "s.zarr").exists()


def test_malformed_json_and_missing_field_name_file_and_line(tmp_path: Path) -> None:
    bad_json = tmp_path / "a.jsonl"
    bad_json.write_text('{"id": "a", "text": "good words"}\n\n{"id": "b", "text": oops}\n')
    with pytest.raises(InputError, match=r"line 3 of '.*a\.jsonl': malformed JSON"):
        ingest_corpus([bad_json], tmp_path / "s.zarr")
    missing = write_jsonl(tmp_path / "b.jsonl", [{"id": "a", "text": "good words"}, {"id": "b", "body": "x"}])
    with pytest.raises(InputError, match=r"line 2 of '.*b\.jsonl': the record has no text field 'text'"):
        ingest_corpus([missing], tmp_path / "s.zarr")
    no_label = write_jsonl(tmp_path / "c.jsonl", [{"id": "a", "text": "good words"}])
    with pytest.raises(InputError, match=r"line 1 of .* no label field 'topic'"):
        ingest_corpus([no_label], tmp_path / "s.zarr", fields=FieldSpec(label_field="topic"))
    bad_time = write_jsonl(tmp_path / "d.jsonl", [{"id": "a", "text": "good words", "ts": "yesterday"}])
    with pytest.raises(InputError, match=r"line 1 of .*'yesterday' is not an ISO-8601 time"):
        ingest_corpus([bad_time], tmp_path / "s.zarr", fields=FieldSpec(timestamp_field="ts"))


def test_parquet_with_wrong_schema_names_file_and_columns(tmp_path: Path) -> None:
    pq.write_table(pa.table({"id": ["a"], "body": ["words here"]}), tmp_path / "in.parquet")
    with pytest.raises(InputError, match=r"'.*in\.parquet' has no column 'text'.*\['id', 'body'\]"):
        ingest_corpus([tmp_path / "in.parquet"], tmp_path / "s.zarr")
    pq.write_table(pa.table({"id": ["a"], "text": [3]}), tmp_path / "int.parquet")
    with pytest.raises(InputError, match=r"column 'text' has type int64"):
        ingest_corpus([tmp_path / "int.parquet"], tmp_path / "s.zarr")


def test_text_file_with_invalid_utf8_names_file_and_line(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "a.txt").write_bytes(b"first line\nsecond \xff line\n")
    with pytest.raises(InputError, match=r"line 2 of '.*d/a\.txt': invalid UTF-8"):
        ingest_corpus([tmp_path / "d"], tmp_path / "s.zarr")


def test_empty_input_and_existing_output(tmp_path: Path) -> None:
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(EmptyInputError, match="holds no document"):
        ingest_corpus([tmp_path / "empty.jsonl"], tmp_path / "s.zarr")
    only_stop = write_jsonl(tmp_path / "stop.jsonl", [{"id": "a", "text": "the and of"}])
    with pytest.raises(EmptyInputError, match="empty after tokenizing and pruning"):
        ingest_corpus([only_stop], tmp_path / "s.zarr")
    (tmp_path / "in.jsonl.gz").write_bytes(b"")
    with pytest.raises(InputError, match="unknown kind"):
        ingest_corpus([tmp_path / "in.jsonl.gz"], tmp_path / "s.zarr")
    with pytest.raises(InputError, match="does not exist"):
        ingest_corpus([tmp_path / "missing.jsonl"], tmp_path / "s.zarr")
    src = write_jsonl(tmp_path / "in.jsonl", docs_rows(TEXTS[:2]))
    ingest_corpus([src], tmp_path / "s.zarr")
    with pytest.raises(StoreExistsError, match="exists already.*--overwrite"):
        ingest_corpus([src], tmp_path / "s.zarr")
    result = ingest_corpus([src], tmp_path / "s.zarr", overwrite=True)
    assert result.n_kept == 2
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_store_of_newer_format_version_is_refused(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", docs_rows(TEXTS[:2]))
    ingest_corpus([src], tmp_path / "s.zarr")
    manifest = json.loads((tmp_path / "s.zarr" / "manifest.json").read_text())
    manifest["format_version"] = 99
    (tmp_path / "s.zarr" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(FormatVersionError, match="format version 99.*upgrade topicflow"):
        append_corpus(tmp_path / "s.zarr", [src])


def test_on_error_skip_counts_bad_records_by_reason(tmp_path: Path) -> None:
    src = tmp_path / "in.jsonl"
    src.write_bytes(
        b'{"id": "a", "text": "good words"}\n'
        b'{"id": "b", "text": "bad \xff"}\n'
        b'not json\n'
        b'{"id": "c", "body": "no text"}\n'
        b'{"id": "a", "text": "duplicate words"}\n'
        b'{"id": "d", "text": "fresh good words"}\n'
    )
    result = ingest_corpus([src], tmp_path / "s.zarr", on_error="skip", shard_size=2)
    assert result.skipped == {"invalid_utf8": 1, "malformed_json": 1, "missing_field": 1, "duplicate_id": 1}
    assert dict(stored_docs(tmp_path / "s.zarr")) == {"a": {"good": 1, "words": 1},
                                                       "d": {"fresh": 1, "good": 1, "words": 1}}
    vocab = Corpus.open(tmp_path / "s.zarr").vocabulary()
    # The skipped duplicate's "duplicate" term and its counts are gone from the vocabulary.
    assert dict(zip(vocab.terms, vocab.corpus_freq.tolist())) == {"good": 2, "words": 2, "fresh": 1}


def test_duplicate_ids_name_both_places(tmp_path: Path) -> None:
    first = write_jsonl(tmp_path / "a.jsonl", [{"id": "x", "text": "one words"}, {"id": "y", "text": "two"}])
    second = write_jsonl(tmp_path / "b.jsonl", [{"id": "z", "text": "three"}, {"id": "x", "text": "four"}])
    with pytest.raises(InputError, match=r"'x' appears more than once: at line 1 of '.*a\.jsonl' and at "
                                         r"line 2 of '.*b\.jsonl'"):
        ingest_corpus([first, second], tmp_path / "s.zarr", shard_size=1)


# ----------------------------------------------------------------------------- atomicity


def test_interrupted_ingest_leaves_no_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", docs_rows(TEXTS))

    def fail(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(ingest_module, "write_manifest", fail)
    with pytest.raises(KeyboardInterrupt):
        ingest_corpus([src], tmp_path / "s.zarr", shard_size=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
            and p.name != ".lock"}


@pytest.fixture
def base_store(tmp_path: Path) -> Path:
    src = write_jsonl(tmp_path / "base.jsonl", docs_rows(TEXTS))
    ingest_corpus([src], tmp_path / "s.zarr", fields=FieldSpec(label_field="label", timestamp_field="ts"),
                  shard_size=3)
    return tmp_path / "s.zarr"


def new_rows(prefix: str) -> list[dict[str, Any]]:
    return [
        {"id": f"{prefix}1", "text": "fox and zebra zebra quagga", "label": "L0", "ts": "2024-01-01T00:00:00Z"},
        {"id": f"{prefix}2", "text": "unicorn zebra", "label": "L1", "ts": 0},
        {"id": f"{prefix}3", "text": "dog tax tax", "label": "L0", "ts": 1.5},
    ]


def test_append_uses_store_vocabulary_and_records_candidates(base_store: Path, tmp_path: Path) -> None:
    before = snapshot(base_store / "shards")
    old_vocab = Corpus.open(base_store).vocabulary()
    fields = FieldSpec(label_field="label", timestamp_field="ts")
    src = write_jsonl(tmp_path / "new.jsonl", new_rows("n"))
    result = append_corpus(base_store, [src], fields=fields)
    corpus = Corpus.open(base_store)
    assert corpus.verify() == []
    assert {k: v for k, v in snapshot(base_store / "shards").items() if k in before} == before
    assert corpus.vocabulary().terms.tolist() == old_vocab.terms.tolist()
    docs = dict(stored_docs(base_store))
    assert docs["n1"] == {"fox": 1} and docs["n3"] == {"dog": 1, "tax": 2} and "n2" not in docs
    assert result.dropped == {"all_terms_out_of_vocabulary": 1} and result.n_kept == 2
    cands = corpus.candidates()
    assert dict(zip(cands.terms, zip(cands.doc_freq.tolist(), cands.corpus_freq.tolist()))) == {
        "zebra": (2, 3), "quagga": (1, 1), "unicorn": (1, 1)}
    assert result.oov_tokens == {"default": 5}
    assert corpus.shards[-1].first_doc == len(corpus) - 2
    first_candidates = corpus.manifest.candidates
    # A second append merges candidates into a new set and leaves the old set untouched.
    old_set = snapshot(base_store / "candidates" / first_candidates)
    src2 = write_jsonl(tmp_path / "new2.jsonl", new_rows("m"))
    append_corpus(base_store, [src2], fields=fields)
    corpus = Corpus.open(base_store)
    assert corpus.manifest.candidates != first_candidates
    assert snapshot(base_store / "candidates" / first_candidates) == old_set
    cands = corpus.candidates()
    assert dict(zip(cands.terms, cands.corpus_freq.tolist())) == {"zebra": 6, "quagga": 2, "unicorn": 2}
    assert describe_store(base_store)["n_appends"] == 2


def test_append_refuses_inconsistent_input(base_store: Path, tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "new.jsonl", new_rows("n"))
    full = FieldSpec(label_field="label", timestamp_field="ts")
    with pytest.raises(VocabularyMismatchError, match="has labels but the input gives no label field"):
        append_corpus(base_store, [src], fields=FieldSpec(timestamp_field="ts"))
    with pytest.raises(VocabularyMismatchError, match="has timestamps"):
        append_corpus(base_store, [src], fields=FieldSpec(label_field="label"))
    with pytest.raises(VocabularyMismatchError, match=r"languages \['default'\].*\['en', 'de'\]"):
        append_corpus(base_store, [src], fields=FieldSpec(lang_fields=(("en", "text"), ("de", "x")),
                                                          label_field="label", timestamp_field="ts"))
    with pytest.raises(VocabularyMismatchError, match="min_length: 3 != 2"):
        append_corpus(base_store, [src], fields=full, tokenizer=TokenizerConfig(min_length=3))
    again = write_jsonl(tmp_path / "again.jsonl", docs_rows(TEXTS[:1]))
    with pytest.raises(InputError, match=r"'doc-0' \(line 1 of '.*again\.jsonl'\) is already in store"):
        append_corpus(base_store, [again], fields=full)
    result = append_corpus(base_store, [again, src], fields=full, on_error="skip")
    assert result.skipped == {"duplicate_id": 1} and result.n_kept == 2
    assert Corpus.open(base_store).verify() == []


def test_multilingual_append_needs_every_language(tmp_path: Path) -> None:
    rows = [{"id": "a", "en": "tax policy", "de": "steuer politik"}]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    langs = FieldSpec(lang_fields=(("en", "en"), ("de", "de")))
    ingest_corpus([src], tmp_path / "s.zarr", fields=langs)
    new = write_jsonl(tmp_path / "new.jsonl", [{"id": "b", "text": "tax"}])
    with pytest.raises(VocabularyMismatchError, match="--lang-field en=FIELD --lang-field de=FIELD"):
        append_corpus(tmp_path / "s.zarr", [new])
    new = write_jsonl(tmp_path / "new2.jsonl", [{"id": "b", "de": "politik neu"}])
    result = append_corpus(tmp_path / "s.zarr", [new], fields=langs)
    assert result.n_kept == 1 and result.n_candidates == {"en": 0, "de": 1}
    assert dict(stored_docs(tmp_path / "s.zarr", "en"))["b"] == {}


def test_interrupted_append_leaves_store_unchanged(base_store: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(base_store)
    src = write_jsonl(tmp_path / "new.jsonl", new_rows("n"))

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(append_module, "write_manifest", fail)
    with pytest.raises(RuntimeError, match="killed"):
        append_corpus(base_store, [src], fields=FieldSpec(label_field="label", timestamp_field="ts"))
    assert snapshot(base_store) == before
    assert Corpus.open(base_store).verify() == []
    monkeypatch.undo()
    result = append_corpus(base_store, [src], fields=FieldSpec(label_field="label", timestamp_field="ts"))
    assert result.n_kept == 2


def test_append_cleans_shards_left_by_a_crashed_append(base_store: Path, tmp_path: Path) -> None:
    leftover = base_store / "shards" / "000099"
    leftover.mkdir()
    src = write_jsonl(tmp_path / "new.jsonl", new_rows("n"))
    append_corpus(base_store, [src], fields=FieldSpec(label_field="label", timestamp_field="ts"))
    assert not leftover.exists()
    assert [s.shard_id for s in read_manifest(base_store).shards] == ["000000", "000001", "000002", "000003"]


# ----------------------------------------------------------------------------- determinism


def store_fingerprint(store: Path) -> tuple[Any, ...]:
    corpus = Corpus.open(store)
    vocab = corpus.vocabulary()
    return (tuple(s.checksum for s in corpus.shards), tuple(s.n_docs for s in corpus.shards),
            vocab.terms.tolist(), vocab.doc_freq.tolist(), vocab.corpus_freq.tolist())


def test_same_store_on_threads_and_on_one_or_two_workers(tmp_path: Path) -> None:
    from distributed import Client, LocalCluster

    rng = np.random.default_rng(0)
    words = [f"w{i}" for i in range(60)]
    rows = [{"id": f"d{i}", "text": " ".join(rng.choice(words, size=int(rng.integers(1, 30)),
                                                         p=None))} for i in range(150)]
    src = write_jsonl(tmp_path / "in.jsonl", rows)
    prune = PruneConfig(min_df=2, max_vocab=40)
    ingest_corpus([src], tmp_path / "threads.zarr", shard_size=7, split_every=3, prune=prune)
    expected = store_fingerprint(tmp_path / "threads.zarr")
    for n_workers in (1, 2):
        with LocalCluster(n_workers=n_workers, threads_per_worker=2, processes=False,
                          dashboard_address=":0") as cluster, Client(cluster) as client:
            out = tmp_path / f"w{n_workers}.zarr"
            ingest_corpus([src], out, shard_size=7, split_every=3, prune=prune, client=client)
        assert store_fingerprint(out) == expected
