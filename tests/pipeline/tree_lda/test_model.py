"""Saved tree-LDA models: exact round trip of the tree state, the LDA view, refusal of other models."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.tree_lda.test_batch import _store_and_tree
from topicflow.errors import ModelFormatError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model
from topicflow.io.trees import read_tree
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.models.tree_lda.vb import topic_word
from topicflow.models.tree_lda.view import lda_view
from topicflow.pipeline.tree_lda import (
    TreeVBConfig,
    fit_batch_tree_vb,
    is_tree_model,
    saved_tree,
    saved_tree_config,
    saved_tree_state,
    tree_model,
)


@pytest.mark.parametrize("normalization", ["node", "node_language"])
def test_save_load_round_trip_is_exact(tmp_path: Path, normalization: str) -> None:
    store, tree_path = _store_and_tree(tmp_path)
    tree, _ = read_tree(tree_path)
    corpus = Corpus.open(store)
    config = TreeVBConfig(n_topics=2, normalization=normalization, estep="hybrid", max_iter=3, tol=0.0,  # type: ignore[arg-type]
                          seed=4)
    result = fit_batch_tree_vb(corpus, tree, config)
    save_model(tmp_path / "m", tree_model(corpus, result, config, tree_source=str(tree_path)))
    model = load_model(tmp_path / "m")
    assert is_tree_model(model) and model.info.family == "tree_lda"
    assert saved_tree_config(model) == TreeVBConfig.from_dict(config.to_dict())
    assert saved_tree_config(model).initial_alpha == config.initial_alpha
    loaded = saved_tree(model)
    for name in ("edge_parent", "edge_child", "edge_prior", "path_indptr", "path_edges", "path_language", "path_term"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(tree, name))
    assert (loaded.languages, loaded.n_terms, loaded.node_names) == (tree.languages, tree.n_terms, tree.node_names)
    state, layout = saved_tree_state(model)
    np.testing.assert_array_equal(state.edge_var, result.state.edge_var)
    np.testing.assert_array_equal(state.doc_topic_prior, result.state.doc_topic_prior)
    # The LDA view has the tree's word means, per language (under "node" the tree's rows span both
    # languages, so the view is the mean conditional on the word's language).
    means = topic_word(state.edge_var, layout)
    for lang in tree.languages:
        expected = means[lang] / means[lang].sum(axis=1, keepdims=True)
        np.testing.assert_allclose(model.state.topic_word()[lang], expected, rtol=1e-12)
    assert [r["elbo"] for r in model.info.trace] == [r.elbo for r in result.trace]


def test_lda_view_of_a_flat_polylingual_tree_is_lambda() -> None:
    from topicflow.models.tree_lda.vb import tree_vb_layout

    layout = tree_vb_layout(flat_tree(["en", "de"], [3, 2], beta=0.1), "node_language")
    lam = np.random.default_rng(0).gamma(2.0, 1.0, size=(4, 5)) + 0.1
    view, priors = lda_view(lam, layout)
    np.testing.assert_allclose(view["en"], lam[:, :3], rtol=1e-12)
    np.testing.assert_allclose(view["de"], lam[:, 3:], rtol=1e-12)
    assert priors == {"en": pytest.approx(0.1), "de": pytest.approx(0.1)}


def test_lda_model_is_not_a_tree_model(tmp_path: Path) -> None:
    from topicflow.io.models.store import SavedModel
    from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb

    store, _ = _store_and_tree(tmp_path)
    result = fit_batch_vb(Corpus.open(store), VBConfig(n_topics=2, max_iter=1))
    model = SavedModel(result.state, {})
    assert not is_tree_model(model)
    with pytest.raises(ModelFormatError, match="--prior-tree"):
        saved_tree_state(model)
