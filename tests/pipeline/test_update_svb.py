"""Nightly updates of a streaming-VB model: the new documents' statistics join its posterior."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests.pipeline.test_update import NO_STOP, write_docs
from topicflow.api.lda import LDA
from topicflow.cli import main
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.update import update_model
from topicflow.pipeline.vb.batch import VBConfig
from topicflow.pipeline.vb.svb import SVBConfig, fit_svb
from topicflow.testing.corpora import draw_planted_corpus

SVB = {"method": "svb", "batch_size": 50, "seed": 3, "max_iter": 20}


@pytest.fixture(scope="module")
def truth() -> object:
    return draw_planted_corpus(n_docs=500, n_topics=4, n_terms=40, doc_length=30, alpha=0.3, seed=7)


@pytest.fixture
def grown(tmp_path: Path, truth: object) -> tuple[Path, Path]:
    """A store of 400 documents with an svb model on it; 100 more documents wait in ``new.jsonl``."""
    counts = truth.counts["default"]  # type: ignore[attr-defined]
    store = tmp_path / "corpus.zarr"
    ingest_corpus([write_docs(tmp_path / "base.jsonl", counts, 0, 400)], store, tokenizer=NO_STOP, shard_size=100)
    LDA(4, **SVB).fit(store).save(tmp_path / "model")  # type: ignore[arg-type]
    write_docs(tmp_path / "new.jsonl", counts, 400, 500, extra_words={d: "zebra" for d in range(400, 430)})
    return store, tmp_path / "model"


def test_fit_then_update_equals_one_stream_over_everything(grown: tuple[Path, Path], tmp_path: Path) -> None:
    """SVB's natural use: the posterior after the new minibatches is what one stream over all documents gives."""
    store, model_path = grown
    append_corpus(store, [tmp_path / "new.jsonl"])  # "zebra" stays out of the vocabulary: same terms
    result = update_model(model_path, store)
    assert result.version == 2 and result.new_docs == 100 and result.minibatches == 2
    after = load_model(model_path)
    assert after.info.method == "svb" and after.info.online["t"] == 10 and after.info.online["docs_seen"] == 500
    assert after.info.online["config"]["batch_size"] == 50
    config = VBConfig.from_dict(after.info.settings)
    whole = fit_svb(Corpus.open(store), config, SVBConfig(batch_size=50))
    np.testing.assert_array_equal(after.state.topic_word_var["default"], whole.state.topic_word_var["default"])
    np.testing.assert_array_equal(after.state.doc_topic_prior, whole.state.doc_topic_prior)
    assert after.info.online["iterations"] == whole.iterations


def test_update_grows_the_vocabulary_from_the_prior(grown: tuple[Path, Path], tmp_path: Path) -> None:
    store, model_path = grown
    before = load_model(model_path)
    append_corpus(store, [tmp_path / "new.jsonl"], promote_min_df=5)
    result = update_model(model_path, store)
    assert result.new_terms == {"default": 1}
    after = load_model(model_path)
    n_terms = before.state.n_terms("default")
    zebra = after.state.topic_word_var["default"][:, n_terms]
    # The new column is eta plus the new documents' expected counts of "zebra" (3 in each of 30 documents).
    assert zebra.sum() == pytest.approx(4 * 0.01 + 90, rel=1e-9)
    # Old terms: the old posterior plus the new statistics only (nothing is scaled or forgotten).
    assert np.all(after.state.topic_word_var["default"][:, :n_terms] >= before.state.topic_word_var["default"] - 1e-12)


def test_update_command_continues_by_svb_and_refuses_step_sizes(
    grown: tuple[Path, Path], tmp_path: Path, local_cluster: object
) -> None:
    store, model_path = grown
    append_corpus(store, [tmp_path / "new.jsonl"])
    runner = CliRunner()
    refused = runner.invoke(main, ["update", str(model_path), str(store), "--tau0", "4"])
    assert refused.exit_code == 2 and "fitted by streaming VB (svb), which has no step sizes" in refused.output
    refused = runner.invoke(main, ["update", str(model_path), str(store), "--passes", "2"])
    assert refused.exit_code != 0 and "streaming VB (svb) sees each document once" in refused.output
    done = runner.invoke(main, ["update", str(model_path), str(store),
                                "--scheduler", local_cluster.scheduler_address])  # type: ignore[attr-defined]
    assert done.exit_code == 0, done.output
    after = load_model(model_path)
    assert after.info.method == "svb" and after.info.online["t"] == 10
