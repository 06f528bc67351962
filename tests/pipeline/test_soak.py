"""A short soak (issue 26.6): nightly cycles of append, update, versions --keep and a resumed SGS stream.

The long run with memory and time is ``benchmarks/soak.py`` (subprocesses, as cron runs them); this
runs a few tiny cycles in-process through the Python API and checks what does not depend on timing:
three versions kept, the current version advancing, the store growing by the appended documents,
the vocabulary growing by the new words, the model's size bounded by the kept versions, the
stream resuming from its saved state with its position advancing by the appended documents, and
the stream's history bounded: ``state/stream.json`` of constant size, ``trace.jsonl`` rotated into at
most ``keep`` compressed segments, ``summary.json`` the last points only. A state of the format
before that (version 1, every record in ``stream.json``) still resumes, to the same stream.
"""
from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow.api.lda import LDA
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import corpus_provenance
from topicflow.io.models.versions import list_versions, prune_versions
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.streaming import TraceRotation, run_stream
from topicflow.pipeline.streaming.config import StreamConfig
from topicflow.pipeline.update import update_model
from topicflow.testing.corpora import draw_planted_corpus

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())
BASE_DOCS, CYCLE_DOCS, CYCLES, KEEP, NEW_WORDS = 60, 30, 5, 3, 2
#: The stream's history: a trace segment of about three records, one rotated segment kept, 3 summary rows.
ROTATION = TraceRotation(max_bytes=1_200, keep=1, summary_points=3)


def new_words(cycle: int) -> list[str]:
    return [f"c{cycle:02d}n{j}" for j in range(NEW_WORDS)]


def write_docs(path: Path, counts: Any, start: int, stop: int, cycle: int) -> Path:
    """Planted documents ``start .. stop - 1`` as JSON Lines; from cycle 1 each also has the cycle's new words."""
    lines = []
    for d in range(start, stop):
        row = counts[d].toarray().ravel()
        words = [f"w{w:03d}" for w in np.flatnonzero(row) for _ in range(row[w])]
        words += new_words(cycle) if cycle > 0 else []
        lines.append(json.dumps({"id": f"d{d}", "text": " ".join(words)}))
    path.write_text("\n".join(lines) + "\n")
    return path


def stream_config() -> StreamConfig:
    settings: dict[str, Any] = dict(algorithm="sgs", n_topics=3, doc_topic_prior=0.1, topic_word_prior=0.05,
                                    batch_size=CYCLE_DOCS, max_iter=10, runs=1, eval_every=CYCLE_DOCS, seed=2)
    names = StreamConfig.setting_names("sgs")
    return StreamConfig.create(**{k: v for k, v in settings.items() if k in names})


def trace_on_disk(stream: Path) -> list[dict[str, Any]]:
    """Every record the stream's directory still holds: the kept rotated segments, then trace.jsonl."""
    texts = [gzip.decompress(p.read_bytes()).decode() for p in sorted(stream.glob("trace-*.jsonl.gz"))]
    texts.append((stream / "trace.jsonl").read_text())
    return [json.loads(line) for text in texts for line in text.splitlines()]


def as_format_1(stream: Path, store: Path) -> None:
    """Rewrite a saved state as the code before issue 26.6 wrote it: every record in stream.json, version 1."""
    path = stream / "state" / "stream.json"
    info = json.loads(path.read_text())
    info.pop("trace")
    info.update(format_version=1, records=trace_on_disk(stream),
                corpus=corpus_provenance(Corpus.open(store), range(info["corpus"]["n_shards"])))
    path.write_text(json.dumps(info))


def disk_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


