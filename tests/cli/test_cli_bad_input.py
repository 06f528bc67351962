"""Bad input through the CLI: one `topicflow: error:` line naming the place, no traceback, no worker log.

A bad record met inside a Dask task (a malformed JSON line, a corrupt shard) fails the task on a worker;
the worker's "Compute Failed" record of it is dropped for topicflow's own errors
(topicflow/pipeline/worker_logging.py), so the command's stderr is its usual lines plus that one
error line. The subprocess tests read the whole stderr a user would see; unexpected errors and
``--debug`` still show the worker's record and a traceback.
"""
from __future__ import annotations

import json
import logging
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Iterator

import numpy as np
import pytest
import zarr
from click.testing import CliRunner, Result

from topicflow.cli import main
from topicflow.errors import InputError
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.worker_logging import QuietTopicflowTaskErrors
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def sound(tmp_path_factory: pytest.TempPathFactory, local_cluster: object) -> tuple[Path, Path]:
    """A store and a model fitted on it, never modified (tests damage copies)."""
    base = tmp_path_factory.mktemp("cli-bad-input")
    truth = draw_planted_corpus(n_docs=150, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=8)
    store = write_test_store(base / "s.zarr", truth.counts, shard_size=50)
    result = run(["fit", str(store), "--model", str(base / "model"), "--topics", "5", "--iterations", "3",
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    return store, base / "model"


def run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def single_error_line(result: Result) -> str:
    """The one error line the CLI printed for a damaged input (progress lines may precede it), checked."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("topicflow: error: ")]
    assert len(errors) == 1, result.stderr
    assert "Traceback" not in result.output and "Compute Failed" not in result.output
    return errors[0]


def copy_of(path: Path, tmp_path: Path) -> Path:
    target = tmp_path / path.name
    shutil.copytree(path, target)
    return target


def flip_counts_chunk(store: Path, shard_id: str) -> None:
    chunk = next(p for p in (store / "shards" / shard_id / "default" / "counts" / "c").rglob("*") if p.is_file())
    data = bytearray(chunk.read_bytes())
    for i in range(12, min(40, len(data))):
        data[i] ^= 0xFF
    chunk.write_bytes(bytes(data))


class WorkerRecords(logging.Handler):
    """The records of the ``distributed.worker`` logger that pass its filters (in-process workers)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def failed(self) -> list[str]:
        """The exception reprs of the "Compute Failed" records."""
        return [str(r.args[3]) for r in self.records if str(r.msg).startswith("Compute Failed")  # type: ignore[index]
                and isinstance(r.args, tuple)]


@pytest.fixture
def worker_records() -> Iterator[WorkerRecords]:
    logger = logging.getLogger("distributed.worker")
    handler, level = WorkerRecords(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    yield handler
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_fit_on_a_shard_with_flipped_bytes(sound: tuple[Path, Path], tmp_path: Path, local_cluster: object,
                                           worker_records: WorkerRecords) -> None:
    store = copy_of(sound[0], tmp_path)
    flip_counts_chunk(store, "000001")
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["fit", str(store), "--model", str(tmp_path / "m"), "--topics", "3", "--scheduler", address])
    line = single_error_line(result)
    # The cluster given with --scheduler runs in this process: its workers' log is read here. The
    # CLI registered the quiet plugin on them while connected: the failed load was not logged.
    assert worker_records.failed() == []
    assert not any(isinstance(f, QuietTopicflowTaskErrors) for f in logging.getLogger("distributed.worker").filters)
    assert "shard 000001 of " in line and str(store) in line and "is corrupt" in line
    assert "re-ingest the store or restore the shard from a backup" in line
    assert not (tmp_path / "m").exists()


def test_topics_of_a_model_whose_n_topics_disagrees_with_its_arrays(sound: tuple[Path, Path], tmp_path: Path) -> None:
    model = copy_of(sound[1], tmp_path)
    meta = model / "versions" / "000001" / "model.json"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "n_topics": 7}))
    line = single_error_line(run(["topics", str(model)]))
    assert f"model {str(model)!r} version 1 is damaged: n_topics is 7 in model.json" in line
    assert f"`topicflow rollback {model} VERSION`" in line


