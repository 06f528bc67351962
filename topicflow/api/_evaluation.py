"""Methods every estimator shares: using, scoring and saving its fitted model.

Document topics (``transform``, ``transform_to_zarr``), held-out likelihood (``evaluate``,
``perplexity``, ``score``, ``heldout_likelihood`` by protocol), topics as features, and ``save``. They
read the model's LDA view (an HDP model's is lambda = n_kw + beta with the prior alpha * pi), so LDA and
HDP share one copy.

The estimators score their fitted model (``model_``) with the same drivers as ``topicflow evaluate``
(:mod:`topicflow.pipeline.evaluation`); documents may be anything the estimator accepts, written to
a temporary store first when they are not one.
"""
from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from topicflow._typing import DEFAULT_PROTOCOL
from topicflow.api._base import split_client
from topicflow.api._inputs import column_terms, input_kind, store_for, transform_blocks
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.store import SavedModel, save_model
from topicflow.metrics.classification import DEFAULT_FOLDS, FeatureTransform
from topicflow.pipeline.cluster import compute
from topicflow.pipeline.vb.infer import (
    EvaluationResult,
    evaluate_model,
    fold_in_params,
    infer_doc_topics,
    model_blocks,
    model_token,
)

if TYPE_CHECKING:  # io.sources loads every source format (pyarrow); the annotations need only the name
    from topicflow.io.sources.base import FieldSpec

    # The evaluation package (reports, pyLDAvis, coherence, features) is imported by the methods that use
    # it: a fit never does (issue 22: start-up).
    from topicflow.pipeline.evaluation.features import FeaturesResult
    from topicflow.pipeline.evaluation.heldout import HeldoutResult


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
        from topicflow.pipeline.evaluation.heldout import heldout_likelihood

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
        from topicflow.pipeline.evaluation.features import topic_features_scores

        model = self._check_fitted()
        with self._scoring_store(corpus, vocabulary, fields, client) as store:
            return topic_features_scores(model, store, client=client, n_folds=n_folds, seed=seed, max_docs=max_docs,
                                         baseline=baseline)



