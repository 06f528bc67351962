"""`topicflow coherence` end to end: JSON and text output, and its errors."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.api.lda import LDA
from topicflow.cli import main
from topicflow.metrics import coherence
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli-coherence")
    truth = draw_planted_corpus(n_docs=150, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=4)
    store = write_test_store(base / "train.zarr", {"default": truth.counts["default"]}, shard_size=40)
    LDA(3, max_iter=15, seed=0).fit(str(store)).save(base / "model")
    return base / "model", store


def run(args: list[str]) -> Any:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_json_output_holds_the_measure_per_topic_and_mean(fitted: tuple[Path, Path], local_cluster: Any) -> None:
    model, store = fitted
    address = local_cluster.scheduler_address
    result = run(["coherence", str(model), "--reference", str(store), "--measure", "u_mass", "--top-n", "6",
                  "--format", "json", "--scheduler", address])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    expected = coherence(str(model), str(store), measure="u_mass", top_n=6)
    assert payload["measure"] == "u_mass" and payload["top_n"] == 6 and payload["window"] is None
    assert len(payload["per_topic"]) == 3
    np.testing.assert_allclose(payload["per_topic"], expected.per_topic, rtol=1e-12)
    assert payload["mean"] == pytest.approx(expected.mean, rel=1e-12)
    assert [t["words"] for t in payload["topics"]] == [list(w) for w in expected.topics]
    assert all(len(t["words"]) == 6 for t in payload["topics"]) and payload["n_units"] == 150

    text = run(["coherence", str(model), "--reference", str(store), "--measure", "u_mass", "--scheduler", address])
    assert text.exit_code == 0, text.output
    assert "u_mass coherence, top 10 words" in text.output and text.output.count("topic-") == 3
    assert "mean" in text.output


def test_window_measure_on_a_store_without_order_says_to_keep_order(fitted: tuple[Path, Path]) -> None:
    model, store = fitted
    result = CliRunner().invoke(main, ["coherence", str(model), "--reference", str(store), "--measure", "c_npmi"])
    assert result.exit_code == 2
    assert "--keep-order" in result.output and "u_mass" in result.output and str(store) in result.output


def test_missing_model_and_bad_options_are_reported(fitted: tuple[Path, Path], tmp_path: Path) -> None:
    _, store = fitted
    result = CliRunner().invoke(main, ["coherence", str(tmp_path / "nope"), "--reference", str(store)])
    assert result.exit_code == 2 and "no topicflow model" in result.output
    model, _ = fitted
    result = CliRunner().invoke(main, ["coherence", str(model), "--reference", str(tmp_path / "none.zarr"),
                                       "--measure", "u_mass"])
    assert result.exit_code == 2 and "no corpus store" in result.output
    result = CliRunner().invoke(main, ["coherence", str(model), "--reference", str(store), "--measure", "u_mass",
                                       "--window", "5"])
    assert result.exit_code == 2 and "u_mass counts documents" in result.output


def test_python_api_accepts_a_model_directory_a_saved_model_and_an_estimator(fitted: tuple[Path, Path]) -> None:
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.store import load_model

    model_path, store = fitted
    by_path = coherence(model_path, store, measure="u_mass")
    saved = load_model(model_path)
    assert coherence(saved, Corpus.open(store), measure="u_mass").per_topic == by_path.per_topic
    estimator = LDA(3)
    estimator.model_ = saved
    assert coherence(estimator, str(store), measure="u_mass").per_topic == by_path.per_topic
    words = [list(t) for t in by_path.topics]
    assert coherence(words, store, measure="u_mass").per_topic == by_path.per_topic
