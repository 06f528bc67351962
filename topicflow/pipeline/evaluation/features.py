"""Topics as features: classification accuracy and clustering scores of a model on a labeled store.

Each document's topic proportions are folded in (VB, topics fixed: the path of ``topicflow infer``)
shard by shard on the cluster and collected on the driver with the documents' labels and counts.
There they are scored by :mod:`topicflow.metrics.classification` (logistic regression, stratified
k-fold) beside a bag-of-words baseline on the same folds, and by :mod:`topicflow.metrics.clustering`
(each document's most probable topic as its cluster).

Memory: the features of every evaluated document are in the driver's memory at once: ``8 n_docs
n_topics`` bytes for theta (1M documents of 100 topics: 800 MB) plus the baseline's sparse counts
(about 12 bytes per distinct term of a document). ``max_docs`` evaluates a deterministic uniform
sample instead (:func:`topicflow.metrics.classification.sample_documents`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import scipy.sparse as sp

from topicflow._typing import choices
from topicflow.errors import InvalidParameterError, MissingLabelsError
from topicflow.io.corpus.reader import as_corpus
from topicflow.io.models.store import SavedModel
from topicflow.metrics.classification import (
    DEFAULT_FOLDS,
    ClassificationScores,
    FeatureTransform,
    check_classes,
    cross_validated_accuracy,
    sample_documents,
)
from topicflow.metrics.clustering import (
    ClusteringScores,
    argmax_topics,
    clustering_scores,
)
from topicflow.pipeline.cluster import compute_list, current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb import fold_in_params, model_blocks, model_token, share
from topicflow.tasks.estep import graph_token
from topicflow.tasks.evaluate import map_topic_features

#: What the baseline classifier sees, by ``baseline`` setting.
BASELINE_FEATURES = {"tfidf": "tf-idf of the store's term counts", "none": "the store's raw term counts"}


@dataclass(frozen=True, slots=True)
class FeaturesResult:
    """Topics-as-features scores of a model on a labeled store.

    Attributes
    ----------
    classification : ClassificationScores
        Logistic regression on the document-topic proportions.
    baseline : ClassificationScores
        The same classifier on the same folds, on the bag of words.
    clustering : ClusteringScores
        Each document's most probable topic against its label.
    n_docs : int
        Documents evaluated.
    n_docs_store : int
        Documents of the store (more than ``n_docs`` when ``max_docs`` sampled them).
    settings : dict
        ``folds``, ``seed``, ``max_docs``, the classifier and the baseline's features.
    """

    classification: ClassificationScores
    baseline: ClassificationScores
    clustering: ClusteringScores
    n_docs: int
    n_docs_store: int
    settings: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        """Return the scores as a JSON-able dict (the ``evaluate --labels --format json`` output).

        Returns
        -------
        dict
        """
        return {
            "classification": self.classification.to_dict(), "baseline": self.baseline.to_dict(),
            "clustering": self.clustering.to_dict(), "n_docs": self.n_docs, "n_docs_store": self.n_docs_store,
            "settings": dict(self.settings),
        }


@dataclass(frozen=True, slots=True)
class CollectedFeatures:
    """What the driver holds for the evaluation: one row per evaluated document, in store order.

    Attributes
    ----------
    doc_topic : ndarray of shape (n_docs, n_topics), float64
        Folded-in topic proportions (rows sum to 1).
    labels : ndarray of shape (n_docs,), object
    counts : scipy.sparse.csr_matrix of shape (n_docs, n_terms)
        Term counts in the store's vocabulary (languages side by side in sorted order).
    positions : ndarray of shape (n_docs,), int64
        Global positions of the documents in the store.
    """

    doc_topic: np.ndarray
    labels: np.ndarray
    counts: sp.csr_matrix
    positions: np.ndarray


def collect_topic_features(
    model: SavedModel, store: Any, *, client: Any = None, max_docs: int | None = None, seed: int = 0,
    progress: ProgressReporter = NO_PROGRESS,
) -> CollectedFeatures:
    """Fold the (sampled) documents of a labeled store into the model and collect them on the driver.

    Parameters
    ----------
    model : SavedModel
    store : str, os.PathLike or Corpus
        Must carry labels.
    client : distributed.Client, optional
    max_docs : int, optional
        Evaluate a deterministic uniform sample of this many documents (all by default).
    seed : int, default 0
        Seed of the sample.
    progress : ProgressReporter, optional
        Told of every finished shard.

    Returns
    -------
    CollectedFeatures

    Raises
    ------
    MissingLabelsError
        The store has no labels.
    """
    corpus = as_corpus(store)
    if not corpus.has_labels:
        raise MissingLabelsError(
            f"store {str(corpus.path)!r} has no document labels, which classification and clustering scores "
            "need; ingest it with --label-field (or --label-from-dir).", path=str(corpus.path),
        )
    client = current_client(client)
    positions = sample_documents(len(corpus), max_docs, seed=seed)
    rows = [positions[(positions >= s.first_doc) & (positions < s.first_doc + s.n_docs)] - s.first_doc
            for s in corpus.shards]
    token = graph_token(corpus.token(), model_token(model), "features", max_docs, seed)
    blocks, maps = model_blocks(model, corpus, token=token)
    topics = share(model.state.prepared_topics(list(maps)), client, name=f"topics-{token}")
    parts = map_topic_features(corpus.to_delayed_multi(), blocks, topics, model.state.doc_topic_prior,
                               fold_in_params(model), rows, token=token)
    results = compute_list(parts, client=client, progress=progress, desc="features", unit="shard")
    if not results:
        raise InvalidParameterError(f"store {str(corpus.path)!r} has no documents to evaluate")
    return CollectedFeatures(
        doc_topic=np.concatenate([theta for theta, _, _ in results]),
        labels=np.concatenate([labels for _, labels, _ in results]),
        counts=sp.vstack([counts for _, _, counts in results], format="csr"),
        positions=positions,
    )


def topic_features_scores(
    model: SavedModel, store: Any, *, client: Any = None, n_folds: int = DEFAULT_FOLDS, seed: int = 0,
    max_docs: int | None = None, baseline: FeatureTransform = "tfidf", inverse_regularization: float = 1.0,
    progress: ProgressReporter = NO_PROGRESS,
) -> FeaturesResult:
    """Score a model's topics as document features on a labeled store: classification and clustering.

    Parameters
    ----------
    model : SavedModel
        Any saved LDA-family model.
    store : str, os.PathLike or Corpus
        A store with labels (``topicflow ingest --label-field``).
    client : distributed.Client, optional
        Cluster for the fold-in; by default the current client, else local threads.
    n_folds : int, default 5
        Folds (k) of the stratified k-fold cross-validation.
    seed : int, default 0
        Seed of the folds and of the document sample.
    max_docs : int, optional
        Evaluate a deterministic uniform sample of this many documents (see the module's memory note).
    baseline : {"tfidf", "none"}, default "tfidf"
        The bag-of-words baseline's features: tf-idf weights of the counts (fitted per training
        part) or the raw counts.
    inverse_regularization : float, default 1.0
        ``C`` of the logistic regressions (both feature sets).
    progress : ProgressReporter, optional

    Returns
    -------
    FeaturesResult

    Raises
    ------
    MissingLabelsError
        The store has no labels.
    InvalidParameterError
        Bad settings, fewer than two classes, or a class with fewer documents than folds.
    ImportError
        scikit-learn is not installed.

    Examples
    --------
    >>> from topicflow.io.models.store import load_model                            # doctest: +SKIP
    >>> topic_features_scores(load_model("m"), "labeled.zarr").classification.mean_accuracy  # doctest: +SKIP
    """
    if baseline not in choices(FeatureTransform):
        raise InvalidParameterError(f"baseline must be one of {list(choices(FeatureTransform))}, got {baseline!r}")
    corpus = as_corpus(store)
    collected = collect_topic_features(model, corpus, client=client, max_docs=max_docs, seed=seed, progress=progress)
    labels = check_classes(collected.labels, n_folds)
    topics = cross_validated_accuracy(collected.doc_topic, labels, name="document-topic proportions",
                                      n_folds=n_folds, seed=seed, inverse_regularization=inverse_regularization)
    bag = cross_validated_accuracy(collected.counts, labels, name=BASELINE_FEATURES[baseline], transform=baseline,
                                   n_folds=n_folds, seed=seed, inverse_regularization=inverse_regularization)
    settings = {
        "folds": n_folds, "seed": seed, "max_docs": max_docs,
        "classifier": f"scikit-learn LogisticRegression(C={inverse_regularization}, max_iter=1000), "
                      f"StratifiedKFold({n_folds}, shuffle=True, random_state={seed})",
        "baseline": BASELINE_FEATURES[baseline], "clusters": "each document's most probable topic",
    }
    return FeaturesResult(
        classification=topics, baseline=bag,
        clustering=clustering_scores(labels, argmax_topics(collected.doc_topic)),
        n_docs=int(labels.shape[0]), n_docs_store=len(corpus), settings=settings,
    )
