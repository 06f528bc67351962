"""Scratch storage of each shard's gamma between batch-VB iterations (warm starts).

Keeping gamma in cluster memory would grow with the corpus; here each shard's gamma lives in a
``.npy`` file on a filesystem the workers share (by default beside the corpus store). Files are
versioned by iteration (``iter-<t>/<shard>.npy``): iteration t reads t - 1 and writes t, so a task
that the scheduler recomputes after a worker is lost reads the same input and writes the same output.
Every write is atomic (temporary file, then rename).
"""
from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from pathlib import Path

import numpy as np

from topicflow.io.storage import StoragePath, is_url


def scratch_directory(store: Path | StoragePath, token: str, base: str | None = None) -> Path:
    """A fresh scratch directory for one fit: under ``base`` if given, else beside the store.

    A store on object storage has no local "beside": the default is then the system's temporary
    directory, which only the workers of a local cluster share (set ``topicflow.scratch-dir`` to a
    shared filesystem on a multi-host cluster, or fit without warm starts).
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


def read_gamma(directory: str, iteration: int, shard_id: str) -> np.ndarray | None:
    """Gamma written at ``iteration`` for ``shard_id``, or None (first iteration, or no file)."""
    if iteration < 0:
        return None
    path = Path(directory) / f"iter-{iteration}" / f"{shard_id}.npy"
    if not path.is_file():
        return None
    return np.load(path, allow_pickle=False)


def write_gamma(directory: str, iteration: int, shard_id: str, gamma: np.ndarray) -> None:
    """Save the gamma of ``shard_id`` at ``iteration`` atomically (temporary file, then rename).

    Parameters
    ----------
    directory : str
        Scratch directory of the fit (see :func:`scratch_directory`).
    iteration : int
        Iteration that computed ``gamma``; the file goes to ``iter-<iteration>/``.
    shard_id : str
        Corpus shard the rows belong to.
    gamma : ndarray of shape (n_docs_in_shard, n_topics)
        Variational document-topic parameters; stored as float64.
    """
    folder = Path(directory) / f"iter-{iteration}"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{shard_id}.{uuid.uuid4().hex[:8]}.npy"
    np.save(tmp, np.ascontiguousarray(gamma, dtype=np.float64), allow_pickle=False)
    os.replace(tmp, folder / f"{shard_id}.npy")


def drop_iterations_before(directory: Path, iteration: int) -> None:
    """Delete the gamma of iterations older than ``iteration`` (they are never read again)."""
    for child in Path(directory).glob("iter-*"):
        if int(child.name.split("-", 1)[1]) < iteration:
            shutil.rmtree(child, ignore_errors=True)


def remove_scratch(directory: Path) -> None:
    """Delete the scratch directory of a fit and everything in it; missing files are ignored.

    Parameters
    ----------
    directory : Path
        Directory returned by :func:`scratch_directory`.
    """
    shutil.rmtree(directory, ignore_errors=True)
