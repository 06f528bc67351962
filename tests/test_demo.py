"""The bundled demo corpus, its build script, and the demo's corpus stage end to end."""
from __future__ import annotations

import gzip
import importlib.util
import json
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner

from topicflow import Corpus
from topicflow.cli.demo import STORE_NAME, bundled_corpus, main, prepare_corpus, summarize_corpus

REPO = Path(__file__).resolve().parents[1]


def load_build_script() -> Any:
    spec = importlib.util.spec_from_file_location("build_demo_corpus", REPO / "scripts" / "build_demo_corpus.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bundled_corpus_is_small_complete_and_well_formed() -> None:
    data = bundled_corpus().read_bytes()
    assert len(data) < 3 * 1024 * 1024
    records = [json.loads(line) for line in gzip.decompress(data).decode("utf-8").splitlines()]
    assert 3000 <= len(records) <= 5000
    assert all(set(r) == {"id", "text", "label", "group"} and r["text"] for r in records)
    assert len({r["id"] for r in records}) == len(records)
    assert records[0]["id"] == "Genesis 1:1-8" and records[-1]["label"] == "Revelation"
    assert len({r["label"] for r in records}) == 66 and len({r["group"] for r in records}) == 10
    assert (REPO / "topicflow" / "data" / "KJV_LICENSE.md").is_file()


def test_build_script_splits_chapters_into_passages_deterministically(tmp_path: Path) -> None:
    build = load_build_script()
    assert build.split_verses(4) == [(1, 4)]
    assert build.split_verses(20) == [(1, 10), (11, 20)]
    sizes = [last - first + 1 for first, last in build.split_verses(176)]
    assert len(sizes) == 18 and sum(sizes) == 176 and set(sizes) == {9, 10}
    chapter = {"id": "1Samuel.3", "text": "\n".join(f"verse {i}." for i in range(1, 13)),
               "label": "1 Samuel", "group": "History"}
    passages = list(build.passages(chapter))
    assert [p["id"] for p in passages] == ["1 Samuel 3:1-6", "1 Samuel 3:7-12"]
    assert passages[1]["text"].startswith("verse 7. verse 8.")
    assert build.build([chapter]) == build.build([chapter])  # gzip without timestamps


def test_demo_corpus_stage_end_to_end(tmp_path: Path, local_cluster: Any) -> None:
    result = CliRunner().invoke(
        main, ["--limit", "300", "--workdir", str(tmp_path), "--scheduler", local_cluster.scheduler_address],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    assert "Dask dashboard:" in result.output
    assert "documents   300 in 2 shards" in result.output

    lines = (tmp_path / "kjv_passages.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert len(records) == 300
    store = tmp_path / STORE_NAME
    corpus = Corpus.open(store)
    summary = summarize_corpus(store)
    vocab = corpus.vocabulary()
    assert summary.n_docs == len(corpus) == 300
    assert summary.n_tokens == corpus.n_tokens == int(vocab.corpus_freq.sum())
    assert summary.n_terms == len(vocab) > 500
    assert summary.n_labels == len({r["label"] for r in records})
    counts = [count for _, count in summary.top_terms]
    assert counts == sorted(counts, reverse=True) and counts[0] == int(vocab.corpus_freq.max())
    assert not {"thee", "unto", "the"} & {term for term, _ in summary.top_terms}
    assert list(corpus.doc_ids())[:2] == ["Genesis 1:1-8", "Genesis 1:9-16"]
    lengths = np.concatenate([block.doc_lengths() for block in corpus.iter_blocks()])
    assert lengths.sum() == summary.n_tokens and lengths.min() > 0


def test_prepare_corpus_limit(tmp_path: Path) -> None:
    path = prepare_corpus(tmp_path, limit=5)
    assert len(path.read_text(encoding="utf-8").splitlines()) == 5
