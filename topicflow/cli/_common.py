"""Pieces shared by every CLI command: cluster options, logging set-up and error reporting.

Imported by every command module, so it imports nothing heavy at module level (no Dask, numba or
zarr): ``topicflow --help`` and the commands that need no cluster stay quick to start.
"""
from __future__ import annotations

import functools
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Mapping, TypeVar, cast

import click

from topicflow.errors import TopicflowError
from topicflow.pipeline.cluster import (
    DEFAULT_DASHBOARD_ADDRESS,
    LOCAL_EXECUTORS,
    ClusterConfig,
    estimate_workload,
)

if TYPE_CHECKING:
    from topicflow.pipeline.presets import PresetCommand
    from topicflow.pipeline.progress import ProgressReporter

F = TypeVar("F", bound=Callable[..., Any])


def cluster_options(func: F) -> F:
    """Add the cluster options (``--scheduler``, ``--local-cluster``, ``--tls-*``, ...); pass ``cluster=``.

    The :class:`~topicflow.pipeline.cluster.ClusterConfig` passed on carries the command's
    :class:`~topicflow.pipeline.cluster.Workload`, sized from its path arguments (and its number of
    topics, ``n_topics`` or ``topics``) by :func:`~topicflow.pipeline.cluster.estimate_workload`,
    which ``--local-cluster auto`` uses to choose threads or processes.

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
                  help="Run on an existing Dask scheduler (tcp://host:port, tls://host:port or a scheduler "
                  "file; see docs/cluster.md). Default: start a local cluster.")
    @click.option("--local-cluster", "local_executor", type=click.Choice(LOCAL_EXECUTORS), default=None,
                  help="Workers of the local cluster: threads of this process (quick to start; the kernels "
                  "release the GIL), worker processes (memory kept apart), or auto: threads when the corpus "
                  "and model fit in topicflow.local-cluster-memory (default: half the machine's memory). "
                  "The choice is printed.  [default: topicflow.local-cluster, auto]")
    @click.option("--workers", type=click.IntRange(min=1), default=None,
                  help="Workers of the local cluster (default: one per core).")
    @click.option("--threads-per-worker", type=click.IntRange(min=1), default=None,
                  help="Threads per local worker (default 1).")
    @click.option("--memory-limit", default=None, metavar="SIZE",
                  help="Memory limit per local worker, e.g. 4GiB (default: share of the machine for "
                  "processes, none for threads).")
    @click.option("--dashboard-address", default=DEFAULT_DASHBOARD_ADDRESS, show_default=True, metavar="HOST:PORT",
                  help="Where the local cluster's dashboard listens; the default serves this machine only, "
                  "':0' every interface (it then shows the cluster's work to the network).")
    @click.option("--tls-ca-file", default=None, metavar="FILE",
                  help="For a tls:// scheduler: the PEM certificate of the CA that signed the cluster's "
                  "certificates.  [default: distributed.comm.tls.ca-file]")
    @click.option("--tls-cert", default=None, metavar="FILE",
                  help="For a tls:// scheduler: this client's PEM certificate, signed by that CA.  "
                  "[default: distributed.comm.tls.client.cert]")
    @click.option("--tls-key", default=None, metavar="FILE",
                  help="For a tls:// scheduler: the private key of --tls-cert (unless that file holds it).  "
                  "[default: distributed.comm.tls.client.key]")
    @functools.wraps(func)
    def wrapper(*args: Any, scheduler: str | None, local_executor: str | None, workers: int | None,
                threads_per_worker: int | None, memory_limit: str | None, dashboard_address: str,
                tls_ca_file: str | None, tls_cert: str | None, tls_key: str | None,
                **kwargs: Any) -> Any:
        workload = None if scheduler else estimate_workload(_path_arguments(kwargs), _topics_argument(kwargs))
        kwargs["cluster"] = ClusterConfig(
            scheduler=scheduler, workers=workers, threads_per_worker=threads_per_worker,
            memory_limit=memory_limit, executor=cast(Any, local_executor), workload=workload,
            dashboard_address=dashboard_address, tls_ca_file=tls_ca_file, tls_cert=tls_cert, tls_key=tls_key,
            quiet_task_errors=not shows_task_failures(),
        )
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def _path_arguments(kwargs: Mapping[str, Any]) -> list[Path]:
    """The values of a command's parameters that name existing directories (stores, models)."""
    values: list[Any] = []
    for value in kwargs.values():
        values.extend(value if isinstance(value, (tuple, list)) else [value])
    return [Path(value) for value in values if isinstance(value, (str, Path)) and value and Path(value).is_dir()]


