"""May et al. (2014) from the command line: the new stream options, the preset, and `reproduce may2014`."""
from __future__ import annotations

import json
from pathlib import Path

import click
import numpy as np
import pytest
from click.testing import CliRunner, Result

from topicflow.cli import main
from topicflow.cli.stream import parse_init_docs
from topicflow.pipeline.reproduce import PAPERS
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=24, doc_length=8, alpha=0.1, seed=6)
    labels = [f"t{k}" for k in np.argmax(truth.doc_topic, axis=1)]
    base = tmp_path_factory.mktemp("cli-may")
    counts = truth.counts["default"]
    train = write_test_store(base / "train.zarr", {"default": counts[:90]}, shard_size=30, labels=labels[:90])
    whole = write_test_store(base / "whole.zarr", {"default": counts}, shard_size=30, labels=labels)
    return train, whole


def run(args: list[object]) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_init_docs_accepts_documents_or_a_share() -> None:
    assert parse_init_docs("0") == 0 and parse_init_docs("300") == 300
    assert parse_init_docs("10%") == pytest.approx(0.1) and parse_init_docs("0.25") == 0.25
    for bad in ("1.5", "-3", "ten", "100%"):
        with pytest.raises(click.BadParameter, match="neither a number of documents"):
            parse_init_docs(bad)


def test_stream_without_rejuvenation_or_initialization(stores: tuple[Path, Path], tmp_path: Path,
                                                       local_cluster: object) -> None:
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["stream", train, "--out", tmp_path / "a", "--algo", "pf", "--topics", 3, "--particles", 5,
                  "--rejuv", 0, "--init-docs", 0, "--runs", 2, "--eval-every", 45, "--scheduler", address,
                  "--format", "json"])
    assert result.exit_code == 0, result.output
    records = [json.loads(line) for line in (tmp_path / "a" / "trace.jsonl").read_text().splitlines()]
    assert records[0]["docs_seen"] == 0
    assert all(r["rejuvenation_steps"] == 0 for r in records) and records[-1]["resamples"] > 0


def test_stream_with_the_preset_and_a_shared_initial_model(stores: tuple[Path, Path], tmp_path: Path,
                                                           local_cluster: object) -> None:
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    shared = run(["stream", train, "--out", tmp_path / "s", "--preset", "may2014", "--particles", 5, "--runs", 2,
                  "--init-trials", 2, "--init-sweeps", 10, "--init-docs", "10%", "--eval-every", 45,
                  "--scheduler", address, "--format", "json"])
    assert shared.exit_code == 0, shared.output
    saved = json.loads((tmp_path / "s" / "summary.json").read_text())["config"]
    assert (saved["n_topics"], saved["ess_threshold"], saved["resampling"], saved["init_start"]) == \
        (3, 0.2, "multinomial", "random")
    assert saved["init_shared"] and saved["init_docs"] == pytest.approx(0.1) and saved["n_particles"] == 5
    assert (tmp_path / "s" / "init" / "stream.json").exists()
    again = run(["stream", train, "--out", tmp_path / "t", "--preset", "may2014", "--particles", 5, "--runs", 2,
                 "--init-model", tmp_path / "s" / "init", "--eval-every", 45,
                 "--scheduler", address, "--format", "json"])
    assert again.exit_code == 0, again.output
    first = [json.loads(line) for line in (tmp_path / "t" / "trace.jsonl").read_text().splitlines()][0]
    assert first["docs_seen"] == 9  # the saved model was fitted on 10% of the 90 documents
    # --init-model takes a URL too (docs/storage.md): the same initial model on memory:// gives the same stream
    import uuid

    import fsspec

    url = f"memory:///tf-{uuid.uuid4().hex[:12]}/init"
    fsspec.filesystem("memory").put(str(tmp_path / "s" / "init"), url.removeprefix("memory://"), recursive=True)
    remote = run(["stream", train, "--out", tmp_path / "u", "--preset", "may2014", "--particles", 5, "--runs", 2,
                  "--init-model", url, "--eval-every", 45, "--scheduler", address, "--format", "json"])
    fsspec.filesystem("memory").rm(url.removeprefix("memory://").rsplit("/", 1)[0], recursive=True)
    assert remote.exit_code == 0, remote.output
    def records(out: str) -> list[dict[str, object]]:  # without the timings
        return [{k: v for k, v in json.loads(line).items() if "seconds" not in k and "nbytes" not in k}
                for line in (tmp_path / out / "trace.jsonl").read_text().splitlines()]

    assert records("u") == records("t") and records("u")[0]["top_terms"]


