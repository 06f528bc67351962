"""Mr. LDA (issue 18): informed-prior settings in saved models, document matching, `reproduce zhai2014-mrlda`."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.api.lda import LDA
from topicflow.cli import main
from topicflow.io.corpus.reader import Corpus
from topicflow.models.lda.priors import SeedTopic
from topicflow.pipeline.evaluation import document_matching, language_doc_topics
from topicflow.pipeline.reproduce.mrlda import SCALES, MrLdaSettings
from topicflow.pipeline.vb.batch import VBConfig, initial_state
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


def _labeled_store(path: Path, n_docs: int = 90, seed: int = 1) -> Path:
    truth = draw_planted_corpus(n_docs=n_docs, n_topics=3, n_terms=30, doc_length=20, alpha=0.2, seed=seed)
    labels = [f"label {k}" for k in np.argmax(truth.doc_topic, axis=1)]
    return write_test_store(path, truth.counts, shard_size=40, labels=labels)


def _bilingual_store(path: Path, n_docs: int, seed: int) -> Path:
    truth = draw_planted_corpus(n_docs=n_docs, n_topics=6, n_terms=36, doc_length=60, alpha=0.1, seed=seed,
                                languages=("en", "de"))
    return write_test_store(path, truth.counts, shard_size=25)


def test_model_saved_before_issue_18_loads_with_its_push_out(tmp_path: Path) -> None:
    store = _labeled_store(tmp_path / "s.zarr")
    seeds = (SeedTopic("first", ("de00000", "de00001"), (1.0, 1.0)),)
    old = LDA(3, seed_topics=seeds, seed_strength=1.0, seed_off_topic=1e-3, max_iter=3).fit(store)
    old.save(tmp_path / "old")
    [model_json] = list((tmp_path / "old").rglob("model.json"))
    payload = json.loads(model_json.read_text())
    del payload["settings"]["seed_off_topic"]  # what a model written before the setting existed holds
    model_json.write_text(json.dumps(payload))

    loaded = LDA.load(tmp_path / "old")
    assert loaded.seed_off_topic == 1e-3 and loaded.seed_strength == 1.0
    config = VBConfig.from_dict(loaded.model_.info.settings)
    rebuilt, _ = initial_state(Corpus.open(store), config)
    np.testing.assert_array_equal(rebuilt.topic_word_prior["default"], loaded.model_.state.topic_word_prior["default"])
    assert loaded.model_.state.topic_word_prior["default"][1, 0] == 1e-3

    new = LDA(3, seed_topics=seeds, max_iter=2).fit(store)
    new.save(tmp_path / "new")
    again = LDA.load(tmp_path / "new")
    assert again.seed_off_topic is None and again.seed_strength == 10.0
    assert set(np.unique(again.model_.state.topic_word_prior["default"]).tolist()) == {0.01, 10.0}


def test_preset_and_alpha_start(tmp_path: Path) -> None:
    model = LDA.from_preset("zhai2014-mrlda", max_iter=2)
    assert (model.n_topics, model.doc_topic_prior_init, model.seed_strength, model.tol) == (50, 1.0, 10.0, 0.0)
    config = model._config()
    assert config.doc_topic_prior_mode == "auto" and config.initial_alpha == 1.0
    assert LDA(4, doc_topic_prior=0.3, doc_topic_prior_init=2.0)._config().initial_alpha == 0.3  # fixed wins


def test_document_matching_finds_translations(tmp_path: Path, client: object) -> None:
    train = _bilingual_store(tmp_path / "train.zarr", 200, seed=3)
    test = _bilingual_store(tmp_path / "test.zarr", 30, seed=4)
    model = LDA(6, max_iter=30, seed=1).fit(train, client=client)
    scores = document_matching(model.model_, test, query_language="en", candidate_language="de", client=client)
    assert scores.n_pairs == 30 and scores.precision_at_1 > 0.3  # chance is 1/30
    assert model.match_documents(test, query_language="en", candidate_language="de", client=client) == scores
    theta_en = language_doc_topics(model.model_, test, "en", client=client)
    np.testing.assert_allclose(theta_en.sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="not 'fr'"):
        document_matching(model.model_, test, query_language="en", candidate_language="fr", client=client)


@pytest.mark.slow
def test_reproduce_zhai2014_mrlda_quick(tmp_path: Path, local_cluster: object, monkeypatch: pytest.MonkeyPatch) -> None:
    # The command's plumbing (stores, the three experiments, claims, figures, trace) on a smaller "quick"
    # scale than the shipped one, whose 30-50 topics and 20 iterations cost 10 s of suite time here.
    tiny = MrLdaSettings(informed_topics=5, seed_words_per_label=5, informed_iterations=4, poly_topics=6,
                         poly_iterations=4, ablation_topics=(6,), ablation_iterations=4, eval_every=2)
    monkeypatch.setitem(SCALES, "quick", tiny)
    labeled = _labeled_store(tmp_path / "labeled.zarr")
    aligned = _bilingual_store(tmp_path / "aligned.zarr", 40, seed=5)
    out = tmp_path / "out"
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    args = ["reproduce", "zhai2014-mrlda", "--corpus", str(labeled), "--corpus", str(aligned), "--out", str(out),
            "--scale", "quick", "--format", "json", "--scheduler", address]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert len(payload["claims"]) == 6 and payload["claims"][-1]["held"] is None
    assert all(isinstance(c["held"], bool) for c in payload["claims"][:-1])
    assert sorted(payload["figures"]) == ["mrlda-alpha.png", "mrlda-informed.png", "mrlda-matching.png"]
    assert all((out / name).stat().st_size > 0 for name in payload["figures"])
    records = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    assert {r["experiment"] for r in records} == {"informed", "polylingual", "alpha"}
    matching = [r for r in records if r["experiment"] == "polylingual"]
    assert all(r["precision_at_1_95"][0] <= r["precision_at_1"] <= r["precision_at_1_95"][1] for r in matching)
    assert json.loads((out / "results.json").read_text())["polylingual"]["alpha"] == "fixed"  # MALLET's default
    assert payload["settings"]["seed_words"], "no seed words were chosen from the training documents"
    assert len(Corpus.open(out / "stores" / "labeled-test.zarr")) == 9  # 10% of 90, the rest trains

    missing = CliRunner().invoke(main, ["reproduce", "zhai2014-mrlda", "--corpus", str(labeled), "--out",
                                        str(tmp_path / "other"), "--scheduler", address])
    assert missing.exit_code != 0 and "aligned multilingual store" in missing.output


def test_fit_command_builds_the_paper_prior_or_the_push_out(tmp_path: Path, local_cluster: object) -> None:
    store = _labeled_store(tmp_path / "s.zarr")
    seeds = tmp_path / "seeds.txt"
    seeds.write_text("first: de00000 de00001\n")
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    priors = {}
    for name, extra in (("paper", []), ("pushed", ["--seed-off-topic", "0.001"])):
        args = ["fit", str(store), "--model", str(tmp_path / name), "--topics", "3", "--max-iter", "2",
                "--seed-words", str(seeds), "--scheduler", address, *extra]
        result = CliRunner().invoke(main, args, catch_exceptions=False)
        assert result.exit_code == 0, result.output
        priors[name] = LDA.load(tmp_path / name).model_.state.topic_word_prior["default"]
    assert priors["paper"][:, 0].tolist() == [10.0, 0.01, 0.01]
    assert priors["pushed"][:, 0].tolist() == [10.0, 0.001, 0.001]
    assert priors["pushed"][:, 5].tolist() == [0.01] * 3
