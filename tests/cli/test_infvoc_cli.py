"""``topicflow fit --family infvoc``, ``topics`` and ``report`` on infvoc models, and the refusals."""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

import topicflow
from tests.api.test_infvoc import SMALL, assert_same_state, topic_texts, write_store
from topicflow.cli import main
from topicflow.io.models.infvoc import read_doc_topics
from topicflow.io.models.store import load_model

#: SMALL as command-line options.
OPTIONS = ["--topics", "3", "--batch-size", "12", "--truncation", "40", "--reorder-every", "3", "--alpha-beta", "50",
           "--seed", "4"]


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("infvoc_cli")
    texts = topic_texts(96, seed=1)
    return {"ordered": write_store(base, texts, shard_size=24, name="o"),
            "plain": write_store(base, texts[:12], shard_size=6, keep_order=False, name="p")}


def run(*args: Any, cluster: Any = None) -> Any:
    extra = [] if cluster is None else ["--scheduler", cluster.scheduler_address]
    return CliRunner().invoke(main, [str(a) for a in args] + extra, catch_exceptions=False)


@pytest.fixture(scope="module")
def fitted(stores: dict[str, Path], tmp_path_factory: pytest.TempPathFactory, local_cluster: Any) -> Path:
    """An infvoc model fitted by the command on the distributed cluster, two words tracked."""
    path = tmp_path_factory.mktemp("infvoc_model") / "m"
    result = run("fit", stores["ordered"], "--model", path, "--family", "infvoc", *OPTIONS,
                 "--track-words", "kalolo,rarexyzw", cluster=local_cluster)
    assert result.exit_code == 0, result.output
    return path


def test_fit_command_saves_the_estimators_model(fitted: Path, stores: dict[str, Path]) -> None:
    api = topicflow.InfVocLDA(**SMALL, track_words=("kalolo", "rarexyzw")).fit(stores["ordered"])
    saved = topicflow.InfVocLDA.load(fitted)
    assert saved.get_params() == api.get_params()
    assert_same_state(saved.state_, api.state_)
    assert saved.word_index_ == api.word_index_
    info = load_model(fitted).info
    assert (info.family, info.kind, info.method) == ("infvoc", "infvoc", "online")
    assert info.settings["step"] == {"tau0": 64.0, "kappa": 0.8}  # infvoc's defaults, not online LDA's 10 and 0.7


def test_restate_tail_option_reaches_the_saved_model(stores: dict[str, Path], tmp_path: Path) -> None:
    result = run("fit", stores["ordered"], "--model", tmp_path / "m", "--family", "infvoc", *OPTIONS, "--restate-tail")
    assert result.exit_code == 0, result.output
    assert load_model(tmp_path / "m").info.settings["restate_tail"] is True
    refused = run("fit", stores["ordered"], "--model", tmp_path / "n", "--topics", "3", "--restate-tail")
    assert refused.exit_code != 0 and "--family infvoc" in refused.output


def test_topics_lists_words_with_probability_and_tos_rank(fitted: Path) -> None:
    model = topicflow.InfVocLDA.load(fitted)
    text = run("topics", fitted, "--top", "4")
    assert text.exit_code == 0, text.output
    lines = text.output.strip().splitlines()
    assert lines[0].startswith("infvoc model: ") and "words seen" in lines[0] and "T=40, U=3" in lines[0]
    for k, (line, row) in enumerate(zip(lines[1:], model.top_terms(4))):
        assert line.startswith(f"topic-{k} (TOS {model.tos_sizes_[k]:,}): ")
        assert re.findall(r"(\S+) (\d\.\d{4}) #(\d+)", line) == [(w, f"{p:.4f}", str(r)) for w, p, r in row]
    listing = json.loads(run("topics", fitted, "--top", "4", "--format", "json").output)
    assert listing["family"] == "infvoc" and listing["n_words"] == model.n_words_ and listing["g0"] == "default"
    for entry, row, size in zip(listing["topics"], model.top_terms(4), model.tos_sizes_):
        assert entry["tos_size"] == size
        assert [(t["term"], t["p"], t["rank"]) for t in entry["default"]] == row
    refused = run("topics", fitted, "--paths")
    assert refused.exit_code == 2 and "concept paths of a tree model" in refused.output


