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

On object storage (a checkpoint on a URL, or a store on a URL without a checkpoint:
:func:`~topicflow.io.outputs.assignment_layer.scratch_location`) the tasks write q straight to the
object store, so that workers on other hosts need no shared disk. There is no rename there: each
attempt fills its own array ``iter-<t>/<shard_id>.attempt-<id>`` and commits it by putting the small
object ``iter-<t>/<shard_id>.json`` that names it (one PUT, atomic); readers follow that object, and an
array no such object names is an abandoned attempt, removed with its iteration. The checkpoint's
``state-<t>`` objects are put before ``latest.json``, which is put last.
"""
from __future__ import annotations

import io
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
from topicflow.io.outputs.assignment_layer import remove_run, scratch_location
from topicflow.io.outputs.gamma_scratch import scratch_directory
from topicflow.io.storage import (
    Location,
    StoragePath,
    filesystem,
    list_files,
    remove_prefix,
    url_of,
    write_object,
    zarr_store,
)

__all__ = ["create_q", "drop_iterations", "drop_iterations_before", "open_q", "q_exists", "q_path",
           "read_checkpoint_state", "remove_q", "remove_scratch", "scratch_directory", "scratch_location",
           "write_checkpoint_state"]


def _location(directory: str | Path | StoragePath) -> Location:
    """``directory`` as a :class:`~pathlib.Path`, or a :class:`~topicflow.io.storage.StoragePath` for a URL."""
    if isinstance(directory, StoragePath) or url_of(directory) is not None:
        return StoragePath(str(url_of(directory)))
    return Path(directory)


def _get(location: StoragePath) -> bytes:
    """One object's bytes (a GET: never an answer from a cached listing); FileNotFoundError if absent."""
    fs, inner = filesystem(location.url)
    return bytes(fs.cat_file(inner))

#: Rows of q per zarr chunk.
CHUNK_ROWS = 4096


def q_path(directory: str | Path | StoragePath, iteration: int, shard_id: str) -> Location:
    """Where the q of ``shard_id`` after ``iteration`` lives (iteration -1: the random start).

    Parameters
    ----------
    directory : str, Path or StoragePath
        The scratch (or checkpoint) directory of the fit.
    iteration : int
    shard_id : str

    Returns
    -------
    Path or StoragePath
        On object storage, the name of the commit object without its ``.json`` (see the module docstring).
    """
    return _location(directory) / "q.zarr" / f"iter-{iteration}" / shard_id


def q_exists(directory: str | Path | StoragePath, iteration: int, shard_id: str) -> bool:
    """Whether the q of ``shard_id`` after ``iteration`` was committed.

    Parameters
    ----------
    directory : str, Path or StoragePath
    iteration : int
    shard_id : str

    Returns
    -------
    bool
    """
    path = q_path(directory, iteration, shard_id)
    if isinstance(path, StoragePath):
        try:
            _get(StoragePath(path.url + ".json"))
        except FileNotFoundError:
            return False
        return True
    return path.exists()


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

    def __init__(self, directory: str | Path | StoragePath, iteration: int, shard_id: str, n_rows: int,
                 truncation: int, dtype: str) -> None:
        self.final = q_path(directory, iteration, shard_id)
        self.tmp: Location
        if isinstance(self.final, StoragePath):  # this attempt's own array; commit() names it
            self.tmp = StoragePath(f"{self.final.url}.attempt-{uuid.uuid4().hex[:12]}")
        else:
            self.final.parent.mkdir(parents=True, exist_ok=True)
            self.tmp = self.final.with_name(f".{shard_id}.tmp-{uuid.uuid4().hex[:12]}")
        self.array = zarr.create_array(zarr_store(self.tmp), shape=(n_rows, truncation), dtype=dtype,
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
        """Move the array under its final name (replacing one a recomputed task wrote before).

        On object storage: put the commit object naming this attempt's array (one PUT).
        """
        if isinstance(self.final, StoragePath) and isinstance(self.tmp, StoragePath):
            write_object(self.final.url + ".json", json.dumps({"array": self.tmp.name}).encode())
            return
        assert isinstance(self.final, Path) and isinstance(self.tmp, Path)
        if self.final.exists():
            shutil.rmtree(self.final, ignore_errors=True)
        os.replace(self.tmp, self.final)

    def abort(self) -> None:
        """Remove the temporary array."""
        if isinstance(self.tmp, StoragePath):
            remove_prefix(self.tmp.url)
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)