def test_topics_of_a_model_with_negative_alpha(sound: tuple[Path, Path], tmp_path: Path) -> None:
    model = copy_of(sound[1], tmp_path)
    arrays = zarr.open_group(str(model / "versions" / "000001" / "arrays"), mode="a")
    alpha = -np.asarray(arrays["doc_topic_prior"][:])
    del arrays["doc_topic_prior"]
    arrays.create_array("doc_topic_prior", data=alpha)
    result = run(["topics", str(model)])
    line = single_error_line(result)
    assert "doc_topic_prior holds 5 values <= 0" in line and result.stdout == ""


def test_infer_with_a_model_whose_vocabulary_disagrees_with_lambda(sound: tuple[Path, Path], tmp_path: Path,
                                                                   local_cluster: object) -> None:
    store, model = sound[0], copy_of(sound[1], tmp_path)
    vocab = zarr.open_group(str(model / "versions" / "000001" / "vocab" / "default"), mode="a")
    for name in ("terms", "doc_freq", "corpus_freq"):
        values = np.asarray(vocab[name][:])[:-2]
        del vocab[name]
        if name == "terms":
            vocab.create_array(name, shape=values.shape, dtype=str)[:] = values
        else:
            vocab.create_array(name, data=values)
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    line = single_error_line(run(["infer", str(model), str(store), "--out", str(tmp_path / "theta.zarr"),
                                  "--scheduler", address]))
    assert "vocab/default has 28 terms but topic_word_var/default has 30 columns" in line


# ------------------------------------------------------------------ the whole stderr, as a user sees it


def fail_with(kind: str) -> None:
    """A task body that fails with a topicflow error or with an unexpected one."""
    if kind == "topicflow":
        raise InputError("line 3 of 'in.jsonl': malformed JSON")
    raise ZeroDivisionError("unexpected")


def test_a_scheduler_given_keeps_only_unexpected_failures_in_its_workers_log(
        local_cluster: object, worker_records: WorkerRecords) -> None:
    """connect() on a running cluster: its workers drop topicflow errors' records while connected, and only them."""
    from distributed import wait

    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    with connect(ClusterConfig(scheduler=address)) as client:
        futures = [client.submit(fail_with, kind, pure=False) for kind in ("topicflow", "other")]
        wait(futures)  # a worker logs a failed task before it reports the failure
        assert [future.status for future in futures] == ["error", "error"]
        with pytest.raises(InputError, match="line 3 of 'in.jsonl'"):
            futures[0].result()
    assert worker_records.failed() == ["ZeroDivisionError('unexpected')"]
    assert not any(isinstance(f, QuietTopicflowTaskErrors) for f in logging.getLogger("distributed.worker").filters)


