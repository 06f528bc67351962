"""topic_features_scores: classification and clustering of folded-in topics, on any sharding and scheduler."""
from __future__ import annotations

import numpy as np
import pytest
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.linear_model import LogisticRegression
from sklearn.metrics import adjusted_rand_score, normalized_mutual_info_score
from sklearn.model_selection import StratifiedKFold, cross_val_score
from sklearn.pipeline import make_pipeline

from tests.pipeline.evaluation.stores import Stores, build_stores
from topicflow.errors import InvalidParameterError, MissingLabelsError
from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.classification import sample_documents
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.pipeline.evaluation import topic_features_scores
from topicflow.pipeline.evaluation.features import collect_topic_features
from topicflow.pipeline.vb.infer import fold_in_params


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return build_stores(tmp_path_factory.mktemp("features"))


def test_same_scores_on_any_sharding_and_scheduler(stores: Stores, client: object) -> None:
    big = topic_features_scores(stores.model, stores.ordered, n_folds=3, seed=1)
    small = topic_features_scores(stores.model, stores.ordered_small_shards, n_folds=3, seed=1, client=client)
    assert small.to_dict() == big.to_dict()
    assert big.n_docs == big.n_docs_store == 150 and big.clustering.n_classes == 3


def test_scores_equal_scikit_learn_on_the_folded_in_documents(stores: Stores) -> None:
    model, corpus = stores.model, Corpus.open(stores.ordered)
    result = topic_features_scores(model, corpus, seed=2)
    # The documents, their labels and topics, read and folded in directly.
    blocks = [corpus.read_block(i) for i in range(corpus.n_shards)]
    labels = np.concatenate([b.labels for b in blocks])
    theta = np.concatenate([fold_in_block(b, model.state.prepared_topics(), model.state.doc_topic_prior,
                                          fold_in_params(model)) for b in blocks])
    counts = np.vstack([b.to_csr().toarray() for b in blocks])
    folds = StratifiedKFold(n_splits=5, shuffle=True, random_state=2)
    topics = cross_val_score(LogisticRegression(max_iter=1000), theta, labels, cv=folds)
    bag = cross_val_score(make_pipeline(TfidfTransformer(), LogisticRegression(max_iter=1000)), counts, labels,
                          cv=folds)
    assert result.classification.fold_accuracies == pytest.approx(tuple(topics), abs=1e-12)
    assert result.baseline.fold_accuracies == pytest.approx(tuple(bag), abs=1e-12)
    clusters = np.argmax(theta, axis=1)
    assert result.clustering.nmi_arithmetic == pytest.approx(normalized_mutual_info_score(labels, clusters), rel=1e-12)
    assert result.clustering.nmi_geometric == pytest.approx(
        normalized_mutual_info_score(labels, clusters, average_method="geometric"), rel=1e-12)
    assert result.clustering.ari == pytest.approx(adjusted_rand_score(labels, clusters), rel=1e-12)
    # Three planted topics, labelled by the largest: the topics separate the classes well.
    assert result.classification.mean_accuracy > 0.6 and result.clustering.purity > 0.6


def test_max_docs_scores_a_deterministic_sample(stores: Stores) -> None:
    collected = collect_topic_features(stores.model, stores.ordered_small_shards, max_docs=60, seed=3)
    np.testing.assert_array_equal(collected.positions, sample_documents(150, 60, seed=3))
    ids = np.concatenate([b.doc_ids for b in Corpus.open(stores.ordered).iter_blocks()])
    assert collected.doc_topic.shape == (60, 3) and collected.counts.shape[0] == 60
    full = collect_topic_features(stores.model, stores.ordered, seed=3)
    np.testing.assert_allclose(collected.doc_topic, full.doc_topic[collected.positions], rtol=1e-12)
    assert list(collected.labels) == list(full.labels[collected.positions])
    assert (collected.counts != full.counts[collected.positions]).nnz == 0
    assert len(set(ids[collected.positions])) == 60
    result = topic_features_scores(stores.model, stores.ordered, max_docs=60, seed=3, n_folds=3)
    assert result.n_docs == 60 and result.n_docs_store == 150 and result.settings["max_docs"] == 60


def test_raw_counts_baseline_and_clear_errors(stores: Stores) -> None:
    result = topic_features_scores(stores.model, stores.plain, baseline="none", n_folds=3)
    assert result.baseline.features == "the store's raw term counts"
    with pytest.raises(MissingLabelsError, match=r"has no document labels.*--label-field"):
        topic_features_scores(stores.model, stores.unlabeled)
    with pytest.raises(InvalidParameterError, match="fewer than the 50 folds"):
        topic_features_scores(stores.model, stores.plain, n_folds=50)
    with pytest.raises(InvalidParameterError, match="baseline"):
        topic_features_scores(stores.model, stores.plain, baseline="bm25")  # type: ignore[arg-type]
