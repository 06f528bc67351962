"""``topicflow ingest | append | info`` through click's CliRunner on a shared in-process cluster."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

import click
import pytest
from click.testing import CliRunner

from topicflow import Corpus
from topicflow.cli.corpus import COMMANDS


@click.group()
def cli() -> None:
    """The corpus commands alone, so these tests do not depend on other command families."""


for _command in COMMANDS:
    cli.add_command(_command)


@pytest.fixture(scope="module")
def scheduler() -> Iterator[str]:
    from distributed import LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=":0") as cluster:
        yield cluster.scheduler_address


def run(*args: str) -> click.testing.Result:
    return CliRunner().invoke(cli, [str(a) for a in args], catch_exceptions=False)


def write_rows(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_commands_are_the_corpus_family() -> None:
    assert [c.name for c in COMMANDS] == ["ingest", "append", "info"]
    from topicflow.cli import main

    assert {"ingest", "append", "info"} <= set(main.commands)


def test_ingest_append_info(tmp_path: Path, scheduler: str) -> None:
    src = write_rows(tmp_path / "in.jsonl", [
        {"doc": "a", "body": "Tax policy and economy", "topic": "pol"},
        {"doc": "b", "body": "Football match tonight, football!", "topic": "sport"},
        {"doc": "c", "body": "the of and", "topic": "sport"},
    ])
    store = tmp_path / "s.zarr"
    result = run("ingest", src, "--out", store, "--id-field", "doc", "--text-field", "body",
                 "--label-field", "topic", "--min-df", "1", "--shard-size", "2", "--scheduler", scheduler)
    assert result.exit_code == 0, result.output
    assert "3 read, 2 kept" in result.output and "1 no_tokens" in result.output
    assert "shards         1 written" in result.output and "docs/s" in result.output
    corpus = Corpus.open(store)
    assert len(corpus) == 2 and corpus.has_labels and corpus.verify() == []

    new = write_rows(tmp_path / "new.jsonl", [{"doc": "d", "body": "economy zebra", "topic": "pol"}])
    result = run("append", store, new, "--id-field", "doc", "--text-field", "body", "--label-field", "topic",
                 "--scheduler", scheduler)
    assert result.exit_code == 0, result.output
    assert "1 read, 1 kept" in result.output and "candidate terms 1" in result.output

    info = json.loads(run("info", store, "--format", "json").output)
    assert info["n_docs"] == 3 and info["labels"] == {"pol": 2, "sport": 1}
    assert info["n_candidates"] == {"default": 1} and info["format_version"] == 1
    text = run("info", store).output
    assert "documents       3" in text and "candidates      000001" in text


def test_errors_exit_2_with_a_message(tmp_path: Path, scheduler: str) -> None:
    src = write_rows(tmp_path / "in.jsonl", [{"id": "a", "text": "words here"}, {"id": "a", "text": "again"}])
    store = tmp_path / "s.zarr"
    result = run("ingest", src, "--out", store, "--scheduler", scheduler)
    assert result.exit_code == 2
    assert "error: document id 'a' appears more than once: at line 1 of" in result.output
    assert not store.exists()
    result = run("ingest", src, "--out", store, "--on-error", "skip", "--scheduler", scheduler)
    assert result.exit_code == 0 and "1 duplicate_id" in result.output
    result = run("ingest", src, "--out", store, "--scheduler", scheduler)
    assert result.exit_code == 2 and "exists already" in result.output and "--overwrite" in result.output
    result = run("append", store, src, "--no-lowercase", "--scheduler", scheduler)
    assert result.exit_code == 2 and "lowercase: False != True" in result.output
    result = run("info", tmp_path / "nothing.zarr")
    assert result.exit_code == 2 and "no corpus store" in result.output
    result = run("ingest", src, "--out", store, "--lang-field", "en", "--scheduler", scheduler)
    assert result.exit_code == 2 and "LANG=FIELD" in result.output


def test_bad_record_found_on_a_worker_names_file_and_line(tmp_path: Path, scheduler: str) -> None:
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": "a", "text": "fine words"}\n{"id": "b", "text": }\n')
    result = run("ingest", src, "--out", tmp_path / "s.zarr", "--scheduler", scheduler)
    assert result.exit_code == 2
    assert f"line 2 of {str(src)!r}: malformed JSON" in result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.jsonl"]
    result = run("ingest", src, "--out", tmp_path / "s.zarr", "--on-error", "skip", "--scheduler", scheduler)
    assert result.exit_code == 0 and "1 malformed_json" in result.output


def test_append_promote_min_df_grows_vocabulary_and_info_shows_version(tmp_path: Path, scheduler: str) -> None:
    src = write_rows(tmp_path / "in.jsonl", [{"id": "a", "text": "tax policy economy"},
                                              {"id": "b", "text": "football match"}])
    store = tmp_path / "s.zarr"
    assert run("ingest", src, "--out", store, "--scheduler", scheduler).exit_code == 0
    assert "vocabulary      default: 5 (version 1)" in run("info", store).output
    new = write_rows(tmp_path / "new.jsonl", [{"id": "c", "text": "zebra tax"}, {"id": "d", "text": "zebra yak"}])
    result = run("append", store, new, "--promote-min-df", "2", "--scheduler", scheduler)
    assert result.exit_code == 0, result.output
    assert "vocabulary     6 (version 2)" in result.output
    assert "promoted       1 candidate term(s) to the vocabulary (now version 2)" in result.output
    assert "candidate terms 1" in result.output
    corpus = Corpus.open(store)
    assert corpus.vocab_version == 2 and corpus.vocabulary().terms[-1] == "zebra"
    info = json.loads(run("info", store, "--format", "json").output)
    assert info["vocab_version"] == 2 and info["format_version"] == 2 and info["vocab_sizes"] == {"default": 6}
    text = run("info", store).output
    assert "format version  2" in text and "vocabulary      default: 6 (version 2)" in text
    result = run("append", store, new, "--promote-min-df", "0", "--scheduler", scheduler)
    assert result.exit_code == 2 and "--promote-min-df" in result.output


def test_ingest_keep_order_append_and_info(tmp_path: Path, scheduler: str) -> None:
    src = write_rows(tmp_path / "in.jsonl", [
        {"id": "a", "text": "Tax policy and the economy of tax"},
        {"id": "b", "text": "economy grows, tax falls"},
    ])
    store = tmp_path / "s.zarr"
    result = run("ingest", src, "--out", store, "--keep-order", "--min-df", "2", "--scheduler", scheduler)
    assert result.exit_code == 0, result.output
    new = write_rows(tmp_path / "new.jsonl", [{"id": "c", "text": "zebra economy"}])
    assert run("append", store, new, "--scheduler", scheduler).exit_code == 0
    corpus = Corpus.open(store)
    assert corpus.has_order and corpus.verify() == []
    texts = [t for block in corpus.iter_ordered() for t in block.texts(corpus.vocabulary())]
    assert texts == [["tax", "policy", "economy", "tax"], ["economy", "grows", "tax", "falls"], ["zebra", "economy"]]
    info = json.loads(run("info", store, "--format", "json").output)
    assert info["has_order"] is True and info["format_version"] == 3
    assert "token order     kept" in run("info", store).output
    plain = tmp_path / "plain.zarr"
    assert run("ingest", src, "--out", plain, "--scheduler", scheduler).exit_code == 0
    assert "token order     not kept (ingest --keep-order keeps it)" in run("info", plain).output
    assert json.loads(run("info", plain, "--format", "json").output)["has_order"] is False