def _topics_argument(kwargs: Mapping[str, Any]) -> int | None:
    """The number of topics a command fits, when it takes one."""
    for name in ("n_topics", "topics"):
        if isinstance(kwargs.get(name), int):
            return int(kwargs[name])
    return None


def progress_reporter() -> ProgressReporter:
    """Return the progress reporter of the running command: the caller's, else tqdm bars on stderr.

    ``topicflow.cli.main(args, obj=reporter)`` runs a command with ``reporter`` (any
    :class:`~topicflow.pipeline.progress.ProgressReporter`): this is how a test follows a command it
    runs in a subprocess (:class:`topicflow.testing.faults.OnItem`). From the shell ``obj`` is None
    and the command shows :class:`~topicflow.pipeline.progress.TqdmProgress` bars, as before.
    """
    from topicflow.pipeline.progress import TqdmProgress

    context = click.get_current_context(silent=True)
    reporter = None if context is None else context.obj
    return cast("ProgressReporter", reporter) if reporter is not None else TqdmProgress()


def reports_errors(func: F) -> F:
    """Turn topicflow errors into a one-paragraph message on stderr and exit status 2.

    With ``--debug`` (or ``TOPICFLOW_DEBUG=1``) the error's traceback comes first; for an error raised
    in a Dask task it runs through the task's frames on the worker. Other exceptions are not caught:
    Python prints their traceback (exit status 1).
    """

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except TopicflowError as exc:
            if debug_requested():
                import traceback

                click.echo("".join(traceback.format_exception(exc)).rstrip("\n"), err=True)
            click.echo(f"topicflow: error: {exc}", err=True)
            sys.exit(2)

    return wrapper  # type: ignore[return-value]


#: The environment variable that turns ``--debug`` on (``1``, ``true``, ``yes`` or ``on``).
DEBUG_ENVVAR = "TOPICFLOW_DEBUG"


def debug_requested() -> bool:
    """Whether the running command was given ``--debug`` (``topicflow --debug CMD``) or ``TOPICFLOW_DEBUG=1``.

    Returns
    -------
    bool
        The group's ``--debug`` flag (which reads the environment variable too); outside a command
        run by the group (a command object invoked on its own), the environment variable.
    """
    context = click.get_current_context(silent=True)
    params = {} if context is None else context.find_root().params
    if "debug" in params:
        return bool(params["debug"])
    return os.environ.get(DEBUG_ENVVAR, "").strip().lower() in ("1", "true", "yes", "on")


def shows_task_failures() -> bool:
    """Whether workers log every failed task in full: with ``--debug`` or ``-vv``, else only unexpected errors.

    Returns
    -------
    bool
        True when the running command was given ``--debug`` (or ``TOPICFLOW_DEBUG=1``) or ``-vv``.
    """
    context = click.get_current_context(silent=True)
    verbose = 0 if context is None else int(context.find_root().params.get("verbose") or 0)
    return debug_requested() or verbose >= 2


