"""`topicflow fit --method gibbs` and `LDA(method="gibbs")` end to end on the in-process cluster.

The CLI (on the distributed scheduler) and the API (threads) fit the same model from the same
settings; the saved model is an ordinary LDA model that ``topics`` and ``LDA.load`` read.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from topicflow import LDA
from topicflow.cli import main
from topicflow.errors import InvalidParameterError
from topicflow.io.models.store import load_model
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("cli-gibbs")
    truth = draw_planted_corpus(n_docs=230, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=5)
    train = write_test_store(base / "train", {"default": truth.counts["default"][:200]}, shard_size=60)
    test = write_test_store(base / "test", {"default": truth.counts["default"][200:]}, shard_size=60)
    return train, test


def test_cli_fit_on_the_cluster_equals_the_api(stores: tuple[Path, Path], tmp_path: Path,
                                               local_cluster: object) -> None:
    train, test = stores
    address = local_cluster.scheduler_address  # type: ignore[attr-defined]
    model = tmp_path / "model"
    result = CliRunner().invoke(main, ["fit", str(train), "--model", str(model), "--method", "gibbs", "--topics", "3",
                                       "--max-iter", "6", "--batch-size", "50", "--burn-in", "2",
                                       "--optimize-every", "2", "--test", str(test), "--eval-every", "3",
                                       "--seed", "4", "--scheduler", address], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "collapsed Gibbs (AD-LDA, blocks of 50 documents" in result.output
    assert "executor: tasks on 2 workers" in result.output
    assert "heldout" in result.output and "saved model to" in result.output
    saved = load_model(model)
    assert (saved.info.family, saved.info.kind, saved.info.method) == ("lda", "gibbs_lda", "gibbs")
    assert [r["sweep"] for r in saved.info.trace] == [1, 2, 3, 4, 5, 6]
    assert [r["heldout_perplexity"] is not None for r in saved.info.trace] == [False, False, True] * 2
    topics = CliRunner().invoke(main, ["topics", str(model)], catch_exceptions=False)
    assert topics.exit_code == 0 and "topic-2" in topics.output

    api = LDA(n_topics=3, method="gibbs", max_iter=6, block_size=50, burn_in=2, optimize_every=2, seed=4,
              eval_every=3).fit(str(train), test=str(test))
    assert_array_equal(api.components_, saved.state.topic_word_var["default"])
    assert_array_equal(api.doc_topic_prior_, saved.state.doc_topic_prior)
    assert api.n_iter_ == 6 and api.trace_[-1]["heldout_perplexity"] == saved.info.trace[-1]["heldout_perplexity"]
    loaded = LDA.load(model)
    assert loaded.method == "gibbs" and loaded.block_size == 50 and loaded.optimize_every == 2
    assert np.allclose(loaded.topic_word_.sum(axis=1), 1.0)
    assert loaded.transform(str(test)).shape == (30, 3)


def test_cli_refuses_options_the_sampler_does_not_read(stores: tuple[Path, Path], tmp_path: Path) -> None:
    result = CliRunner().invoke(main, ["fit", str(stores[0]), "--model", str(tmp_path / "m"), "--method", "gibbs",
                                       "--topics", "3", "--tol", "0.1"])
    assert result.exit_code != 0 and "--tol given with --method gibbs" in result.output
    result = CliRunner().invoke(main, ["fit", str(stores[0]), "--model", str(tmp_path / "m"), "--method", "batch",
                                       "--topics", "3", "--optimize-every", "3"])
    assert result.exit_code != 0 and "--optimize-every" in result.output
    with pytest.raises(InvalidParameterError, match="symmetric"):
        LDA(n_topics=3, method="gibbs", doc_topic_prior="symmetric").fit(str(stores[0]))
    with pytest.raises(InvalidParameterError, match="not continued"):
        LDA(n_topics=3, method="gibbs").partial_fit(str(stores[0]))


def test_gibbs_starts_from_the_cli_and_the_api(stores: tuple[Path, Path], tmp_path: Path) -> None:
    """``--gibbs-start sequential`` is ``LDA(gibbs_start="sequential")`` and ``GibbsConfig(init="sequential")``:
    the same model from both, saved with its start, read back by ``LDA.load``, and not the random start's."""
    from topicflow.io.corpus.reader import Corpus
    from topicflow.pipeline.gibbs import GibbsConfig, fit_gibbs

    train = str(stores[0])
    common = ["--method", "gibbs", "--topics", "3", "--max-iter", "3", "--batch-size", "50", "--seed", "2"]
    # (--local-cluster, a cluster option, was refused with --method gibbs, tree LDA and infvoc before)
    for start, cluster in (("sequential", ["--executor", "threads"]), ("random", ["--local-cluster", "threads"]),
                           ("scvb0", ["--executor", "threads"])):
        result = CliRunner().invoke(main, ["fit", train, "--model", str(tmp_path / start), *common, *cluster,
                                           "--gibbs-start", start], catch_exceptions=False)
        assert result.exit_code == 0, result.output
    sequential, random = load_model(tmp_path / "sequential"), load_model(tmp_path / "random")
    assert sequential.info.settings["init"] == "sequential" and random.info.settings["init"] == "random"
    assert load_model(tmp_path / "scvb0").info.settings["init"] == "scvb0"
    assert not np.array_equal(load_model(tmp_path / "scvb0").state.topic_word_var["default"],
                              random.state.topic_word_var["default"])
    assert not np.array_equal(sequential.state.topic_word_var["default"], random.state.topic_word_var["default"])
    api = LDA(n_topics=3, method="gibbs", max_iter=3, block_size=50, seed=2, gibbs_start="sequential").fit(train)
    assert_array_equal(api.components_, sequential.state.topic_word_var["default"])
    direct = fit_gibbs(Corpus.open(train), GibbsConfig(n_topics=3, sweeps=3, block_size=50, seed=2, init="sequential"))
    assert_array_equal(direct.saved_model.state.topic_word_var["default"], api.components_)
    assert LDA.load(tmp_path / "sequential").gibbs_start == "sequential"
    refused = CliRunner().invoke(main, ["fit", train, "--model", str(tmp_path / "b"), "--method", "batch",
                                        "--topics", "3", "--gibbs-start", "sequential"])
    assert refused.exit_code != 0 and "--gibbs-start" in refused.output
