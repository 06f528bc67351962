"""`topicflow reproduce bleier2016`: the held-out protocol, the claims and a CLI run on a tiny generated store."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.reproduce import PAPERS, bleier2016
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    counts = draw_planted_corpus(n_docs=60, n_topics=3, n_terms=30, doc_length=20, alpha=0.2, seed=4).counts["default"]
    return Path(write_test_store(tmp_path_factory.mktemp("bleier") / "s.zarr", {"default": counts}, shard_size=12))


def _jsonl_store(root: Path, name: str, docs: list[list[str]]) -> Corpus:
    (root / f"{name}.jsonl").write_text("".join(json.dumps({"id": f"{name}{i}", "text": " ".join(words)}) + "\n"
                                                for i, words in enumerate(docs)))
    ingest_corpus([root / f"{name}.jsonl"], root / f"{name}.zarr", tokenizer=NO_STOP, shard_size=10)
    return Corpus.open(root / f"{name}.zarr")


def test_heldout_split_is_70_30_per_document_and_a_uniform_model_scores_v(store: Path) -> None:
    corpus = Corpus.open(store)
    train, held, how = bleier2016.split_train_test(corpus, None)
    # 80% of 60 documents in shards of 12: the first 4 shards (48 documents) train, the last 12 are held out.
    assert (len(train), held.n_docs) == (48, 12) and "first 48 of 60" in how
    full = np.vstack([corpus.read_block(i).to_csr().toarray() for i in range(corpus.n_shards)])[48:]
    observed = np.vstack([o.to_csr().toarray() for o, _ in held.pairs])
    scored = np.vstack([s.to_csr().toarray() for _, s in held.pairs])
    np.testing.assert_array_equal(observed + scored, full)
    lengths = full.sum(axis=1)
    np.testing.assert_array_equal(observed.sum(axis=1), np.floor(0.7 * lengths + 0.5))
    assert held.n_scored == int(scored.sum()) and held.n_dropped == 0
    # Whatever the fold-in finds, uniform topics give every scored token probability 1/V.
    n_terms = len(train.vocabulary())
    assert held.perplexity(np.ones((4, n_terms)), 0.5) == pytest.approx(n_terms, rel=1e-12)


def test_a_test_store_is_mapped_onto_the_training_vocabulary(tmp_path: Path) -> None:
    train = _jsonl_store(tmp_path, "train", [["apple", "pear", "fig"] * 4, ["fig", "plum"] * 5])
    test = _jsonl_store(tmp_path, "test", [["plum", "kiwi", "apple", "apple"] * 5])
    _, held, how = bleier2016.split_train_test(train, test)
    assert held.n_dropped == 5 and held.n_scored + sum(o.n_tokens for o, _ in held.pairs) == 15
    vocab = train.vocabulary()
    both = sum(o.to_csr() + s.to_csr() for o, s in held.pairs).toarray().ravel()
    assert both[vocab.ids_of(["apple"])[0]] == 10 and both[vocab.ids_of(["plum"])[0]] == 5
    assert "test" in how
    with pytest.raises(InvalidParameterError, match="too few to hold out"):
        bleier2016.split_train_test(test, None)


def test_the_evaluator_is_topicflow_evaluates_completion_random_at_70_percent(tmp_path: Path) -> None:
    from topicflow.io.models.info import ModelInfo
    from topicflow.io.models.store import SavedModel
    from topicflow.models.lda.state import LDAState
    from topicflow.pipeline.evaluation import heldout_likelihood

    train = _jsonl_store(tmp_path, "train", [["apple", "pear", "fig", "plum"][i % 3:] * 5 for i in range(12)])
    test = _jsonl_store(tmp_path, "test", [["plum", "kiwi", "apple", "fig", "fig"][i % 2:] * 4 for i in range(15)])
    _, held, _ = bleier2016.split_train_test(train, test)
    rng = np.random.default_rng(1)
    topic_word = rng.gamma(1.0, 1.0, size=(3, len(train.vocabulary())))
    prior = np.array([0.5, 0.2, 0.05])
    model = SavedModel(LDAState(topic_word_var={"default": topic_word}, doc_topic_prior=prior,
                                topic_word_prior={"default": 0.01}),
                       {"default": train.vocabulary()}, ModelInfo(kind="test"))
    theirs = heldout_likelihood(model, test, "completion-random", fraction=0.7, seed=0)
    # heldout_likelihood scores the posterior mean of lambda: the same rows normalized.
    assert held.perplexity(topic_word, prior) == pytest.approx(float(theirs.perplexity), rel=1e-12)
    assert held.n_scored == int(theirs.n_tokens)


def test_evaluation_points_halve_inside_the_first_pass() -> None:
    assert bleier2016.evaluation_points(1800, 3, 4) == [112, 225, 450, 900, 1800, 3600, 5400]
    assert bleier2016.evaluation_points(10, 2, 0) == [10, 20]


def _trace(finals: dict[str, tuple[float, float]]) -> list[dict[str, object]]:
    rows = []
    for name, (first, last) in finals.items():
        rows += [{"algorithm": name, "docs_seen": 50, "perplexity": first * 1.5, "topics_in_use": 3},
                 {"algorithm": name, "docs_seen": 100, "perplexity": first, "topics_in_use": 3},
                 {"algorithm": name, "docs_seen": 300, "perplexity": last, "topics_in_use": 4}]
    return rows


def test_claims_read_the_orderings_off_the_trace() -> None:
    held = bleier2016.fig1_claims(_trace({"PCSVB0": (900, 800), "SCVB0 K=50": (1000, 850), "PCVB0": (950, 820)}),
                                  100, 3)
    verdicts = {c.claim: c.held for c in held}
    assert verdicts["PCSVB0 converges faster than SCVB0 and PCVB0 (rate of convergence)"] is True
    assert verdicts["PCSVB0 converges to a better optimum than SCVB0 and PCVB0"] is True
    assert "PCSVB0 900.0" in held[0].ours and "after 3 passes" in held[1].ours
    failed = bleier2016.fig1_claims(_trace({"PCSVB0": (900, 830), "SCVB0 K=50": (1000, 850), "PCVB0": (950, 820)}),
                                    100, 3)
    verdicts = {c.claim: c.held for c in failed}
    assert verdicts["PCSVB0 converges to a better optimum than SCVB0 and PCVB0"] is False
    assert verdicts["PCSVB0 ends below SCVB0 K=50"] is True and verdicts["PCSVB0 ends below PCVB0"] is False
    assert bleier2016.fig1_claims(_trace({"PCVB0": (1, 1)}), 100, 3)[0].held is None
    with_reading = bleier2016.fig1_claims(_trace({"PCSVB0": (900, 800), "PCVB0": (950, 820),
                                                  "reading: PCSVB0, burn-in 1": (700, 600)}), 100, 3)
    assert with_reading[1].held is True  # a reading is not a competitor
    reading = next(c for c in with_reading if c.claim.startswith("Readings"))
    assert reading.held is None and "PCSVB0, burn-in 1: after one pass 700.0, at the end 600.0" in reading.ours
    png = bleier2016.fig1_png(_trace({"PCSVB0": (900, 800), "PCVB0": (950, 820)}), title="t")
    assert png[:4] == b"\x89PNG"


def test_the_paper_arms_carry_section_4s_constants() -> None:
    arms = bleier2016.paper_arms(bleier2016.SCALES["paper"], seed=3)
    assert [a.name for a in arms] == ["PCSVB0", "SCVB0 K=50", "SCVB0 K=100", "SCVB0 K=200", "PCVB0",
                                      "reading: PCSVB0, burn-in 1", "reading: PCSVB0, n_dk kept",
                                      "reading: SCVB0 K=100, no burn-in"]
    assert (arms[5].params.burn_in, arms[6].params.keep_doc_state, arms[7].params.burn_in) == (1, True, 0)
    pcsvb0 = arms[0].params
    assert (pcsvb0.truncation, pcsvb0.topic_word_prior, pcsvb0.seed) == (200, 0.01, 3)
    assert (pcsvb0.topic_word_step.scale, pcsvb0.topic_word_step.delay, pcsvb0.topic_word_step.power) == (10, 1000, 0.9)
    assert (pcsvb0.doc_step.scale, pcsvb0.doc_step.delay) == (1, 10)
    assert (pcsvb0.hyper_step.scale, pcsvb0.hyper_step.delay) == (5, 100)
    scvb0 = arms[2].params
    assert (scvb0.truncation, scvb0.alpha_init, scvb0.learn_alpha, scvb0.topic_word_prior, scvb0.burn_in) == (
        100, 0.1, False, 0.01, 1)
    assert pcsvb0.burn_in == 0
    assert "bleier2016" in PAPERS


def test_the_presets_are_the_arms_settings() -> None:
    from topicflow.pipeline.presets import get_preset

    hdp = get_preset("bleier2016", "fit").settings
    pcsvb0, scvb0 = bleier2016.paper_arms(bleier2016.SCALES["paper"], seed=0)[:2]
    assert (hdp["family"], hdp["method"], hdp["truncation"], hdp["passes"]) == ("hdp", "pcsvb0", 200, 30)
    for name in ("topic_word_step", "doc_step", "hyper_step"):
        step = getattr(pcsvb0.params, name)
        assert hdp[name] == (step.scale, step.delay) and step.power == hdp["step_power"]
    assert hdp["topic_word_prior"] == pcsvb0.params.topic_word_prior and hdp["burn_in"] == pcsvb0.params.burn_in
    lda = get_preset("bleier2016-scvb0", "fit").settings
    assert (lda["method"], lda["doc_topic_prior"], lda["topic_word_prior"]) == ("scvb0", scvb0.params.alpha_init,
                                                                                 scvb0.params.topic_word_prior)


@pytest.mark.slow
def test_reproduce_bleier2016_quick_from_the_cli(store: Path, tmp_path: Path, local_cluster: object) -> None:
    out = tmp_path / "out"
    args = ["reproduce", "bleier2016", "--corpus", str(store), "--out", str(out), "--format", "json",
            "--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["paper"] == "bleier2016" and payload["scale"] == "quick"
    assert (payload["settings"]["train_docs"], payload["settings"]["test_docs"]) == (48, 12)
    claims = {c["claim"]: c for c in payload["claims"]}
    for name in ("PCSVB0 converges faster than SCVB0 and PCVB0 (rate of convergence)",
                 "PCSVB0 converges to a better optimum than SCVB0 and PCVB0"):
        assert claims[name]["held"] in (True, False) and "PCVB0" in claims[name]["ours"]
    rows = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    arms = {row["algorithm"] for row in rows}
    assert arms == {"PCSVB0", "SCVB0 K=20", "SCVB0 K=50", "PCVB0"}
    points = bleier2016.evaluation_points(48, bleier2016.SCALES["quick"].passes,
                                          bleier2016.SCALES["quick"].first_pass_points)
    for arm in arms - {"PCVB0"}:
        assert [r["docs_seen"] for r in rows if r["algorithm"] == arm] == points
    assert [r["docs_seen"] for r in rows if r["algorithm"] == "PCVB0"] == [48 * p for p in range(1, 6)]
    n_terms = len(Corpus.open(store).vocabulary())
    assert all(1 < r["perplexity"] < n_terms for r in rows)  # better than the uniform model
    assert (out / "fig1-perplexity.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "claims.md").read_text().startswith("# Reproduction: bleier2016")


@pytest.mark.parametrize("keep", [False, True])
def test_cutting_a_pass_at_evaluation_points_does_not_change_the_run(store: Path, keep: bool) -> None:
    from dataclasses import replace

    train, held, _ = bleier2016.split_train_test(Corpus.open(store), None)
    arm = bleier2016.paper_arms(replace(bleier2016.SCALES["quick"], truncation=6), seed=1)[0]
    arm = replace(arm, params=replace(arm.params, keep_doc_state=keep))
    n_tokens = train.n_tokens
    cut = bleier2016.word_by_word_arm(train, arm, held, [5, 17, 48, 60, 96], 48, n_tokens)
    whole = bleier2016.word_by_word_arm(train, arm, held, [48, 96], 48, n_tokens)
    assert [r["docs_seen"] for r in cut] == [5, 17, 48, 60, 96]
    for a, b in ((cut[2], whole[0]), (cut[4], whole[1])):
        assert (a["perplexity"], a["alpha"], a["gamma"]) == (b["perplexity"], b["alpha"], b["gamma"])
