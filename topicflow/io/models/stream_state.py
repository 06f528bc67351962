"""Saved state of streaming-sampler runs: one directory of npz arrays plus JSON per run, written atomically.

Layout (spec in docs/streaming.md)::

    OUT/state/
      stream.json          format, the run settings, the stream position, corpus provenance, the
                           trace position (format version 2; version 1 kept every trace record),
                           run_arrays (each run's array names, dtypes and shapes, checked on read)
      runs/<NNN>/arrays.npz   the sampler's arrays (never pickled: loaded with allow_pickle=False)
      runs/<NNN>/run.json     the sampler's JSON metadata (kind, position, seed, counters)

The whole ``state`` directory is built beside the old one and renamed into place, so a stream killed
while saving resumes from the previous complete state.

On object storage (a URL, docs/storage.md), where nothing renames atomically, each save uploads its
runs under a fresh prefix ``state/runs-<id>/`` and then replaces ``stream.json`` (one PUT, atomic
there), whose ``runs_dir`` entry names that prefix; older prefixes are deleted after it. A stream
killed while saving leaves the previous ``stream.json`` and the runs it names intact. A state without
``runs_dir`` (every local one) keeps its runs under ``runs/``.
"""
from __future__ import annotations

import io
import logging
import shutil
import tempfile
import uuid
import zipfile
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, ModelFormatError, ModelNotFoundError
from topicflow.io import storage
from topicflow.io._atomic import (
    atomic_write_json,
    commit_directory,
    disk_full_guard,
    read_json,
    temporary_sibling,
)
from topicflow.io._zarr import check_format
from topicflow.io.output_paths import output_location, write_output_bytes
from topicflow.io.storage import Location, StoragePath

log = logging.getLogger(__name__)

STREAM_STATE_FORMAT = "topicflow-stream-state"
#: 2: the stream's ``info`` keeps the trace position, not the trace (issue 26.6); 1 is still read.
STREAM_STATE_VERSION = 2
#: Key of ``stream.json`` recording each run's array names, dtypes and shapes (checked on read).
RUN_ARRAYS = "run_arrays"
#: Key of ``stream.json`` naming the prefix of the runs (object storage only; default ``runs``).
RUNS_DIR = "runs_dir"

#: One run's state: named arrays and JSON-able metadata.
RunState = tuple[dict[str, np.ndarray], dict[str, Any]]


def run_dir_name(run: int) -> str:
    """Return the directory name of run number ``run`` under ``runs/`` (zero-padded, e.g. ``"007"``)."""
    return f"{run:03d}"


