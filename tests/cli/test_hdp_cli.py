"""`topicflow fit --family hdp | --method scvb0` and the commands that read an HDP model, end to end."""
from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.pipeline.test_update import NO_STOP, write_docs
from topicflow.api.hdp import hdp_topics
from topicflow.cli import main
from topicflow.io.models.store import load_model
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

T = 8


@pytest.fixture(scope="module")
def truth() -> object:
    return draw_planted_corpus(n_docs=100, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=4)


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, truth: object) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli-hdp")
    counts = truth.counts["default"]  # type: ignore[attr-defined]
    train = write_test_store(base / "train.zarr", {"default": counts[:60]}, shard_size=20)
    test = write_test_store(base / "test.zarr", {"default": counts[60:72]}, shard_size=12)
    return train, test


@pytest.fixture(scope="module")
def hdp_model(stores: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory, local_cluster: object) -> Path:
    """An HDP fitted by the command: PCSVB0 in minibatches with clumping, scored on the test store."""
    train, test = stores
    model = tmp_path_factory.mktemp("hdp-model") / "model"
    result = run(["fit", str(train), "--model", str(model), "--family", "hdp", "--truncation", str(T),
                  "--batch-size", "20", "--clumping", "--passes", "2", "--test", str(test), "--eval-every", "40",
                  "--seed", "1", "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    assert f"topics in use (share >= 0.001) of truncation {T}" in result.output and "saved model" in result.output
    return model


def run(args: list[str]) -> object:
    return CliRunner().invoke(main, args, catch_exceptions=False)


@pytest.mark.parametrize(("args", "message"), [
    (["--family", "hdp", "--topics", "5"], "--topics given with --family hdp --method pcsvb0, which does not use it"),
    (["--family", "hdp", "--tau0", "3", "--max-iter", "4"],
     "--max-iter, --tau0 given with --family hdp --method pcsvb0, which does not use them"),
    (["--method", "pcvb0", "--batch-size", "4", "--keep-doc-state"],
     "--batch-size, --keep-doc-state given with --family hdp --method pcvb0"),
    (["--method", "pcvb0", "--hyper-step", "5,100"], "--hyper-step: pcsvb0"),
    (["--method", "online", "--topics", "3", "--truncation", "5"],
     "--truncation given with --family lda --method online, which does not use it (where each applies: "
     "--truncation: pcsvb0, pcvb0)"),
    (["--topics", "3", "--clumping"], "--clumping given with --family lda --method batch"),
    (["--method", "scvb0", "--topics", "3", "--clumping", "--alpha-init", "2"],
     "--alpha-init, --clumping given with --family lda --method scvb0"),
    (["--method", "scvb0", "--topics", "3", "--seed-words", "w.txt"], "--seed-words given with --family lda --method scvb0"),
    (["--family", "hdp", "--method", "online"], "--family hdp is fitted by --method pcsvb0 or pcvb0"),
    (["--family", "lda", "--method", "pcvb0"], "--method pcvb0 fits the HDP family: use --family hdp"),
    (["--family", "hdp", "--eval-every", "10"], "--eval-every scores the --test store along the fit; give --test"),
    (["--method", "svb", "--topics", "3", "--passes", "2"], "--passes given with --method svb"),
])
def test_options_of_other_families_and_methods_are_refused(args: list[str], message: str, tmp_path: Path) -> None:
    result = run(["fit", str(tmp_path / "no-store"), "--model", str(tmp_path / "m"), *args])
    assert result.exit_code == 2, result.output  # a usage error, before the store is opened
    assert message in " ".join(result.output.split()), result.output


def test_bad_step_and_missing_topics_are_explained(stores: tuple[Path, Path], tmp_path: Path) -> None:
    train, _ = stores
    result = run(["fit", str(train), "--model", str(tmp_path / "m"), "--family", "hdp", "--topic-word-step", "10,1"])
    assert result.exit_code == 2 and "'topic_word_step' parameter of HDP" in result.output, result.output
    assert "exceeds 1" in result.output or "s / tau^kappa <= 1" in result.output
    result = run(["fit", str(train), "--model", str(tmp_path / "m"), "--method", "scvb0"])
    assert result.exit_code == 2 and "Missing option '--topics'" in result.output, result.output
    assert not (tmp_path / "m").exists()


def test_fit_records_an_hdp_model(hdp_model: Path) -> None:
    model = load_model(hdp_model)
    assert model.info.family == "hdp" and model.info.method == "pcsvb0" and model.state.n_topics == T
    topics = hdp_topics(model)
    assert 1 <= topics.n_in_use <= T and topics.n_in_use == model.info.topics_in_use
    assert any(r.get("heldout_perplexity") is not None for r in model.info.trace)


def test_topics_lists_only_the_topics_in_use(hdp_model: Path) -> None:
    model = load_model(hdp_model)
    expected = hdp_topics(model)
    result = run(["topics", str(hdp_model), "--top", "4"])
    assert result.exit_code == 0, result.output
    lines = result.output.strip().splitlines()
    assert lines[0] == f"{expected.n_in_use} topics in use (share >= 0.001) of truncation {T}"
    assert len(lines) == 1 + expected.n_in_use and all("share" in line for line in lines[1:])
    listing = json.loads(run(["topics", str(hdp_model), "--format", "json"]).output)
    assert [t["topic"] for t in listing["topics"]] == expected.in_use.tolist()
    weights = [t["stick_weight"] for t in listing["topics"]]
    assert weights == sorted(weights, reverse=True) and all(t["share"] >= 1e-3 for t in listing["topics"])
    assert listing["truncation"] == T and listing["topics_in_use"] == expected.n_in_use
    everything = json.loads(run(["topics", str(hdp_model), "--format", "json", "--all-topics"]).output)
    assert len(everything["topics"]) == T


def test_infer_evaluate_export_read_the_lda_view(hdp_model: Path, stores: tuple[Path, Path], tmp_path: Path,
                                                 local_cluster: object) -> None:
    _, test = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["infer", str(hdp_model), str(test), "--out", str(tmp_path / "theta.zarr"), "--scheduler", address])
    assert result.exit_code == 0, result.output
    theta = DocTopics.open(tmp_path / "theta.zarr").to_dask_array().compute()
    assert theta.shape == (12, T)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    result = run(["evaluate", str(hdp_model), str(test), "--format", "json", "--scheduler", address])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.output)
    # Three planted topics of ten terms each: between one topic's 10 terms and a flat model's 30.
    assert 5 < scores["perplexity"] < 30 and scores["n_docs"] == 12
    result = run(["export", str(hdp_model), "--out", str(tmp_path / "hdp.npz")])
    assert result.exit_code == 0, result.output
    with np.load(tmp_path / "hdp.npz") as data:
        model = load_model(hdp_model)
        np.testing.assert_allclose(data["alpha"], model.state.doc_topic_prior)
        assert data["alpha"].sum() == pytest.approx(hdp_topics(model).alpha)


