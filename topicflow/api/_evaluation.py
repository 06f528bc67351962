"""Evaluation methods every estimator shares: held-out likelihood by protocol and topics as features.

The estimators score their fitted model (``model_``) with the same drivers as ``topicflow evaluate``
(:mod:`topicflow.pipeline.evaluation`); documents may be anything the estimator accepts, written to
a temporary store first when they are not one.
"""
from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from topicflow.api._inputs import column_terms, input_kind, store_for
from topicflow.io.corpus.reader import Corpus
from topicflow.io.sources.base import FieldSpec
from topicflow.metrics.classification import DEFAULT_FOLDS, FeatureTransform
from topicflow.pipeline.evaluation.features import FeaturesResult, topic_features_scores
from topicflow.pipeline.evaluation.heldout import (
    DEFAULT_PROTOCOL,
    HeldoutResult,
    heldout_likelihood,
)


class EvaluationMixin:
    """``heldout_likelihood`` and ``topic_features_scores`` for an estimator with a fitted ``model_``."""

    if TYPE_CHECKING:
        def _check_fitted(self) -> Any:
            """The fitted model (TopicModelEstimator provides it)."""

    def _model_terms(self) -> list[str] | None:
        """Terms of a fitted monolingual model; None before fitting or for a polylingual model."""
        model = getattr(self, "model_", None)
        if model is None or len(model.state.languages) != 1:
            return None
        return [str(t) for t in model.vocabularies[model.state.languages[0]].terms]

    @contextlib.contextmanager
    def _scoring_store(self, corpus: Any, vocabulary: Sequence[str] | None, fields: FieldSpec | None,
                       client: Any) -> Iterator[Corpus]:
        """``store_for`` with a matrix's columns taken as the model's terms by default."""
        kind = input_kind(corpus)
        vocabulary = column_terms(corpus, kind, vocabulary, self._model_terms(), owner=type(self).__name__)
        with store_for(corpus, vocabulary=vocabulary, fields=fields, client=client) as store:
            yield store

    def heldout_likelihood(
        self, corpus: Any, protocol: str = DEFAULT_PROTOCOL, client: Any = None, *,
        vocabulary: Sequence[str] | None = None, fields: FieldSpec | None = None, **settings: Any,
    ) -> HeldoutResult:
        """Score held-out documents under a named protocol (as ``topicflow evaluate --protocol``).

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for ``fit``.
        protocol : {"completion-random", "completion-first-half", "left-to-right", "bound"}
            See docs/evaluation.md, "Held-out likelihood".
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column (default: the model's terms).
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.
        **settings
            ``seed``, ``fraction``, ``n_particles``, ``max_doc_iter``, ``doc_tol``, ``split_every``
            (:class:`~topicflow.pipeline.evaluation.heldout.HeldoutOptions`).

        Returns
        -------
        HeldoutResult
            ``protocol``, ``log_lik_per_token`` (nats), ``perplexity``, ``n_docs``, ``n_tokens``, ``settings``.
        """
        model = self._check_fitted()
        with self._scoring_store(corpus, vocabulary, fields, client) as store:
            return heldout_likelihood(model, store, protocol, client=client, **settings)

    def topic_features_scores(
        self, corpus: Any, client: Any = None, *, n_folds: int = DEFAULT_FOLDS, seed: int = 0,
        max_docs: int | None = None, baseline: FeatureTransform = "tfidf", vocabulary: Sequence[str] | None = None,
        fields: FieldSpec | None = None,
    ) -> FeaturesResult:
        """Classification accuracy and clustering scores of the topics on labeled documents.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, dask DataFrame or dask.bag.Bag
            Labeled documents (a store with labels, or texts with a label field in ``fields``).
        client : distributed.Client, optional
            Cluster for the fold-in; by default the current client, else local threads.
        n_folds : int, default 5
            Folds of the stratified cross-validation.
        seed : int, default 0
            Seed of the folds and of the document sample.
        max_docs : int, optional
            Score a deterministic sample of this many documents.
        baseline : {"tfidf", "none"}, default "tfidf"
            Features of the bag-of-words baseline.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column (default: the model's terms).
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.

        Returns
        -------
        FeaturesResult
            See :func:`topicflow.pipeline.evaluation.features.topic_features_scores`.
        """
        model = self._check_fitted()
        with self._scoring_store(corpus, vocabulary, fields, client) as store:
            return topic_features_scores(model, store, client=client, n_folds=n_folds, seed=seed, max_docs=max_docs,
                                         baseline=baseline)
