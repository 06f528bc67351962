"""The one place where topicflow connects to Dask.

The CLI starts a local distributed cluster unless given ``--scheduler`` (an address or a scheduler
file); the Python API takes a ``distributed.Client``, else the current one, else Dask's threaded
scheduler. Every pipeline computes through :func:`compute` so both paths behave the same.
"""
from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Sequence

import dask

from topicflow.errors import TopicflowError

log = logging.getLogger(__name__)

#: Where a local cluster's dashboard listens unless told otherwise: loopback only, any free port.
DEFAULT_DASHBOARD_ADDRESS = "127.0.0.1:0"


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """How to reach or start a Dask cluster.

    Attributes
    ----------
    scheduler : str or None
        ``tcp://host:port`` of a running scheduler, or the path of a scheduler file; None starts a
        local cluster.
    workers, threads_per_worker : int or None
        Size of the local cluster (defaults: one process per core, one thread each).
    memory_limit : str or None
        Memory limit per local worker, e.g. ``"4GiB"``; ``"auto"`` divides the machine's memory.
    processes : bool
        Local workers as processes (True) or threads of this process (False).
    dashboard_address : str
        ``host:port`` the local cluster's dashboard listens on. The default serves this machine only
        (loopback, any free port); ``:0`` serves every interface, which exposes the dashboard (and
        what it shows of the data) to the network. The workers' HTTP endpoints listen on the same host.
    """

    scheduler: str | None = None
    workers: int | None = None
    threads_per_worker: int | None = None
    memory_limit: str | None = None
    processes: bool = True
    dashboard_address: str = DEFAULT_DASHBOARD_ADDRESS


@contextlib.contextmanager
def connect(config: ClusterConfig) -> Iterator[Any]:
    """Yield a ``distributed.Client`` for ``config``; a local cluster is closed on exit.

    Parameters
    ----------
    config : ClusterConfig
        A scheduler address or file to connect to, else the local cluster to start.

    Yields
    ------
    distributed.Client
        Connected for the duration of the ``with`` block.
    """
    from distributed import Client, LocalCluster

    if config.scheduler:
        if Path(config.scheduler).is_file():
            client = Client(scheduler_file=config.scheduler)
        else:
            client = Client(config.scheduler)
        log.info("connected to scheduler %s (dashboard %s)", client.scheduler.address, client.dashboard_link)
        try:
            yield client
        finally:
            client.close()
        return
    import os

    n_workers = config.workers or max(1, os.cpu_count() or 1)
    cluster = LocalCluster(
        n_workers=n_workers,
        threads_per_worker=config.threads_per_worker or 1,
        memory_limit=config.memory_limit or "auto",
        processes=config.processes,
        dashboard_address=config.dashboard_address,
        # The workers' HTTP endpoints (metrics, health) listen on the dashboard's host, any free port;
        # in-process workers would otherwise listen on every interface.
        worker_dashboard_address=f"{config.dashboard_address.rpartition(':')[0]}:0",
    )
    # Workers are on this machine, so the client can reach them: results and actor calls (online
    # VB's E-step servers) then skip the hop through the scheduler (about half the cost of a round trip carrying 1 MB).
    client = Client(cluster, direct_to_workers=True)
    if config.processes:  # in-process workers share this process's logging, which is the caller's to set
        client.run(quiet_topicflow_task_errors)
    log.info(
        "local Dask cluster: %d workers x %d threads, dashboard %s",
        n_workers,
        config.threads_per_worker or 1,
        client.dashboard_link,
    )
    try:
        yield client
    finally:
        client.close()
        cluster.close()


class QuietTopicflowTaskErrors(logging.Filter):
    """Drop a worker's "Compute Failed" record of a task that raised a topicflow error.

    The client re-raises that error, and the CLI prints it as one ``topicflow: error:`` line; the
    worker's record (key, task, exception and traceback) would only repeat it. Every other record,
    including failures of other kinds, passes.
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
        return str(args[3]).split("(", 1)[0] not in _error_names(TopicflowError)


def _error_names(cls: type[BaseException]) -> set[str]:
    """Names of ``cls`` and all its subclasses."""
    return {cls.__name__}.union(*(_error_names(sub) for sub in cls.__subclasses__()))


def quiet_topicflow_task_errors() -> None:
    """Install :class:`QuietTopicflowTaskErrors` in this process, unless Dask logs at INFO or below (``-vv``).

    Run on every worker of the local cluster :func:`connect` starts (``client.run``).
    """
    logger = logging.getLogger("distributed.worker")
    if logger.getEffectiveLevel() > logging.INFO and not any(
        isinstance(installed, QuietTopicflowTaskErrors) for installed in logger.filters
    ):
        logger.addFilter(QuietTopicflowTaskErrors())


def current_client(client: Any = None) -> Any:
    """The given client, else the current distributed client, else None (threaded scheduler)."""
    if client is not None:
        return client
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def compute(*graphs: Any, client: Any = None) -> tuple[Any, ...]:
    """Compute Dask objects on ``client`` (or the current one), else on the threaded scheduler."""
    client = current_client(client)
    if client is None:
        return tuple(dask.compute(*graphs, scheduler="threads"))
    futures = client.compute(list(graphs))
    return tuple(client.gather(futures))


def compute_list(graphs: Sequence[Any], *, client: Any = None, progress: Any = None, desc: str = "", unit: str = "task") -> list[Any]:
    """Compute many independent Dask objects, reporting each as it finishes; results keep input order."""
    client = current_client(client)
    if client is None or progress is None:
        return list(compute(*graphs, client=client)) if graphs else []
    from distributed import as_completed

    futures = client.compute(list(graphs))
    for _ in progress.track(as_completed(futures), total=len(futures), desc=desc, unit=unit):
        pass
    return list(client.gather(futures))
