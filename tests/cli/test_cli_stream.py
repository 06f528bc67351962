"""`topicflow stream` end to end on an in-process cluster, and its model through topics/evaluate/export."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner, Result

from topicflow.cli import main
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli-stream")
    truth = draw_planted_corpus(n_docs=200, n_topics=3, n_terms=30, doc_length=25, alpha=0.1, seed=4)
    labels = [f"t{k}" for k in np.argmax(truth.doc_topic, axis=1)]
    counts = truth.counts["default"]
    train = write_test_store(base / "train.zarr", {"default": counts[:150]}, shard_size=50, labels=labels[:150])
    test = write_test_store(base / "test.zarr", {"default": counts[150:]}, shard_size=50, labels=labels[150:])
    return train, test


def run(args: list[object]) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_stream_writes_trace_summary_plot_and_a_usable_model(
    stores: tuple[Path, Path], tmp_path: Path, local_cluster: object
) -> None:
    train, test = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    out = tmp_path / "pf"
    result = run(["stream", train, "--out", out, "--algo", "pf", "--topics", 3, "--particles", 8, "--rejuv", 5,
                  "--rejuv-source", "reservoir", "--reservoir", 200, "--init-docs", 30, "--init-sweeps", 20,
                  "--init-trials", 2, "--runs", 3, "--eval-every", 40, "--test", test, "--scheduler", address,
                  "--format", "json"])
    assert result.exit_code == 0, result.output
    final = json.loads(result.stdout)["final"]
    assert final["runs"] == 3 and final["docs_seen"] == 150
    assert 0.5 < final["nmi_out_mean"] <= 1.0
    lines = (out / "trace.jsonl").read_text().splitlines()
    assert len(lines) == 3 * len(json.loads((out / "summary.json").read_text())["summary"])
    assert {json.loads(line)["run"] for line in lines} == {0, 1, 2}
    assert (out / "nmi.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    topics = run(["topics", out / "model", "--top", 5, "--format", "json"])
    assert topics.exit_code == 0, topics.output
    assert len(json.loads(topics.stdout)["topics"]) == 3
    evaluated = run(["evaluate", out / "model", test, "--format", "json", "--scheduler", address])
    assert evaluated.exit_code == 0, evaluated.output
    assert np.isfinite(json.loads(evaluated.stdout)["perplexity"])
    exported = run(["export", out / "model", "--out", tmp_path / "pf.npz"])
    assert exported.exit_code == 0, exported.output
    with np.load(tmp_path / "pf.npz", allow_pickle=False) as arrays:
        np.testing.assert_allclose(arrays["topic_word"].sum(axis=1), 1.0)

    update = run(["update", out / "model", train])
    assert update.exit_code == 2 and "--resume" in update.output


def test_stream_resume_and_refusals(stores: tuple[Path, Path], tmp_path: Path, local_cluster: object) -> None:
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    out = tmp_path / "olda"
    common: list[object] = ["stream", train, "--out", out, "--algo", "olda", "--topics", 3, "--init-docs", 30,
                            "--eval-every", 40, "--scheduler", address]
    first = run([*common, "--max-docs", 80])
    assert first.exit_code == 0, first.output
    assert first.stdout.splitlines()[-1].split()[1] == "80"  # the table's last row: point, documents seen
    again = run(common)
    assert again.exit_code == 2 and "exists already" in again.output
    resumed = run([*common, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert resumed.stdout.splitlines()[-1].split()[1] == "150"
    other = run([*common, "--resume", "--doc-topic-prior", 0.5])
    assert other.exit_code == 2 and "doc_topic_prior" in other.output


def test_stream_gibbs_start_is_chosen_saved_and_refused_elsewhere(
    stores: tuple[Path, Path], tmp_path: Path, local_cluster: object
) -> None:
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    common: list[object] = ["stream", train, "--topics", 3, "--sweeps", 2, "--eval-every", 1, "--scheduler", address,
                            "--format", "json"]
    finals = {}
    for start in ("random", "sequential", "scvb0"):
        result = run([*common, "--out", tmp_path / start, "--algo", "gibbs", "--gibbs-start", start])
        assert result.exit_code == 0, result.output
        assert json.loads((tmp_path / start / "summary.json").read_text())["config"]["gibbs_start"] == start
        finals[start] = json.loads(result.stdout)["final"]["log_likelihood_per_token_mean"]
    assert len(set(finals.values())) == 3, finals
    refused = run([*common, "--out", tmp_path / "pf", "--algo", "pf", "--gibbs-start", "sequential"])
    assert refused.exit_code == 2 and "gibbs_start" in refused.output, refused.output


def test_stream_gibbs_partitions_set_the_chain_and_threads_do_not(
    stores: tuple[Path, Path], tmp_path: Path, local_cluster: object
) -> None:
    """--gibbs-partitions 2 is another chain than the sequential one, the same on 1 or 2 threads; the
    threads are not part of what a resume must match."""
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    common: list[object] = ["stream", train, "--topics", 3, "--sweeps", 3, "--eval-every", 3, "--scheduler", address,
                            "--format", "json", "--algo", "gibbs"]
    finals = {}
    for name, extra in (("seq", []), ("p2t1", ["--gibbs-partitions", 2]),
                        ("p2t2", ["--gibbs-partitions", 2, "--gibbs-threads", 2])):
        result = run([*common, "--out", tmp_path / name, *extra])
        assert result.exit_code == 0, result.output
        finals[name] = json.loads(result.stdout)["final"]["log_likelihood_per_token_mean"]
        # the fixture's workers have one thread each: two sampler threads are pointed out
        assert ("--threads-per-worker 2" in result.stderr) == (name == "p2t2"), result.stderr
    config = json.loads((tmp_path / "p2t2" / "summary.json").read_text())["config"]
    assert config["gibbs_partitions"] == 2 and config["gibbs_threads"] == 2
    assert finals["p2t1"] == finals["p2t2"] != finals["seq"]
    resumed = run([*common, "--out", tmp_path / "p2t1", "--gibbs-partitions", 2, "--gibbs-threads", 2, "--sweeps", 4,
                   "--resume"])
    assert resumed.exit_code == 0, resumed.output
    other = run([*common, "--out", tmp_path / "p2t2", "--gibbs-partitions", 3, "--sweeps", 4, "--resume"])
    assert other.exit_code != 0 and "gibbs_partitions" in other.output, other.output
    refused = run([*common[:-2], "--out", tmp_path / "pf", "--algo", "pf", "--gibbs-partitions", 2])
    assert refused.exit_code == 2 and "gibbs_partitions" in refused.output, refused.output
