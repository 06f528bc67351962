"""Scratch storage of each shard's gamma between batch-VB iterations (warm starts).

Keeping gamma in cluster memory would grow with the corpus; here each shard's gamma lives in a
``.npy`` file in the fit's scratch directory, which every worker reaches: a local directory beside the
corpus store (or under ``topicflow.scratch-dir``), or, for a store or a ``scratch-dir`` on object
storage, a prefix there (:func:`topicflow.io.outputs.assignment_layer.scratch_location` chooses, as
for the Gibbs and PCVB0 state), so that workers on other hosts need no shared disk. Files are
versioned by iteration (``iter-<t>/<shard>.npy``): iteration t reads t - 1 and writes t, so a task
that the scheduler recomputes after a worker is lost reads the same input and writes the same output.
Every write is atomic: a temporary file, then rename, on a local disk; one PUT of the whole object on
object storage, where a reader sees the old object, the new one or none, never a part.
"""
from __future__ import annotations

import io
import os
import shutil
import tempfile
import uuid
from pathlib import Path

import numpy as np

from topicflow.io.storage import (
    Location,
    StoragePath,
    filesystem,
    is_url,
    remove_prefix,
    url_of,
    write_object,
)


def scratch_directory(store: Path | StoragePath, token: str, base: str | None = None) -> Path:
    """A fresh local scratch directory for one fit: under ``base`` if given, else beside the store.

    The local case of :func:`topicflow.io.outputs.assignment_layer.scratch_location`, which the fits
    call and which returns a prefix on object storage instead when ``base`` is a URL, or when there is
    no ``base`` and the store is on object storage. Called directly for a store on object storage
    without ``base``, this falls back to the system's temporary directory, which only the workers of a
    local cluster share.
    """
    if base:
        parent = Path(base)
    elif is_url(store):
        parent = Path(tempfile.gettempdir())
    else:
        parent = Path(str(store)).resolve().parent
    path = parent / f".topicflow-scratch-{token[:12]}-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    return path


def _remote(directory: str | Path | StoragePath) -> StoragePath | None:
    """``directory`` as a :class:`~topicflow.io.storage.StoragePath` when it is a URL, else None."""
    url = url_of(directory)
    return None if url is None else StoragePath(url)


def read_gamma(directory: str | Path | StoragePath, iteration: int, shard_id: str) -> np.ndarray | None:
    """Gamma written at ``iteration`` for ``shard_id``, or None (first iteration, or no file).

    Parameters
    ----------
    directory : str, Path or StoragePath
        Scratch directory of the fit: a local directory or a URL prefix.
    iteration : int
    shard_id : str

    Returns
    -------
    ndarray of shape (n_docs_in_shard, n_topics), float64, or None
    """
    if iteration < 0:
        return None
    remote = _remote(directory)
    if remote is not None:
        fs, inner = filesystem((remote / f"iter-{iteration}" / f"{shard_id}.npy").url)
        try:
            data = fs.cat_file(inner)  # a GET: never an answer from a cached listing
        except FileNotFoundError:
            return None
        return np.load(io.BytesIO(bytes(data)), allow_pickle=False)
    path = Path(str(directory)) / f"iter-{iteration}" / f"{shard_id}.npy"
    if not path.is_file():
        return None
    return np.load(path, allow_pickle=False)


def write_gamma(directory: str | Path | StoragePath, iteration: int, shard_id: str, gamma: np.ndarray) -> None:
    """Save the gamma of ``shard_id`` at ``iteration`` atomically.

    Parameters
    ----------
    directory : str, Path or StoragePath
        Scratch directory of the fit (a local directory or a URL prefix).
    iteration : int
        Iteration that computed ``gamma``; the file goes to ``iter-<iteration>/``.
    shard_id : str
        Corpus shard the rows belong to.
    gamma : ndarray of shape (n_docs_in_shard, n_topics)
        Variational document-topic parameters; stored as float64.
    """
    values = np.ascontiguousarray(gamma, dtype=np.float64)
    remote = _remote(directory)
    if remote is not None:  # one PUT: the object appears whole
        buffer = io.BytesIO()
        np.save(buffer, values, allow_pickle=False)
        write_object((remote / f"iter-{iteration}" / f"{shard_id}.npy").url, buffer.getvalue())
        return
    folder = Path(str(directory)) / f"iter-{iteration}"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{shard_id}.{uuid.uuid4().hex[:8]}.npy"
    np.save(tmp, values, allow_pickle=False)
    os.replace(tmp, folder / f"{shard_id}.npy")


def _iterations(directory: str | Path | StoragePath) -> list[tuple[int, Location]]:
    """The ``iter-<t>`` folders (or prefixes) of a scratch directory, with their t."""
    remote = _remote(directory)
    if remote is not None:
        fs, inner = filesystem(remote.url)
        try:  # refresh: another process (the workers) wrote them, so a cached listing is stale
            names = [str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(inner, detail=False, refresh=True)]
        except FileNotFoundError:
            names = []
        children: list[Location] = [remote / name for name in names]
    else:
        children = list(Path(str(directory)).glob("iter-*"))
    return [(int(child.name.split("-", 1)[1]), child) for child in children
            if child.name.startswith("iter-") and child.name.split("-", 1)[1].isdigit()]


def drop_iterations_before(directory: str | Path | StoragePath, iteration: int) -> None:
    """Delete the gamma of iterations older than ``iteration`` (they are never read again).

    Parameters
    ----------
    directory : str, Path or StoragePath
    iteration : int
    """
    for number, child in _iterations(directory):
        if number < iteration:
            _remove(child)


def _remove(location: Location) -> None:
    if isinstance(location, StoragePath):
        remove_prefix(location.url)
    else:
        shutil.rmtree(location, ignore_errors=True)


def remove_scratch(directory: str | Path | StoragePath) -> None:
    """Delete the scratch directory of a fit and everything in it; missing files are ignored.

    Parameters
    ----------
    directory : str, Path or StoragePath
        The fit's scratch directory: a local directory or a URL prefix.
    """
    remote = _remote(directory)
    _remove(remote if remote is not None else Path(str(directory)))
