"""``topicflow fit --prior-tree``: tree LDA end to end from the command line (vb, hybrid, gibbs; batch and online;
checkpoints; the chapter's preset), topics per language, refusals."""
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
    (["--method", "svb"], "--method svb given with --prior-tree"),
    (["--preset", "zhai2014-mrlda"], "--preset zhai2014-mrlda is an LDA/HDP preset"),
    (["--inference", "gibbs", "--tol", "0.1", "--burn-in", "2"],
     "--tol, --burn-in given with --inference gibbs, which does not use them (the tree Gibbs sampler runs"),
    (["--inference", "gibbs", "--doc-topic-prior", "auto"], "keeps alpha fixed; give a number"),
    (["--inference", "gibbs", "--method", "online"], "online tree LDA is variational"),
    (["--inference", "gibbs", "--checkpoint-every", "2"], "--checkpoint-every given with --inference gibbs"),
    (["--sync-every", "2"], "--sync-every given with --inference vb"),
    (["--batch-size", "4"], "--batch-size given with --inference vb, which does not use them (batch VB"),
    (["--method", "online", "--max-iter", "3"], "--max-iter given with --inference vb --method online"),
    (["--method", "online", "--executor", "servers"], "Dask tasks only"),
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


def test_gibbs_fit_from_the_command_line(tiny: tuple[Path, Path], tmp_path: Path, local_cluster: object) -> None:
    store, tree = tiny
    model_path = tmp_path / "g"
    result = run(["fit", str(store), "--model", str(model_path), "--prior-tree", str(tree), "--inference", "gibbs",
                  "--topics", "2", "--max-iter", "5", "--sync-every", "2", "--doc-topic-prior", "0.1", "--seed", "2",
                  "--doc-topics", str(tmp_path / "theta.zarr"),
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    assert "sweep    4  log p(w,z,y)" in result.output and "(5 sweeps in 3 rounds" in result.output, result.output
    model = load_model(model_path)
    assert model.info.method == "gibbs" and model.info.settings["estep"] == "gibbs"
    assert (model.info.settings["sync_every"], model.info.settings["doc_topic_prior"]) == (2, 0.1)
    api = TreeLDA(2, prior_tree=tree, inference="gibbs", max_iter=5, sync_every=2, alpha=0.1, seed=2).fit(store)
    np.testing.assert_array_equal(TreeLDA.load(model_path).edge_var_, api.edge_var_)
    assert (tmp_path / "theta.zarr").exists()
    listed = run(["topics", str(model_path), "--top", "3"])
    assert listed.exit_code == 0 and "[de]" in listed.output, listed.output
    # Unset, --max-iter is the sampler's 200 sweeps and alpha 1/K (checked without running them).
    default = TreeLDA(2, prior_tree=tree, inference="gibbs").config()
    assert (default.max_iter, default.doc_topic_prior) == (200, 0.5)


def test_online_fit_with_checkpoints_from_the_command_line(tiny: tuple[Path, Path], tmp_path: Path,
                                                          local_cluster: object) -> None:
    store, tree = tiny
    model_path = tmp_path / "o"
    result = run(["fit", str(store), "--model", str(model_path), "--prior-tree", str(tree), "--topics", "2",
                  "--method", "online", "--batch-size", "8", "--passes", "2", "--tau0", "4", "--kappa", "0.6",
                  "--checkpoint-every", "3", "--checkpoint", str(tmp_path / "ck"),
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    assert "(8 minibatches, 60 documents" in result.output, result.output
    assert not (tmp_path / "ck").exists()  # removed once the model is saved
    model = load_model(model_path)
    assert model.info.method == "online" and model.info.online["t"] == 8
    api = TreeLDA(2, prior_tree=tree, method="online", batch_size=8, passes=2, tau0=4.0, kappa=0.6).fit(store)
    np.testing.assert_array_equal(TreeLDA.load(model_path).edge_var_, api.edge_var_)


def test_the_chapter_preset_fills_what_is_not_typed(tiny: tuple[Path, Path], tmp_path: Path,
                                                    local_cluster: object) -> None:
    store, tree = tiny
    model_path = tmp_path / "p"
    result = run(["fit", str(store), "--model", str(model_path), "--prior-tree", str(tree), "--preset",
                  "zhai2014-ptlda", "--topics", "2", "--max-iter", "2",
                  "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    settings = load_model(model_path).info.settings
    assert (settings["n_topics"], settings["max_iter"]) == (2, 2)  # typed
    assert (settings["estep"], settings["doc_topic_prior_mode"], settings["doc_topic_prior"], settings["burn_in"],
            settings["samples"], settings["hybrid_init"], settings["normalization"]) == (
        "hybrid", "fixed", 0.01, 5, 5, "random", "node")  # the chapter's
    # The preset with --inference gibbs: its hybrid sweeps are dropped, its alpha kept.
    gibbs = run(["fit", str(store), "--model", str(tmp_path / "pg"), "--prior-tree", str(tree), "--preset",
                 "zhai2014-ptlda", "--inference", "gibbs", "--topics", "2", "--max-iter", "2",
                 "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert gibbs.exit_code == 0, gibbs.output
    assert load_model(tmp_path / "pg").info.settings["doc_topic_prior"] == 0.01
    missing = run(["fit", str(store), "--model", str(tmp_path / "px"), "--preset", "zhai2014-ptlda"])
    assert missing.exit_code == 2 and "needs --prior-tree TREE" in missing.output, missing.output
