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
import re
import shutil
import uuid
from pathlib import Path
from typing import Any, Iterator, cast

from topicflow.errors import DiskFullError, LockedError, StoreExistsError
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


def final_of_temporary(path: Path) -> Path:
    """The path a :func:`temporary_sibling` stands for (``d/.name.tmp-<hex>`` -> ``d/name``); others as given.

    Parameters
    ----------
    path : Path

    Returns
    -------
    Path
    """
    path = Path(path)
    while match := re.fullmatch(r"\.(.+)\.[a-z]+-[0-9a-f]{12}", path.name):  # a temporary of a temporary too
        path = path.with_name(match.group(1))
    return path


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


#: Error numbers of a write that found no room: the filesystem is full, or the user's quota is.
DISK_FULL_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


def is_disk_full(exc: BaseException) -> bool:
    """Whether ``exc`` is a write that ran out of space (``ENOSPC``) or quota (``EDQUOT``).

    Parameters
    ----------
    exc : BaseException

    Returns
    -------
    bool
        True also for a :class:`~topicflow.errors.DiskFullError` (it keeps the error number).
    """
    return isinstance(exc, OSError) and exc.errno in DISK_FULL_ERRNOS


def disk_full_error(exc: OSError, path: object, *, what: str, unchanged: str) -> DiskFullError:
    """The :class:`~topicflow.errors.DiskFullError` for ``exc``, met while writing the ``what`` at ``path``.

    Parameters
    ----------
    exc : OSError
        The write's error (``ENOSPC`` or ``EDQUOT``), or an inner ``DiskFullError`` to re-word.
    path : path or str
        The output being written: the message says to free space on the filesystem holding it.
    what : str
        What ``path`` is, a noun (``"model"``, ``"stream state"``, ...).
    unchanged : str
        What was left as it was, a sentence (``"nothing was changed: version 3 is still current."``).

    Returns
    -------
    DiskFullError
        ``path``, ``failed`` (the file whose write failed) and ``errno`` set.
    """
    failed = getattr(exc, "failed", None) if isinstance(exc, DiskFullError) else exc.filename
    failed = None if failed is None else os.fsdecode(failed)
    reason = "the disk quota is exhausted" if exc.errno == errno.EDQUOT else "no space left on device"
    at = f" (writing {failed!r})" if failed and failed != str(path) else ""
    return DiskFullError(
        f"{what} {str(path)!r} could not be written: {reason}{at}. Free space on the filesystem holding "
        f"{str(path)!r}, then rerun; {unchanged}",
        path=str(path), failed=failed, error_number=exc.errno)


@contextlib.contextmanager
def disk_full_guard(path: object, *, what: str, unchanged: str) -> Iterator[None]:
    """Turn a write that runs out of space inside the block into a :class:`~topicflow.errors.DiskFullError`.

    Only the error is translated: cleaning up what the block left is the caller's job (its own
    ``except`` around the temporary output, inside this guard or outside it). Guards nest: an outer
    one re-words an inner one's error with its own ``path``, ``what`` and ``unchanged``, keeping the
    failed file.

    Parameters
    ----------
    path : path or str
        The output being written.
    what : str
        What it is, a noun for the message.
    unchanged : str
        What is left as it was when the write fails, a sentence for the message.

    Yields
    ------
    None

    Raises
    ------
    DiskFullError
        The block raised an ``OSError`` with ``errno`` ``ENOSPC`` or ``EDQUOT``.
    """
    try:
        yield
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        raise disk_full_error(exc, path, what=what, unchanged=unchanged) from exc


@contextlib.contextmanager
def atomic_output_file(path: Path) -> Iterator[Path]:
    """A temporary sibling of ``path`` to write; renamed to ``path`` when the block ends, deleted if it fails.

    Parameters
    ----------
    path : Path
        The file to produce.

    Yields
    ------
    Path
        Where to write; nothing is left of it when the block raises.
    """
    path = Path(path)
    tmp = temporary_sibling(path)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_directory(path.parent)


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary sibling, fsync, then rename.

    On failure the temporary file is removed and ``path`` is as before; a full disk raises
    :class:`~topicflow.errors.DiskFullError` naming ``path``.
    """
    path = Path(path)
    with disk_full_guard(path, what="file", unchanged=f"{path.name!r} was left as it was."):
        with atomic_output_file(path) as tmp, open(tmp, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())


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


def commit_directory(tmp: Path, final: Path, *, overwrite: bool, what: str = "store") -> None:
    """Move a finished directory into place; an existing one is replaced only with ``overwrite``.

    The old directory is renamed aside first and deleted after the new one is in place, so at
    every moment ``final`` is either the complete old directory or the complete new one. ``what``
    names the output in the error raised when ``final`` appeared meanwhile (:func:`check_output_path`).
    """
    check_output_path(final, overwrite=overwrite, what=what)
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