def echo_info(info: Any, lines: Callable[[Any], Any], *, as_json: bool, seconds: float | None = None,
              done: str = "built") -> None:
    """Print a built file's info (``tree build``, ``g0 train``) or a read one's (``tree info``, ``g0 info``).

    Parameters
    ----------
    info : object
        With ``to_dict()``.
    lines : callable
        ``lines(info)``: the text lines.
    as_json : bool
        JSON (``to_dict()``, plus ``seconds`` when given) instead of the lines.
    seconds : float, optional
        The build's wall time: a ``"  <done> in X s"`` line (or a ``seconds`` key).
    done : str, default "built"
        The verb of that line.
    """
    import json

    if as_json:
        payload = {**info.to_dict(), **({} if seconds is None else {"seconds": round(seconds, 3)})}
        click.echo(json.dumps(payload, indent=2, sort_keys=True))
        return
    for line in lines(info):
        click.echo(line)
    if seconds is not None:
        click.echo(f"  {done} in {seconds:.2f} s")


def setup_logging(verbose: int, debug: bool = False) -> None:
    """Set up logging: topicflow's own lines at INFO (WARNING with -q), Dask's chatter only with -vv or --debug.

    Dask reads its logging levels from its config when ``distributed`` is imported, in this process
    and in every worker process the local cluster spawns, so the level is also set in the
    environment those processes inherit. Errors only, by default: the workers' record of a task
    failed by a topicflow error is dropped too (see
    :class:`~topicflow.pipeline.cluster.ClusterConfig`'s ``quiet_task_errors``), so a bad input
    ends in the command's one ``topicflow: error:`` line.

    Parameters
    ----------
    verbose : int
        -1 (``-q``), 0, 1 (``-v``) or 2 and more (``-vv``: Dask's own INFO lines).
    debug : bool, default False
        ``--debug``: Dask's INFO lines as with ``-vv`` (the workers' full logs of every failure).
    """
    level = logging.WARNING if verbose <= 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(message)s", stream=sys.stderr)
    logging.getLogger("topicflow").setLevel(logging.INFO if verbose >= 0 or debug else logging.WARNING)
    dask_level = "info" if verbose >= 2 or debug else "error"
    os.environ["DASK_LOGGING__DISTRIBUTED"] = dask_level
    if "dask.config" in sys.modules:  # else Dask reads the environment when a command imports it
        import dask.config

        dask.config.set({"logging.distributed": dask_level})
    for name in list(logging.root.manager.loggerDict):
        if name.split(".")[0] in ("distributed", "bokeh", "tornado"):
            logging.getLogger(name).setLevel(dask_level.upper())


def preset_option(command: PresetCommand) -> Callable[[F], F]:
    """Add ``--preset NAME`` (the presets of ``command``) to a command; it passes ``preset=``.

    Parameters
    ----------
    command : {"fit", "stream"}
        Whose presets are offered.

    Returns
    -------
    callable
        The decorator.
    """
    from topicflow.pipeline.presets import preset_names

    return click.option(
        "--preset", default=None, type=click.Choice(preset_names(command)),
        help="A paper's published settings (see docs/reproductions.md); options you type win over the preset's.")


def apply_preset(name: str | None, command: PresetCommand, values: Mapping[str, Any],
                 option_of: Mapping[str, str] | None = None) -> tuple[dict[str, Any], set[str]]:
    """Merge a preset into a command's settings: typed options win, the preset fills the rest.

    Parameters
    ----------
    name : str or None
        The ``--preset`` value.
    command : {"fit", "stream"}
        The running command.
    values : mapping
        Every setting under its API name, with the value click parsed (a default when not typed).
    option_of : mapping, optional
        The click parameter name of a setting whose API name differs.

    Returns
    -------
    settings : dict
        The merged settings.
    chosen : set of str
        The settings the user typed or the preset set.

    Raises
    ------
    click.UsageError
        A preset names a setting this command does not take (a defect of the preset table).
    """
    from topicflow.pipeline.presets import get_preset

    option_of = option_of or {}
    context = click.get_current_context()
    defaults = (click.core.ParameterSource.DEFAULT, click.core.ParameterSource.DEFAULT_MAP, None)
    typed = {key for key in values if context.get_parameter_source(option_of.get(key, key)) not in defaults}
    if name is None:
        return dict(values), typed
    preset = get_preset(name, command)
    unknown = sorted(set(preset.settings) - set(values))
    if unknown:
        raise click.UsageError(f"preset {name!r} sets {', '.join(unknown)}, which {command} does not take")
    merged = {**values, **{key: value for key, value in preset.settings.items() if key not in typed}}
    return merged, typed | set(preset.settings)


