"""Fold-in, document-topic output, held-out evaluation and the estimator façade."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from topicflow.errors import NotFittedError, StoreExistsError, VocabularyMismatchError
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.io.models.store import SavedModel, export_npz, load_model
from topicflow.io.corpus.reader import Corpus
from topicflow.models.lda.state import LDAState
from topicflow.api.lda import LDA
from topicflow.pipeline.vb.infer import evaluate_model
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def fitted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, LDA, object]:
    base = tmp_path_factory.mktemp("infer")
    truth = draw_planted_corpus(n_docs=400, n_topics=4, n_terms=40, doc_length=60, alpha=0.2, seed=21)
    train = {lang: m[:300] for lang, m in truth.counts.items()}
    test = {lang: m[300:] for lang, m in truth.counts.items()}
    train_path = write_test_store(base / "train.zarr", train, shard_size=64)
    test_path = write_test_store(base / "test.zarr", test, shard_size=40)
    model = LDA(4, max_iter=50, seed=3).fit(train_path)
    return train_path, test_path, model, truth


def test_infer_writes_aligned_normalized_doc_topics(fitted: tuple, tmp_path: Path, client: object) -> None:
    _, test_path, model, truth = fitted
    out = tmp_path / "theta.zarr"
    written = model.transform_to_zarr(test_path, out, client)
    assert written == 100
    output = DocTopics.open(out)
    ids = np.concatenate([ids for ids, _ in output])
    theta = output.to_dask_array().compute()
    assert list(ids) == list(Corpus.open(test_path).doc_ids())
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    # The dominant inferred topic is the dominant true topic (up to the topic permutation).
    true_theta = truth.doc_topic[300:]
    order = np.argmax(model.topic_word_ @ truth.topic_word["default"].T, axis=0)
    agreement = np.mean(np.argmax(theta[:, order], axis=1) == np.argmax(true_theta, axis=1))
    assert agreement > 0.85
    # The lazy transform gives the same numbers.
    np.testing.assert_allclose(model.transform(test_path).compute(), theta, rtol=1e-12)
    with pytest.raises(StoreExistsError):
        model.transform_to_zarr(test_path, out, client)


def fixed_topic_model(model: LDA, topic_word: np.ndarray, alpha: np.ndarray) -> SavedModel:
    """A model whose posterior mean topics are ``topic_word`` (lambda scaled up so E[log beta] ~ log beta)."""
    state = LDAState({"default": topic_word * 1e8}, np.asarray(alpha, dtype=np.float64), {"default": 0.01})
    return SavedModel(state=state, vocabularies=model.model_.vocabularies, info={})


def test_evaluate_gives_near_oracle_perplexity(fitted: tuple) -> None:
    _, test_path, model, truth = fitted
    corpus = Corpus.open(test_path)
    result = model.evaluate(test_path)
    assert result.n_docs == 100
    assert result.n_heldout_tokens > 0 and result.oov_tokens == 0
    assert result.elbo_per_token < 0
    oracle = evaluate_model(fixed_topic_model(model, truth.topic_word["default"], truth.alpha), corpus)
    flat = evaluate_model(fixed_topic_model(model, np.full((4, 40), 1 / 40), truth.alpha), corpus)
    assert oracle.n_heldout_tokens == result.n_heldout_tokens  # the same token split for every model
    assert result.perplexity < 1.1 * oracle.perplexity, (result.perplexity, oracle.perplexity)
    assert flat.perplexity == pytest.approx(40.0, rel=1e-6)
    assert model.perplexity(test_path) == pytest.approx(result.perplexity)


def test_store_with_another_vocabulary_is_remapped(fitted: tuple, tmp_path: Path) -> None:
    train_path, test_path, model, truth = fitted
    test_corpus = Corpus.open(test_path)
    # Same documents, terms in reverse order and two unknown extra terms.
    terms = list(test_corpus.vocabulary().terms)
    counts = truth.counts["default"][300:].toarray()
    extra = np.zeros((counts.shape[0], 2), dtype=np.int64)
    extra[:, 0] = 1
    reordered = np.hstack([counts[:, ::-1], extra])
    import scipy.sparse as sp

    other = write_test_store(tmp_path / "other.zarr", {"default": sp.csr_matrix(reordered)}, shard_size=40,
                             terms={"default": terms[::-1] + ["zz-unknown-1", "zz-unknown-2"]})
    a = model.evaluate(test_path)
    b = model.evaluate(other)
    assert b.oov_tokens == counts.shape[0]
    np.testing.assert_allclose(b.heldout_log_likelihood, a.heldout_log_likelihood, rtol=0.05)
    np.testing.assert_allclose(model.transform(other).compute(), model.transform(test_path).compute(), rtol=1e-10)


def test_model_without_shared_language_is_refused(fitted: tuple, tmp_path: Path) -> None:
    _, _, model, truth = fitted
    other = write_test_store(tmp_path / "fr.zarr", {"fr": truth.counts["default"][:10]}, shard_size=10)
    with pytest.raises(VocabularyMismatchError, match="none is shared"):
        model.evaluate(other)


def test_save_load_export_round_trip(fitted: tuple, tmp_path: Path) -> None:
    _, test_path, model, _ = fitted
    model.save(tmp_path / "m")
    with pytest.raises(StoreExistsError):
        model.save(tmp_path / "m")
    loaded = LDA.load(tmp_path / "m")
    np.testing.assert_array_equal(loaded.components_, model.components_)
    np.testing.assert_array_equal(loaded.doc_topic_prior_, model.doc_topic_prior_)
    assert loaded.n_iter_ == model.n_iter_ and loaded.topic_names_ == model.topic_names_
    assert [r.elbo for r in loaded.trace_] == [r.elbo for r in model.trace_]
    assert loaded.perplexity(test_path) == pytest.approx(model.perplexity(test_path), rel=1e-12)
    assert not list(tmp_path.glob(".m.tmp-*")), "temporary directories left behind"
    shapes = export_npz(tmp_path / "m.npz", load_model(tmp_path / "m"))
    with np.load(tmp_path / "m.npz") as npz:
        np.testing.assert_allclose(npz["topic_word"].sum(axis=1), 1.0)
        assert npz["alpha"].shape == (4,) and npz["vocab"].shape == (40,)
    assert shapes["topic_word"] == (4, 40)


def test_unfitted_estimator_says_so() -> None:
    with pytest.raises(NotFittedError, match="not fitted"):
        LDA(3).perplexity("nowhere.zarr")


def test_load_restores_every_hyperparameter(fitted: tuple, tmp_path: Path) -> None:
    train_path, _, _, _ = fitted
    from topicflow.models.lda.priors import SeedTopic

    seeds = (SeedTopic("first", ("de00001", "de00002"), (1.0, 2.0)),)
    model = LDA(4, doc_topic_prior=0.2, topic_word_prior=0.05, max_iter=3, tol=1e-3, max_doc_iter=40, doc_tol=1e-4, seed=9,
                seed_topics=seeds, seed_strength=4.0, warm_start=True).fit(train_path)
    model.save(tmp_path / "m")
    loaded = LDA.load(tmp_path / "m")
    assert loaded._config() == model._config()
