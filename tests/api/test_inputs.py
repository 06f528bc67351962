"""What LDA and StreamingLDA accept besides stores: matrices, Dask arrays, Dask DataFrames and bags.

A matrix is written to a store with ``topicflow.shard-size`` documents per shard, so fitting it gives
bit for bit the model of a store written from the same matrix with that shard size; chunking a
Dask array differently changes nothing either.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterator

import dask
import dask.array as da
import dask.bag as db
import dask.dataframe as dd
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import sparse

from topicflow import LDA, StreamingLDA
from topicflow.errors import InputError, InvalidParameterError, StoreExistsError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.sources.base import FieldSpec
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

SHARD = 50
PARAMS: dict[str, Any] = dict(n_topics=3, max_iter=8, seed=1)


@pytest.fixture(autouse=True)
def small_shards(tmp_path: Path) -> Iterator[Path]:
    """Shards of 50 documents (four per corpus) and a scratch directory the tests can look into."""
    scratch = tmp_path / "scratch"
    with dask.config.set({"topicflow.shard-size": SHARD, "topicflow.scratch-dir": str(scratch)}):
        yield scratch


@pytest.fixture(scope="module")
def counts() -> sp.csr_matrix:
    planted = draw_planted_corpus(n_docs=200, n_topics=3, n_terms=30, doc_length=20, alpha=0.1, seed=4)
    return planted.counts["default"]


@pytest.fixture(scope="module")
def store(counts: sp.csr_matrix, tmp_path_factory: pytest.TempPathFactory) -> Path:
    terms = {"default": [f"t{j}" for j in range(counts.shape[1])]}
    return write_test_store(tmp_path_factory.mktemp("store") / "s.zarr", {"default": counts}, shard_size=SHARD,
                            terms=terms)


@pytest.fixture(scope="module")
def store_model(store: Path) -> LDA:
    with dask.config.set({"topicflow.shard-size": SHARD}):
        return LDA(**PARAMS).fit(store)


# ----------------------------------------------------------------------------- matrices


def test_fit_on_csr_equals_fit_on_a_store_of_the_same_matrix(counts: sp.csr_matrix, store_model: LDA,
                                                               small_shards: Path) -> None:
    model = LDA(**PARAMS).fit(counts)
    np.testing.assert_array_equal(model.components_, store_model.components_)
    np.testing.assert_array_equal(model.topic_word_, store_model.topic_word_)
    np.testing.assert_array_equal(model.doc_topic_prior_, store_model.doc_topic_prior_)
    assert model.n_iter_ == store_model.n_iter_ and model.n_features_in_ == 30
    assert list(small_shards.iterdir()) == []  # the temporary store is gone once fit returns


@pytest.mark.parametrize("form", ["csc", "coo", "dense", "float", "uint8", "pydata", "list"])
def test_every_matrix_form_gives_the_same_model(counts: sp.csr_matrix, store_model: LDA, form: str) -> None:
    forms = {
        "csc": lambda: counts.tocsc(), "coo": lambda: sp.coo_array(counts), "dense": lambda: counts.toarray(),
        "float": lambda: counts.astype(np.float64), "uint8": lambda: counts.astype(np.uint8),
        "pydata": lambda: sparse.COO.from_scipy_sparse(counts), "list": lambda: counts.toarray().tolist(),
    }
    model = LDA(**PARAMS).fit(forms[form]())
    np.testing.assert_array_equal(model.components_, store_model.components_)


def test_online_fit_on_csr_equals_online_fit_on_the_store(counts: sp.csr_matrix, store: Path) -> None:
    online = dict(PARAMS, method="online", batch_size=40, executor="threads")
    np.testing.assert_array_equal(LDA(**online).fit(counts).components_, LDA(**online).fit(store).components_)


def test_vocabulary_names_the_terms(counts: sp.csr_matrix) -> None:
    terms = [f"w{j:02d}" for j in range(30)]
    model = LDA(**PARAMS).fit(counts, vocabulary=terms)
    assert model.vocabularies_["default"].terms.tolist() == terms
    assert all(term.startswith("w") for term, _ in model.top_terms(3)[0])


def test_transform_of_a_matrix_is_a_numpy_array_equal_to_the_store_transform(
    counts: sp.csr_matrix, store: Path, store_model: LDA,
) -> None:
    theta = store_model.transform(counts)
    assert isinstance(theta, np.ndarray) and theta.shape == (200, 3)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    np.testing.assert_array_equal(theta, store_model.transform(store).compute())


def test_transform_keeps_empty_documents_as_prior_rows(counts: sp.csr_matrix, store_model: LDA) -> None:
    with_empty = sp.vstack([counts[:3], sp.csr_matrix((1, 30), dtype=np.int64)]).tocsr()
    theta = store_model.transform(with_empty)
    assert theta.shape == (4, 3)
    np.testing.assert_array_equal(theta[:3], store_model.transform(counts[:3]))
    prior = store_model.doc_topic_prior_
    np.testing.assert_allclose(theta[3], prior / prior.sum())


def test_transform_matches_columns_by_vocabulary(counts: sp.csr_matrix, store_model: LDA) -> None:
    order = np.arange(30)[::-1]
    reversed_terms = [f"t{j}" for j in order]
    np.testing.assert_array_equal(
        store_model.transform(counts[:, order], vocabulary=reversed_terms), store_model.transform(counts)
    )
    with pytest.raises(InputError, match="X has 29 features, but LDA is expecting 30 features as input"):
        store_model.transform(counts[:, :29])


def test_score_and_perplexity_of_a_matrix_equal_those_of_the_store(
    counts: sp.csr_matrix, store: Path, store_model: LDA,
) -> None:
    assert store_model.score(counts) == store_model.score(store)
    assert store_model.perplexity(counts) == store_model.perplexity(store)


def test_partial_fit_on_successive_matrices(counts: sp.csr_matrix, store: Path) -> None:
    online = dict(PARAMS, method="online", batch_size=25, executor="threads")
    model = LDA(**online)
    model.partial_fit(counts[:100]).partial_fit(counts[100:])
    assert model.n_docs_seen_ == 200 and model.n_iter_ == 8
    assert np.isfinite(model.components_).all()
    grown = LDA(**online).partial_fit(counts[:100]).partial_fit(sp.hstack([counts[100:], counts[100:, :2]]).tocsr())
    assert grown.n_features_in_ == 32 and grown.vocabularies_["default"].terms.tolist()[-2:] == ["t30", "t31"]


def test_store_path_keeps_the_store(counts: sp.csr_matrix, tmp_path: Path) -> None:
    LDA(**PARAMS).fit(counts, store_path=tmp_path / "kept.zarr")
    corpus = Corpus.open(tmp_path / "kept.zarr")
    assert len(corpus) == 200 and corpus.n_shards == 4 and corpus.verify() == []
    with pytest.raises(StoreExistsError, match="exists already"):
        LDA(**PARAMS).fit(counts, store_path=tmp_path / "kept.zarr")


# ----------------------------------------------------------------------------- bad inputs


@pytest.mark.parametrize(
    ("matrix", "message"),
    [
        (sp.csr_matrix(np.array([[1, 0], [0, -2]])), r"Negative values in data.*X row 1, column 1: count -2;"
                                                      r" counts must be non-negative integers"),
        (np.array([[1.0, 0.5], [0.0, 2.0]]), r"X row 0, column 1: count 0.5; counts must be non-negative integers"),
        (np.array([[1.0, np.nan]]), r"X row 0, column 1: NaN"),
        (np.array([[1.0, np.inf]]), r"X row 0, column 1: inf"),
        (np.array([1, 2, 3]), r"must be a 2-D document-term matrix .* shape \(3,\)"),
        (np.array([["a dog"], ["a cat"]]), r"has dtype <U5, not a number"),
        (np.zeros((3, 0), dtype=int), r"X has 0 feature\(s\) \(shape=\(3, 0\)\)"),
        (np.zeros((0, 3), dtype=int), r"X has no rows"),
        (np.array([[2**31]]), r"count 2147483648 exceeds 2147483647"),
    ],
)
def test_bad_matrices_are_refused_clearly(matrix: Any, message: str, small_shards: Path) -> None:
    with pytest.raises(InputError, match=message):
        LDA(**PARAMS).fit(matrix)
    assert list(small_shards.iterdir()) == []  # nothing left behind


def test_bad_vocabularies_are_refused_clearly(counts: sp.csr_matrix) -> None:
    with pytest.raises(InvalidParameterError, match="vocabulary has 3 terms but X has 30 columns"):
        LDA(**PARAMS).fit(counts, vocabulary=["a", "b", "c"])
    with pytest.raises(InvalidParameterError, match="holds the term 'a' more than once"):
        LDA(**PARAMS).fit(counts, vocabulary=["a"] * 30)
    with pytest.raises(InvalidParameterError, match="vocabulary must be a sequence of terms"):
        LDA(**PARAMS).fit(counts, vocabulary="abc")
    with pytest.raises(InvalidParameterError, match="vocabulary= names the columns of a matrix"):
        LDA(**PARAMS).fit("any.zarr", vocabulary=["a"])


def test_bad_dask_chunks_are_refused_when_written(counts: sp.csr_matrix) -> None:
    dense = counts.toarray().astype(np.int64)
    dense[123, 4] = -1
    with pytest.raises(InputError, match=r"Negative values in data.*the Dask array row 123, column 4: count -1"):
        LDA(**PARAMS).fit(da.from_array(dense, chunks=(40, 30)))


# ----------------------------------------------------------------------------- Dask arrays


def _sparse_chunks(counts: sp.csr_matrix, rows: int, cols: int, kind: str) -> Any:
    convert = (lambda b: sp.csr_matrix(b)) if kind == "scipy" else (lambda b: sparse.COO.from_numpy(b))
    return da.from_array(counts.toarray(), chunks=(rows, cols)).map_blocks(convert, dtype=counts.dtype)


@pytest.mark.parametrize(("rows", "cols", "kind"), [(37, 30, "scipy"), (64, 11, "scipy"), (50, 30, "pydata"),
                                                    (23, 30, "dense")])
def test_dask_array_fit_equals_the_csr_fit(counts: sp.csr_matrix, store_model: LDA, rows: int, cols: int,
                                           kind: str, client: Any) -> None:
    array = (da.from_array(counts.toarray(), chunks=(rows, cols)) if kind == "dense"
             else _sparse_chunks(counts, rows, cols, kind))
    model = LDA(**PARAMS).fit(array, client=client)
    np.testing.assert_array_equal(model.components_, store_model.components_)


def test_dask_array_transform_is_lazy_and_equals_the_matrix_transform(counts: sp.csr_matrix,
                                                                     store_model: LDA) -> None:
    array = _sparse_chunks(counts, 64, 30, "scipy")
    with dask.config.set(scheduler="sync"):
        theta = store_model.transform(array)
    assert isinstance(theta, da.Array) and theta.chunks[0] == (64, 64, 64, 8)
    np.testing.assert_array_equal(theta.compute(), store_model.transform(counts))


# ----------------------------------------------------------------------------- texts

WORDS = (("apple", "banana", "cherry", "grape", "melon"), ("python", "java", "rust", "golang", "haskell"),
         ("soccer", "tennis", "golf", "rugby", "hockey"))


@pytest.fixture(scope="module")
def texts() -> list[str]:
    rng = np.random.default_rng(7)
    docs = [" ".join(rng.choice(WORDS[i % 3], size=12)) for i in range(200)]
    docs[5] = "the and of"  # only stop words: ingest drops it, transform keeps a prior row
    return docs


def _topic_words(model: LDA) -> set[frozenset[str]]:
    return {frozenset(term for term, _ in topic) for topic in model.top_terms(5)}


def test_dask_bag_of_strings_end_to_end(texts: list[str], client: Any, small_shards: Path) -> None:
    bag = db.from_sequence(texts, npartitions=4)
    model = LDA(n_topics=3, max_iter=30, seed=0).fit(bag, client=client)
    assert _topic_words(model) == {frozenset(group) for group in WORDS}
    assert model.n_docs_seen_ == 199 and list(small_shards.iterdir()) == []
    theta = model.transform(bag)
    assert isinstance(theta, da.Array)
    values = theta.compute()
    assert values.shape == (200, 3)
    np.testing.assert_allclose(values.sum(axis=1), 1.0)
    assert len({int(np.argmax(values[i])) for i in range(0, 30, 3)}) == 1  # documents of one group agree


def test_dask_dataframe_with_id_and_label_columns(texts: list[str], tmp_path: Path) -> None:
    frame = pd.DataFrame({"doc": [f"d{i}" for i in range(200)], "body": texts, "group": [str(i % 3) for i in range(200)]})
    fields = FieldSpec(id_field="doc", text_field="body", label_field="group")
    ddf = dd.from_pandas(frame, npartitions=3)
    model = LDA(n_topics=3, max_iter=30, seed=0).fit(ddf, fields=fields, store_path=tmp_path / "texts.zarr")
    assert _topic_words(model) == {frozenset(group) for group in WORDS}
    corpus = Corpus.open(tmp_path / "texts.zarr")
    assert corpus.has_labels and next(corpus.doc_ids()) == "d0" and len(corpus) == 199
    assert model.transform(ddf, fields=fields).compute().shape == (200, 3)
    series = model.transform(ddf["body"]).compute()
    np.testing.assert_array_equal(series, model.transform(ddf, fields=fields).compute())
    with pytest.raises(InputError, match="has no column 'text'.*fields=FieldSpec"):
        LDA(n_topics=3).fit(ddf)


def test_bag_of_dicts_and_bad_items(texts: list[str]) -> None:
    records = db.from_sequence([{"id": f"r{i}", "text": t} for i, t in enumerate(texts)], npartitions=2)
    assert LDA(n_topics=3, max_iter=5).fit(records).n_docs_seen_ == 199
    with pytest.raises(InputError, match="holds strings .* or dicts .*; got int"):
        LDA(n_topics=3).fit(db.from_sequence([1, 2, 3], npartitions=1))


# ----------------------------------------------------------------------------- StreamingLDA


def test_streaming_lda_fits_a_matrix_like_its_store(counts: sp.csr_matrix, store: Path) -> None:
    settings = dict(n_topics=3, init_docs=30, init_sweeps=10, eval_every=100, seed=3)
    from_matrix = StreamingLDA("olda", **settings).fit(counts)
    from_store = StreamingLDA("olda", **settings).fit(store)
    np.testing.assert_array_equal(from_matrix.components_, from_store.components_)


def test_streaming_partial_fit_continues_on_the_grown_matrix(counts: sp.csr_matrix, tmp_path: Path) -> None:
    settings = dict(n_topics=3, init_docs=30, init_sweeps=10, eval_every=100, seed=3)
    whole = StreamingLDA("olda", **settings).fit(counts)
    model = StreamingLDA("olda", **settings).fit(counts[:100], out=tmp_path / "runs")  # two whole shards
    model.partial_fit(counts)  # the same first 100 rows, then the new ones
    np.testing.assert_array_equal(model.components_, whole.components_)
    with pytest.raises(InvalidParameterError, match="is not the store the stream .* was reading"):
        StreamingLDA("olda", **settings).fit(counts[:120], out=tmp_path / "other").partial_fit(counts)