def create_q(directory: str | Path | StoragePath, iteration: int, shard_id: str, n_rows: int, truncation: int,
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


def open_q(directory: str | Path | StoragePath, iteration: int, shard_id: str, *, n_rows: int, truncation: int) -> zarr.Array:
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
        if isinstance(path, StoragePath):  # the commit object names the attempt's array
            name = json.loads(_get(StoragePath(path.url + ".json")))["array"]
            array = zarr.open_array(zarr_store(path.parent / str(name), read_only=True), mode="r")
        else:
            array = zarr.open_array(str(path), mode="r")
    except Exception as exc:
        raise ModelFormatError(f"the PCVB0 assignments {str(path)!r} are missing or damaged ({exc}); delete "
                               f"{str(directory)!r} and fit again.", path=str(path)) from exc
    if tuple(array.shape) != (n_rows, truncation):
        raise ModelFormatError(f"the PCVB0 assignments {str(path)!r} have shape {tuple(array.shape)}, expected "
                               f"{(n_rows, truncation)}; delete {str(directory)!r} and fit again.",
                               path=str(path))
    return array


def drop_iterations(directory: str | Path | StoragePath, before: int, keep: int | None = None) -> None:
    """Delete the q of iterations older than ``before`` (they are never read again), except ``keep``.

    Parameters
    ----------
    directory : str, Path or StoragePath
    before : int
    keep : int, optional
        An older iteration to keep (the one a checkpoint names).
    """
    root = _location(directory) / "q.zarr"
    if isinstance(root, StoragePath):
        fs, inner = filesystem(root.url)
        try:
            names = [str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(inner, detail=False, refresh=True)]
        except FileNotFoundError:
            names = []
        children: list[Location] = [root / name for name in names if name.startswith("iter-")]
    else:
        children = list(root.glob("iter-*"))
    for child in children:
        number = int(child.name.split("-", 1)[1])
        if number < before and number != keep:
            remove_run(child)


def drop_iterations_before(directory: str | Path | StoragePath, iteration: int) -> None:
    """Delete the q of iterations older than ``iteration`` (they are never read again).

    Parameters
    ----------
    directory : str, Path or StoragePath
    iteration : int
    """
    drop_iterations(directory, iteration)


def remove_q(directory: str | Path | StoragePath) -> None:
    """Delete every iteration's q of a scratch or checkpoint directory (a finished fit's checkpoint keeps its state).

    Parameters
    ----------
    directory : str, Path or StoragePath
    """
    remove_run(_location(directory) / "q.zarr")


def remove_scratch(directory: str | Path | StoragePath) -> None:
    """Delete a fit's scratch directory and everything in it; missing files are ignored.

    Parameters
    ----------
    directory : str, Path or StoragePath
    """
    remove_run(_location(directory))


# ----------------------------------------------------------------------------- checkpoints


def write_checkpoint_state(directory: str | Path | StoragePath, iteration: int, arrays: Mapping[str, np.ndarray],
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
    location = _location(directory)
    if isinstance(location, StoragePath):
        _write_remote_state(location, iteration, arrays, record)
        return
    directory = location
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


def read_checkpoint_state(directory: str | Path | StoragePath) -> tuple[int, dict[str, np.ndarray], dict[str, Any]] | None:
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
    location = _location(directory)
    if isinstance(location, StoragePath):
        return _read_remote_state(location)
    directory = location
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


def _write_remote_state(location: StoragePath, iteration: int, arrays: Mapping[str, np.ndarray],
                        record: Mapping[str, Any]) -> None:
    """:func:`write_checkpoint_state` on object storage: the state's objects, ``latest.json`` (one PUT), clean-up."""
    buffer = io.BytesIO()
    payload: dict[str, Any] = {name: np.asarray(value) for name, value in arrays.items()}
    np.savez(buffer, **payload)
    write_object(f"{location.url}/state-{iteration}.npz", buffer.getvalue())
    write_object(f"{location.url}/state-{iteration}.json", json.dumps(dict(record), sort_keys=True).encode())
    write_object(f"{location.url}/latest.json", json.dumps({"iteration": int(iteration)}).encode())
    fs, inner = filesystem(location.url)
    for name in list_files(location.url):
        if name.startswith("state-") and name.split(".", 1)[0] != f"state-{iteration}":
            fs.rm_file(f"{inner}/{name}")


def _read_remote_state(location: StoragePath) -> tuple[int, dict[str, np.ndarray], dict[str, Any]] | None:
    """:func:`read_checkpoint_state` on object storage."""
    try:
        payload = json.loads(_get(location / "latest.json"))
    except FileNotFoundError:
        return None
    except ValueError as exc:
        raise ModelFormatError(f"the PCVB0 checkpoint {location.url!r} is damaged ({exc}); delete it and fit "
                               "again.", path=location.url) from exc
    if not isinstance(payload, dict) or "iteration" not in payload:
        raise InvalidParameterError(f"{location.url!r} is not a PCVB0 checkpoint; pass another checkpoint path "
                                    "or delete it.", path=location.url)
    try:
        iteration = int(payload["iteration"])
        with np.load(io.BytesIO(_get(location / f"state-{iteration}.npz")), allow_pickle=False) as data:
            arrays = {name: np.array(data[name]) for name in data.files}
        record = json.loads(_get(location / f"state-{iteration}.json"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelFormatError(f"the PCVB0 checkpoint {location.url!r} is damaged ({exc}); delete it and fit "
                               "again.", path=location.url) from exc
    return iteration, arrays, record
