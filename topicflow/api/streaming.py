"""``StreamingLDA``: the streaming samplers behind one scikit-learn-style class.

``__init__`` only stores keyword parameters. ``fit`` runs :func:`topicflow.pipeline.streaming.run_stream`
(all runs side by side on the cluster) and sets the fitted attributes, whose names end in ``_``.
``partial_fit`` continues the same runs after ``topicflow append`` has added documents to the store.
"""
from __future__ import annotations

import contextlib
import os
from numbers import Integral
from pathlib import Path
from typing import Any, ClassVar, Sequence

import numpy as np

from topicflow.api._base import (
    Constraint,
    Interval,
    Options,
    TopicModelEstimator,
    split_client,
)
from topicflow.api._evaluation import EvaluationMixin
from topicflow.api._inputs import store_for
from topicflow.errors import InvalidParameterError, NotFittedError
from topicflow.io.models.store import SavedModel, save_model
from topicflow.io.sources.base import FieldSpec
from topicflow.pipeline.presets import with_preset
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.streaming import TraceRotation, run_stream
from topicflow.pipeline.streaming.config import (
    SETTING_NAMES,
    STREAM_ALGORITHMS,
    StreamConfig,
    StreamResult,
)

#: ``topicflow stream``'s defaults for the trace options, whose constructor defaults these are.
_TRACE_DEFAULTS = TraceRotation()


