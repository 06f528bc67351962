"""Pieces shared by every CLI command: cluster options, logging set-up and error reporting."""
from __future__ import annotations

import functools
import logging
import os
import sys
from typing import Any, Callable, TypeVar, cast

import click
import dask.config

from topicflow.errors import TopicflowError
from topicflow.pipeline.cluster import DEFAULT_DASHBOARD_ADDRESS, ClusterConfig
from topicflow.pipeline.progress import ProgressReporter, TqdmProgress

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(func: F) -> F:
    """Add ``--scheduler --workers --threads-per-worker --memory-limit --dashboard-address``; pass ``cluster=``.

    Parameters
    ----------
    func : callable
        A click command taking a ``cluster`` keyword (a :class:`~topicflow.pipeline.cluster.ClusterConfig`).

    Returns
    -------
    callable
        The command with the cluster options.
    """

    @click.option("--scheduler", default=None, metavar="ADDRESS|FILE",
                  help="Run on an existing Dask scheduler (tcp://host:port or a scheduler file). "
                  "Default: start a local cluster.")
    @click.option("--workers", type=click.IntRange(min=1), default=None,
                  help="Worker processes of the local cluster (default: one per core).")
    @click.option("--threads-per-worker", type=click.IntRange(min=1), default=None,
                  help="Threads per local worker (default 1).")
    @click.option("--memory-limit", default=None, metavar="SIZE",
                  help="Memory limit per local worker, e.g. 4GiB (default: share of the machine).")
    @click.option("--dashboard-address", default=DEFAULT_DASHBOARD_ADDRESS, show_default=True, metavar="HOST:PORT",
                  help="Where the local cluster's dashboard listens; the default serves this machine only, "
                  "':0' every interface (it then shows the cluster's work to the network).")
    @functools.wraps(func)
    def wrapper(*args: Any, scheduler: str | None, workers: int | None,
                threads_per_worker: int | None, memory_limit: str | None, dashboard_address: str,
                **kwargs: Any) -> Any:
        kwargs["cluster"] = ClusterConfig(
            scheduler=scheduler, workers=workers, threads_per_worker=threads_per_worker,
            memory_limit=memory_limit, dashboard_address=dashboard_address,
        )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def progress_reporter() -> ProgressReporter:
    """Return the progress reporter of the running command: the caller's, else tqdm bars on stderr.

    ``topicflow.cli.main(args, obj=reporter)`` runs a command with ``reporter`` (any
    :class:`~topicflow.pipeline.progress.ProgressReporter`): this is how a test follows a command it
    runs in a subprocess (:class:`topicflow.testing.faults.OnItem`). From the shell ``obj`` is None
    and the command shows :class:`~topicflow.pipeline.progress.TqdmProgress` bars, as before.
    """
    context = click.get_current_context(silent=True)
    reporter = None if context is None else context.obj
    return cast(ProgressReporter, reporter) if reporter is not None else TqdmProgress()


def reports_errors(func: F) -> F:
    """Turn topicflow errors into a one-paragraph message on stderr and exit status 2."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TopicflowError as exc:
            click.echo(f"topicflow: error: {exc}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


def setup_logging(verbose: int) -> None:
    """Set up logging: topicflow's own lines at INFO (WARNING with -q), Dask's chatter only with -vv.

    Dask reads its logging levels from its config when ``distributed`` is imported, in this process
    and in every worker process the local cluster spawns, so the level is also set in the
    environment those processes inherit.
    """
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    logging.getLogger("topicflow").setLevel(logging.INFO if verbose >= 0 else logging.WARNING)
    dask_level = "info" if verbose >= 2 else "error"
    os.environ["DASK_LOGGING__DISTRIBUTED"] = dask_level
    dask.config.set({"logging.distributed": dask_level})
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in ("distributed", "bokeh", "tornado"):
            logging.getLogger(name).setLevel(dask_level.upper())
