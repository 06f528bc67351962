"""Models of gensim and tomotopy as topicflow saved models: conversion, round trip, and the CLI's topics.

gensim and tomotopy are both in the test extra (requirements/test.lock), so every test here runs.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner

from topicflow.cli import main
from topicflow.errors import InvalidParameterError, VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.foreign import from_gensim, from_tomotopy, imported_model
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.pipeline.evaluation.report import describe_method
from topicflow.pipeline.update import continuer_for
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

N_TOPICS, N_TERMS = 3, 30


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    """Planted block topics (each topic owns 10 terms), term ids named by words in a non-sorted order."""
    planted = draw_planted_corpus(n_docs=60, n_topics=N_TOPICS, n_terms=N_TERMS, doc_length=40, alpha=0.3, seed=3)
    terms = [f"w{(7 * i) % N_TERMS:02d}" for i in range(N_TERMS)]
    path = write_test_store(tmp_path_factory.mktemp("foreign") / "train.zarr", planted.counts, shard_size=25,
                            terms={"default": terms})
    return Corpus.open(path)


def store_bags(corpus: Corpus) -> list[list[tuple[int, int]]]:
    """Each document as gensim's list of (term id, count)."""
    docs = []
    for block in corpus.iter_blocks():
        for d in range(block.n_docs):
            row = slice(block.indptr[d], block.indptr[d + 1])
            docs.append(list(zip(block.term_ids[row].tolist(), block.counts[row].tolist())))
    return docs


def cli_topics(model_path: Path, top: int) -> dict[int, list[tuple[str, float]]]:
    """Top terms and their probabilities of each topic id, as ``topicflow topics --format json`` lists them."""
    result = CliRunner().invoke(main, ["topics", str(model_path), "--top", str(top), "--format", "json"],
                                catch_exceptions=False)
    assert result.exit_code == 0, result.output
    listing = json.loads(result.output)
    return {entry["topic"]: [(t["term"], t["p"]) for t in entry["default"]] for entry in listing["topics"]}


def assert_same_top_terms(listed: list[tuple[str, float]], expected: list[tuple[str, float]]) -> None:
    """Same probabilities in order, and the same terms except for ties at the last listed probability.

    A Gibbs sampler's topics are counts, so terms tie; the libraries order ties differently.
    """
    np.testing.assert_allclose([p for _, p in listed], [p for _, p in expected], rtol=1e-5)
    last = expected[-1][1]
    assert {t for t, p in listed if p > last * (1 + 1e-5)} == {t for t, p in expected if p > last * (1 + 1e-5)}


def round_trip(model: SavedModel, path: Path) -> SavedModel:
    save_model(path, model)
    return load_model(path)


def test_columns_follow_the_store_vocabulary_by_term(store: Corpus, tmp_path: Path) -> None:
    """Plain NumPy reference: column j of the result is the foreign column whose term is the store's term j."""
    rng = np.random.default_rng(0)
    store_terms = [str(t) for t in store.vocabulary().terms]
    foreign_terms = list(rng.permutation(store_terms))
    lam = rng.gamma(2.0, 1.0, size=(N_TOPICS, N_TERMS)) + 0.01
    eta = rng.uniform(0.01, 0.1, size=N_TERMS)
    model = imported_model(lam, [0.1, 0.2, 0.3], eta, foreign_terms, store, source={"library": "numpy"})
    expected = np.empty_like(lam)
    expected_eta = np.empty_like(eta)
    for j, term in enumerate(store_terms):
        expected[:, j] = lam[:, foreign_terms.index(term)]
        expected_eta[j] = eta[foreign_terms.index(term)]
    loaded = round_trip(model, tmp_path / "m")
    np.testing.assert_array_equal(loaded.state.topic_word_var["default"], expected)
    np.testing.assert_array_equal(loaded.state.topic_word_prior["default"], np.tile(expected_eta, (N_TOPICS, 1)))
    np.testing.assert_array_equal(loaded.state.doc_topic_prior, [0.1, 0.2, 0.3])
    assert loaded.info.kind == "imported" and loaded.info.extra["source"] == {"library": "numpy"}
    assert loaded.info.corpus["n_docs"] == len(store)


def test_a_different_vocabulary_is_refused_naming_terms(store: Corpus) -> None:
    terms = [str(t) for t in store.vocabulary().terms]
    with pytest.raises(VocabularyMismatchError, match=r"'zzz'.*same terms"):
        imported_model(np.ones((2, N_TERMS)), 0.1, 0.01, terms[:-1] + ["zzz"], store, source={})
    with pytest.raises(VocabularyMismatchError, match="distinct term"):
        imported_model(np.ones((2, N_TERMS)), 0.1, 0.01, terms[:-1] + terms[:1], store, source={})
    with pytest.raises(InvalidParameterError, match="finite and positive"):
        imported_model(np.zeros((2, N_TERMS)), 0.1, 0.01, terms, store, source={})
    with pytest.raises(InvalidParameterError, match="one column per term"):
        imported_model(np.ones((2, N_TERMS - 1)), 0.1, 0.01, terms, store, source={})