def write_stream_state(path: Path | StoragePath, info: Mapping[str, Any], runs: Sequence[RunState]) -> None:
    """Write ``info`` and every run's state as the directory ``path``, replacing it atomically.

    Parameters
    ----------
    path : Path or StoragePath
        ``OUT/state`` (a URL on object storage: see the module docstring).
    info : mapping
        JSON-able description of the stream (settings, position, trace).
    runs : sequence of (dict of str to ndarray, dict)
        Arrays (numeric dtypes only) and metadata of each run, in run order.
    """
    location = output_location(path)
    if isinstance(location, StoragePath):
        _write_remote_state(location, info, runs)
        return
    location.parent.mkdir(parents=True, exist_ok=True)
    unchanged = ("nothing was changed: the previous state is still the one a rerun resumes from."
                 if location.exists() else "no state was written.")
    tmp = temporary_sibling(location)
    with disk_full_guard(location, what="stream state", unchanged=unchanged):
        try:
            _write_state_dir(tmp, "runs", info, runs)
            commit_directory(tmp, location, overwrite=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def _write_state_dir(directory: Path, runs_dir: str, info: Mapping[str, Any], runs: Sequence[RunState]) -> dict[str, Any]:
    """Write every run under ``directory/runs_dir`` and ``directory/stream.json``; return that JSON."""
    for run, (arrays, meta) in enumerate(runs):
        run_dir = directory / runs_dir / run_dir_name(run)
        run_dir.mkdir(parents=True)
        for name, array in arrays.items():
            if np.asarray(array).dtype.hasobject:
                raise InvalidParameterError(
                    f"run {run}: array {name!r} holds Python objects; saved states hold numbers only (never pickle)")
        buffer = io.BytesIO()
        contiguous: dict[str, Any] = {name: np.ascontiguousarray(a) for name, a in arrays.items()}
        np.savez(buffer, **contiguous)  # Any: savez's stubs type **kwds like allow_pickle
        (run_dir / "arrays.npz").write_bytes(buffer.getvalue())
        atomic_write_json(run_dir / "run.json", dict(meta))
    payload = {"format": STREAM_STATE_FORMAT, "format_version": STREAM_STATE_VERSION, **info,
               "n_runs": len(runs), RUN_ARRAYS: [array_shapes(arrays) for arrays, _ in runs]}
    if runs_dir != "runs":
        payload[RUNS_DIR] = runs_dir
    atomic_write_json(directory / "stream.json", payload)
    return payload


def _write_remote_state(location: StoragePath, info: Mapping[str, Any], runs: Sequence[RunState]) -> None:
    """:func:`write_stream_state` on object storage: runs under a fresh prefix, ``stream.json`` last."""
    runs_dir = f"runs-{uuid.uuid4().hex[:12]}"
    staging = Path(tempfile.mkdtemp(prefix="topicflow-state-", dir=storage.staging_root()))
    try:
        _write_state_dir(staging, runs_dir, info, runs)
        storage.upload_files(staging / runs_dir, f"{location.url}/{runs_dir}")
        write_output_bytes(location / "stream.json", (staging / "stream.json").read_bytes())
    except BaseException:
        storage.remove_prefix(f"{location.url}/{runs_dir}")  # never named by stream.json: garbage
        raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    for child in list(location.iterdir()):  # earlier saves' runs, and leftovers of failed ones
        if child.name != runs_dir and child.name != "stream.json":
            try:
                storage.remove_prefix(child.url)
            except Exception as exc:  # committed already: an unnamed prefix is garbage the next save removes
                log.warning("could not delete %s after saving the stream state (%s)", child.url, exc)


def array_shapes(arrays: Mapping[str, np.ndarray]) -> dict[str, dict[str, Any]]:
    """The dtype and shape of each array, as ``stream.json`` records them for each run.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        One run's arrays.

    Returns
    -------
    dict of str to dict
        ``{name: {"dtype": str, "shape": [int, ...]}}``.

    Examples
    --------
    >>> array_shapes({"weights": np.ones(4)})
    {'weights': {'dtype': 'float64', 'shape': [4]}}
    """
    return {name: {"dtype": str(np.asarray(a).dtype), "shape": list(np.shape(a))} for name, a in arrays.items()}


def damaged_stream_state(path: Location, field: str, problem: str) -> ModelFormatError:
    """The error of a saved stream state that cannot be resumed from, saying what to do.

    Parameters
    ----------
    path : Path
        The state directory (``OUT/state``).
    field : str
        What is damaged (``"stream.json"``, ``"run 1"``, ``"run 1/weights"``).
    problem : str
        What is wrong, as a clause naming its subject (``"run 1 cannot be read (...)"``).

    Returns
    -------
    ModelFormatError
        Whose message says to start the stream again without ``--resume``.
    """
    return ModelFormatError(
        f"saved stream state {str(path)!r}: {problem}; the state is damaged. Start the stream again "
        "without --resume.",
        path=str(path),
        field=field,
        problem=problem,
    )


def read_stream_state(path: Path | StoragePath) -> tuple[dict[str, Any], list[RunState]]:
    """Read what :func:`write_stream_state` wrote, checking every run against ``stream.json``.

    Parameters
    ----------
    path : Path or StoragePath
        ``OUT/state`` (a URL on object storage).

    Returns
    -------
    info : dict
        ``stream.json`` (with ``format``, ``format_version`` and ``n_runs``).
    runs : list of (dict of str to ndarray, dict)
        Each run's arrays and metadata, in run order.

    Raises
    ------
    ModelNotFoundError
        No saved state at ``path``.
    FormatVersionError
        The state was written by a newer topicflow.
    ModelFormatError
        The state is damaged: ``stream.json`` unreadable, a run's files missing or undecodable
        (truncated or corrupt npz), or its arrays of other names, dtypes or shapes than recorded.
    """
    path = output_location(path)
    info_path = path / "stream.json"
    if not info_path.is_file():
        raise ModelNotFoundError(
            f"no saved stream state at {str(path)!r}; run `topicflow stream` without --resume first",
            path=str(path),
        )
    try:
        info = read_json(info_path)
    except ValueError as exc:
        raise damaged_stream_state(path, "stream.json", f"stream.json is not valid JSON ({exc})") from exc
    if not isinstance(info, dict):
        raise damaged_stream_state(path, "stream.json", f"stream.json holds a {type(info).__name__}, not an object")
    check_format(info, path=str(info_path), name=STREAM_STATE_FORMAT, version=STREAM_STATE_VERSION)
    n_runs = info.get("n_runs")
    if isinstance(n_runs, bool) or not isinstance(n_runs, int) or n_runs < 0:
        raise damaged_stream_state(path, "stream.json", f"stream.json gives n_runs {n_runs!r}, expected a count of runs")
    # Written since shapes were recorded; older states have none and are checked by their samplers only.
    recorded = info.pop(RUN_ARRAYS, None)
    if recorded is not None and (not isinstance(recorded, list) or len(recorded) != n_runs):
        count = len(recorded) if isinstance(recorded, list) else recorded
        raise damaged_stream_state(path, "stream.json", f"stream.json records the arrays of {count!r} runs for {n_runs} runs")
    runs_dir = info.pop(RUNS_DIR, "runs")
    if not isinstance(runs_dir, str) or not runs_dir.startswith("runs") or "/" in runs_dir or ".." in runs_dir:
        raise damaged_stream_state(path, "stream.json", f"stream.json gives runs_dir {runs_dir!r}, expected a "
                                                        "directory name starting with 'runs'")
    return info, [_read_run(path, runs_dir, run, None if recorded is None else recorded[run]) for run in range(n_runs)]


def _read_run(path: Location, runs_dir: str, run: int, recorded: Any) -> RunState:
    """One run's arrays and metadata, checked against the shapes ``stream.json`` recorded for it."""
    run_dir = path / runs_dir / run_dir_name(run)
    try:
        with storage.open_input(run_dir / "arrays.npz") as handle:
            content = io.BytesIO(handle.read())
        with np.load(content, allow_pickle=False) as data:
            arrays = {name: data[name] for name in data.files}
        meta = read_json(run_dir / "run.json")
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise damaged_stream_state(path, f"run {run}", f"run {run} cannot be read ({type(exc).__name__}: {exc})") from exc
    if not isinstance(meta, dict):
        raise damaged_stream_state(path, f"run {run}", f"run {run} has a run.json holding a {type(meta).__name__}, "
                                                       "not an object")
    if recorded is not None and not (isinstance(recorded, dict) and all(isinstance(v, dict) for v in recorded.values())):
        raise damaged_stream_state(path, "stream.json", f"stream.json records the arrays of run {run} as {recorded!r}, "
                                                        "expected {name: {dtype, shape}}")
    if recorded is not None and array_shapes(arrays) != recorded:
        found = array_shapes(arrays)
        differing = sorted(name for name in set(found) | set(recorded) if found.get(name) != recorded.get(name))
        name = differing[0]
        raise damaged_stream_state(path, f"run {run}/{name}", f"run {run}/{name} is {found.get(name, 'missing')} but "
                                                              f"stream.json records {recorded.get(name, 'no such array')}")
    return arrays, meta
