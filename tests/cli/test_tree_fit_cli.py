"""``topicflow fit --prior-tree``: tree LDA end to end from the command line, topics per language, refusals."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.pipeline.tree_lda.test_batch import _store_and_tree
from topicflow.api.tree_lda import TreeLDA
from topicflow.cli import main
from topicflow.io.models.store import load_model


def run(args: list[str]) -> object:
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _store_and_tree(tmp_path_factory.mktemp("tree-cli"))


@pytest.mark.parametrize("inference", ["vb", "hybrid"])
def test_fit_with_a_prior_tree_saves_the_estimators_model(tiny: tuple[Path, Path], tmp_path: Path,
                                                          local_cluster: object, inference: str) -> None:
    store, tree = tiny
    model_path = tmp_path / "m"
    result = run(["fit", str(store), "--model", str(model_path), "--prior-tree", str(tree), "--inference", inference,
                  "--topics", "2", "--max-iter", "3", "--tol", "0", "--seed", "3", "--doc-topics",
                  str(tmp_path / "theta.zarr"),
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    assert "fitting tree LDA K=2" in result.output and "saved model" in result.output
    model = load_model(model_path)
    assert model.info.family == "tree_lda" and model.info.settings["estep"] == inference
    api = TreeLDA(2, prior_tree=tree, inference=inference, max_iter=3, tol=0.0, seed=3).fit(store)
    np.testing.assert_array_equal(TreeLDA.load(model_path).edge_var_, api.edge_var_)
    assert (tmp_path / "theta.zarr").exists()
    listed = run(["topics", str(model_path), "--top", "3"])
    assert listed.exit_code == 0, listed.output
    assert "[en]" in listed.output and "[de]" in listed.output, listed.output
    updated = CliRunner().invoke(main, ["update", str(model_path), str(store)])
    assert updated.exit_code != 0 and "tree LDA model" in updated.output, updated.output


@pytest.mark.parametrize(("args", "message"), [
    (["--estep", "hybrid"], "--estep given with --prior-tree"),
    (["--method", "online", "--batch-size", "4"], "given with --prior-tree"),
    (["--topic-word-prior", "0.1"], "--topic-word-prior given with --prior-tree"),
])
def test_options_tree_lda_does_not_use_are_refused(tiny: tuple[Path, Path], tmp_path: Path, args: list[str],
                                                    message: str) -> None:
    store, tree = tiny
    result = run(["fit", str(store), "--model", str(tmp_path / "m"), "--prior-tree", str(tree), "--topics", "2",
                  *args])
    assert result.exit_code == 2 and message in result.output, result.output
    assert not (tmp_path / "m").exists()


def test_tree_options_without_a_tree_and_a_tree_for_another_store(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    store, tree = tiny
    result = run(["fit", str(store), "--model", str(tmp_path / "m"), "--topics", "2", "--inference", "hybrid"])
    assert result.exit_code == 2 and "apply to tree LDA only" in result.output, result.output
    result = run(["fit", str(store), "--model", str(tmp_path / "m"), "--family", "tree_lda", "--topics", "2"])
    assert result.exit_code == 2 and "needs --prior-tree" in result.output, result.output
    other = tmp_path / "o.jsonl"
    other.write_text(json.dumps({"id": "x", "en": "apple pear", "de": "apfel birne"}) + "\n", encoding="utf-8")
    assert run(["ingest", str(other), "--out", str(tmp_path / "o.zarr"), "--lang-field", "en=en",
                "--lang-field", "de=de"]).exit_code == 0
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "o.zarr"), "--model", str(tmp_path / "m"),
                                       "--prior-tree", str(tree), "--topics", "2"])
    assert result.exit_code != 0 and "rebuild the tree" in result.output, result.output
    assert not (tmp_path / "m").exists()
