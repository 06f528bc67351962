"""Out-of-core storage of PCVB0's per-token q between iterations, and PCVB0 checkpoints.

Batch PCVB0 keeps q(z_di) for every token: O(tokens x T) numbers, which do not fit in memory on a
large corpus. Each shard's q is one zarr array ``q.zarr/iter-<t>/<shard_id>`` of shape (units, T)
(units: tokens, or (document, distinct term) pairs with clumping), chunked by rows and written
uncompressed (q of a token is dense and close to random in its low bits, so a codec costs time and
saves little). Iteration t reads ``iter-<t-1>`` and writes ``iter-<t>``, so a task that the scheduler
recomputes after a worker is lost reads the same input and writes the same output; an array is
filled under a temporary name and renamed into place when complete, so a crash never leaves a
half-written array under its final name. Tasks read and write a shard's q in slices of documents, so a
worker holds one slice of q at a time, never a whole shard's.

Scratch lives beside the corpus store (or under the ``scratch-dir`` setting) and is removed when the
fit ends, whether it succeeds or fails. With a checkpoint, it lives inside the checkpoint directory
instead (``<checkpoint>/q.zarr``) together with ``state-<t>.npz`` and ``latest.json`` naming the last
iteration whose q and state are complete, so that a resumed fit continues from there.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io._atomic import atomic_write_bytes, atomic_write_json, read_json
from topicflow.io.outputs.gamma_scratch import scratch_directory

__all__ = ["create_q", "drop_iterations_before", "open_q", "q_path", "read_checkpoint_state",
           "remove_scratch", "scratch_directory", "write_checkpoint_state"]

#: Rows of q per zarr chunk.
CHUNK_ROWS = 4096


def q_path(directory: str | Path, iteration: int, shard_id: str) -> Path:
    """Where the q of ``shard_id`` after ``iteration`` lives (iteration -1: the random start).

    Parameters
    ----------
    directory : str or Path
        The scratch (or checkpoint) directory of the fit.
    iteration : int
    shard_id : str

    Returns
    -------
    Path
    """
    return Path(directory) / "q.zarr" / f"iter-{iteration}" / shard_id


class QWriter:
    """A shard's q of one iteration being written; :meth:`commit` moves it under its final name.

    Parameters
    ----------
    directory : str or Path
    iteration : int
    shard_id : str
    n_rows, truncation : int
    dtype : str
        "float32" or "float64".
    """

    def __init__(self, directory: str | Path, iteration: int, shard_id: str, n_rows: int, truncation: int,
                 dtype: str) -> None:
        self.final = q_path(directory, iteration, shard_id)
        self.final.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.final.with_name(f".{shard_id}.tmp-{uuid.uuid4().hex[:12]}")
        self.array = zarr.create_array(str(self.tmp), shape=(n_rows, truncation), dtype=dtype,
                                       chunks=(max(1, min(CHUNK_ROWS, n_rows)), max(1, truncation)),
                                       compressors=None, fill_value=0.0)

    def write(self, start: int, values: np.ndarray) -> None:
        """Write rows ``start:start + len(values)``.

        Parameters
        ----------
        start : int
        values : ndarray of shape (rows, T)
        """
        if values.shape[0]:
            self.array[start:start + values.shape[0]] = values

    def commit(self) -> None:
        """Move the array under its final name (replacing one a recomputed task wrote before)."""
        if self.final.exists():
            shutil.rmtree(self.final, ignore_errors=True)
        os.replace(self.tmp, self.final)

    def abort(self) -> None:
        """Remove the temporary array."""
        shutil.rmtree(self.tmp, ignore_errors=True)


def create_q(directory: str | Path, iteration: int, shard_id: str, n_rows: int, truncation: int,
             dtype: str) -> QWriter:
    """Start writing a shard's q of ``iteration`` (see :class:`QWriter`).

    Parameters
    ----------
    directory : str or Path
    iteration : int
    shard_id : str
    n_rows, truncation : int
    dtype : str

    Returns
    -------
    QWriter
    """
    return QWriter(directory, iteration, shard_id, n_rows, truncation, dtype)


def open_q(directory: str | Path, iteration: int, shard_id: str, *, n_rows: int, truncation: int) -> zarr.Array:
    """The q of ``shard_id`` after ``iteration``, opened for reading (rows are read by slicing).

    Parameters
    ----------
    directory : str or Path
    iteration : int
    shard_id : str
    n_rows, truncation : int
        The shape the caller expects.

    Returns
    -------
    zarr.Array

    Raises
    ------
    ModelFormatError
        The array is missing or has another shape (a scratch or checkpoint directory damaged or
        written for another corpus); the message says to delete it.
    """
    path = q_path(directory, iteration, shard_id)
    try:
        array = zarr.open_array(str(path), mode="r")
    except Exception as exc:
        raise ModelFormatError(f"the PCVB0 assignments {str(path)!r} are missing or damaged ({exc}); delete "
                               f"{str(Path(directory))!r} and fit again.", path=str(path)) from exc
    if tuple(array.shape) != (n_rows, truncation):
        raise ModelFormatError(f"the PCVB0 assignments {str(path)!r} have shape {tuple(array.shape)}, expected "
                               f"{(n_rows, truncation)}; delete {str(Path(directory))!r} and fit again.",
                               path=str(path))
    return array


def drop_iterations_before(directory: str | Path, iteration: int) -> None:
    """Delete the q of iterations older than ``iteration`` (they are never read again).

    Parameters
    ----------
    directory : str or Path
    iteration : int
    """
    root = Path(directory) / "q.zarr"
    for child in root.glob("iter-*"):
        if int(child.name.split("-", 1)[1]) < iteration:
            shutil.rmtree(child, ignore_errors=True)


def remove_scratch(directory: str | Path) -> None:
    """Delete a fit's scratch directory and everything in it; missing files are ignored.

    Parameters
    ----------
    directory : str or Path
    """
    shutil.rmtree(directory, ignore_errors=True)


# ----------------------------------------------------------------------------- checkpoints


def write_checkpoint_state(directory: str | Path, iteration: int, arrays: Mapping[str, np.ndarray],
                           record: Mapping[str, Any]) -> None:
    """Record that ``iteration`` is complete: its state arrays, then ``latest.json`` naming it.

    The q of ``iteration`` must already be committed. Written atomically: a crash leaves the previous
    ``latest.json``, which still names complete files (older q and states are dropped by the caller
    only after this returns).

    Parameters
    ----------
    directory : str or Path
        The checkpoint directory.
    iteration : int
    arrays : mapping of str to ndarray
        The state's arrays (``HDPState.to_arrays``).
    record : mapping
        JSON-able: the state's scalars, the trace and the fingerprint of the fit.
    """
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"state-{iteration}.npz"
    tmp = directory / f".state-{iteration}.{uuid.uuid4().hex[:8]}.npz"
    payload: dict[str, Any] = {name: np.asarray(value) for name, value in arrays.items()}
    np.savez(tmp, **payload)
    os.replace(tmp, path)
    atomic_write_bytes(directory / f"state-{iteration}.json", json.dumps(dict(record), sort_keys=True).encode())
    atomic_write_json(directory / "latest.json", {"iteration": int(iteration)})
    for old in directory.glob("state-*.*"):
        stem = old.name.split(".", 1)[0]
        if stem != f"state-{iteration}":
            old.unlink(missing_ok=True)


def read_checkpoint_state(directory: str | Path) -> tuple[int, dict[str, np.ndarray], dict[str, Any]] | None:
    """The last complete iteration of a PCVB0 checkpoint, or None when there is none.

    Parameters
    ----------
    directory : str or Path

    Returns
    -------
    (iteration, arrays, record) or None

    Raises
    ------
    ModelFormatError
        ``latest.json`` names files that are missing or unreadable; the message says to delete the
        checkpoint.
    InvalidParameterError
        The directory holds another kind of checkpoint.
    """
    directory = Path(directory)
    latest = directory / "latest.json"
    if not latest.exists():
        return None
    try:
        payload = read_json(latest)
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"the PCVB0 checkpoint {str(directory)!r} is damaged ({exc}); delete it and fit "
                               "again.", path=str(directory)) from exc
    if not isinstance(payload, dict) or "iteration" not in payload:
        raise InvalidParameterError(f"{str(directory)!r} is not a PCVB0 checkpoint; pass another checkpoint path "
                                    "or delete it.", path=str(directory))
    try:
        iteration = int(payload["iteration"])
        with np.load(directory / f"state-{iteration}.npz", allow_pickle=False) as data:
            arrays = {name: np.array(data[name]) for name in data.files}
        record = read_json(directory / f"state-{iteration}.json")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelFormatError(f"the PCVB0 checkpoint {str(directory)!r} is damaged ({exc}); delete it and fit "
                               "again.", path=str(directory)) from exc
    return iteration, arrays, record
