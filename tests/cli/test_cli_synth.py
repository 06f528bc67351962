"""`topicflow synth` through the real command group, on an in-process cluster (``--scheduler``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner

from topicflow import Corpus
from topicflow.cli import main
from topicflow.pipeline.synth import load_truth


def run(args: list[str]) -> Any:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def synth_args(out: Path, scheduler: str, *extra: str) -> list[str]:
    return ["synth", "--out", str(out), "--docs", "120", "--topics", "3", "--vocab", "40",
            "--doc-length", "15", "--doc-topic-prior", "0.2,0.5,1.0", "--topic-word-prior", "0.1", "--seed", "5",
            "--shard-size", "50", "--scheduler", scheduler, *extra]


def test_synth_writes_a_store_with_its_truth(tmp_path: Path, local_cluster: Any) -> None:
    out = tmp_path / "cli.zarr"
    result = run(synth_args(out, local_cluster.scheduler_address, "--labels", "--languages", "2"))
    assert result.exit_code == 0, result.output
    assert "120 documents in 3 shards" in result.output
    corpus = Corpus.open(out)
    assert corpus.languages == ("l0", "l1") and corpus.has_labels and corpus.n_shards == 3
    truth = load_truth(out)
    assert truth.params.doc_topic_prior == (0.2, 0.5, 1.0) and truth.params.seed == 5
    assert truth.topic_word["l0"].shape == (3, 40)
    assert truth.doc_topic().shape == (120, 3)


def test_synth_refuses_an_existing_store_and_bad_alpha(tmp_path: Path, local_cluster: Any) -> None:
    out = tmp_path / "cli.zarr"
    assert run(synth_args(out, local_cluster.scheduler_address)).exit_code == 0
    before = [s.checksum for s in Corpus.open(out).shards]

    again = run(synth_args(out, local_cluster.scheduler_address, "--seed", "6"))
    assert again.exit_code == 2
    assert "exists already" in again.output and "--overwrite" in again.output
    assert [s.checksum for s in Corpus.open(out).shards] == before

    bad = run(synth_args(tmp_path / "bad.zarr", local_cluster.scheduler_address, "--doc-topic-prior", "1,2"))
    assert bad.exit_code == 2
    assert "alpha '1,2' has 2 values" in bad.output
    assert not (tmp_path / "bad.zarr").exists()

    replaced = run(synth_args(out, local_cluster.scheduler_address, "--seed", "6", "--overwrite"))
    assert replaced.exit_code == 0
    assert [s.checksum for s in Corpus.open(out).shards] != before
    assert np.isclose(load_truth(out).read_doc_topic().sum(), 120.0)


def test_synth_with_a_local_cluster_of_one_worker(tmp_path: Path) -> None:
    out = tmp_path / "local.zarr"
    args = [a for a in synth_args(out, "x") if a not in ("--scheduler", "x")]
    result = run([*args, "--workers", "1", "--threads-per-worker", "2"])
    assert result.exit_code == 0, result.output
    assert len(Corpus.open(out)) == 120