@pytest.fixture(scope="module")
def bad_jsonl(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 good lines, then a malformed one (line 41), then 9 good lines: the bad line sits in the third partition."""
    path = tmp_path_factory.mktemp("bad-jsonl") / "in.jsonl"
    good = [json.dumps({"id": f"d{i}", "text": f"apple banana cherry word{i % 7}"}) for i in range(49)]
    path.write_text("\n".join([*good[:40], '{"id": "x", "text": broken', *good[40:]]) + "\n")
    return path


def bad_line_error(path: Path) -> str:
    return (f"topicflow: error: line 41 of {str(path)!r}: malformed JSON (Expecting value at column 21); each line "
            "must hold one JSON object. Fix the line or pass --on-error skip.")


def run_cli(args: list[str], *, debug: bool = False, script: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run the command line in a new process, as a user would (``script``: Python that runs it instead)."""
    env = {k: v for k, v in os.environ.items() if k != "TOPICFLOW_DEBUG" and not k.startswith("DASK_LOGGING")}
    if debug:
        env["TOPICFLOW_DEBUG"] = "1"
    command = [sys.executable, "-c", script, *args] if script else [sys.executable, "-m", "topicflow", *args]
    return subprocess.run(command, capture_output=True, text=True, env=env)


def ingest_args(bad_jsonl: Path, out: Path, executor: str) -> list[str]:
    return ["ingest", str(bad_jsonl), "--out", str(out), "--shard-size", "20", "--local-cluster", executor,
            "--workers", "1"]


def test_fit_in_worker_processes_ends_in_one_line(sound: tuple[Path, Path], tmp_path: Path) -> None:
    """The CLI's own cluster of worker processes, which share its stderr: fit's two lines, then the error line.

    The error is raised in a worker process and crosses to the client; that process's log of the
    failed task would land on the same stderr, before the line. (``fit`` echoes its first two lines
    even with -q.)
    """
    store = copy_of(sound[0], tmp_path)
    chunk = next(p for p in (store / "shards" / "000002" / "default" / "term_ids" / "c").rglob("*") if p.is_file())
    chunk.write_bytes(chunk.read_bytes()[:10])  # truncated
    done = run_cli(["-q", "fit", str(store), "--model", str(tmp_path / "m"), "--topics", "3", "--workers", "1",
                    "--threads-per-worker", "1", "--local-cluster", "processes"])
    assert done.returncode == 2 and done.stdout == ""
    shard = f"shard 000002 of {str(store)!r} is corrupt: {str(store / 'shards' / '000002' / 'default' / 'term_ids')!r}"
    patterns = [f"fitting K=3 by batch VB on Corpus\\({re.escape(repr(str(store)))}, n_docs=150, .*\\)",
                r"dashboard: http://127\.0\.0\.1:\d+/status",
                f"topicflow: error: {re.escape(shard)} cannot be decoded \\(.+\\); re-ingest the store or restore the "
                "shard from a backup.*"]
    lines = done.stderr.splitlines()
    assert len(lines) == len(patterns) and all(map(re.fullmatch, patterns, lines)), done.stderr
    assert not (tmp_path / "m").exists()


def test_bad_line_in_worker_threads_ends_in_one_line(bad_jsonl: Path, tmp_path: Path) -> None:
    """Threads log in the command's own process: its usual lines, then the error line, and nothing else."""
    done = run_cli(ingest_args(bad_jsonl, tmp_path / "s.zarr", "threads"))
    assert done.returncode == 2 and done.stdout == ""
    lines = done.stderr.splitlines()
    assert lines[:1] == ["executor: threads (asked for)"] and lines[2:] == [bad_line_error(bad_jsonl)], done.stderr
    assert re.fullmatch(r"local Dask cluster: 1 workers x 1 threads, dashboard http://127\.0\.0\.1:\d+/status",
                        lines[1]), done.stderr
    assert not (tmp_path / "s.zarr").exists()


def test_debug_shows_the_worker_log_and_the_traceback(bad_jsonl: Path, tmp_path: Path) -> None:
    done = run_cli(["-q", *ingest_args(bad_jsonl, tmp_path / "s.zarr", "threads")], debug=True)
    assert done.returncode == 2 and done.stderr.endswith(bad_line_error(bad_jsonl) + "\n")
    worker_log = done.stderr.index("Compute Failed")
    traceback = done.stderr.index("Traceback (most recent call last):")
    assert worker_log < traceback and "Exception: 'topicflow.errors.InputError(" in done.stderr
    # The client's traceback runs through the task's frames on the worker, down to the raise.
    assert 'topicflow/tasks/ingest.py", line' in done.stderr[traceback:]
    assert "topicflow.errors.InputError: line 41 of" in done.stderr[traceback:]


UNEXPECTED = """
import sys
import topicflow.tasks.ingest as tasks

def broken(*args, **kwargs):
    raise ZeroDivisionError("injected in a task")

tasks.read_partition_columns = broken
from topicflow.cli import main
main(sys.argv[1:])
"""


def test_an_unexpected_error_in_a_task_shows_its_traceback(bad_jsonl: Path, tmp_path: Path) -> None:
    done = run_cli(["-q", *ingest_args(bad_jsonl, tmp_path / "s.zarr", "threads")], script=UNEXPECTED)
    assert done.returncode == 1 and "topicflow: error:" not in done.stderr
    assert "Compute Failed" in done.stderr and "Exception: \"ZeroDivisionError('injected in a task')\"" in done.stderr
    assert done.stderr.rstrip().endswith("ZeroDivisionError: injected in a task")
    assert "Traceback (most recent call last):" in done.stderr
