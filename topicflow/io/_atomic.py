"""Atomic file and directory writes, and an advisory file lock.

Everything topicflow writes goes to a temporary sibling first and is moved into place with
``os.replace``, so a crash leaves either the old content or the new, never a half-written file.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterator, cast

from topicflow.errors import LockedError, StoreExistsError
from topicflow.io.storage import (
    StoragePath,
    check_bucket,
    is_url,
    open_input,
    require_local,
    url_of,
)


def temporary_sibling(path: Path, tag: str = "tmp") -> Path:
    """A fresh path beside ``path`` whose name marks it as unfinished work."""
    return path.with_name(f".{path.name}.{tag}-{uuid.uuid4().hex[:12]}")


def fsync_directory(path: Path) -> None:
    """Flush the directory entry of ``path`` to disk, so a rename inside it survives a crash.

    Parameters
    ----------
    path : Path
        An existing directory.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling, fsync, then rename."""
    path = Path(path)
    tmp = temporary_sibling(path)
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def atomic_write_json(path: Path, payload: Any) -> None:
    """Write ``payload`` as indented, key-sorted JSON atomically."""
    text = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    atomic_write_bytes(Path(path), text.encode("utf-8"))


def read_json(path: Path | StoragePath) -> Any:
    """Read a UTF-8 JSON file, local or on object storage.

    Parameters
    ----------
    path : Path or StoragePath
        File to read.

    Returns
    -------
    Any
        The decoded JSON value.
    """
    if is_url(path):
        with open_input(path) as binary:
            return json.load(binary)
    with open(cast(Path, path), encoding="utf-8") as handle:
        return json.load(handle)


#: Where each kind of output is given on the command line, for the "not on object storage yet" message.
OUTPUT_OPTIONS = {"model": "fit --model", "doc-topics output": "fit --doc-topics",
                  "document-topic output": "infer --out", "report": "report --out",
                  "stream output": "stream --out", "store": "--out", "prior tree": "tree build --out",
                  "G0": "g0 train --out"}


def check_output_path(path: Path, *, overwrite: bool, what: str = "store") -> None:
    """Refuse to write over an existing path unless ``overwrite`` was asked for.

    Also refuses URLs (and local paths that are URLs mangled by ``pathlib``, ``s3:/bucket/...``), except
    for a model (``what="model"``), which may be on object storage: the other outputs that reach this
    check are not written to object storage yet (docs/storage.md).
    """
    url = url_of(path)
    if url is not None and what == "model":  # models may live on object storage (docs/storage.md)
        check_bucket(StoragePath(url))
        if (StoragePath(url) / "versions.json").is_file() and not overwrite:  # models.store.VERSIONS_JSON
            raise StoreExistsError(
                f"model path {url!r} exists already; choose another path or pass --overwrite "
                "(overwrite=True) to replace it once the new model is complete.", path=url)
        return
    require_local(path, what=what, option=OUTPUT_OPTIONS.get(what, "--out"))
    if path.exists() and not overwrite:
        raise StoreExistsError(
            f"{what} path {str(path)!r} exists already; choose another path or pass --overwrite "
            f"(overwrite=True) to replace it once the new {what} is complete.",
            path=str(path),
        )


def commit_directory(tmp: Path, final: Path, *, overwrite: bool) -> None:
    """Move a finished directory into place; an existing one is replaced only with ``overwrite``.

    The old directory is renamed aside first and deleted after the new one is in place, so at
    every moment ``final`` is either the complete old directory or the complete new one.
    """
    check_output_path(final, overwrite=overwrite)
    aside = None
    if final.exists():
        aside = temporary_sibling(final, "old")
        os.replace(final, aside)
    os.replace(tmp, final)
    fsync_directory(final.parent)
    if aside is not None:
        shutil.rmtree(aside, ignore_errors=True)


@contextlib.contextmanager
def exclusive_lock(path: Path, *, what: str) -> Iterator[None]:
    """Hold an advisory exclusive lock on ``path`` (created if missing) or fail at once.

    Parameters
    ----------
    path : Path
        Lock file; created if missing and never deleted.
    what : str
        What the lock protects, named in the error message.

    Yields
    ------
    None
        The lock is held while the ``with`` block runs.

    Raises
    ------
    LockedError
        If another process holds the lock.
    """
    path = Path(path)
    handle = open(path, "a+")
    try:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            if exc.errno in (errno.EAGAIN, errno.EACCES):
                raise LockedError(
                    f"{what} is locked by another topicflow process (lock file {str(path)!r}); "
                    "wait for it to finish. If no such process runs, the lock is released "
                    "automatically; nothing needs deleting.",
                    path=str(path),
                ) from exc
            raise
        yield
    finally:
        handle.close()
