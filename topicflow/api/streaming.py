"""``StreamingLDA``: the streaming samplers behind one scikit-learn-style class.

``__init__`` only stores keyword parameters. ``fit`` runs :func:`topicflow.pipeline.streaming.run_stream`
(all runs side by side on the cluster) and sets the fitted attributes, whose names end in ``_``.
``partial_fit`` continues the same runs after ``topicflow append`` has added documents to the store.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.errors import NotFittedError
from topicflow.io.corpus.reader import as_corpus
from topicflow.io.models.store import SavedModel, save_model
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.streaming import run_stream
from topicflow.pipeline.streaming.config import StreamConfig, StreamResult


class StreamingLDA:
    """LDA by a streaming sampler: ``gibbs``, ``olda``, ``incgibbs``, ``pf``, ``sgs`` or ``dsgs``.

    Parameters
    ----------
    algorithm : str, default "pf"
    n_topics : int, default 10
    **settings
        Any field of :class:`~topicflow.pipeline.streaming.config.StreamConfig` (``n_particles``,
        ``rejuvenation_source``, ``init_trials``, ``runs``, ``batch_size``, ``decay``, ...).

    Attributes
    ----------
    result_ : StreamResult
        Traces of every run and their summary.
    model_ : SavedModel
        Run 0 as an LDA model.
    components_ : ndarray of shape (n_topics, n_terms)
        lambda of run 0 (topic-word counts plus beta).
    topic_word_ : ndarray of shape (n_topics, n_terms)
        Its rows normalized.
    summary_ : list of dict
        Mean and standard deviation over runs of every metric, per evaluation point.

    Examples
    --------
    >>> model = StreamingLDA("pf", n_topics=3, n_particles=50, runs=30).fit("train.zarr")  # doctest: +SKIP
    >>> model.summary_[-1]["nmi_in_mean"]                                                 # doctest: +SKIP
    """

    def __init__(self, algorithm: str = "pf", n_topics: int = 10, **settings: Any) -> None:
        self.algorithm = algorithm
        self.n_topics = n_topics
        self.settings = dict(settings)

    def config(self) -> StreamConfig:
        """Return the validated settings.

        Returns
        -------
        StreamConfig

        Raises
        ------
        InvalidParameterError
            An unknown setting or a bad value, naming the allowed ones.
        """
        names = {f.name for f in dataclasses.fields(StreamConfig)}
        unknown = sorted(set(self.settings) - names)
        if unknown:
            from topicflow.errors import InvalidParameterError

            raise InvalidParameterError(f"unknown settings {unknown}; allowed: {', '.join(sorted(names))}")
        return StreamConfig(algorithm=self.algorithm, n_topics=self.n_topics, **self.settings)  # type: ignore[arg-type]

    def fit(self, corpus: Any, client: Any = None, *, test: Any = None, out: Path | str | None = None,
            progress: ProgressReporter = NO_PROGRESS) -> StreamingLDA:
        """Run every seed over ``corpus``.

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            Training corpus store.
        client : distributed.Client, optional
            Cluster to run the runs' actors on; by default the current client, else a local one.
        test : str, os.PathLike or Corpus, optional
            Held-out store; adds held-out scores to the traces.
        out : str or os.PathLike, optional
            Directory for the runs' state, so :meth:`partial_fit` can continue them.
        progress : ProgressReporter, optional
            Receives progress along the stream.

        Returns
        -------
        StreamingLDA
            ``self``, fitted.
        """
        self._out = None if out is None else Path(out)
        self._test = test
        result = run_stream(as_corpus(corpus), self.config(), client=client,
                            test_corpus=None if test is None else as_corpus(test), out=self._out, progress=progress)
        return self._set_fitted(result)

    def partial_fit(self, corpus: Any, client: Any = None, *, progress: ProgressReporter = NO_PROGRESS) -> StreamingLDA:
        """Continue every run with the documents added to ``corpus`` since (needs ``fit(..., out=DIR)``).

        Parameters
        ----------
        corpus : str, os.PathLike or Corpus
            Training corpus store.
        client : distributed.Client, optional
            Cluster to run the runs' actors on; by default the current client, else a local one.
        progress : ProgressReporter, optional
            Receives progress along the stream.

        Returns
        -------
        StreamingLDA
            ``self``, updated.
        """
        if not hasattr(self, "result_") or getattr(self, "_out", None) is None:
            raise NotFittedError("partial_fit continues a stream saved by fit(..., out=DIR); call that first")
        test = None if self._test is None else as_corpus(self._test)
        result = run_stream(as_corpus(corpus), self.config(), client=client, test_corpus=test, out=self._out,
                            resume=True, progress=progress)
        return self._set_fitted(result)

    def _set_fitted(self, result: StreamResult) -> StreamingLDA:
        self.result_ = result
        self.model_: SavedModel = result.model
        (lam,) = result.model.state.topic_word_var.values()
        self.components_ = np.asarray(lam)
        self.topic_word_ = self.components_ / self.components_.sum(axis=1, keepdims=True)
        self.summary_ = list(result.summary)
        return self

    def save(self, path: Path | str, *, overwrite: bool = False) -> None:
        """Save run 0 as a model directory (topics, infer, evaluate, export, and update for sgs/dsgs).

        Parameters
        ----------
        path : str or os.PathLike
            Model directory.
        overwrite : bool, default False
            Replace an existing model at ``path``.
        """
        if not hasattr(self, "model_"):
            raise NotFittedError("fit the StreamingLDA before saving it")
        save_model(Path(path), self.model_, overwrite=overwrite)