class _Interrupted(BaseException):
    """The driver stopped from outside (a BaseException, so no error handler turns it into a message)."""


def _without_timings(path: Path) -> list[dict[str, object]]:
    return [{k: v for k, v in json.loads(line).items() if "seconds" not in k and "nbytes" not in k}
            for line in path.read_text().splitlines()]


@pytest.mark.slow
def test_reproduce_may2014_quick_on_a_tiny_labeled_store(stores: tuple[Path, Path], tmp_path: Path,
                                                         local_cluster: object,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from topicflow.pipeline.reproduce import may2014

    # Every arm of the quick scale, with fewer runs and particles: the test is about the command, its
    # outputs and its resume, not about the numbers (the quick scale itself is in RESULTS.md).
    monkeypatch.setitem(may2014.SCALES, "quick", may2014.ScaleSettings(
        n_particles=5, runs=2, init_trials=2, init_sweeps=20, size_sweeps=20, init_sizes=(0, 30)))
    _, whole = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    out = tmp_path / "may"
    command = ["reproduce", "may2014", "--corpus", whole, "--scale", "quick", "--format", "json",
               "--scheduler", address]
    result = run([*command, "--out", out])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["paper"] == "may2014" and len(payload["claims"]) == 7
    assert payload["settings"]["stream_docs"] == 90 and payload["settings"]["test_docs"] == 30
    rejuv_claim = payload["claims"][-1]
    assert rejuv_claim["held"] is True and "max 0" in rejuv_claim["ours"]
    for name in ("may2014-fig1.png", "may2014-fig2.png", "may2014-grid.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    arms = {json.loads(line)["arm"] for line in (out / "trace.jsonl").read_text().splitlines()}
    assert arms == {"fixed/none", "fixed/reservoir", "fixed/history", "init-0/reservoir", "init-30/reservoir",
                    "init-0/none", "init-30/none", "batch-gibbs"}
    assert "| From a fixed good initial model" in (out / "claims.md").read_text()

    # Interrupted in the middle of the second arm, right after its first checkpoint, then --resume:
    # the finished arms are read back, the interrupted one continues from its checkpoint, and the
    # whole trace is the uninterrupted one.
    from topicflow.pipeline.streaming.outputs import StreamOutputs

    save, stream = StreamOutputs.save, may2014.run_stream
    calls: list[tuple[str, bool]] = []

    def stop_after_first_checkpoint(self: StreamOutputs, *args: object, **kwargs: object) -> None:
        save(self, *args, **kwargs)
        if str(self.out).endswith("fixed-reservoir") and not calls[-1][1]:
            raise _Interrupted

    def spy(*args: object, **kwargs: object) -> object:
        calls.append((Path(str(kwargs["out"])).name, bool(kwargs["resume"])))
        return stream(*args, **kwargs)

    monkeypatch.setattr(StreamOutputs, "save", stop_after_first_checkpoint)
    monkeypatch.setattr(may2014, "run_stream", spy)
    again = tmp_path / "again"
    with pytest.raises(_Interrupted):
        run([*command, "--out", again])
    assert calls == [("fixed-none", False), ("fixed-reservoir", False)]
    assert not (again / "claims.md").exists() and not (again / "arms" / "fixed-reservoir" / "records.json").exists()
    refused = run([*command, "--out", again])
    assert refused.exit_code == 2 and "give --resume to continue" in refused.output
    calls.clear()
    resumed = run([*command, "--out", again, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert calls == [("fixed-reservoir", True), ("fixed-history", False), ("init-0-reservoir", False),
                     ("init-30-reservoir", False), ("init-0-none", False), ("init-30-none", False),
                     ("batch-gibbs", False)]
    assert _without_timings(again / "trace.jsonl") == _without_timings(out / "trace.jsonl")
    assert [c["held"] for c in json.loads(resumed.stdout)["claims"]] == [c["held"] for c in payload["claims"]]

    # Resuming with other settings names the arm and what differs; --resume and --overwrite exclude each other.
    other = run([*command, "--out", again, "--resume", "--seed", 5])
    assert other.exit_code == 2 and "fixed-none" in other.output and "seed" in other.output
    both = run([*command, "--out", again, "--resume", "--overwrite"])
    assert both.exit_code == 2 and "give one" in both.output
    fixed = next(name for name, paper in sorted(PAPERS.items()) if not paper.resumable)
    other_paper = run(["reproduce", fixed, "--corpus", whole, "--out", tmp_path / "other", "--resume"])
    assert other_paper.exit_code == 2 and "cannot be resumed" in other_paper.output