class StreamingLDA(EvaluationMixin, TopicModelEstimator):
    """LDA by a streaming sampler: ``gibbs``, ``olda``, ``incgibbs``, ``pf``, ``sgs`` or ``dsgs``.

    ``get_params`` lists ``algorithm``, ``n_topics`` and every entry of ``settings`` as parameters
    of their own, so ``sklearn.base.clone`` and ``set_params(n_particles=...)`` work. Documents may
    be anything :class:`~topicflow.api.lda.LDA` accepts; anything but a store is written to one first.

    Parameters
    ----------
    algorithm : str, default "pf"
    n_topics : int, default 10
    trace_max_bytes : int, default 16 MiB (16 * 2**20)
        With ``fit(..., out=DIR)``: ``DIR/trace.jsonl`` is rotated into a compressed segment
        ``trace-NNNNNN.jsonl.gz`` when a save would make it larger than this (``topicflow stream
        --trace-max-bytes``). At least 1.
    trace_keep : int, default 4
        Rotated segments kept; older ones are deleted (0: none kept). ``--trace-keep``; at least 0.
    summary_points : int, default 1000
        With ``out=DIR``: ``DIR/summary.json``, the model's summary and ``summary_`` keep the
        last this many evaluation points (``--summary-points``). At least 1.
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

    Notes
    -----
    ``trace_max_bytes``, ``trace_keep`` and ``summary_points`` bound what a long stream keeps: they
    are the :class:`~topicflow.pipeline.streaming.TraceRotation` that ``topicflow stream`` builds
    from its options, passed to the same :func:`~topicflow.pipeline.streaming.run_stream`.

    Examples
    --------
    >>> model = StreamingLDA("pf", n_topics=3, n_particles=50, runs=30).fit("train.zarr")  # doctest: +SKIP
    >>> model.summary_[-1]["nmi_in_mean"]                                                 # doctest: +SKIP
    >>> bounded = StreamingLDA("olda", n_topics=3, trace_max_bytes=2**20, trace_keep=2)     # doctest: +SKIP
    >>> bounded.fit("train.zarr", out="nightly")  # trace.jsonl stays under about 1 MiB    # doctest: +SKIP
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "algorithm": [Options(STREAM_ALGORITHMS)],
        "n_topics": [Interval(Integral, 1, None, closed="left")],
        # The bounds TraceRotation checks, and click's IntRange on the same options of `topicflow stream`.
        "trace_max_bytes": [Interval(Integral, 1, None, closed="left")],
        "trace_keep": [Interval(Integral, 0, None, closed="left")],
        "summary_points": [Interval(Integral, 1, None, closed="left")],
    }

    def __init__(self, algorithm: str = "pf", n_topics: int = 10, *,
                 trace_max_bytes: int = _TRACE_DEFAULTS.max_bytes, trace_keep: int = _TRACE_DEFAULTS.keep,
                 summary_points: int = _TRACE_DEFAULTS.summary_points, **settings: Any) -> None:
        self.algorithm = algorithm
        self.n_topics = n_topics
        self.trace_max_bytes = trace_max_bytes
        self.trace_keep = trace_keep
        self.summary_points = summary_points
        self.settings = dict(settings)

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> StreamingLDA:
        """The estimator with a paper's published settings (see docs/reproductions.md).

        Parameters
        ----------
        name : str
            A preset of command ``stream`` (:data:`topicflow.pipeline.presets.PRESETS`).
        **overrides
            Settings that replace the preset's.

        Returns
        -------
        StreamingLDA

        Raises
        ------
        InvalidParameterError
            No such preset.
        """
        settings = with_preset(name, "stream", overrides)
        return cls(settings.pop("algorithm", "pf"), settings.pop("n_topics", 10), **settings)

    def _extra_param_names(self) -> frozenset[str]:
        return SETTING_NAMES - {"algorithm", "n_topics"}

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
        unknown = sorted(set(self.settings) - SETTING_NAMES)
        if unknown:
            raise InvalidParameterError(f"unknown settings {unknown}; allowed: {', '.join(sorted(SETTING_NAMES))}")
        return StreamConfig.create(algorithm=self.algorithm, n_topics=self.n_topics,  # type: ignore[arg-type]
                                   **self.settings)

    def trace_rotation(self) -> TraceRotation:
        """Return how much of the stream's history ``out`` keeps, as ``topicflow stream`` builds it.

        Returns
        -------
        TraceRotation
            From ``trace_max_bytes``, ``trace_keep`` and ``summary_points``.

        Raises
        ------
        InvalidParameterError
            A value out of its range.
        """
        return TraceRotation(self.trace_max_bytes, self.trace_keep, self.summary_points)

    def fit(self, corpus: Any, y: Any = None, *, client: Any = None, test: Any = None,
            out: Path | str | None = None, progress: ProgressReporter = NO_PROGRESS,
            vocabulary: Sequence[str] | None = None, fields: FieldSpec | None = None,
            store_path: str | os.PathLike[str] | None = None) -> StreamingLDA:
        """Run every seed over ``corpus``.

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            Training documents, as for :meth:`topicflow.LDA.fit`.
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run the runs' actors on; by default the current client, else a local one.
        test : same kinds as ``corpus``, optional
            Held-out documents; adds held-out scores to the traces.
        out : str or os.PathLike, optional
            Directory for the runs' state, so :meth:`partial_fit` can continue them, and for
            ``trace.jsonl`` and ``summary.json``, bounded by ``trace_max_bytes``, ``trace_keep`` and
            ``summary_points`` as ``topicflow stream --out`` is.
        progress : ProgressReporter, optional
            Receives progress along the stream.
        vocabulary : sequence of str, optional
            Matrices or Dask arrays (``corpus`` and ``test``): one term per column.
        fields : FieldSpec, optional
            Texts: the text, id and label columns or keys.
        store_path : str or os.PathLike, optional
            Where to write (and keep) the store of a non-store ``corpus``; by default a temporary
            directory, removed when ``fit`` returns.

        Returns
        -------
        StreamingLDA
            ``self``, fitted.
        """
        self._validate_params()
        client = split_client(y, client)
        self._out = None if out is None else Path(out)
        self._test = test
        self._input_options = {"vocabulary": vocabulary, "fields": fields}
        with self._stores(corpus, test, client, store_path) as (train, held_out):
            result = run_stream(train, self.config(), client=client, test_corpus=held_out, out=self._out,
                                progress=progress, trace=self.trace_rotation())
        return self._set_fitted(result)

    def partial_fit(self, corpus: Any, y: Any = None, *, client: Any = None,
                    progress: ProgressReporter = NO_PROGRESS, store_path: str | os.PathLike[str] | None = None,
                    ) -> StreamingLDA:
        """Continue every run with the documents added to ``corpus`` since (needs ``fit(..., out=DIR)``).

        Parameters
        ----------
        corpus : str, os.PathLike, Corpus, matrix, dask.array.Array, dask DataFrame or dask.bag.Bag
            The grown training documents: those ``fit`` saw first, then the new ones (a matrix
            holds all their rows), read with the ``vocabulary`` and ``fields`` given to ``fit``. The
            stream continues only if the store written now starts with the shards ``fit`` read:
            with a matrix, ``fit``'s rows must fill whole shards (a multiple of
            ``topicflow.shard-size``); otherwise give ``fit`` a ``store_path`` and grow that store
            with ``topicflow append``.
        y : None
            Ignored (scikit-learn's signature). A ``distributed.Client`` here is taken as ``client``.
        client : distributed.Client, optional
            Cluster to run the runs' actors on; by default the current client, else a local one.
        progress : ProgressReporter, optional
            Receives progress along the stream.
        store_path : str or os.PathLike, optional
            Where to write (and keep) the store of a non-store ``corpus``.

        Returns
        -------
        StreamingLDA
            ``self``, updated.
        """
        if not hasattr(self, "result_") or getattr(self, "_out", None) is None:
            raise NotFittedError("partial_fit continues a stream saved by fit(..., out=DIR); call that first")
        client = split_client(y, client)
        with self._stores(corpus, self._test, client, store_path) as (train, held_out):
            result = run_stream(train, self.config(), client=client, test_corpus=held_out, out=self._out,
                                resume=True, progress=progress, trace=self.trace_rotation())
        return self._set_fitted(result)

    @contextlib.contextmanager
    def _stores(self, corpus: Any, test: Any, client: Any, store_path: Any) -> Any:
        """The training and held-out documents as stores (written first if they are not)."""
        options = getattr(self, "_input_options", {})
        with contextlib.ExitStack() as stack:
            train = stack.enter_context(store_for(corpus, store_path=store_path, client=client, **options))
            held_out = None if test is None else stack.enter_context(store_for(test, client=client, **options))
            yield train, held_out

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
        save_model(path, self.model_, overwrite=overwrite)