class FittedModelMixin(EvaluationMixin):
    """Use, score and save a fitted ``model_`` that reads as LDA (the LDA and HDP estimators).

    ``transform``, ``transform_to_zarr``, ``evaluate``, ``perplexity``, ``score`` and ``save``;
    ``split_every`` is the estimator's.
    """

    split_every: int | None


    def transform(self, corpus: Any, *, vocabulary: Sequence[str] | None = None,
                  fields: FieldSpec | None = None) -> Any:
        """Compute document-topic proportions with the topics fixed (lazily for stores and Dask inputs).

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for :meth:`fit`; no store is written. A matrix's columns are the model's
            terms, in order, unless ``vocabulary`` names them (terms the model lacks are ignored).
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column.
        fields : FieldSpec, optional
            Texts: where the text is; tokenized with the default tokenizer.

        Returns
        -------
        ndarray or dask.array.Array of shape (n_docs, n_topics), float64
            Normalized gamma (rows sum to 1), one row per document (an empty document gets the
            normalized prior). A NumPy array for a matrix; for a store or a Dask input a Dask array
            with one chunk per shard, row of chunks or partition, of which nothing is computed yet
            (texts: the partitions' lengths are unknown until computed).

        Raises
        ------
        InputError
            A matrix whose columns do not fit the model, or counts that are not non-negative integers.
        """
        return fold_in_documents(self._check_fitted(), corpus, owner=type(self).__name__, terms=self._model_terms(),
                                 vocabulary=vocabulary, fields=fields)

    def transform_to_zarr(self, corpus: Any, out: str | os.PathLike[str], client: Any = None, *,
                          overwrite: bool = False, vocabulary: Sequence[str] | None = None,
                          fields: FieldSpec | None = None) -> int:
        """Write document-topic proportions out of core (see :mod:`topicflow.io.outputs.doc_topics`).

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for :meth:`fit` (anything but a store is written to a temporary one first).
        out : str or os.PathLike
            Zarr store to write (atomically).
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        overwrite : bool, default False
            Replace an existing ``out``.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column (default: the model's terms).
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.

        Returns
        -------
        int
            Number of documents written.
        """
        model = self._check_fitted()
        with self._scoring_store(corpus, vocabulary, fields, client) as store:
            return infer_doc_topics(model, store, Path(out), client=client, overwrite=overwrite)

    def evaluate(self, corpus: Any, client: Any = None, *, seed: int = 0, vocabulary: Sequence[str] | None = None,
                 fields: FieldSpec | None = None) -> EvaluationResult:
        """Score held-out documents: document-completion perplexity and the per-word ELBO bound.

        The two scores of the ``completion-random`` and ``bound`` protocols (docs/evaluation.md); for
        any protocol, with its name and units, use :meth:`heldout_likelihood`.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for :meth:`fit` (anything but a store is written to a temporary one first).
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        seed : int, default 0
            Seed of the split of each document's tokens into observed and scored halves.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column (default: the model's terms).
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.

        Returns
        -------
        EvaluationResult
            ``perplexity``, ``elbo_per_token`` and the token counts.
        """
        model = self._check_fitted()
        with self._scoring_store(corpus, vocabulary, fields, client) as store:
            return evaluate_model(model, store, client=client, seed=seed, split_every=self.split_every)

    def perplexity(self, corpus: Any, client: Any = None, *, vocabulary: Sequence[str] | None = None,
                   fields: FieldSpec | None = None) -> float:
        """Compute held-out perplexity by document completion (lower is better).

        The ``completion-random`` protocol with seed 0: theta folded in on a random half of each
        document's tokens, the other half scored; ``heldout_likelihood(corpus, protocol)`` gives the others.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for :meth:`fit`.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column (default: the model's terms).
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.

        Returns
        -------
        float
        """
        return self.evaluate(corpus, client, vocabulary=vocabulary, fields=fields).perplexity

    def score(self, corpus: Any, y: Any = None, *, client: Any = None, vocabulary: Sequence[str] | None = None,
              fields: FieldSpec | None = None) -> float:
        """Compute the per-word variational lower bound on ``corpus`` with the topics fixed (higher is better).

        The ``bound`` protocol's ``log_lik_per_token`` (nats per token), as scikit-learn's
        ``LatentDirichletAllocation.score`` is a bound, not a held-out likelihood estimate.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Documents, as for :meth:`fit`.
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run on; by default the current client, else local threads.
        vocabulary : sequence of str, optional
            Matrix or Dask array: one term per column (default: the model's terms).
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.

        Returns
        -------
        float
        """
        return self.evaluate(corpus, split_client(y, client), vocabulary=vocabulary, fields=fields).elbo_per_token

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Save the fitted model to a directory (zarr + JSON, written atomically; never pickle).

        Parameters
        ----------
        path : str or os.PathLike
            Model directory.
        overwrite : bool, default False
            Replace an existing model at ``path``.
        """
        save_model(path, self._check_fitted(), overwrite=overwrite)


def fold_in_documents(model: SavedModel, corpus: Any, *, owner: str, terms: Sequence[str] | None,
                      vocabulary: Sequence[str] | None = None, fields: FieldSpec | None = None) -> Any:
    """Document-topic proportions of ``corpus`` folded into ``model`` (topics fixed): what ``transform`` returns.

    Shared by every estimator whose model reads as LDA (the HDP's LDA view: lambda and the prior alpha * pi).

    Parameters
    ----------
    model : SavedModel
        The fitted model.
    corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
        Documents, as for ``fit``; no store is written.
    owner : str
        The estimator's class name, for messages.
    terms : sequence of str or None
        The model's terms (a monolingual model), the default columns of a matrix.
    vocabulary : sequence of str, optional
        Matrix or Dask array: one term per column.
    fields : FieldSpec, optional
        Texts: where the text is.

    Returns
    -------
    ndarray or dask.array.Array of shape (n_docs, n_topics)
        Normalized gamma, one row per document (see :meth:`LDA.transform`).
    """
    import dask
    import dask.array as da

    from topicflow.tasks.estep import graph_token
    from topicflow.tasks.evaluate import map_fold_in

    kind = input_kind(corpus)
    k = model.state.n_topics
    if kind != "store":
        lang = single_language(model, owner)
        blocks, n_rows = transform_blocks(corpus, kind, terms=list(terms or []), language=lang,
                                          owner=owner, vocabulary=vocabulary, fields=fields)
        token = graph_token(dask.base.tokenize(corpus, vocabulary, fields), model_token(model), "transform")
        topics = dask.delayed(model.state.prepared_topics([lang]), traverse=False, name=f"topics-{token}")
        thetas = map_fold_in(blocks, topics, model.state.doc_topic_prior, fold_in_params(model), token=token)
        if kind == "matrix":
            return np.concatenate(compute(*thetas)) if thetas else np.zeros((0, k))
        parts = [da.from_delayed(t, shape=(n, k), dtype=np.float64) for t, n in zip(thetas, n_rows)]
        return da.concatenate(parts, axis=0, allow_unknown_chunksizes=True)
    corpus = as_corpus(corpus)
    token = graph_token(corpus.token(), model_token(model), "transform")
    blocks, maps = model_blocks(model, corpus, token=token)
    topics = dask.delayed(model.state.prepared_topics(list(maps)), traverse=False, name=f"topics-{token}")
    thetas = map_fold_in(blocks, topics, model.state.doc_topic_prior, fold_in_params(model), token=token)
    return da.concatenate(
        [da.from_delayed(t, shape=(s.n_docs, k), dtype=np.float64) for t, s in zip(thetas, corpus.shards)],
        axis=0,
    )


def single_language(model: SavedModel, owner: str) -> str:
    """The one language of a monolingual model; a clear error for a polylingual one.

    Parameters
    ----------
    model : SavedModel
    owner : str
        The estimator's class name, for the message.

    Returns
    -------
    str
    """
    languages = model.state.languages
    if len(languages) != 1:
        raise InvalidParameterError(
            f"this {owner} is polylingual (languages {list(languages)}); give it documents as a corpus store "
            "with those languages, not as a matrix or texts."
        )
    return languages[0]
