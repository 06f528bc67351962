"""`topicflow evaluate --protocol ...` and `--labels`: text and JSON name protocol, units and settings."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from tests.pipeline.evaluation.stores import Stores, build_stores
from topicflow.cli import main
from topicflow.io.models.store import save_model
from topicflow.pipeline.evaluation import heldout_likelihood, topic_features_scores


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> tuple[Stores, Path]:
    base = tmp_path_factory.mktemp("cli-evaluate")
    stores = build_stores(base)
    save_model(base / "model", stores.model)
    return stores, base / "model"


def run(args: list[str], address: str) -> object:
    return CliRunner().invoke(main, [*map(str, args), "--scheduler", address], catch_exceptions=False)


def test_default_text_names_protocol_units_and_settings(saved: tuple[Stores, Path], local_cluster: object) -> None:
    stores, model = saved
    result = run(["evaluate", model, stores.plain], local_cluster.scheduler_address)  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    expected = heldout_likelihood(stores.model, stores.plain)
    assert "protocol             completion-random" in result.stdout
    assert f"documents            {expected.n_docs}" in result.stdout
    assert f"evaluated tokens     {expected.n_tokens}" in result.stdout
    assert f"log likelihood       {expected.log_lik_per_token:.4f} nats per token" in result.stdout
    assert f"perplexity           {expected.perplexity:.2f}" in result.stdout
    assert "settings             seed=0 fraction=0.5 max_doc_iter=100 doc_tol=0.001" in result.stdout


@pytest.mark.parametrize("protocol", ["completion-random", "completion-first-half", "left-to-right", "bound"])
def test_json_of_every_protocol(saved: tuple[Stores, Path], local_cluster: object, protocol: str) -> None:
    stores, model = saved
    result = run(["evaluate", model, stores.ordered, "--protocol", protocol, "--particles", "4", "--seed", "2",
                  "--fraction", "0.3", "--format", "json"], local_cluster.scheduler_address)  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    expected = heldout_likelihood(stores.model, stores.ordered, protocol, seed=2, fraction=0.3, n_particles=4)
    assert payload == json.loads(json.dumps(expected.to_dict()))
    assert payload["protocol"] == protocol and payload["units"]["log_lik_per_token"] == "nats per evaluated token"
    assert {"log_lik_per_token", "perplexity", "n_docs", "n_tokens", "settings", "token_order"} <= set(payload)
    if protocol == "left-to-right":
        assert payload["settings"] == {"seed": 2, "particles": 4} and payload["token_order"] == "reading"
    if protocol.startswith("completion"):
        assert payload["settings"]["fraction"] == 0.3


def test_labels_text_and_json(saved: tuple[Stores, Path], local_cluster: object) -> None:
    stores, model = saved
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    expected = topic_features_scores(stores.model, stores.plain, n_folds=3, max_docs=90, seed=1)
    result = run(["evaluate", model, stores.plain, "--labels", "--folds", "3", "--max-docs", "90", "--seed", "1",
                  "--format", "json"], address)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout) == json.loads(json.dumps(expected.to_dict()))
    text = run(["evaluate", model, stores.plain, "--labels", "--folds", "3", "--max-docs", "90", "--seed", "1"],
               address).stdout
    assert "documents            90 (of 150 in the store)" in text
    assert f"accuracy {expected.classification.mean_accuracy:.4f} +- {expected.classification.std_accuracy:.4f}" in text
    assert f"accuracy {expected.baseline.mean_accuracy:.4f}" in text and "tf-idf" in text
    for name in ("NMI (arithmetic)", "NMI (geometric)", "ARI", "purity"):
        assert name in text


def test_clear_errors(saved: tuple[Stores, Path], local_cluster: object) -> None:
    stores, model = saved
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["evaluate", model, stores.unlabeled, "--labels"], address)
    assert result.exit_code == 2 and "has no document labels" in result.output and "--label-field" in result.output
    result = run(["evaluate", model, stores.plain, "--protocol", "completion-first-half"], address)
    assert result.exit_code == 2 and "does not keep" in result.output and "--keep-order" in result.output
    result = run(["evaluate", model, stores.plain, "--protocol", "heldout"], address)
    assert result.exit_code == 2 and "'heldout' is not one of 'completion-random'" in result.output
    result = run(["evaluate", model, stores.plain, "--labels", "--protocol", "bound"], address)
    assert result.exit_code == 2 and "run `topicflow evaluate` once for each" in result.output