@pytest.fixture(scope="module")
def soak(tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    """Run the base (ingest, online fit, SGS stream) and CYCLES nightly cycles; one row of facts per cycle."""
    root = tmp_path_factory.mktemp("soak")
    counts = draw_planted_corpus(n_docs=BASE_DOCS + CYCLES * CYCLE_DOCS, n_topics=3, n_terms=30, doc_length=20,
                                 alpha=0.3, seed=11).counts["default"]
    store, model, stream = root / "corpus.zarr", root / "model", root / "stream"
    ingest_corpus([write_docs(root / "base.jsonl", counts, 0, BASE_DOCS, 0)], store, tokenizer=NO_STOP,
                  shard_size=CYCLE_DOCS)
    LDA(3, method="online", batch_size=CYCLE_DOCS, seed=3).fit(store).save(model)  # type: ignore[arg-type]
    run_stream(Corpus.open(store), stream_config(), client=None, out=stream, trace=ROTATION)
    rows = []
    for cycle in range(1, CYCLES + 1):
        start = BASE_DOCS + (cycle - 1) * CYCLE_DOCS
        jsonl = write_docs(root / f"cycle-{cycle}.jsonl", counts, start, start + CYCLE_DOCS, cycle)
        appended = append_corpus(store, [jsonl], promote_min_df=2)
        updated = update_model(model, store)
        removed = prune_versions(model, KEEP)
        if cycle == 1:  # the state as the code before the bounded format wrote it, resumed beside
            shutil.copytree(stream, root / "format-1")
            as_format_1(root / "format-1", store)
            old = run_stream(Corpus.open(store), stream_config(), client=None, out=root / "format-1", resume=True,
                             trace=ROTATION)
        if cycle == 3:  # a save killed before its state was written left records beyond the state's position
            future = {"run": 0, "point": start + CYCLE_DOCS, "docs_seen": start + CYCLE_DOCS, "killed": True}
            with open(stream / "trace.jsonl", "a") as handle:
                handle.write(json.dumps(future) + "\n")
        resumed = run_stream(Corpus.open(store), stream_config(), client=None, out=stream, resume=True,
                             trace=ROTATION)
        corpus = Corpus.open(store)
        versions = list_versions(model)
        current = next(v for v in versions if v.is_current)
        rows.append({
            "appended": appended.n_kept, "update_version": updated.version, "update_docs": updated.new_docs,
            "removed": removed, "versions": [v.version for v in versions], "current": current.version,
            "store_docs": len(corpus), "vocab": corpus.vocabulary("default").terms.tolist(),
            "model_bytes": disk_bytes(model),
            "version_bytes": {p.name: disk_bytes(p) for p in (model / "versions").iterdir() if p.is_dir()},
            "stream_points": [r["point"] for r in resumed.records],
            "stream_docs_seen": int(resumed.snapshots[0][1]["docs_seen"]),
            "stream_model_terms": resumed.model.state.n_terms("default"),
            "state_json_bytes": (stream / "state" / "stream.json").stat().st_size,
            "trace_bytes": (stream / "trace.jsonl").stat().st_size,
            "segments": sorted(p.name for p in stream.glob("trace-*")),
            "trace_on_disk": trace_on_disk(stream),
            "summary_points": [r["point"] for r in json.loads((stream / "summary.json").read_text())["summary"]],
            "result_summary_points": [r["point"] for r in resumed.summary],
        })
        if cycle == 1:
            rows[-1]["format_1"] = old
            rows[-1]["format_2"] = resumed
    return rows


def test_each_night_adds_a_version_and_three_are_kept(soak: list[dict[str, Any]]) -> None:
    for cycle, row in enumerate(soak, start=1):
        assert row["update_version"] == row["current"] == cycle + 1  # version 1 is the fit
        assert row["versions"] == list(range(max(1, cycle + 2 - KEEP), cycle + 2))
        assert len(row["version_bytes"]) == len(row["versions"]) <= KEEP
    assert [len(r["removed"]) for r in soak] == [0, 0] + [1] * (CYCLES - 2)


def test_the_store_grows_by_the_appended_documents_and_words(soak: list[dict[str, Any]]) -> None:
    for cycle, row in enumerate(soak, start=1):
        assert row["appended"] == row["update_docs"] == CYCLE_DOCS
        assert row["store_docs"] == BASE_DOCS + cycle * CYCLE_DOCS
        assert row["vocab"][-NEW_WORDS:] == new_words(cycle)  # promoted at the end: old term ids stay
    assert len(soak[-1]["vocab"]) - len(soak[0]["vocab"]) == (CYCLES - 1) * NEW_WORDS


def test_the_model_on_disk_is_bounded_by_the_kept_versions(soak: list[dict[str, Any]]) -> None:
    for row in soak:
        current = row["version_bytes"][max(row["version_bytes"])]
        # Older versions have a smaller (prefix) vocabulary, so no version outweighs the current one by
        # more than compression noise; outside the versions there is only versions.json.
        assert max(row["version_bytes"].values()) <= 1.1 * current
        assert row["model_bytes"] <= KEEP * 1.1 * current + 16_384
    # Bytes per vocabulary term of the current version do not creep up night after night.
    per_term = [r["version_bytes"][max(r["version_bytes"])] / len(r["vocab"]) for r in soak]
    assert max(per_term[KEEP:]) <= 1.25 * min(per_term[KEEP:])


def test_the_stream_resumes_from_its_saved_state_and_advances(soak: list[dict[str, Any]]) -> None:
    for cycle, row in enumerate(soak, start=1):
        seen = BASE_DOCS + cycle * CYCLE_DOCS
        assert row["stream_docs_seen"] == seen
        # The trace on disk continues the saved one: every minibatch point up to now that rotation has
        # kept, none repeated, none of a save that did not finish (cycle 3); the result's records are
        # those of the current segment.
        points = [r["point"] for r in row["trace_on_disk"]]
        assert points == list(range(seen - CYCLE_DOCS * (len(points) - 1), seen + 1, CYCLE_DOCS))
        assert not any(r.get("killed") for r in row["trace_on_disk"])
        assert row["stream_points"] == points[len(points) - len(row["stream_points"]):]
        assert row["stream_model_terms"] == len(row["vocab"])


def test_the_stream_history_on_disk_is_bounded(soak: list[dict[str, Any]]) -> None:
    # stream.json keeps the position of the trace, not the trace: its size does not grow night after night.
    sizes = [row["state_json_bytes"] for row in soak]
    assert max(sizes[1:]) - min(sizes[1:]) <= 16, sizes
    record_bytes = max(len(json.dumps(r, sort_keys=True)) + 1 for r in soak[-1]["trace_on_disk"])
    for cycle, row in enumerate(soak, start=1):
        assert row["trace_bytes"] <= ROTATION.max_bytes + record_bytes  # one save's records beyond the cap
        assert len(row["segments"]) <= ROTATION.keep
        seen = BASE_DOCS + cycle * CYCLE_DOCS
        expected = list(range(seen - CYCLE_DOCS * (ROTATION.summary_points - 1), seen + 1, CYCLE_DOCS))
        assert row["summary_points"] == row["result_summary_points"] == expected
    # The trace was rotated, the oldest segments dropped: the history kept is a bounded suffix.
    assert soak[-1]["segments"] != soak[1]["segments"] and len(soak[-1]["trace_on_disk"]) < soak[-1]["stream_docs_seen"] // CYCLE_DOCS


def test_a_state_of_the_format_before_resumes_to_the_same_stream(soak: list[dict[str, Any]]) -> None:
    old, new = soak[0]["format_1"], soak[0]["format_2"]
    for (old_arrays, old_meta), (new_arrays, new_meta) in zip(old.snapshots, new.snapshots):
        assert old_arrays.keys() == new_arrays.keys() and old_meta["docs_seen"] == new_meta["docs_seen"]
        for name in old_arrays:
            np.testing.assert_array_equal(old_arrays[name], new_arrays[name], err_msg=name)
    strip = lambda records: [{k: v for k, v in r.items() if k != "seconds"} for r in records]  # noqa: E731
    assert strip(old.records) == strip(new.records)
