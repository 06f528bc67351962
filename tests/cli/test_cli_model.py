"""`topicflow fit | topics | infer | evaluate | export` end to end on an in-process cluster."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.cli import main
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli-model")
    truth = draw_planted_corpus(n_docs=240, n_topics=3, n_terms=30, doc_length=40, alpha=0.3, seed=2)
    train = write_test_store(base / "train.zarr", {"default": truth.counts["default"][:200]}, shard_size=50)
    test = write_test_store(base / "test.zarr", {"default": truth.counts["default"][200:]}, shard_size=50)
    return train, test


def run(args: list[str]) -> object:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    return result


def test_fit_then_use_the_model(stores: tuple[Path, Path], tmp_path: Path, local_cluster: object) -> None:
    train, test = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    model = tmp_path / "model"
    result = run(["fit", str(train), "--model", str(model), "--topics", "3", "--max-iter", "30",
                  "--seed", "1", "--doc-topics", str(tmp_path / "train-theta.zarr"), "--scheduler", address])
    assert result.exit_code == 0, result.output
    assert "ELBO" in result.output and "saved model" in result.output
    assert (model / "versions.json").is_file()
    assert len(np.concatenate([t for _, t in DocTopics.open(tmp_path / "train-theta.zarr")])) == 200

    result = run(["topics", str(model), "--top", "5", "--format", "json"])
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    assert len(listing["topics"]) == 3 and all(len(t["default"]) == 5 for t in listing["topics"])
    # Each planted topic owns ten consecutive terms: a recovered topic's top terms share one block.
    for topic in listing["topics"]:
        blocks = {int(t["term"][2:]) // 10 for t in topic["default"]}
        assert len(blocks) == 1, topic
    assert run(["topics", str(model)]).output.count("topic-") == 3

    result = run(["infer", str(model), str(test), "--out", str(tmp_path / "theta.zarr"), "--scheduler", address])
    assert result.exit_code == 0, result.output
    theta = DocTopics.open(tmp_path / "theta.zarr").to_dask_array().compute()
    assert theta.shape == (40, 3)

    result = run(["evaluate", str(model), str(test), "--format", "json", "--scheduler", address])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    # Three planted topics of ten terms each: between one topic's 10 and a flat model's 30.
    assert 10 < scores["perplexity"] < 25 and scores["n_docs"] == 40

    result = run(["export", str(model), "--out", str(tmp_path / "m.npz")])
    assert result.exit_code == 0, result.output
    with np.load(tmp_path / "m.npz") as npz:
        assert npz["topic_word"].shape == (3, 30)


def test_fit_refuses_existing_model_and_bad_alpha(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    (tmp_path / "model").mkdir()
    result = CliRunner().invoke(main, ["fit", str(train), "--model", str(tmp_path / "model"), "--topics", "2"])
    assert result.exit_code == 2 and "exists already" in result.output and "--overwrite" in result.output
    result = CliRunner().invoke(main, ["fit", str(train), "--model", str(tmp_path / "m2"), "--topics", "2", "--doc-topic-prior", "lots"])
    assert result.exit_code == 2 and "doc_topic_prior" in result.output


def test_init_shape_reaches_the_model_and_is_checked(stores: tuple[Path, Path], tmp_path: Path,
                                                     local_cluster: object) -> None:
    from topicflow.api.lda import LDA

    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    models = {}
    for shape in ("100", "10"):
        path = tmp_path / f"model-{shape}"
        result = run(["fit", str(train), "--model", str(path), "--topics", "3", "--max-iter", "1",
                      "--init-shape", shape, "--scheduler", address])
        assert result.exit_code == 0, result.output
        models[shape] = LDA.load(path)
    assert models["10"].init_shape == 10.0 and models["100"].init_shape == 100.0
    assert not np.allclose(models["10"].components_, models["100"].components_)
    result = CliRunner().invoke(main, ["fit", str(train), "--model", str(tmp_path / "m0"), "--topics", "2",
                                       "--init-shape", "0"])
    assert result.exit_code == 2 and "--init-shape" in result.output


def test_missing_store_and_model_are_explained(tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["topics", str(tmp_path / "nope")])
    assert result.exit_code == 2 and "no topicflow model" in result.output
    result = CliRunner().invoke(main, ["fit", str(tmp_path / "nostore"), "--model", str(tmp_path / "m"), "--topics", "2"])
    assert result.exit_code == 2 and "no corpus store" in result.output


def test_polylingual_model_prints_and_exports_each_language(tmp_path: Path) -> None:
    truth = draw_planted_corpus(n_docs=120, n_topics=2, n_terms=20, doc_length=30, alpha=0.3, seed=4,
                                languages=("en", "de"))
    store = write_test_store(tmp_path / "poly.zarr", truth.counts, shard_size=50)
    model = tmp_path / "poly-model"
    assert run(["fit", str(store), "--model", str(model), "--topics", "2", "--max-iter", "20",
                "--workers", "1", "--threads-per-worker", "2"]).exit_code == 0
    text = run(["topics", str(model), "--top", "3"]).output
    assert text.count("[en] en") == 2 and text.count("[de] de") == 2, text
    assert run(["export", str(model), "--out", str(tmp_path / "poly.npz")]).exit_code == 0
    with np.load(tmp_path / "poly.npz") as npz:
        assert {"topic_word_en", "topic_word_de", "vocab_en", "vocab_de", "alpha"} <= set(npz.files)
        assert npz["topic_word_de"].shape == (2, 20)


def test_online_fit_on_servers_or_threads_gives_one_model(
    stores: tuple[Path, Path], tmp_path: Path, local_cluster: object
) -> None:
    train, test = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    saved = {}
    for executor in ("servers", "threads"):
        model = tmp_path / executor
        result = run(["fit", str(train), "--model", str(model), "--topics", "3", "--method", "online",
                      "--batch-size", "40", "--passes", "3", "--shuffle-window", "100", "--seed", "4",
                      "--executor", executor, "--scheduler", address])
        assert result.exit_code == 0, result.output
        assert "15 minibatches, 600 documents" in result.output
        with np.load(run_export(model, tmp_path / f"{executor}.npz")) as npz:
            saved[executor] = npz["topic_word"]
    np.testing.assert_array_equal(saved["servers"], saved["threads"])
    scores = json.loads(run(["evaluate", str(tmp_path / "threads"), str(test), "--format", "json"]).output)
    assert 10 < scores["perplexity"] < 25


def run_export(model: Path, out: Path) -> Path:
    result = run(["export", str(model), "--out", str(out)])
    assert result.exit_code == 0, result.output
    return out
