"""topicflow.TreeLDA: fit on a tiny bilingual store with a dictionary tree (vb, hybrid, gibbs; batch and online),
transform, save/load, presets, errors."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import topicflow
from tests.pipeline.tree_lda.test_batch import _store_and_tree
from topicflow.errors import InvalidParameterError, VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.trees import read_tree
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.pipeline.tree_lda import TreeVBConfig, fit_batch_tree_vb


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _store_and_tree(tmp_path_factory.mktemp("tree-api"))


@pytest.mark.parametrize("inference", ["vb", "hybrid"])
def test_fit_matches_the_driver_and_round_trips(tiny: tuple[Path, Path], tmp_path: Path, client: object,
                                                inference: str) -> None:
    store, tree_path = tiny
    model = topicflow.TreeLDA(2, prior_tree=tree_path, inference=inference, max_iter=3, tol=0.0, seed=1)
    model.fit(store, client=client)
    tree, _ = read_tree(tree_path)
    config = TreeVBConfig(n_topics=2, estep=inference, max_iter=3, tol=0.0, seed=1,  # type: ignore[arg-type]
                          hybrid_init="random" if inference == "hybrid" else "progressive")
    reference = fit_batch_tree_vb(Corpus.open(store), tree, config)
    np.testing.assert_array_equal(model.edge_var_, reference.state.edge_var)
    assert set(model.components_) == {"en", "de"} and model.components_["en"].shape[0] == 2
    for lang in ("en", "de"):
        np.testing.assert_allclose(model.topic_word_[lang].sum(axis=1), 1.0)
    theta = np.asarray(model.transform(store))
    assert theta.shape == (len(Corpus.open(store)), 2)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.isfinite(model.perplexity(store, client)) and model.perplexity(store, client) > 1.0
    model.save(tmp_path / "m")
    loaded = topicflow.TreeLDA.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.edge_var_, model.edge_var_)
    np.testing.assert_array_equal(loaded.doc_topic_prior_, model.doc_topic_prior_)
    assert loaded.get_params()["inference"] == inference and loaded.n_iter_ == 3
    assert len(loaded.top_terms(3, language="de")) == 2
    with pytest.raises(InvalidParameterError, match="tree_lda"):
        topicflow.LDA.load(tmp_path / "m")


def test_tree_object_and_tree_path_give_the_same_model(tiny: tuple[Path, Path]) -> None:
    store, tree_path = tiny
    tree, _ = read_tree(tree_path)
    by_path = topicflow.TreeLDA(2, prior_tree=tree_path, max_iter=2, tol=0.0, seed=2).fit(store)
    by_object = topicflow.TreeLDA(2, prior_tree=tree, max_iter=2, tol=0.0, seed=2).fit(store)
    np.testing.assert_array_equal(by_path.edge_var_, by_object.edge_var_)
    assert by_path.model_.info.extra["tree"]["source"] == str(tree_path)
    # A flat tree is accepted too (polylingual LDA under "node_language").
    corpus = Corpus.open(store)
    flat = flat_tree(corpus.languages, [len(corpus.vocabulary(lang)) for lang in corpus.languages], beta=0.01)
    assert topicflow.TreeLDA(2, prior_tree=flat, max_iter=1).fit(store).edge_var_.shape == (2, flat.n_edges)


def test_bad_inputs_are_refused(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    store, tree_path = tiny
    with pytest.raises(InvalidParameterError, match="prior_tree"):
        topicflow.TreeLDA(2).fit(store)
    with pytest.raises(InvalidParameterError, match="inference"):
        topicflow.TreeLDA(2, prior_tree=tree_path, inference="mcmc").fit(store)
    with pytest.raises(InvalidParameterError, match="corpus store"):
        topicflow.TreeLDA(2, prior_tree=tree_path).fit(np.ones((3, 4)))
    other, _ = _store_and_tree_other(tmp_path)
    with pytest.raises(VocabularyMismatchError, match="rebuild the tree"):
        topicflow.TreeLDA(2, prior_tree=tree_path, max_iter=1).fit(other)


def _store_and_tree_other(tmp: Path) -> tuple[Path, Path]:
    import json

    from topicflow.io.sources.base import FieldSpec
    from topicflow.io.tokenizer import TokenizerConfig
    from topicflow.pipeline.ingest.ingest import ingest_corpus

    src = tmp / "o.jsonl"
    src.write_text(json.dumps({"id": "x", "en": "apple pear", "de": "apfel birne"}) + "\n", encoding="utf-8")
    ingest_corpus([src], tmp / "o.zarr", fields=FieldSpec(lang_fields=(("en", "en"), ("de", "de"))),
                  tokenizer=TokenizerConfig())
    return tmp / "o.zarr", tmp


# ----------------------------------------------------------------------------- Gibbs


@pytest.mark.parametrize("normalization", ["node", "node_language"])
def test_gibbs_fit_matches_the_driver_and_reads_like_lda(tiny: tuple[Path, Path], tmp_path: Path, client: object,
                                                        normalization: str) -> None:
    from topicflow.pipeline.tree_lda import fit_gibbs_tree

    store, tree_path = tiny
    model = topicflow.TreeLDA(2, prior_tree=tree_path, inference="gibbs", normalization=normalization, max_iter=6,
                              sync_every=2, seed=4)
    model.fit(store, client=client)
    config = model.config()
    assert (config.estep, config.doc_topic_prior_mode, config.doc_topic_prior, config.max_iter) == ("gibbs", "fixed",
                                                                                                   0.5, 6)
    tree, _ = read_tree(tree_path)
    reference = fit_gibbs_tree(Corpus.open(store), tree, config)  # threads, no client
    np.testing.assert_array_equal(model.edge_var_, reference.state.edge_var)
    assert [r.elbo for r in model.trace_] == [r.elbo for r in reference.trace] and model.n_iter_ == 6
    assert model.model_.info.method == "gibbs" and not model.converged_
    theta = np.asarray(model.transform(store))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.isfinite(model.perplexity(store, client)) and model.perplexity(store, client) > 1.0
    model.save(tmp_path / "g")
    loaded = topicflow.TreeLDA.load(tmp_path / "g")
    np.testing.assert_array_equal(loaded.edge_var_, model.edge_var_)
    params = loaded.get_params()
    assert (params["inference"], params["max_iter"], params["sync_every"], params["alpha"],
            params["normalization"]) == ("gibbs", 6, 2, 0.5, normalization)
    assert loaded.n_iter_ == 6 and loaded.config() == config


def test_flat_tree_gibbs_recovers_topics_like_lda_gibbs(tmp_path: Path) -> None:
    """A flat tree with beta 0.01 per leaf is LDA with beta 0.01: same collapsed conditional, different random
    numbers. On planted data (3 block topics over 30 terms, 150 documents of 40 tokens, alpha 0.2) 60 sweeps of
    the tree sampler over 3 shards and 60 of topicflow's LDA Gibbs sampler in one chain both recover the truth
    (worst Hellinger < 0.15; observed 0.046 and 0.035) and agree with each other (< 0.1; observed 0.039)."""
    from topicflow.metrics.recovery import match_topics
    from topicflow.models.common.blocks import block_from_csr
    from topicflow.models.lda.gibbs.chain import initial_state, run_sweeps
    from topicflow.models.lda.gibbs.state import GibbsParams
    from topicflow.testing.corpora import draw_planted_corpus, write_test_store

    truth = draw_planted_corpus(n_docs=150, n_topics=3, n_terms=30, doc_length=40, alpha=0.2, seed=11)
    counts = truth.counts["default"]
    store = write_test_store(tmp_path / "planted.zarr", {"default": counts}, shard_size=50)
    tree = flat_tree(["default"], [30], beta=0.01)
    model = topicflow.TreeLDA(3, prior_tree=tree, inference="gibbs", alpha=0.2, max_iter=60, seed=2).fit(store)
    tree_topics = model.topic_word_
    params = GibbsParams(n_topics=3, doc_topic_prior=0.2, topic_word_prior=0.01, seed=2)
    chain = run_sweeps(initial_state(block_from_csr(counts, language="default"), params), params, 60)
    nkw = chain.term_topic_counts.T.astype(np.float64) + 0.01
    lda_topics = nkw / nkw.sum(axis=1, keepdims=True)
    assert match_topics(tree_topics, truth.topic_word["default"]).worst < 0.15
    assert match_topics(lda_topics, truth.topic_word["default"]).worst < 0.15
    assert match_topics(tree_topics, lda_topics).worst < 0.1


@pytest.mark.parametrize(("params", "message"), [
    (dict(inference="gibbs", alpha="auto"), "keeps alpha fixed"),
    (dict(inference="gibbs", tol=0.1), "tol=0.1 given with inference='gibbs'"),
    (dict(inference="gibbs", burn_in=3), "burn_in=3 given with inference='gibbs'"),
    (dict(inference="vb", sync_every=2), "sync_every=2 given with inference='vb'"),
    (dict(inference="gibbs", method="online"), "online tree LDA is variational"),
    (dict(method="online", max_iter=5), "max_iter=5 given with inference='vb', method='online'"),
    (dict(batch_size=10), "batch_size=10 given with inference='vb'"),
])
def test_settings_a_scheme_does_not_use_are_refused(tiny: tuple[Path, Path], params: dict[str, object],
                                                    message: str) -> None:
    store, tree_path = tiny
    with pytest.raises(InvalidParameterError, match=message):
        topicflow.TreeLDA(2, prior_tree=tree_path, **params).fit(store)  # type: ignore[arg-type]


def test_gibbs_fit_is_not_checkpointed(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    from topicflow.pipeline.policies import CheckpointPolicy

    store, tree_path = tiny
    with pytest.raises(InvalidParameterError, match="not checkpointed"):
        topicflow.TreeLDA(2, prior_tree=tree_path, inference="gibbs").fit(store, checkpoint=CheckpointPolicy(tmp_path))


# ----------------------------------------------------------------------------- online and checkpoints


def test_online_fit_matches_the_driver_and_partial_fit_continues_it(tiny: tuple[Path, Path], tmp_path: Path,
                                                                     client: object) -> None:
    from topicflow.pipeline.tree_lda import fit_online_tree
    from topicflow.pipeline.vb import OnlineConfig

    store, tree_path = tiny
    settings = dict(prior_tree=tree_path, method="online", inference="hybrid", batch_size=8, passes=2, tau0=4.0,
                    kappa=0.6, seed=3)
    model = topicflow.TreeLDA(2, **settings).fit(store, client=client)  # type: ignore[arg-type]
    tree, _ = read_tree(tree_path)
    online = OnlineConfig(batch_size=8, passes=2, tau0=4.0, kappa=0.6, executor="tasks")
    reference = fit_online_tree(Corpus.open(store), tree, model.config(), online)
    np.testing.assert_array_equal(model.edge_var_, reference.state.edge_var)
    assert model.n_iter_ == len(reference.trace) == 8 and model.n_docs_seen_ == 60
    assert model.model_.info.method == "online" and model.model_.info.online["t"] == 8
    model.save(tmp_path / "o")
    loaded = topicflow.TreeLDA.load(tmp_path / "o")
    assert {key: loaded.get_params()[key] for key in ("method", "batch_size", "passes", "tau0", "kappa")} == \
        {"method": "online", "batch_size": 8, "passes": 2, "tau0": 4.0, "kappa": 0.6}
    # One pass over shards 0-1, then partial_fit over the unseen rest: the one-pass fit, bit for bit.
    one_pass = {**settings, "passes": 1}
    whole = topicflow.TreeLDA(2, **one_pass).fit(store, client=client)  # type: ignore[arg-type]
    pieces = topicflow.TreeLDA(2, **one_pass)  # type: ignore[arg-type]
    pieces.partial_fit(store, shards=[0, 1], client=client)
    assert pieces.n_docs_seen_ == 16
    pieces.partial_fit(store, client=client)
    np.testing.assert_array_equal(pieces.edge_var_, whole.edge_var_)
    assert pieces.n_docs_seen_ == 30 and len(pieces.model_.info.corpus["shards"]) == Corpus.open(store).n_shards


def test_checkpoints_are_written_and_resumed_with_the_same_settings_only(tiny: tuple[Path, Path], tmp_path: Path) -> None:
    from topicflow.pipeline.policies import CheckpointPolicy

    store, tree_path = tiny
    whole = topicflow.TreeLDA(2, prior_tree=tree_path, max_iter=4, tol=0.0, seed=6).fit(store)
    topicflow.TreeLDA(2, prior_tree=tree_path, max_iter=2, tol=0.0, seed=6).fit(
        store, checkpoint=CheckpointPolicy(tmp_path / "ck", every=1))
    assert (tmp_path / "ck" / "latest.json").exists()
    with pytest.raises(InvalidParameterError):  # the checkpoint of 2 iterations is for other settings
        topicflow.TreeLDA(2, prior_tree=tree_path, max_iter=4, tol=0.0, seed=6).fit(
            store, checkpoint=CheckpointPolicy(tmp_path / "ck", resume=True))
    resumed = topicflow.TreeLDA(2, prior_tree=tree_path, max_iter=4, tol=0.0, seed=6)
    resumed.fit(store, checkpoint=CheckpointPolicy(tmp_path / "ck4", every=2))
    again = topicflow.TreeLDA(2, prior_tree=tree_path, max_iter=4, tol=0.0, seed=6).fit(
        store, checkpoint=CheckpointPolicy(tmp_path / "ck4", resume=True))
    np.testing.assert_array_equal(resumed.edge_var_, whole.edge_var_)
    np.testing.assert_array_equal(again.edge_var_, whole.edge_var_)


# ----------------------------------------------------------------------------- presets


def test_tree_presets_are_valid_for_the_api_and_the_cli(tiny: tuple[Path, Path]) -> None:
    from topicflow.cli.model import TREE_OPTION_OF
    from topicflow.cli.model import fit as fit_command
    from topicflow.pipeline.presets import TREE_PRESETS, get_preset, preset_names

    store, tree_path = tiny
    fit_options = {p.name for p in fit_command.params}
    assert TREE_PRESETS
    for (name, command), preset in TREE_PRESETS.items():
        assert command == "fit" and name in preset_names("fit") and get_preset(name, "fit") is preset
        assert preset.settings["family"] == "tree_lda" and preset.source and preset.description
        estimator = topicflow.TreeLDA.from_preset(name, prior_tree=tree_path)
        estimator.config()
        assert {TREE_OPTION_OF.get(key, key) for key in preset.settings} <= fit_options
    config = topicflow.TreeLDA.from_preset("zhai2014-ptlda", prior_tree=tree_path, n_topics=3).config()
    assert (config.n_topics, config.doc_topic_prior_mode, config.doc_topic_prior, config.estep, config.burn_in,
            config.samples, config.hybrid_init, config.normalization) == (3, "fixed", 0.01, "hybrid", 5, 5, "random",
                                                                         "node")
    gibbs = topicflow.TreeLDA.from_preset("zhai2014-ptlda", prior_tree=tree_path, inference="gibbs",
                                          burn_in=5, samples=5).config()
    assert (gibbs.estep, gibbs.doc_topic_prior) == ("gibbs", 0.01)
    with pytest.raises(InvalidParameterError, match="not a tree-LDA preset"):
        topicflow.TreeLDA.from_preset("zhai2014-mrlda")