def test_coherence_and_report_hide_topics_not_in_use(hdp_model: Path, stores: tuple[Path, Path], tmp_path: Path,
                                                     local_cluster: object) -> None:
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    expected = hdp_topics(load_model(hdp_model))
    result = run(["coherence", str(hdp_model), "--reference", str(train), "--measure", "u_mass", "--format", "json",
                  "--scheduler", address])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)
    everything = json.loads(run(["coherence", str(hdp_model), "--reference", str(train), "--measure", "u_mass",
                                 "--format", "json", "--all-topics", "--scheduler", address]).output)
    assert len(shown["per_topic"]) == expected.n_in_use and len(everything["per_topic"]) == T
    kept = [everything["per_topic"][k] for k in expected.in_use]
    np.testing.assert_allclose(shown["per_topic"], kept)
    assert shown["mean"] == pytest.approx(float(np.mean(kept)))
    assert shown["topics_in_use"] == expected.headline()
    out = tmp_path / "report.html"
    result = run(["report", str(hdp_model), "--corpus", str(train), "--out", str(out), "--scheduler", address])
    assert result.exit_code == 0, result.output
    page = html.unescape(out.read_text(encoding="utf-8"))
    assert expected.headline() in page and expected.headline() in result.output
    hidden = sorted(set(range(T)) - set(expected.in_use.tolist()))
    assert all(f'id="topic-{k}"' not in page for k in hidden)
    assert all(f'id="topic-{k}"' in page for k in expected.in_use)
    result = run(["report", str(hdp_model), "--out", str(tmp_path / "all.html"), "--all-topics"])
    assert result.exit_code == 0, result.output
    assert all(f'id="topic-{k}"' in (tmp_path / "all.html").read_text(encoding="utf-8") for k in range(T))


