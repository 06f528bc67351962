"""What topicflow changes in a Dask worker's logging: the plugin that quiets tasks failed by its own errors.

When a task raises, the worker logs ``Compute Failed`` with the task, the exception and a traceback
of topicflow's internals, and the client re-raises the same exception. For topicflow's own errors
(:class:`~topicflow.errors.TopicflowError`: a malformed input line, a corrupt shard) that record only
repeats, with noise, the one clear message the command prints. :class:`QuietTaskErrorsPlugin`
installs :class:`QuietTopicflowTaskErrors` on each worker's
``distributed.worker`` logger while it is registered (:func:`topicflow.pipeline.cluster.connect`
registers it for as long as it is connected); every other record, and every failure of another
kind, is logged as before.

Why a log filter and not catching the errors in the tasks: a task that returned its error as a value
would be a *successful* task to Dask, so its dependents would run on that value, the scheduler would
keep it as a result, ``retries`` would not apply and the client would learn of the failure only
where some code looked for the marker. With the filter the task fails exactly as before (its
dependents are cancelled, the client's ``compute`` raises the original error with the worker's
traceback attached); only the worker's log line is dropped.

This module imports ``distributed`` (the plugin's base class): it is imported by
:func:`~topicflow.pipeline.cluster.connect` when it connects (never by the CLI at start-up), and by
the workers when they unpickle the plugin.
"""
from __future__ import annotations

import logging
from typing import Any

from distributed.diagnostics.plugin import WorkerPlugin

#: The logger distributed's workers log a failed task on.
WORKER_LOGGER = "distributed.worker"


#: How the repr of every topicflow error starts (:meth:`topicflow.errors.TopicflowError.__repr__`).
TOPICFLOW_ERROR_REPR_PREFIX = "topicflow."


class QuietTopicflowTaskErrors(logging.Filter):
    """Drop a worker's "Compute Failed" record of a task that raised a topicflow error.

    The client re-raises that error, and the CLI prints it as one ``topicflow: error:`` line; the
    worker's record (key, task, exception and traceback) would only repeat it. The record carries
    the exception as its repr, which for topicflow's errors names their module
    (``topicflow.errors.InputError(...)``). Every other record, including failures of other kinds,
    passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        """Return False for the "Compute Failed" record of a topicflow error, True for any other.

        Parameters
        ----------
        record : logging.LogRecord
            A record of the ``distributed.worker`` logger; its fourth argument is the exception's repr.

        Returns
        -------
        bool
            Whether the record is logged.
        """
        args = record.args if isinstance(record.args, tuple) else ()
        if not str(record.msg).startswith("Compute Failed") or len(args) < 4:
            return True
        return not str(args[3]).startswith(TOPICFLOW_ERROR_REPR_PREFIX)


class QuietTaskErrorsPlugin(WorkerPlugin):
    """A worker plugin that keeps the worker from logging tasks failed by topicflow errors.

    ``setup`` adds a :class:`QuietTopicflowTaskErrors` filter to the
    worker's ``distributed.worker`` logger and ``teardown`` (when the plugin is unregistered or the
    worker closes) removes it. Workers that share a process (a local cluster of threads) share that
    logger: each adds and removes its own filter.

    Examples
    --------
    >>> import logging
    >>> from types import SimpleNamespace
    >>> plugin = QuietTaskErrorsPlugin()
    >>> worker = SimpleNamespace(address="inproc://w1")
    >>> plugin.setup(worker)
    >>> len(plugin.installed)
    1
    >>> plugin.teardown(worker)
    >>> plugin.installed
    {}
    """

    def __init__(self) -> None:
        #: The filter this plugin added, by worker address (several workers may share one instance).
        self.installed: dict[str, QuietTopicflowTaskErrors] = {}

    def setup(self, worker: Any) -> None:
        """Add a filter to the worker's ``distributed.worker`` logger.

        Parameters
        ----------
        worker : distributed.Worker
            The worker the plugin is set up on.
        """
        quiet = QuietTopicflowTaskErrors()
        self.installed[str(worker.address)] = quiet
        logging.getLogger(WORKER_LOGGER).addFilter(quiet)

    def teardown(self, worker: Any) -> None:
        """Remove the filter :meth:`setup` added on this worker.

        Parameters
        ----------
        worker : distributed.Worker
            The worker the plugin is torn down on.
        """
        quiet = self.installed.pop(str(worker.address), None)
        if quiet is not None:
            logging.getLogger(WORKER_LOGGER).removeFilter(quiet)
