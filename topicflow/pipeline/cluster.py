"""The one place where topicflow connects to Dask.

The CLI starts a local distributed cluster unless given ``--scheduler`` (an address or a scheduler
file); the Python API takes a ``distributed.Client``, else the current one, else Dask's threaded
scheduler. Every pipeline computes through :func:`compute` so both paths behave the same.

A remote scheduler at ``tls://host:port`` is reached through ``distributed.Security``, with the
client's TLS files given on the command line (``--tls-ca-file``, ``--tls-cert``, ``--tls-key``,
which :class:`ClusterConfig` carries) or in Dask's security config (``distributed.comm.tls.ca-file``,
``distributed.comm.tls.client.cert`` and ``.key``). :func:`client_security` checks them before any
connection (a ``tls://`` address without certificates, an unreadable or malformed file, TLS files
for a ``tcp://`` scheduler) and :func:`connect` turns a refused handshake into a
:class:`SchedulerConnectionError` that says which side refused and what to check. Dask's TLS is
mutual: the client, like every worker, shows a certificate signed by the cluster's CA.

A local cluster's workers are threads of this process or worker processes (the *executor*).
Threads start in a fraction of the time (no interpreters to launch, no modules to import again,
no data to pickle between processes) and every kernel on the hot path is numba ``nogil``, so they
use every core; processes keep each worker's memory apart, so a worker that outgrows its share
is restarted instead of taking the whole run down. ``executor="auto"`` (the default) picks
threads when the command's :class:`Workload` (its corpus and model, sized from the store's
manifest and arrays) fits the memory budget ``topicflow.local-cluster-memory`` (default: half of
this machine's memory), processes otherwise, and logs the choice and its reason in one line.

While :func:`connect` holds a client, the workers do not log tasks that fail with a topicflow error
(``ClusterConfig.quiet_task_errors``, :mod:`topicflow.pipeline.worker_logging`): the client re-raises
the error, and the CLI prints it in one line. Other failures are logged as Dask does.

This module imports only the standard library at import time (Dask and distributed are imported
by the functions that use them), so the command line can build its options without loading Dask.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Iterator, Literal, Sequence, get_args

from topicflow.errors import InvalidParameterError, TopicflowError

log = logging.getLogger(__name__)

#: Where a local cluster's dashboard listens unless told otherwise: loopback only, any free port.
DEFAULT_DASHBOARD_ADDRESS = "127.0.0.1:0"
#: The host a local cluster's scheduler and worker processes listen on: this machine only.
LOCAL_CLUSTER_HOST = "127.0.0.1"
#: How a local cluster runs its workers: "auto" picks by :class:`Workload` (see the module docstring).
LocalExecutor = Literal["auto", "threads", "processes"]
LOCAL_EXECUTORS: tuple[str, ...] = get_args(LocalExecutor)
#: Copies of the topic-word matrix batch VB holds at once (lambda, exp E[log beta], the merged
#: statistics and one partial sum per worker in the reduction tree), for the model estimate.
MODEL_COPIES = 4
#: Bytes per element of the zarr data types topicflow writes (strings: a generous average).
_ITEMSIZE = {"float64": 8, "int64": 8, "uint64": 8, "float32": 4, "int32": 4, "uint32": 4,
             "int16": 2, "uint16": 2, "int8": 1, "uint8": 1, "bool": 1}
_STRING_ITEMSIZE = 16


@dataclass(frozen=True, slots=True)
class Workload:
    """What a command holds in memory, estimated before it starts, for ``executor="auto"``.

    Attributes
    ----------
    corpus_bytes : int
        The corpus stores it reads, uncompressed (term ids, counts and offsets of every shard).
    model_bytes : int
        The model it fits (``MODEL_COPIES`` topic-word matrices plus the documents' topic
        proportions) or reads (its arrays, uncompressed).
    """

    corpus_bytes: int = 0
    model_bytes: int = 0

    @property
    def total_bytes(self) -> int:
        """Corpus plus model, in bytes."""
        return self.corpus_bytes + self.model_bytes


@dataclass(frozen=True, slots=True)
class ExecutorChoice:
    """The executor a local cluster runs with, and why.

    Attributes
    ----------
    executor : {"threads", "processes"}
        Threads of this process or worker processes.
    reason : str
        Why, for the one line :func:`connect` logs (e.g. ``corpus 12 MB + model 40 MB fit in 8 GB``).
    """

    executor: Literal["threads", "processes"]
    reason: str

    def line(self) -> str:
        """The line logged when the cluster starts: ``executor: threads (<reason>)``."""
        return f"executor: {self.executor} ({self.reason})"


@dataclass(frozen=True, slots=True)
class ClusterConfig:
    """How to reach or start a Dask cluster.

    Attributes
    ----------
    scheduler : str or None
        ``tcp://host:port`` or ``tls://host:port`` of a running scheduler, or the path of a
        scheduler file; None starts a local cluster.
    workers, threads_per_worker : int or None
        Size of the local cluster (defaults: one worker per core, one thread each).
    memory_limit : str or None
        Memory limit per local worker, e.g. ``"4GiB"``; ``"auto"`` divides the machine's memory.
        Default: ``"auto"`` for worker processes, none for threads (in-process workers would each
        compare the whole process's memory with their share).
    executor : {"auto", "threads", "processes"}
        Local workers as threads of this process or as processes; ``"auto"`` picks threads when
        ``workload`` fits the memory budget ``topicflow.local-cluster-memory`` (see
        :func:`choose_executor`). None reads ``topicflow.local-cluster`` (default ``"auto"``).
    workload : Workload or None
        What the command will hold in memory, for ``"auto"``; None when unknown (threads are chosen).
    dashboard_address : str
        ``host:port`` the local cluster's dashboard listens on. The default serves this machine only
        (loopback, any free port); ``:0`` serves every interface, which exposes the dashboard (and
        what it shows of the data) to the network. The workers' HTTP endpoints listen on the same host.
    tls_ca_file, tls_cert, tls_key : str or None
        The client's TLS files for a ``tls://`` scheduler: the PEM certificate of the CA that signed
        the scheduler's and workers' certificates, this client's certificate (signed by that CA)
        and its private key (None when the certificate file holds it). None: Dask's security config
        (``distributed.comm.tls.ca-file``, ``distributed.comm.tls.client.cert``, ``.key``).
    security : distributed.Security or None
        A ready ``distributed.Security`` for a ``tls://`` scheduler (the Python API's way), instead
        of the three files.
    quiet_task_errors : bool
        Keep the workers from logging tasks that fail with a topicflow error (the client re-raises
        the error, and the CLI prints it in one line): :func:`connect` registers
        :class:`~topicflow.pipeline.worker_logging.QuietTaskErrorsPlugin` on the workers while it
        is connected. False (the CLI's ``--debug`` or ``-vv``) lets the workers log every failure.
    threads_without_cluster : bool
        When the local executor chosen is threads, run Dask's threaded scheduler in this process
        instead of starting a local cluster (:func:`connect` yields None): no ``distributed`` to
        import, no scheduler and workers to start (most of a small fit's start-up). Only for
        commands that need nothing but task graphs (no actors, no per-task progress); a dashboard
        address other than the default still starts the cluster, since it asks for a dashboard.
    """

    scheduler: str | None = None
    workers: int | None = None
    threads_per_worker: int | None = None
    memory_limit: str | None = None
    executor: LocalExecutor | None = None
    workload: Workload | None = None
    dashboard_address: str = DEFAULT_DASHBOARD_ADDRESS
    tls_ca_file: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    security: Any = None
    quiet_task_errors: bool = True
    threads_without_cluster: bool = False

    def __post_init__(self) -> None:
        if self.executor is not None and self.executor not in LOCAL_EXECUTORS:
            raise InvalidParameterError(
                f"executor {self.executor!r} is not one of {', '.join(LOCAL_EXECUTORS)}")

    @property
    def tls_files(self) -> dict[str, str]:
        """The TLS files given, by option name (``--tls-ca-file`` ...), for messages and checks."""
        given = {"--tls-ca-file": self.tls_ca_file, "--tls-cert": self.tls_cert, "--tls-key": self.tls_key}
        return {option: path for option, path in given.items() if path}


class SchedulerConnectionError(TopicflowError, ConnectionError):
    """The Dask scheduler given with ``--scheduler`` could not be reached or refused this client.

    The message names the address, which side refused a TLS handshake and what to check.
    """


class SchedulerLostError(SchedulerConnectionError):
    """The Dask scheduler given with ``--scheduler`` went away while a command was running.

    The message names the scheduler's address; the command's outputs are unchanged (they are
    committed only when complete).
    """


class ActorLostError(RuntimeError):
    """The worker holding a Dask actor left the cluster while a call on it was waiting."""


#: Seconds between checks, while an actor call waits, that the actor's worker is still in the cluster.
ACTOR_POLL_SECONDS = 2.0


def worker_addresses(client: Any) -> list[str]:
    """Ask the scheduler for the addresses of the workers it lists now, sorted.

    ``Client.scheduler_info()`` is not used for this: it refreshes the client's cached copy of the
    scheduler's identity and returns that copy, but the client also refreshes the same copy every few
    seconds on its own thread with totals only (no ``"workers"``). When the two interleave, a call
    sees no worker at all although every worker is there; a long run under load met it as a
    spurious "worker left the cluster". ``Client.nthreads()`` asks the scheduler and returns its
    answer directly.

    Parameters
    ----------
    client : distributed.Client
        A synchronous client.

    Returns
    -------
    list of str
        The workers' addresses, sorted.
    """
    return sorted(client.nthreads())


def actor_of(future: Any) -> Any:
    """The actor ``future`` (a ``client.submit(..., actor=True)``) made, bound to that future's client.

    distributed binds an actor handle to whatever client is the default when the handle is made
    (``get_client()``), not to the client that submitted it, and the handle keeps only a future of
    that client. With several clients in one process (a notebook, a test session, a library inside an
    application) its calls can then go through another client, of another cluster or already closed;
    and once the submitting future is dropped nothing holds the actor's key, the scheduler releases it,
    the worker deletes the actor, and the next call waits for ever (distributed resolves a call only
    when the worker answers, and a worker asked for an actor it no longer has raises instead). A
    worker of a cluster in this process caches the first client it is given, so a handle received
    from it (an in-process cluster passes the worker's own handle) has that client, closed or not.
    Binding the handle to the submitting future and its client, in every case, avoids both.

    Parameters
    ----------
    future : distributed.Future
        Of a task submitted with ``actor=True``.

    Returns
    -------
    distributed.Actor
        The handle, whose calls go through ``future.client`` (or, in a worker of this process, through
        that worker's connections) and which holds ``future``, so the actor lives as long as the handle.
    """
    actor = future.result()
    actor._client = future.client
    actor._future = future
    return actor


def actor_result(client: Any, actor: Any, call: Any, *, poll: float = ACTOR_POLL_SECONDS) -> Any:
    """Wait for ``call`` (an actor method's future) and return its result.

    A call whose actor's worker dies does not always end: distributed retries it once the actor's
    task has rerun, and when that wait fails the call is never resolved (seen with a client connected
    by address). So while it waits, every ``poll`` seconds, the worker is looked up in the scheduler's
    list; once it is gone, :class:`ActorLostError` is raised for the caller to restart its actors.
    The same when the client has lost its scheduler for good (it is closed). ``poll`` only sets how soon
    the loss is noticed, not whether it is.

    Parameters
    ----------
    client : distributed.Client or None
        The client the actor was created through (None: the actor's own, ``actor.client``).
    actor : distributed.Actor
        The actor ``call`` was made on.
    call : distributed.actor.BaseActorFuture
        The pending call.
    poll : float
        Seconds between checks.

    Returns
    -------
    object
        The call's result.

    Raises
    ------
    ActorLostError
        The actor's worker is no longer in the cluster.
    """
    address = getattr(actor, "_address", None)
    client = actor.client if client is None else client
    while True:
        try:
            return call.result(timeout=poll)
        except TimeoutError:
            if client.status in ("closing", "closed"):  # the scheduler is gone: the worker list is stale
                raise ActorLostError(f"lost the scheduler while waiting for an actor on {address}") from None
            if address is not None and address not in worker_addresses(client):
                raise ActorLostError(f"the worker {address} holding an actor left the cluster") from None
            if address is not None and not _holds_actor(client, address, actor.key):
                raise ActorLostError(f"the worker {address} no longer holds the actor {actor.key}") from None


def _holds_actor(client: Any, address: str, key: Any) -> bool:
    """Whether the worker at ``address`` still holds the actor ``key`` (True when it cannot be asked).

    A call to an actor its worker has deleted (its key released) never ends in distributed: the
    worker's KeyError is not turned into the call's result.
    """
    try:
        return bool(client.run(_has_actor, key, workers=[address]).get(address, True))
    except Exception:  # noqa: BLE001 - unreachable now: the worker-list check above decides next time
        return True


def _has_actor(key: Any, dask_worker: Any = None) -> bool:
    return key in dask_worker.state.actors


def scheduler_lost(client: Any) -> bool:
    """Whether ``client`` has lost its scheduler (closed after Dask's reconnect window, or reconnecting).

    Parameters
    ----------
    client : distributed.Client
        A client connected to a scheduler when the command started.

    Returns
    -------
    bool
        True when the client is no longer running, i.e. its connection to the scheduler broke.
    """
    return str(getattr(client, "status", "running")) not in ("running", "Status.running")


#: cgroup memory limits, v1 then v2 (hard, then softer), the smallest positive one of which applies.
_CGROUP_MEMORY_FILES = ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.soft_limit_in_bytes",
                        "/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.high", "/sys/fs/cgroup/memory.low")


def machine_memory() -> int:
    """The memory this process may use: the machine's, lowered by cgroup limits and ``RLIMIT_RSS``.

    The same reading as ``distributed.system.MEMORY_LIMIT``, without importing distributed (about
    half a second, which a fit on Dask's threaded scheduler would otherwise pay to size itself).

    Returns
    -------
    int
        Bytes.
    """
    import psutil

    limit = int(psutil.virtual_memory().total)
    if sys.platform == "linux":
        for name in _CGROUP_MEMORY_FILES:
            with contextlib.suppress(OSError, ValueError):  # absent, or "max" (no limit)
                value = int(Path(name).read_text())
                if value > 0:
                    limit = min(limit, value)
    if sys.platform != "win32":
        import resource

        with contextlib.suppress(OSError, ValueError):
            hard = resource.getrlimit(resource.RLIMIT_RSS)[1]
            if 0 < hard < limit:
                limit = hard
    return limit


def memory_budget() -> int:
    """Return the bytes a threads executor may hold: ``topicflow.local-cluster-memory``, else half the machine.

    ``"auto"`` (the default) is half of the memory Dask sees on this machine (cgroup limits
    included), leaving room for copies, the scheduler and other programs; a size such as ``"8GB"``
    or a number of bytes sets it (``DASK_TOPICFLOW__LOCAL_CLUSTER_MEMORY=8GB``).

    Returns
    -------
    int
        The budget in bytes.

    Raises
    ------
    InvalidParameterError
        The setting is neither ``"auto"`` nor a size.
    """
    from dask.utils import parse_bytes

    from topicflow import config

    value = config.get("local-cluster-memory", "auto")
    if value in (None, "auto"):
        return machine_memory() // 2
    try:
        return int(parse_bytes(value))
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"topicflow.local-cluster-memory is {value!r}; give 'auto' or a size such as '8GB'") from exc


def choose_executor(config: ClusterConfig, budget: int | None = None) -> ExecutorChoice:
    """Choose threads or processes for the local cluster of ``config``, with the reason.

    Parameters
    ----------
    config : ClusterConfig
        Its ``executor`` (None: the ``topicflow.local-cluster`` setting) and ``workload``.
    budget : int, optional
        Bytes the threads executor may hold (default :func:`memory_budget`).

    Returns
    -------
    ExecutorChoice
        ``threads`` when asked for, or under ``"auto"`` when the workload is unknown or fits the
        budget; ``processes`` when asked for or when it does not fit.

    Examples
    --------
    >>> choose_executor(ClusterConfig(executor="auto", workload=Workload(10**6, 10**6)), budget=10**9).line()
    'executor: threads (corpus 1 MB + model 1 MB fit in 1000 MB)'
    """
    executor = config.executor
    if executor is None:
        from topicflow import config as tf_config

        executor = tf_config.get("local-cluster", "auto")
        if executor not in LOCAL_EXECUTORS:
            raise InvalidParameterError(
                f"topicflow.local-cluster is {executor!r}; give one of {', '.join(LOCAL_EXECUTORS)}")
    if executor == "threads":
        return ExecutorChoice("threads", "asked for")
    if executor == "processes":
        return ExecutorChoice("processes", "asked for")
    if config.workload is None:
        return ExecutorChoice("threads", "no corpus or model to size")
    budget = memory_budget() if budget is None else budget
    work = config.workload
    sizes = f"corpus {_size(work.corpus_bytes)} + model {_size(work.model_bytes)}"
    if work.total_bytes <= budget:
        return ExecutorChoice("threads", f"{sizes} fit in {_size(budget)}")
    return ExecutorChoice("processes", f"{sizes} exceed the threads budget {_size(budget)}; "
                                       "set topicflow.local-cluster-memory to change it")


def _size(n_bytes: int) -> str:
    """``n_bytes`` in MB (GB from 10 GB on), the way the executor line prints it."""
    return f"{n_bytes / 1e9:.0f} GB" if n_bytes >= 10**10 else f"{n_bytes / 1e6:.0f} MB"


def estimate_workload(paths: Iterable[str | os.PathLike[str]], n_topics: int | None = None) -> Workload | None:
    """Size what a command over ``paths`` holds in memory, from metadata only (no array is read).

    A corpus store counts its tokens (4-byte term id and 4-byte count each, at most one per token)
    and document offsets; with ``n_topics`` the model to fit adds ``MODEL_COPIES`` topic-word
    matrices over the store's vocabulary and the documents' topic proportions. A saved model (a
    directory with ``versions.json``) counts its zarr arrays, uncompressed. Ingest's inputs (files
    and directories of texts) are streamed and not counted; paths that do not exist yet (outputs)
    are skipped.

    Parameters
    ----------
    paths : iterable of path-like
        The command's path arguments.
    n_topics : int, optional
        Topics of the model the command fits.

    Returns
    -------
    Workload or None
        None when no path is a corpus store or a saved model (nothing to size).
    """
    corpus = model = 0
    found = False
    for raw in paths:
        path = Path(raw)
        if not path.is_dir():
            continue
        manifest = _corpus_manifest(path)
        if manifest is None:
            if (path / "versions.json").is_file():  # a saved model (not a directory of texts to walk)
                model += _array_bytes(path)
                found = True
            continue
        found = True
        n_docs = int(manifest.get("n_docs", 0))
        n_tokens = sum(int(n) for n in dict(manifest.get("n_tokens", {})).values())
        corpus += 8 * n_tokens + 8 * (n_docs + 1) * max(1, len(manifest.get("languages", [])))
        if n_topics:
            n_terms = sum(_largest_first_dimension(path / "vocab" / str(lang))
                          for lang in manifest.get("languages", []))
            model += 8 * n_topics * (MODEL_COPIES * n_terms + n_docs)
    return Workload(corpus, model) if found else None


def _corpus_manifest(path: Path) -> dict[str, Any] | None:
    """The manifest of the corpus store at ``path``, or None when it is not one."""
    try:
        with open(path / "manifest.json", encoding="utf-8") as handle:
            manifest = json.load(handle)
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and manifest.get("format") == "topicflow-corpus" else None


def _zarr_arrays(path: Path) -> Iterator[dict[str, Any]]:
    """The metadata of every zarr v3 array under ``path``."""
    for directory, _, files in os.walk(path):
        if "zarr.json" in files:
            try:
                with open(Path(directory) / "zarr.json", encoding="utf-8") as handle:
                    meta = json.load(handle)
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and meta.get("node_type") == "array":
                yield meta


def _array_bytes(path: Path) -> int:
    """Uncompressed bytes of the zarr arrays under ``path``."""
    total = 0
    for meta in _zarr_arrays(path):
        n_items = 1
        for extent in meta.get("shape", []):
            n_items *= int(extent)
        total += n_items * _ITEMSIZE.get(str(meta.get("data_type")), _STRING_ITEMSIZE)
    return total


def _largest_first_dimension(path: Path) -> int:
    """The longest array under ``path`` (a vocabulary directory: its number of terms)."""
    return max((int(meta["shape"][0]) for meta in _zarr_arrays(path) if meta.get("shape")), default=0)


def scheduler_address(scheduler: str) -> str:
    """The address of ``scheduler``: itself, or the ``address`` a scheduler file holds.

    Parameters
    ----------
    scheduler : str
        ``tcp://host:port``, ``tls://host:port``, ``host:port`` or the path of a scheduler file
        (``dask scheduler --scheduler-file``).

    Returns
    -------
    str
        The address (a file that is not a scheduler file: its path, for Dask to report).

    Examples
    --------
    >>> scheduler_address("tls://10.0.0.5:8786")
    'tls://10.0.0.5:8786'
    """
    if not Path(scheduler).is_file():
        return scheduler
    try:
        with open(scheduler, encoding="utf-8") as handle:
            address = json.load(handle).get("address")
    except (OSError, ValueError, AttributeError):
        return scheduler
    return address if isinstance(address, str) else scheduler


def _scheme(address: str) -> str:
    """``tls``, ``tcp``, ...: the protocol of a scheduler address (Dask's default ``tcp`` when none is written)."""
    return address.split("://", 1)[0].lower() if "://" in address else "tcp"


def client_security(config: ClusterConfig) -> Any:
    """Return the ``distributed.Security`` this client connects to ``config.scheduler`` with, checked.

    The TLS files come from ``config`` (``--tls-ca-file``, ``--tls-cert``, ``--tls-key``; each one not
    given from Dask's security config, ``distributed.comm.tls.*``), else from ``config.security``,
    else from Dask's security config alone. They are
    opened and loaded here, so that a missing or malformed file is named before any connection.

    Parameters
    ----------
    config : ClusterConfig
        Its ``scheduler`` (an address or a scheduler file) and TLS settings.

    Returns
    -------
    distributed.Security or None
        None for a local cluster or a scheduler that does not use TLS (Dask's defaults apply).

    Raises
    ------
    InvalidParameterError
        TLS settings without a remote scheduler or for a ``tcp://`` one; a ``tls://`` scheduler
        without a CA file and client certificate; a TLS file that cannot be read or loaded (named).
    """
    files = config.tls_files
    given = ", ".join(files) or "a security object"
    if not config.scheduler:
        if files or config.security is not None:
            raise InvalidParameterError(
                f"{given} given without --scheduler: TLS settings are for a remote scheduler "
                "(--scheduler tls://HOST:PORT); the local cluster listens on 127.0.0.1 only.")
        return None
    address = scheduler_address(config.scheduler)
    if _scheme(address) != "tls":
        if files or config.security is not None:
            raise InvalidParameterError(
                f"{given} given, but the scheduler address {address!r} is {_scheme(address)}://, which is not "
                "encrypted: give the scheduler's tls://HOST:PORT address (a scheduler started with TLS), "
                "or drop the TLS options.")
        return None
    if files and config.security is not None:
        raise InvalidParameterError(f"TLS files ({given}) and a security object were both given; give one.")
    from distributed import Security

    if config.security is not None:
        security = config.security
    elif files:  # a file not given is read from the Dask config, as Security does
        given_files = {"tls_ca_file": config.tls_ca_file, "tls_client_cert": config.tls_cert,
                       "tls_client_key": config.tls_key}
        security = Security(require_encryption=True, **{name: path for name, path in given_files.items() if path})
    else:
        security = Security()  # distributed.comm.tls.* from the Dask config and environment
    _check_tls_files(address, security.tls_ca_file, security.tls_client_cert, security.tls_client_key)
    return security


def _check_tls_files(address: str, ca_file: str | None, cert: str | None, key: str | None) -> None:
    """Check that the client's TLS files exist, can be read and load (Dask also accepts PEM text: not opened)."""
    if not ca_file or not cert:
        raise InvalidParameterError(
            f"the scheduler {address!r} uses TLS, but no {'CA file' if not ca_file else 'client certificate'} "
            "was given: pass --tls-ca-file CA.pem --tls-cert CLIENT.pem --tls-key CLIENT.key (or set "
            "distributed.comm.tls.ca-file, distributed.comm.tls.client.cert and .key in the Dask config). "
            "Dask's TLS is mutual: this client needs a certificate signed by the CA the scheduler trusts.")
    import ssl

    for what, path in (("CA file", ca_file), ("client certificate", cert), ("client key", key)):
        if path and "\n" not in path:
            try:
                with open(path, "rb") as handle:
                    handle.read(1)
            except OSError as exc:
                raise InvalidParameterError(
                    f"cannot read the TLS {what} {path!r}: {exc.strerror or exc}. Check the path and its permissions."
                ) from exc
    try:
        context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, **(
            {"cadata": ca_file} if "\n" in ca_file else {"cafile": ca_file}))
    except (ssl.SSLError, ValueError) as exc:
        raise InvalidParameterError(
            f"the TLS CA file {ca_file!r} holds no PEM certificate ({exc}): give the CA's certificate "
            "(-----BEGIN CERTIFICATE-----), not its key.") from exc
    if "\n" in cert or (key and "\n" in key):
        return  # certificate or key as PEM text: Dask writes them to temporary files and loads them itself
    try:
        context.load_cert_chain(cert, key)
    except ssl.SSLError as exc:
        raise InvalidParameterError(
            f"the TLS client certificate {cert!r} and key {key or cert!r} do not load ({exc.reason or exc}): "
            "give a PEM certificate and the private key that belongs to it (--tls-key, unless the "
            "certificate file holds the key too).") from exc


#: Phrases of a TLS alert the scheduler sent, or of the scheduler closing the handshake (under TLS 1.3
#: the client may finish its side before the scheduler checks the client's certificate, and then
#: sees the connection closed rather than the alert): the scheduler refused this client's certificate.
_REFUSED_BY_SCHEDULER = ("UNKNOWN_CA", "BAD_CERTIFICATE", "CERTIFICATE_REQUIRED", "CERTIFICATE_UNKNOWN",
                         "CERTIFICATE_EXPIRED", "CERTIFICATE_REVOKED", "HANDSHAKE_FAILURE",
                         "EOF occurred in violation of protocol")


def explain_connection_failure(address: str, exc: BaseException, security: Any = None) -> str:
    """Say why connecting to the scheduler at ``address`` failed, which side refused, and what to check.

    Parameters
    ----------
    address : str
        The scheduler's address.
    exc : BaseException
        What ``distributed.Client`` raised (its causes are read too).
    security : distributed.Security, optional
        The client's TLS settings, to name the files in the message.

    Returns
    -------
    str
        One paragraph for :class:`SchedulerConnectionError`.
    """
    chain: list[str] = []
    seen: BaseException | None = exc
    while seen is not None and len(chain) < 6:
        chain.append(f"{type(seen).__name__}: {seen}")
        seen = seen.__cause__ or seen.__context__
    details = " <- ".join(chain)
    ca = getattr(security, "tls_ca_file", None)
    cert = getattr(security, "tls_client_cert", None)
    # A plain scheduler answers the TLS hello with garbage, or sends its own handshake message before
    # the client starts TLS (tornado: "IOStream is not idle"), whichever comes first.
    if _scheme(address) == "tls" and ("WRONG_VERSION_NUMBER" in details or "cannot convert to SSL" in details):
        return (f"the scheduler at {address!r} does not speak TLS (the handshake met plain TCP): it was "
                "started without TLS; use its tcp:// address, or start it with TLS "
                f"(dask scheduler --tls-ca-file ... --tls-cert ... --tls-key ...). [{details}]")
    if "CERTIFICATE_VERIFY_FAILED" in details or "certificate does not match" in details:
        return (f"this client refused the certificate of the scheduler at {address!r}: check that the CA file "
                f"{ca!r} is the CA that signed the scheduler's certificate, and that the certificate is still "
                f"valid. [{details}]")
    if any(phrase in details for phrase in _REFUSED_BY_SCHEDULER):
        return (f"the scheduler at {address!r} refused this client's TLS certificate {cert!r} (a TLS alert, or the "
                "handshake closed by the scheduler): it must be signed "
                "by the CA the scheduler trusts (the scheduler's --tls-ca-file or distributed.comm.tls.ca-file) "
                f"and still be valid; ask the cluster's administrator for a client certificate. [{details}]")
    if _scheme(address) == "tcp" and ("reset by peer" in details or "Stream is closed" in details):
        return (f"the scheduler at {address!r} closed the connection: if it was started with TLS, connect to "
                f"tls://{address.split('://')[-1]} with --tls-ca-file, --tls-cert and --tls-key. [{details}]")
    return (f"cannot connect to the Dask scheduler at {address!r}: check the address, that the scheduler is "
            "running, and that this machine can reach its port (a firewall, a VPN); Dask waits "
            f"distributed.comm.timeouts.connect for it. [{details}]")


def _connect_remote(config: ClusterConfig, scheduler: str) -> Any:
    """A ``distributed.Client`` connected to ``scheduler`` (``config.scheduler``), with a clear error when it fails."""
    from distributed import Client

    security = client_security(config)
    address = scheduler_address(scheduler)
    registered = default_client_keys()
    try:
        if Path(scheduler).is_file():
            return Client(scheduler_file=scheduler, security=security)
        return Client(scheduler, security=security)
    except BaseException as exc:
        # distributed.Client makes itself the default before it connects and stays registered, unclosed,
        # when connecting fails; get_client() would then hand it to every later computation of the
        # process given no client (a notebook cell, the next test), which would wait on it for ever.
        for client in default_clients_since(registered):
            if client.status not in ("running", "closing"):  # never connected (a running one is another thread's)
                client.close()
        if isinstance(exc, (OSError, TimeoutError, ValueError)):  # ValueError: a malformed address, TLS on a plain stream
            raise SchedulerConnectionError(explain_connection_failure(address, exc, security)) from exc
        raise


def default_client_keys() -> set[int]:
    """The keys of distributed's registry of default clients, to pass to :func:`default_clients_since` later."""
    from distributed import client as client_module

    return set(client_module._global_clients)


def default_clients_since(keys: set[int]) -> list[Any]:
    """The clients registered as the process's default since ``keys`` was taken, and not closed."""
    from distributed import client as client_module

    return [c for k, c in list(client_module._global_clients.items()) if k not in keys and c.status != "closed"]


@contextlib.contextmanager
def connect(config: ClusterConfig) -> Iterator[Any]:
    """Yield a ``distributed.Client`` for ``config``; a local cluster is closed on exit.

    A local cluster's executor is chosen by :func:`choose_executor` and logged in one line; its
    scheduler, workers and dashboard listen on 127.0.0.1 (the dashboard: ``dashboard_address``).
    A remote scheduler is reached with the TLS settings :func:`client_security` checks.

    Parameters
    ----------
    config : ClusterConfig
        A scheduler address or file to connect to, else the local cluster to start.

    Yields
    ------
    distributed.Client or None
        Connected for the duration of the ``with`` block; None when ``threads_without_cluster`` lets
        a threads executor run on Dask's threaded scheduler (:func:`compute` then uses it).

    Raises
    ------
    InvalidParameterError
        Wrong or unreadable TLS settings (see :func:`client_security`).
    SchedulerConnectionError
        The scheduler cannot be reached or a TLS handshake failed.
    """
    if not config.scheduler:
        client_security(config)  # TLS settings without --scheduler: refused
        choice = choose_executor(config)
        log.info("%s", choice.line())
        if (choice.executor == "threads" and config.threads_without_cluster
                and config.dashboard_address == DEFAULT_DASHBOARD_ADDRESS):
            threads = (config.workers or max(1, os.cpu_count() or 1)) * (config.threads_per_worker or 1)
            log.info("local: Dask's threaded scheduler in this process, %d threads (no cluster, no dashboard)",
                     threads)
            import dask.config

            with dask.config.set(num_workers=threads):
                yield None
            return
    from distributed import Client, LocalCluster

    if config.scheduler:
        client = _connect_remote(config, config.scheduler)
        log.info("connected to scheduler %s (dashboard %s)", client.scheduler.address, client.dashboard_link)
        address = client.scheduler.address
        try:
            with _quiet_task_errors(client, config.quiet_task_errors):
                yield client
        except Exception as exc:
            if scheduler_lost(client):
                raise SchedulerLostError(
                    f"lost the Dask scheduler at {address!r} while the command ran ({type(exc).__name__}); "
                    "nothing was committed (every output is written under a temporary name and put in place "
                    "only when complete, so what was current before is still current). Check that the "
                    "scheduler is running and reachable, then rerun the command (with --resume if it "
                    "checkpoints).") from exc
            raise
        finally:
            client.close()
        return
    processes = choice.executor == "processes"
    n_workers = config.workers or max(1, os.cpu_count() or 1)
    host = config.dashboard_address.rpartition(":")[0]
    cluster = LocalCluster(
        n_workers=n_workers,
        threads_per_worker=config.threads_per_worker or 1,
        memory_limit=config.memory_limit or ("auto" if processes else 0),
        processes=processes,
        # Worker processes and their scheduler talk over TCP on loopback (Dask's default, written out);
        # threads talk in-process (inproc://, which takes no host).
        host=LOCAL_CLUSTER_HOST if processes else None,
        dashboard_address=config.dashboard_address,
        # The workers' HTTP endpoints (metrics, health) listen on the dashboard's host, any free port;
        # in-process workers would otherwise listen on every interface.
        worker_dashboard_address=f"{host}:0",
    )
    # Workers are on this machine, so the client can reach them: results and actor calls (online
    # VB's E-step servers) then skip the hop through the scheduler (about half the cost of a round trip carrying 1 MB).
    client = Client(cluster, direct_to_workers=True)
    try:
        with _dashboard_link_on(host if not processes else ""), _quiet_task_errors(client, config.quiet_task_errors):
            log.info(
                "local Dask cluster: %d workers x %d threads, dashboard %s",
                n_workers,
                config.threads_per_worker or 1,
                client.dashboard_link,
            )
            yield client
    finally:
        client.close()
        cluster.close()


@contextlib.contextmanager
def _dashboard_link_on(host: str) -> Iterator[None]:
    """Show the dashboard link on ``host`` while the block runs ("" or a wildcard: Dask's own link).

    Threads talk to their in-process scheduler over ``inproc://<this machine's address>``, and Dask
    builds the dashboard link from that address, while the dashboard listens on ``host``.
    """
    if host in ("", "0.0.0.0", "::", "[::]"):
        yield
        return
    import dask.config

    with dask.config.set({"distributed.dashboard.link": f"{{scheme}}://{host}:{{port}}/status"}):
        yield


@contextlib.contextmanager
def _quiet_task_errors(client: Any, quiet: bool) -> Iterator[None]:
    """While the block runs, keep ``client``'s workers from logging tasks failed by topicflow errors.

    Registers :class:`~topicflow.pipeline.worker_logging.QuietTaskErrorsPlugin` under a name of this
    client's own (the scheduler also gives it to workers that join or restart later) and
    unregisters it on exit, which removes the filter again. A scheduler that refuses the plugin
    (one that may not unpickle plugins, say) costs only the quiet logs: the command goes on.
    """
    if not quiet:
        yield
        return
    from topicflow.pipeline.worker_logging import QuietTaskErrorsPlugin

    name = f"topicflow-quiet-task-errors-{client.id}"
    try:
        client.register_plugin(QuietTaskErrorsPlugin(), name=name)
    except Exception as exc:  # cosmetic only: the workers then log failed tasks as usual
        log.info("the workers will log failed tasks in full (registering %s failed: %s)", name, exc)
        yield
        return
    try:
        yield
    finally:
        with contextlib.suppress(Exception):  # a lost scheduler: the workers' plugins go with it
            client.unregister_worker_plugin(name)


def current_client(client: Any = None) -> Any:
    """The given client, else the current distributed client, else None (threaded scheduler)."""
    if client is not None:
        return client
    if "distributed" not in sys.modules:  # no client can exist; importing distributed to ask costs ~0.5 s
        return None
    try:
        from distributed import get_client

        return get_client()
    except (ImportError, ValueError):
        return None


def compute(*graphs: Any, client: Any = None) -> tuple[Any, ...]:
    """Compute Dask objects on ``client`` (or the current one), else on the threaded scheduler.

    When a task fails, this returns (raises) only once no task of the call is still running: the
    caller's clean-up (removing what a failed ingest wrote, say) never races a task that is still
    writing. Tasks not yet started are cancelled. Without a client, ``dask.config`` ``scheduler``
    set to ``"sync"`` (or ``"synchronous"``, ``"single-threaded"``) runs every task in this thread.
    """
    client = current_client(client)
    if client is None:
        return _compute_locally(graphs)
    futures = client.compute(list(graphs))
    with settled_on_failure(client, futures, graphs):
        return tuple(client.gather(futures))


def compute_list(graphs: Sequence[Any], *, client: Any = None, progress: Any = None, desc: str = "", unit: str = "task") -> list[Any]:
    """Compute many independent Dask objects, reporting each as it finishes; results keep input order.

    A failure is raised once no task of the call is still running, as for :func:`compute`.
    """
    client = current_client(client)
    if client is None or progress is None:
        return list(compute(*graphs, client=client)) if graphs else []
    from distributed import as_completed

    futures = client.compute(list(graphs))
    with settled_on_failure(client, futures, graphs):
        for _ in progress.track(as_completed(futures), total=len(futures), desc=desc, unit=unit):
            pass
        return list(client.gather(futures))


_SYNC_SCHEDULERS = frozenset({"sync", "synchronous", "single-threaded"})


def _compute_locally(graphs: Sequence[Any]) -> tuple[Any, ...]:
    """Dask's threaded scheduler on a pool of this call's own, drained before a failure is raised."""
    import dask

    if dask.config.get("scheduler", None) in _SYNC_SCHEDULERS:
        import dask.local

        # The schedulers as functions: a name makes dask import distributed to look for a client.
        return tuple(dask.compute(*graphs, scheduler=dask.local.get_sync))
    from concurrent.futures import ThreadPoolExecutor

    import dask.threaded

    # Dask's shared pool would keep running this call's queued and running tasks after the first
    # failure is raised; a pool of its own is shut down (queued tasks cancelled, running ones awaited)
    # before the failure leaves this function.
    threads = dask.config.get("num_workers", None) or os.cpu_count() or 1
    pool = ThreadPoolExecutor(threads, thread_name_prefix="topicflow-compute")
    try:
        return tuple(dask.compute(*graphs, scheduler=dask.threaded.get, pool=pool))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


#: How often a failed call asks the workers whether its tasks still run (seconds).
_SETTLE_POLL = 0.05


@contextlib.contextmanager
def settled_on_failure(client: Any, futures: Sequence[Any], graphs: Sequence[Any] = ()) -> Iterator[None]:
    """On an exception: cancel ``futures``, then wait until no worker still executes one of their tasks.

    The tasks waited for are the futures' own and every task of ``graphs`` (the Dask collections the
    futures were computed from, whose inner tasks have no future).

    A worker cannot stop a running task; the scheduler forgets a cancelled one at once, but the
    worker keeps it among its executing tasks until the function returns. Asking the workers
    (``Client.run``) until none of the call's keys is among them is the event that ends the wait.
    If the workers cannot be asked (the cluster is going away), the wait ends there.

    Parameters
    ----------
    client : distributed.Client
        The client the futures belong to.
    futures : sequence of distributed.Future
        The call's futures; cancelled on an exception.
    graphs : sequence of Dask collections, optional
        What the futures were computed from.

    Yields
    ------
    None
        The block whose exception (re-raised unchanged) starts the wait.
    """
    try:
        yield
    except BaseException:
        keys: set[Any] = {future.key for future in futures}
        with contextlib.suppress(Exception):
            client.cancel(list(futures))
        for graph in graphs:
            with contextlib.suppress(Exception):
                keys.update(graph.__dask_graph__().keys())
        while keys:
            try:
                running = client.run(_executing_keys, keys)
            except Exception:  # noqa: BLE001 - no answer: nothing more can be known about the tasks
                break
            if not any(running.values()):
                break
            import time

            time.sleep(_SETTLE_POLL)
        raise


def _executing_keys(keys: set[Any], dask_worker: Any = None) -> list[Any]:
    """On a worker: which of ``keys`` it is executing (a cancelled task runs until it returns)."""
    state = dask_worker.state
    return [ts.key for ts in (*state.executing, *state.long_running) if ts.key in keys]