def test_pcvb0_and_scvb0_fit_from_the_command(stores: tuple[Path, Path], tmp_path: Path, local_cluster: object) -> None:
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["fit", str(train), "--model", str(tmp_path / "pcvb0"), "--method", "pcvb0", "--truncation", str(T),
                  "--passes", "3", "--scheduler", address])
    assert result.exit_code == 0, result.output
    model = load_model(tmp_path / "pcvb0")
    assert model.info.family == "hdp" and model.info.method == "pcvb0"
    assert "topics in use" in run(["topics", str(tmp_path / "pcvb0")]).output

    result = run(["fit", str(train), "--model", str(tmp_path / "scvb0"), "--method", "scvb0", "--topics", "3",
                  "--batch-size", "20", "--passes", "2", "--scheduler", address])
    assert result.exit_code == 0, result.output
    model = load_model(tmp_path / "scvb0")
    assert model.info.family == "lda" and model.info.method == "scvb0" and model.state.n_topics == 3
    # SCVB0's fixed alpha: Bleier's 0.1 for every topic.
    np.testing.assert_allclose(model.state.doc_topic_prior, 0.1)
    result = run(["topics", str(tmp_path / "scvb0"), "--format", "json"])
    assert result.exit_code == 0 and len(json.loads(result.output)["topics"]) == 3


def test_update_continues_an_hdp_model(truth: object, tmp_path: Path, local_cluster: object) -> None:
    counts = truth.counts["default"]  # type: ignore[attr-defined]
    store = tmp_path / "corpus.zarr"
    ingest_corpus([write_docs(tmp_path / "base.jsonl", counts, 0, 60)], store, tokenizer=NO_STOP, shard_size=20)
    model = tmp_path / "model"
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["fit", str(store), "--model", str(model), "--family", "hdp", "--truncation", str(T),
                  "--batch-size", "20", "--passes", "1", "--scheduler", address])
    assert result.exit_code == 0, result.output
    before = load_model(model)
    append_corpus(store, [write_docs(tmp_path / "new.jsonl", counts, 60, 100)])
    refused = run(["update", str(model), str(store), "--batch-size", "10"])
    assert refused.exit_code == 2 and "fitted by pcsvb0, whose minibatch size" in refused.output
    result = run(["update", str(model), str(store), "--format", "json", "--scheduler", address])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["new_docs"] == 40
    after = load_model(model)
    assert after.version == 2 and after.info.collapsed_state["docs_seen"] == before.info.collapsed_state["docs_seen"] + 40


def test_presets_of_bleier_fill_the_options_not_typed(stores: tuple[Path, Path], tmp_path: Path,
                                                      local_cluster: object) -> None:
    train, _ = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    result = run(["fit", str(train), "--model", str(tmp_path / "hdp"), "--preset", "bleier2016", "--truncation",
                  str(T), "--passes", "1", "--scheduler", address])
    assert result.exit_code == 0, result.output
    settings = load_model(tmp_path / "hdp").info.settings
    # The paper's step sizes and word-by-word schedule from the preset; T and the passes as typed.
    assert settings["method"] == "pcsvb0" and settings["batch_size"] is None and settings["passes"] == 1
    assert settings["params"]["truncation"] == T and settings["params"]["hyper_step"]["scale"] == 5.0
    result = run(["fit", str(train), "--model", str(tmp_path / "scvb0"), "--preset", "bleier2016-scvb0", "--topics",
                  "3", "--passes", "1", "--batch-size", "20", "--scheduler", address])
    assert result.exit_code == 0, result.output
    model = load_model(tmp_path / "scvb0")
    assert model.info.method == "scvb0" and model.state.n_topics == 3
    np.testing.assert_allclose(model.state.doc_topic_prior, 0.1)
