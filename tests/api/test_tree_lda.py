"""topicflow.TreeLDA: fit on a tiny bilingual store with a dictionary tree, transform, save/load, errors."""
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
        topicflow.TreeLDA(2, prior_tree=tree_path, inference="gibbs").fit(store)
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
