"""`topicflow fit --method svb` end to end, and the options streaming VB refuses."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.io.models.store import load_model
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli-svb")
    truth = draw_planted_corpus(n_docs=240, n_topics=3, n_terms=30, doc_length=40, alpha=0.3, seed=2)
    train = write_test_store(base / "train.zarr", {"default": truth.counts["default"][:200]}, shard_size=50)
    test = write_test_store(base / "test.zarr", {"default": truth.counts["default"][200:]}, shard_size=50)
    return train, test


def test_fit_svb_then_use_the_model(stores: tuple[Path, Path], tmp_path: Path, local_cluster: object) -> None:
    train, test = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    model = tmp_path / "model"
    result = CliRunner().invoke(main, ["fit", str(train), "--model", str(model), "--topics", "3", "--method", "svb",
                                       "--batch-size", "50", "--seed", "1", "--scheduler", address])
    assert result.exit_code == 0, result.output
    assert "by streaming (svb) VB" in result.output and "4 minibatches, 200 documents" in result.output
    saved = load_model(model)
    assert saved.info.method == "svb" and saved.info.online["t"] == 4
    assert saved.info.online["config"]["batch_size"] == 50 and "tau0" not in saved.info.online["config"]
    listing = json.loads(CliRunner().invoke(main, ["topics", str(model), "--top", "5", "--format", "json"]).output)
    for topic in listing["topics"]:  # each planted topic owns ten consecutive terms
        assert len({int(t["term"][2:]) // 10 for t in topic["default"]}) == 1, topic
    scores = CliRunner().invoke(main, ["evaluate", str(model), str(test), "--format", "json", "--scheduler", address])
    assert scores.exit_code == 0, scores.output
    assert 10 < json.loads(scores.output)["perplexity"] < 25


@pytest.mark.parametrize(("option", "message"), [
    (["--tau0", "64"], "--tau0 given with --method svb"),
    (["--kappa", "0.7", "--passes", "2"], "--kappa, --passes given with --method svb"),
    (["--optimize-topic-word-prior"], "optimize_topic_word_prior cannot be used with method 'svb'"),
])
def test_fit_svb_refuses_online_only_settings(stores: tuple[Path, Path], tmp_path: Path, option: list[str],
                                              message: str) -> None:
    result = CliRunner().invoke(main, ["fit", str(stores[0]), "--model", str(tmp_path / "m"), "--topics", "3",
                                       "--method", "svb", *option])
    assert result.exit_code != 0 and message in result.output, result.output
    assert not (tmp_path / "m").exists()