def test_report_charts_the_tracked_words_ranks(fitted: Path, tmp_path: Path) -> None:
    result = run("report", fitted, "--out", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r.html").read_text()
    assert page.count('class="rank-chart"') >= 1 and "Rank across minibatches (Fig. 7.1)" in page
    assert 'alt="rank of kalolo' in page or "kalolo (#" in page
    assert "online LDA with an infinite vocabulary" in page and "trace-chart" in page
    assert page.count('class="topic-chart"') == 3


def test_report_without_tracked_words_says_how_to_get_the_chart(stores: dict[str, Path], tmp_path: Path) -> None:
    topicflow.InfVocLDA(**SMALL).fit(stores["ordered"]).save(tmp_path / "m")
    result = run("report", tmp_path / "m", "--out", tmp_path / "r.html")
    assert result.exit_code == 0, result.output
    page = (tmp_path / "r.html").read_text()
    assert 'class="rank-chart"' not in page and "--track-words w1,w2" in page


def test_infer_evaluate_and_export_read_the_lda_view(fitted: Path, stores: dict[str, Path], tmp_path: Path,
                                                     local_cluster: Any) -> None:
    exported = run("export", fitted, "--out", tmp_path / "m.npz")
    assert exported.exit_code == 0, exported.output
    with np.load(tmp_path / "m.npz", allow_pickle=False) as arrays:
        view = topicflow.InfVocLDA.load(fitted).components_
        assert arrays["topic_word"].shape == view.shape
        np.testing.assert_allclose(arrays["topic_word"].sum(axis=1), 1.0)
    evaluated = run("evaluate", fitted, stores["ordered"], "--format", "json", cluster=local_cluster)
    assert evaluated.exit_code == 0, evaluated.output
    assert np.isfinite(json.loads(evaluated.output)["log_lik_per_token"])
    inferred = run("infer", fitted, stores["ordered"], "--out", tmp_path / "t.zarr", cluster=local_cluster)
    assert inferred.exit_code == 0 and "96 documents" in inferred.output


def test_preset_fills_what_is_not_typed(stores: dict[str, Path], tmp_path: Path) -> None:
    result = run("fit", stores["ordered"], "--model", tmp_path / "m", "--preset", "zhai2014-infvoc", "--topics", "3",
                 "--batch-size", "12", "--truncation", "40", "--doc-topics", tmp_path / "dt.zarr")
    assert result.exit_code == 0, result.output
    model = topicflow.InfVocLDA.load(tmp_path / "m")
    params = model.params()
    # typed: K, S, T; from the preset: alpha^beta 3k, U 10, tau0 64, kappa 0.6; alpha^theta = 1/K of the typed K
    assert (params.n_topics, model.batch_size, params.truncation) == (3, 12, 40)
    assert (params.stick_concentration, params.reorder_every, params.step.tau0, params.step.kappa) == (3000.0, 10,
                                                                                                       64.0, 0.6)
    assert params.alpha == pytest.approx(1 / 3)
    online = read_doc_topics(tmp_path / "dt.zarr")
    assert online["doc_topic"].shape == (96, 3) and sorted(online["doc"].tolist()) == list(range(96))


def test_checkpointed_fit_is_the_same_model(stores: dict[str, Path], tmp_path: Path) -> None:
    result = run("fit", stores["ordered"], "--model", tmp_path / "m", "--family", "infvoc", *OPTIONS,
                 "--checkpoint-every", "2", "--resume", "--no-g0")
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "m.checkpoint").exists()  # removed once the model is saved
    expected = topicflow.InfVocLDA(**SMALL, g0=False).fit(stores["ordered"])
    assert_same_state(topicflow.InfVocLDA.load(tmp_path / "m").state_, expected.state_)


@pytest.mark.parametrize(("args", "message"), [
    (["--family", "infvoc", "--max-iter", "5"], "--max-iter given with --family infvoc, which does not use it"),
    (["--family", "infvoc", "--method", "online"], "--method given with --family infvoc"),
    (["--family", "infvoc", "--prior-tree", "t"], "--prior-tree given with --family infvoc"),
    (["--alpha-beta", "100"], "--alpha-beta apply to infinite-vocabulary LDA only: add --family infvoc"),
    (["--method", "online", "--track-words", "a"], "--track-words apply to infinite-vocabulary LDA only"),
    (["--family", "infvoc", "--g0", "g0dir", "--no-g0"], "--g0 G0 and --no-g0 contradict each other"),
    (["--family", "infvoc", "--doc-topic-prior", "auto"], "alpha^theta is a fixed number"),
    (["--family", "infvoc", "--preset", "zhai2014-mrlda"], "not an infvoc preset: use one of zhai2014-infvoc"),
    (["--family", "infvoc", "--unseen-weight", "g0", "--no-g0"], "unseen_weight='g0' weighs unseen words by log G0"),
])
def test_bad_options_are_refused_with_what_to_do(stores: dict[str, Path], tmp_path: Path, args: list[str],
                                                 message: str) -> None:
    topics = [] if "--topics" in args else ["--topics", "2"]
    result = run("fit", stores["ordered"], "--model", tmp_path / "m", *topics, *args)
    assert result.exit_code == 2, result.output
    assert message in " ".join(result.output.split()), result.output
    assert not (tmp_path / "m").exists()


def test_store_without_order_is_refused_naming_keep_order(stores: dict[str, Path], tmp_path: Path) -> None:
    result = run("fit", stores["plain"], "--model", tmp_path / "m", "--family", "infvoc", "--topics", "2")
    assert result.exit_code == 2
    assert "re-ingest it with `topicflow ingest --keep-order`" in " ".join(result.output.split())
    missing = run("fit", stores["ordered"], "--model", tmp_path / "m", "--family", "infvoc")
    assert missing.exit_code == 2 and "Missing option '--topics'" in missing.output
