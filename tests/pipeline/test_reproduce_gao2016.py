"""`topicflow reproduce gao2016` on a tiny generated store: the run, its claims, figures and trace."""
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
from topicflow.pipeline.presets import get_preset
from topicflow.pipeline.reproduce import PAPERS, ReproduceRequest, gao2016
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())


@pytest.fixture(scope="module")
def ordered_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    counts = draw_planted_corpus(n_docs=90, n_topics=3, n_terms=40, doc_length=14, alpha=0.2, seed=3).counts["default"]
    root = tmp_path_factory.mktemp("gao")
    rng = np.random.default_rng(0)
    lines = []
    for d in range(counts.shape[0]):
        row = counts[d].toarray().ravel()
        words = [f"w{w:03d}" for w in np.flatnonzero(row) for _ in range(row[w])]
        rng.shuffle(words)
        lines.append(json.dumps({"id": f"d{d}", "text": " ".join(words)}))
    (root / "docs.jsonl").write_text("\n".join(lines) + "\n")
    ingest_corpus([root / "docs.jsonl"], root / "docs.zarr", tokenizer=NO_STOP, shard_size=24, keep_order=True)
    return root / "docs.zarr"


@pytest.mark.slow
def test_reproduce_gao2016_quick_on_a_tiny_store(ordered_store: Path, tmp_path: Path, local_cluster: object) -> None:
    out = tmp_path / "out"
    args = ["reproduce", "gao2016", "--corpus", str(ordered_store), "--out", str(out), "--format", "json",
            "--scheduler", local_cluster.scheduler_address]  # type: ignore[attr-defined]
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["paper"] == "gao2016" and payload["settings"]["n_train"] == 72
    assert "first half" in payload["settings"]["held_out"]
    claims = {c["claim"]: c for c in payload["claims"]}
    closeness = claims["With a good decay factor SGS comes close to batch CGS"]
    assert "CGS" in closeness["ours"] and closeness["held"] in (True, False)
    versus_svb = claims["SGS reaches a lower held-out perplexity than SVB at every minibatch size (decay 1)"]
    assert "SVB" in versus_svb["ours"] and versus_svb["held"] in (True, False)
    assert any(c.startswith("Reading: start posterior-document") for c in claims)
    assert any(c.startswith("DSGS") for c in claims)
    for name in payload["figures"]:
        assert (out / name).read_bytes()[:4] == b"\x89PNG"
    rows = [json.loads(line) for line in (out / "trace.jsonl").read_text().splitlines()]
    figures = {row["figure"] for row in rows}
    assert {"1", "1-2", "1-svb", "3a", "readings", "4"} <= figures
    sgs_rows = [r for r in rows if r["figure"] == "1-2"]
    assert all(np.isfinite(r["perplexity"]) and 1 < r["perplexity"] < 40 for r in sgs_rows)  # V = 40
    assert {r["batch_size"] for r in sgs_rows} == {64, 72}  # sizes above the 72 training documents are one minibatch
    assert (out / "claims.md").read_text().startswith("# Reproduction: gao2016")


def test_gao2016_scores_a_random_half_without_token_order(tmp_path: Path) -> None:
    counts = draw_planted_corpus(n_docs=30, n_topics=2, n_terms=20, doc_length=10, alpha=0.2, seed=1).counts["default"]
    store = write_test_store(tmp_path / "bag.zarr", {"default": counts}, shard_size=10)
    request = ReproduceRequest(corpora=[Corpus.open(store)], out=tmp_path)
    corpus, n_train, held, how = gao2016._split(request, gao2016.SCALES["quick"])
    # 80% is 24 documents; training stops at the last whole shard (SVB streams shards) before it.
    assert (n_train, held.start, held.stop, held.first_half) == (20, 24, 30, False)
    assert "random half" in how
    pairs = gao2016._completion_pairs(held)
    observed = sum(int(o.counts.sum()) for o, _ in pairs)
    scored = sum(int(h.counts.sum()) for _, h in pairs)
    assert observed + scored == int(counts[24:].sum())
    with pytest.raises(InvalidParameterError, match="one --corpus"):
        gao2016._split(ReproduceRequest(corpora=[corpus, corpus], out=tmp_path), gao2016.SCALES["quick"])


def test_first_half_split_observes_each_documents_first_tokens(ordered_store: Path) -> None:
    corpus = Corpus.open(ordered_store)
    held = gao2016.HeldOut(str(ordered_store), 72, 90, None, len(corpus.vocabulary()), True)
    pairs = gao2016._completion_pairs(held)
    ordered = [layer for _, layer in gao2016._read_range(corpus, 72, 90, ordered=True)]
    observed = np.vstack([o.to_csr().toarray() for o, _ in pairs])
    tokens = [layer.tokens[layer.indptr[d]:layer.indptr[d + 1]] for layer in ordered for d in range(layer.n_docs)]
    for d, doc in enumerate(tokens):
        first = np.bincount(doc[: int(np.floor(0.5 * len(doc) + 0.5))], minlength=observed.shape[1])
        np.testing.assert_array_equal(observed[d], first)


def test_preset_is_the_papers_settings() -> None:
    preset = get_preset("gao2016", "stream")
    settings = gao2016.SCALES["paper"]
    assert preset.settings["n_topics"] == settings.n_topics == 50
    assert preset.settings["doc_topic_prior"] == settings.alpha and preset.settings["topic_word_prior"] == settings.beta
    assert preset.settings["max_iter"] == settings.max_iter == 400 and preset.settings["patience"] == 10
    assert preset.settings["sgs_init"] == "posterior-token" and preset.settings["decay_beta"] is False
    assert "gao2016" in PAPERS
