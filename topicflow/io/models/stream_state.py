"""Saved state of streaming-sampler runs: one directory of npz arrays plus JSON per run, written atomically.

Layout (spec in docs/streaming.md)::

    OUT/state/
      stream.json          format, the run settings, the stream position, corpus provenance, trace
      runs/<NNN>/arrays.npz   the sampler's arrays (never pickled: loaded with allow_pickle=False)
      runs/<NNN>/run.json     the sampler's JSON metadata (kind, position, seed, counters)

The whole ``state`` directory is built beside the old one and renamed into place, so a stream killed
while saving resumes from the previous complete state.
"""
from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import (
    CorpusFormatError,
    InvalidParameterError,
    ModelNotFoundError,
)
from topicflow.io._atomic import (
    atomic_write_json,
    commit_directory,
    read_json,
    temporary_sibling,
)
from topicflow.io._zarr import check_format

STREAM_STATE_FORMAT = "topicflow-stream-state"
STREAM_STATE_VERSION = 1

#: One run's state: named arrays and JSON-able metadata.
RunState = tuple[dict[str, np.ndarray], dict[str, Any]]


def run_dir_name(run: int) -> str:
    """Return the directory name of run number ``run`` under ``runs/`` (zero-padded, e.g. ``"007"``)."""
    return f"{run:03d}"


def write_stream_state(path: Path, info: Mapping[str, Any], runs: Sequence[RunState]) -> None:
    """Write ``info`` and every run's state as the directory ``path``, replacing it atomically.

    Parameters
    ----------
    path : path
        ``OUT/state``.
    info : mapping
        JSON-able description of the stream (settings, position, trace).
    runs : sequence of (dict of str to ndarray, dict)
        Arrays (numeric dtypes only) and metadata of each run, in run order.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        for run, (arrays, meta) in enumerate(runs):
            run_dir = tmp / "runs" / run_dir_name(run)
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
                   "n_runs": len(runs)}
        atomic_write_json(tmp / "stream.json", payload)
        commit_directory(tmp, path, overwrite=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_stream_state(path: Path) -> tuple[dict[str, Any], list[RunState]]:
    """Read what :func:`write_stream_state` wrote.

    Raises
    ------
    ModelNotFoundError
        No saved state at ``path``.
    CorpusFormatError
        The state is of another format or version, or a run's files are missing.
    """
    path = Path(path)
    info_path = path / "stream.json"
    if not info_path.is_file():
        raise ModelNotFoundError(
            f"no saved stream state at {str(path)!r}; run `topicflow stream` without --resume first",
            path=str(path),
        )
    info = read_json(info_path)
    check_format(info, path=str(info_path), name=STREAM_STATE_FORMAT, version=STREAM_STATE_VERSION)
    runs: list[RunState] = []
    for run in range(int(info["n_runs"])):
        run_dir = path / "runs" / run_dir_name(run)
        try:
            with np.load(run_dir / "arrays.npz", allow_pickle=False) as data:
                arrays = {name: data[name] for name in data.files}
            meta = read_json(run_dir / "run.json")
        except (OSError, ValueError) as exc:
            raise CorpusFormatError(
                f"saved stream state {str(path)!r}: run {run} cannot be read ({exc}); the state is damaged. "
                "Start the stream again without --resume.",
                path=str(run_dir),
            ) from exc
        runs.append((arrays, meta))
    return info, runs
