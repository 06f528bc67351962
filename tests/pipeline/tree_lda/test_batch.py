"""Batch tree VB on Dask: a flat tree is (polylingual) batch VB, worker-count invariance, a dictionary tree."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.io.trees import build_and_write_tree
from topicflow.models.tree_lda.tree import flat_tree
from topicflow.models.tree_lda.vb import topic_word
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.tree_lda import TreeVBConfig, fit_batch_tree_vb
from topicflow.pipeline.vb.batch import VBConfig, fit_batch_vb, initial_state
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

ETA = 0.05


@pytest.fixture(scope="module")
def bilingual(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=20, doc_length=30, alpha=0.3, seed=4,
                                languages=("en", "de"))
    return write_test_store(tmp_path_factory.mktemp("tree-batch") / "bi.zarr", truth.counts, shard_size=32)


def _lda_and_tree(corpus: Corpus, estep: str, normalization: str, max_iter: int = 5):
    vb = VBConfig(n_topics=3, max_iter=max_iter, tol=0.0, seed=2, topic_word_prior=ETA, estep=estep,  # type: ignore[arg-type]
                  doc_tol=1e-6)
    lda = fit_batch_vb(corpus, vb)
    sizes = [len(corpus.vocabulary(lang)) for lang in corpus.languages]
    start = initial_state(corpus, vb)[0].topic_word_var
    config = TreeVBConfig(n_topics=3, normalization=normalization, estep=estep, max_iter=max_iter, tol=0.0,  # type: ignore[arg-type]
                          seed=2, doc_tol=1e-6)
    tree = fit_batch_tree_vb(corpus, flat_tree(corpus.languages, sizes, beta=ETA), config,
                             initial=np.hstack([start[lang] for lang in corpus.languages]))
    return lda, tree


@pytest.mark.parametrize("estep", ["vb", "hybrid"])
def test_flat_bilingual_tree_equals_polylingual_batch_vb(bilingual: Path, estep: str) -> None:
    corpus = Corpus.open(bilingual)
    lda, tree = _lda_and_tree(corpus, estep, "node_language")
    lam = np.hstack([lda.state.topic_word_var[lang] for lang in corpus.languages])
    np.testing.assert_allclose(tree.state.edge_var, lam, rtol=1e-10, atol=0)
    np.testing.assert_allclose(tree.state.doc_topic_prior, lda.state.doc_topic_prior, rtol=1e-10)
    np.testing.assert_allclose([r.elbo for r in tree.trace], [r.elbo for r in lda.trace], rtol=1e-10)
    words = topic_word(tree.state.edge_var, tree.layout)
    for lang in corpus.languages:
        np.testing.assert_allclose(words[lang], lda.state.topic_word()[lang], rtol=1e-9)


def test_flat_monolingual_tree_under_node_normalization_is_lda(tmp_path: Path) -> None:
    truth = draw_planted_corpus(n_docs=80, n_topics=3, n_terms=25, doc_length=30, alpha=0.3, seed=8)
    corpus = Corpus.open(write_test_store(tmp_path / "mono.zarr", truth.counts, shard_size=25))
    vb = VBConfig(n_topics=3, max_iter=4, tol=0.0, seed=6, topic_word_prior=ETA)
    lda = fit_batch_vb(corpus, vb)
    # Default start: a monolingual flat tree starts where LDA starts.
    tree = fit_batch_tree_vb(corpus, flat_tree(["default"], [25], beta=ETA),
                             TreeVBConfig(n_topics=3, normalization="node", max_iter=4, tol=0.0, seed=6))
    np.testing.assert_allclose(tree.state.edge_var, lda.state.topic_word_var["default"], rtol=1e-10, atol=0)


def _store_and_tree(tmp: Path) -> tuple[Path, Path]:
    rows = []
    en = ["house home cat dog", "cat dog mouse", "house home garden", "system network computer", "dog garden"]
    de = ["haus heim katze hund", "katze hund maus", "haus heim garten", "system netz rechner", "hund garten"]
    for i in range(30):
        rows.append({"id": f"d{i}", "en": en[i % 5] + " " + en[(i * 3) % 5], "de": de[i % 5]})
    src = tmp / "rows.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    ingest_corpus([src], tmp / "s.zarr", fields=FieldSpec(lang_fields=(("en", "en"), ("de", "de"))),
                  tokenizer=TokenizerConfig(), shard_size=8)
    dictionary = tmp / "d.tsv"
    dictionary.write_text("en\tde\nhouse\thaus\nhome\theim\nhome\thaus\ncat\tkatze\ndog\thund\n", encoding="utf-8")
    build_and_write_tree(dictionary, tmp / "s.zarr", tmp / "d.tree")
    return tmp / "s.zarr", tmp / "d.tree"


@pytest.fixture(scope="module")
def dictionary_store(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return _store_and_tree(tmp_path_factory.mktemp("dict-tree"))


@pytest.mark.parametrize("estep", ["vb", "hybrid"])
def test_dictionary_tree_same_model_on_any_scheduler(dictionary_store: tuple[Path, Path], client: object,
                                                     estep: str) -> None:
    from topicflow.io.trees import read_tree

    store, tree_path = dictionary_store
    tree, _ = read_tree(tree_path)
    config = TreeVBConfig(n_topics=2, estep=estep, max_iter=4, tol=0.0, seed=3)  # type: ignore[arg-type]
    reference = fit_batch_tree_vb(Corpus.open(store), tree, config, split_every=2)
    result = fit_batch_tree_vb(Corpus.open(store), tree, config, client=client, split_every=2)
    np.testing.assert_array_equal(result.state.edge_var, reference.state.edge_var)
    np.testing.assert_array_equal(result.state.doc_topic_prior, reference.state.doc_topic_prior)
    assert all(np.isfinite(r.elbo) for r in result.trace) and len(result.trace) == 4
    if estep == "vb":
        elbos = np.array([r.elbo for r in result.trace])
        assert np.all(np.diff(elbos) >= -1e-6 * np.abs(elbos[1:])), elbos


@pytest.mark.parametrize("n_workers", [1, 4])
def test_same_model_for_any_worker_count(dictionary_store: tuple[Path, Path], n_workers: int) -> None:
    from distributed import Client, LocalCluster

    from topicflow.io.trees import read_tree

    store, tree_path = dictionary_store
    tree, _ = read_tree(tree_path)
    config = TreeVBConfig(n_topics=2, max_iter=3, tol=0.0, seed=5)
    reference = fit_batch_tree_vb(Corpus.open(store), tree, config)
    with (LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=False, dashboard_address=":0") as cluster,
          Client(cluster) as client):
        state = fit_batch_tree_vb(Corpus.open(store), tree, config, client=client).state
    np.testing.assert_array_equal(state.edge_var, reference.state.edge_var)


def test_tree_for_other_languages_or_sizes_is_refused(bilingual: Path) -> None:
    corpus = Corpus.open(bilingual)
    with pytest.raises(InvalidParameterError, match="languages"):
        fit_batch_tree_vb(corpus, flat_tree(["en"], [20]), TreeVBConfig(n_topics=2, max_iter=1))
    with pytest.raises(InvalidParameterError, match="terms"):
        fit_batch_tree_vb(corpus, flat_tree(corpus.languages, [20, 19]), TreeVBConfig(n_topics=2, max_iter=1))
    with pytest.raises(InvalidParameterError, match="normalization"):
        TreeVBConfig(n_topics=2, normalization="leaf")  # type: ignore[arg-type]


@pytest.mark.parametrize("normalization", ["node", "node_language"])
def test_driver_matches_the_plain_loop_reference_on_a_two_sense_tree(tmp_path: Path, client: object,
                                                                     normalization: str) -> None:
    import scipy.sparse as sp
    from scipy.special import gammaln

    from tests.reference import tree_vb as ref

    tree, edges, paths = ref.toy_tree()
    rng = np.random.default_rng(17)
    counts = {lang: sp.csr_matrix(rng.poisson(1.5, size=(23, 3))) for lang in ("en", "de")}
    corpus = Corpus.open(write_test_store(tmp_path / "toy.zarr", counts, shard_size=5))
    config = TreeVBConfig(n_topics=3, normalization=normalization, doc_topic_prior_mode="fixed",  # type: ignore[arg-type]
                          doc_topic_prior=0.4, max_iter=3, tol=0.0, max_doc_iter=500, doc_tol=1e-9, seed=2)
    result = fit_batch_tree_vb(corpus, tree, config, client=client, split_every=2)
    docs = {lang: [{w: int(n) for w, n in zip(row.indices, row.data)} for row in counts[lang]]
            for lang in ("en", "de")}
    from topicflow.models.tree_lda.vb import initial_edge_var, tree_vb_layout

    lam = initial_edge_var(3, tree_vb_layout(tree, normalization), seed=2)
    beta = np.array([b for _, _, b in edges])
    alpha = np.full(3, 0.4)
    for iteration in range(3):
        expected = ref.estep_reference(docs, lam, edges, paths, alpha, 500, 1e-9,
                                       per_language=normalization == "node_language")
        bound = (expected["doc_elbo"] + ref.topic_terms_reference(lam, edges, paths, normalization == "node_language")
                 + 23 * (gammaln(1.2) - 3 * gammaln(0.4))
                 + (0.4 - 1) * expected["alpha_suff"].sum())
        np.testing.assert_allclose(result.trace[iteration].elbo, bound, rtol=1e-8)
        lam = beta + expected["edge_counts"]
    np.testing.assert_allclose(result.state.edge_var, lam, rtol=1e-8)