def test_gensim_model_round_trips_and_lists_the_same_topics(store: Corpus, tmp_path: Path) -> None:
    from gensim.models import LdaModel

    vocabulary = store.vocabulary()
    lda = LdaModel(store_bags(store), id2word={i: str(t) for i, t in enumerate(vocabulary.terms)},
                   num_topics=N_TOPICS, passes=5, alpha="auto", eta=0.01, random_state=0)
    model = from_gensim(lda, store, settings={"note": "test"})
    loaded = round_trip(model, tmp_path / "gensim")
    lam = loaded.state.topic_word_var["default"]
    np.testing.assert_array_equal(lam, model.state.topic_word_var["default"])
    np.testing.assert_array_equal(lam, np.asarray(lda.state.get_lambda(), dtype=np.float64))
    # gensim computes its topics in float32; ours are the same lambda normalized in float64
    np.testing.assert_allclose(loaded.state.topic_word()["default"], lda.get_topics(), rtol=1e-5)
    np.testing.assert_allclose(loaded.state.doc_topic_prior, lda.alpha, rtol=1e-6)
    assert loaded.state.topic_word_prior["default"] == pytest.approx(0.01)
    source = loaded.info.extra["source"]
    assert source["library"] == "gensim" and source["class"].endswith("LdaModel")
    assert describe_method(loaded) == f"imported from gensim {source['version']} LdaModel"
    assert source["settings"]["num_topics"] == N_TOPICS and source["settings"]["note"] == "test"
    listed = cli_topics(tmp_path / "gensim", top=5)
    assert sorted(listed) == list(range(N_TOPICS))
    for k in range(N_TOPICS):
        expected = [(term, float(p)) for term, p in lda.show_topic(k, topn=5)]
        assert [term for term, _ in listed[k]] == [term for term, _ in expected]
        assert_same_top_terms(listed[k], expected)


def test_imported_gensim_model_is_scored_like_gensim_scores_it(store: Corpus, tmp_path: Path,
                                                               local_cluster: Any) -> None:
    """Independent check of the whole path: `topicflow coherence` on the imported model equals gensim's
    CoherenceModel (u_mass, document co-occurrence) on the gensim model's own top words and bags."""
    from gensim.corpora import Dictionary
    from gensim.models import CoherenceModel, LdaModel

    id2word = {i: str(t) for i, t in enumerate(store.vocabulary().terms)}
    bags = store_bags(store)
    lda = LdaModel(bags, id2word=id2word, num_topics=N_TOPICS, passes=5, alpha="auto", eta=0.01, random_state=1)
    save_model(tmp_path / "gensim", from_gensim(lda, store))
    result = CliRunner().invoke(main, ["coherence", str(tmp_path / "gensim"), "--reference", str(store.path),
                                       "--measure", "u_mass", "--top-n", "5", "--format", "json",
                                       "--scheduler", local_cluster.scheduler_address], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    topics = [[term for term, _ in lda.show_topic(k, topn=5)] for k in range(N_TOPICS)]
    assert [t["words"] for t in payload["topics"]] == topics
    expected = CoherenceModel(topics=topics, corpus=bags, dictionary=Dictionary.from_corpus(bags, id2word=id2word),
                              coherence="u_mass", topn=5).get_coherence_per_topic()
    np.testing.assert_allclose(payload["per_topic"], expected, rtol=1e-9)


def test_tomotopy_model_round_trips_and_lists_the_same_topics(store: Corpus, tmp_path: Path) -> None:
    import tomotopy as tp
    vocabulary = store.vocabulary()
    mdl = tp.LDAModel(k=N_TOPICS, alpha=0.1, eta=0.01, min_cf=0, min_df=0, rm_top=0, seed=1)
    for bag in store_bags(store):
        mdl.add_doc([str(vocabulary.terms[t]) for t, c in bag for _ in range(c)])
    mdl.train(100, workers=1)
    model = from_tomotopy(mdl, store)
    loaded = round_trip(model, tmp_path / "tomotopy")
    np.testing.assert_array_equal(loaded.state.topic_word_var["default"], model.state.topic_word_var["default"])
    order = [list(mdl.used_vocabs).index(str(t)) for t in vocabulary.terms]
    for k in range(N_TOPICS):
        np.testing.assert_allclose(loaded.state.topic_word()["default"][k],
                                   np.asarray(mdl.get_topic_word_dist(k))[order], rtol=1e-5)
    np.testing.assert_allclose(loaded.state.doc_topic_prior, mdl.alpha, rtol=1e-6)
    assert loaded.info.extra["source"]["library"] == "tomotopy"
    listed = cli_topics(tmp_path / "tomotopy", top=5)
    assert sorted(listed) == list(range(N_TOPICS))
    for k in range(N_TOPICS):
        assert_same_top_terms(listed[k], [(term, float(p)) for term, p in mdl.get_topic_words(k, top_n=5)])


def test_update_refuses_an_imported_model(store: Corpus, tmp_path: Path) -> None:
    terms = [str(t) for t in store.vocabulary().terms]
    save_model(tmp_path / "m", imported_model(np.ones((2, N_TERMS)) + np.arange(N_TERMS), 0.1, 0.01, terms, store,
                                              source={"library": "somelib"}))
    with pytest.raises(InvalidParameterError, match=r"imported from somelib.*`topicflow fit`"):
        continuer_for(load_model(tmp_path / "m"), tmp_path / "m")
