"""The pyLDAvis export: exactly pyLDAvis.prepare's arguments, counted out of core, whatever the partitioning."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyLDAvis
import pytest

from topicflow.api.lda import LDA
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model
from topicflow.io.outputs.pyldavis import PYLDAVIS_KEYS, read_pyldavis
from topicflow.pipeline.evaluation.pyldavis import export_pyldavis, pyldavis_data
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("pyldavis")
    truth = draw_planted_corpus(n_docs=150, n_topics=4, n_terms=30, doc_length=20, alpha=0.2, seed=3)
    counts = truth.counts["default"]
    store = write_test_store(base / "a.zarr", {"default": counts}, shard_size=40)
    other = write_test_store(base / "b.zarr", {"default": counts}, shard_size=23)
    LDA(4, max_iter=10, seed=1).fit(store).save(base / "model")
    return {"store": store, "other": other, "model": base / "model", "base": base}


def brute_force_term_counts(store: Path, terms: list[str]) -> np.ndarray:
    """Every shard read on its own, its dense matrix summed, then placed by term string."""
    corpus = Corpus.open(store)
    total = np.zeros(len(corpus.vocabulary()), dtype=np.int64)
    for index in range(corpus.n_shards):
        total += corpus.read_block(index).to_csr().toarray().sum(axis=0)
    by_term = dict(zip((str(t) for t in corpus.vocabulary().terms), total))
    return np.array([by_term.get(t, 0) for t in terms], dtype=np.int64)


def test_pyldavis_prepares_and_renders_with_the_model_topic_order(fitted: dict, client: object) -> None:
    data = pyldavis_data(fitted["model"], fitted["store"], client)
    assert set(data) == set(PYLDAVIS_KEYS)
    model = load_model(fitted["model"])
    np.testing.assert_array_equal(data["topic_term_dists"], model.state.topic_word()["default"])
    np.testing.assert_allclose(data["topic_term_dists"].sum(axis=1), 1.0)
    np.testing.assert_allclose(data["doc_topic_dists"].sum(axis=1), 1.0)
    assert data["doc_topic_dists"].shape == (150, 4) and data["doc_lengths"].shape == (150,)
    np.testing.assert_array_equal(data["term_frequency"], brute_force_term_counts(fitted["store"], data["vocab"]))
    np.testing.assert_array_equal(data["term_frequency"], Corpus.open(fitted["store"]).vocabulary().corpus_freq)
    assert data["term_frequency"].sum() == data["doc_lengths"].sum()
    prepared = pyLDAvis.prepare(**data, sort_topics=False, n_jobs=1)
    assert list(prepared.topic_order) == [1, 2, 3, 4]  # topic k of the model is pyLDAvis's topic k + 1
    page = pyLDAvis.prepared_data_to_html(prepared)
    assert "ldavis" in page and len(page) > 1000
    # Topic sizes pyLDAvis computes are the ones the report shows with this corpus.
    freq = prepared.topic_info[prepared.topic_info.Category == "Default"]
    assert len(freq) > 0
    shares = data["doc_topic_dists"].T @ data["doc_lengths"] / data["doc_lengths"].sum()
    np.testing.assert_allclose(prepared.topic_coordinates.sort_index()["Freq"].to_numpy() / 100, shares, rtol=1e-6)


def test_same_export_whatever_the_partitions_or_workers(fitted: dict, client: object) -> None:
    first = pyldavis_data(fitted["model"], fitted["store"], None, split_every=2)
    second = pyldavis_data(fitted["model"], fitted["other"], client, split_every=3)
    for key in PYLDAVIS_KEYS:
        np.testing.assert_array_equal(np.asarray(first[key]), np.asarray(second[key]))


def test_json_round_trip_and_foreign_vocabulary(fitted: dict, tmp_path: Path) -> None:
    out = tmp_path / "vis.json"
    written = export_pyldavis(fitted["model"], fitted["store"], out)
    with open(out, encoding="utf-8") as handle:
        raw = json.load(handle)
    assert sorted(raw) == sorted(PYLDAVIS_KEYS)
    pyLDAvis.prepare(**raw, sort_topics=False, n_jobs=1)
    back = read_pyldavis(out)
    for key in PYLDAVIS_KEYS:
        np.testing.assert_array_equal(np.asarray(back[key]), np.asarray(written[key]))
    # A store whose terms only partly overlap the model's: its other terms are left out of every count.
    rng = np.random.default_rng(0)
    import scipy.sparse as sp

    counts = sp.csr_matrix(rng.poisson(0.5, size=(30, 12)))
    names = [f"de{i:05d}" for i in range(20, 26)] + [f"zz{i}" for i in range(6)]
    foreign = write_test_store(tmp_path / "foreign.zarr", {"default": counts}, shard_size=10, terms={"default": names})
    data = pyldavis_data(fitted["model"], foreign)
    np.testing.assert_array_equal(data["term_frequency"], brute_force_term_counts(foreign, data["vocab"]))
    assert data["term_frequency"].sum() == data["doc_lengths"].sum() == counts[:, :6].sum()
    pyLDAvis.prepare(**data, sort_topics=False, n_jobs=1)


def test_polylingual_models_show_one_named_language(tmp_path: Path) -> None:
    poly = draw_planted_corpus(n_docs=60, n_topics=3, n_terms=15, doc_length=15, alpha=0.3, seed=2,
                               languages=("en", "de"))
    store = write_test_store(tmp_path / "poly.zarr", poly.counts, shard_size=20)
    LDA(3, max_iter=5).fit(store).save(tmp_path / "model")
    with pytest.raises(InvalidParameterError, match="name the language"):
        pyldavis_data(tmp_path / "model", store)
    with pytest.raises(InvalidParameterError, match="no language 'fr'"):
        pyldavis_data(tmp_path / "model", store, language="fr")
    data = pyldavis_data(tmp_path / "model", store, language="de")
    np.testing.assert_array_equal(data["doc_lengths"], np.asarray(poly.counts["de"].sum(axis=1)).ravel())
    np.testing.assert_array_equal(data["term_frequency"], np.asarray(poly.counts["de"].sum(axis=0)).ravel())
    pyLDAvis.prepare(**data, sort_topics=False, n_jobs=1)
