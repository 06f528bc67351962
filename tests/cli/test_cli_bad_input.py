"""Damaged stores and models through the CLI: one `topicflow: error:` line naming the place, no traceback."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from click.testing import CliRunner, Result

from topicflow.cli import main
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


def test_fit_on_a_shard_with_flipped_bytes(sound: tuple[Path, Path], tmp_path: Path, local_cluster: object) -> None:
    store = copy_of(sound[0], tmp_path)
    flip_counts_chunk(store, "000001")
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["fit", str(store), "--model", str(tmp_path / "m"), "--topics", "3", "--scheduler", address])
    line = single_error_line(result)
    assert "shard 000001 of " in line and str(store) in line and "is corrupt" in line
    assert "re-ingest the store or restore the shard from a backup" in line
    assert not (tmp_path / "m").exists()


def test_fit_in_worker_processes_reports_the_same_error(sound: tuple[Path, Path], tmp_path: Path,
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    """The CLI's own local cluster: the error is raised in a worker process and crosses to the client."""
    store = copy_of(sound[0], tmp_path)
    chunk = next(p for p in (store / "shards" / "000002" / "default" / "term_ids" / "c").rglob("*") if p.is_file())
    chunk.write_bytes(chunk.read_bytes()[:10])  # truncated
    result = run(["fit", str(store), "--model", str(tmp_path / "m"), "--topics", "3", "--workers", "1",
                  "--threads-per-worker", "1", "--local-cluster", "processes"])
    line = single_error_line(result)
    assert "shard 000002 of " in line and "default/term_ids' cannot be decoded" in line
    # The worker logs a failed task before reporting it, so its record would be written by now: the
    # worker process's own "Compute Failed" record (with a traceback) is not shown for topicflow errors.
    assert "Compute Failed" not in capfd.readouterr().err


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