# ----------------------------------------------------------------------------- object storage


class LocationType(click.ParamType):
    """A local path (as a :class:`~pathlib.Path`) or a URL on object storage (kept as the string).

    ``click.Path`` would turn ``s3://bucket/store`` into the local path ``s3:/bucket/store``.
    """

    name = "PATH|URL"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        from topicflow.io.storage import is_url

        if isinstance(value, Path) or not is_url(str(value)):
            return Path(value)
        return str(value)


#: Parameter type of the paths that may be URLs (corpus stores and inputs, models, outputs: docs/storage.md).
LOCATION = LocationType()


def model_location(value: str | os.PathLike[str]) -> Path:
    """A MODEL argument (a :data:`LOCATION` value) as :mod:`topicflow.io.models.store` takes it.

    Parameters
    ----------
    value : str or Path
        A local path, or a URL kept as the string.

    Returns
    -------
    Path
        A :class:`~pathlib.Path`, or for a URL a :class:`~topicflow.io.storage.StoragePath`, which the
        model functions accept although they are annotated with ``Path``.
    """
    from topicflow.io.output_paths import output_location

    return cast(Path, output_location(value))


def parse_storage_options(values: tuple[str, ...] | list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` strings as storage options; values read as YAML scalars, dotted keys nested.

    Parameters
    ----------
    values : sequence of str
        E.g. ``("endpoint_url=http://127.0.0.1:9000", "anon=true", "client_kwargs.region_name=eu-west-1")``.

    Returns
    -------
    dict
        ``{"endpoint_url": "http://127.0.0.1:9000", "anon": True, "client_kwargs": {"region_name": "eu-west-1"}}``.

    Raises
    ------
    click.BadParameter
        A value without ``=`` or with an empty key.
    """
    import yaml

    options: dict[str, Any] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{item!r} is not KEY=VALUE (e.g. endpoint_url=https://...)",
                                     param_hint="'--storage-option'")
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError:
            value = raw
        if isinstance(value, (dict, list)) or value is None:
            value = raw  # only scalars are parsed: a URL or a secret stays the string given
        target = options
        *parents, leaf = key.strip().split(".")
        for part in parents:
            target = target.setdefault(part, {})
        target[leaf] = value
    return options


def storage_options_option(func: F) -> F:
    """Add ``--storage-option KEY=VALUE`` (repeatable): options of the fsspec filesystem of every URL.

    They are merged into the ``topicflow.storage-options`` setting of dask.config before the command
    runs, so the workers of the local cluster it starts inherit them (docs/storage.md).

    Parameters
    ----------
    func : callable
        A click command.

    Returns
    -------
    callable
        The command with the option.
    """
    @click.option("--storage-option", "storage_option_values", multiple=True, metavar="KEY=VALUE",
                  help="Option of the object-storage filesystem for s3://, gs://, ... paths (repeatable), e.g. "
                  "endpoint_url=https://minio:9000, anon=true, client_kwargs.region_name=eu-west-1; "
                  "merged into the topicflow.storage-options setting (docs/storage.md).")
    @functools.wraps(func)
    def wrapper(*args: Any, storage_option_values: tuple[str, ...], **kwargs: Any) -> Any:
        if storage_option_values:
            import dask.config

            merged = dict(dask.config.get("topicflow.storage-options", default=None) or {})
            merged.update(parse_storage_options(storage_option_values))
            dask.config.set({"topicflow.storage-options": merged})
        return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
