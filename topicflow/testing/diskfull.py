"""A full disk for tests: ``OSError(ENOSPC)`` at the Nth write of a file under a directory.

Every file topicflow writes, whichever library writes it (its own atomic writes, zarr's
``LocalStore``, ``np.savez`` through ``zipfile``, ``Path.write_bytes``), is opened with
:func:`io.open` (``builtins.open`` is the same function, and ``pathlib`` and ``zipfile`` call it
through the ``io`` module). :func:`disk_full` replaces that one function for the duration of a
``with`` block: a file opened for writing under ``under`` comes back wrapped, and each call of its
``write``/``writelines`` counts as one write. The ``at``-th such write (counted over all files under
``under``, from 1, in every thread of this process) raises ``OSError(errno.ENOSPC, ..., filename)``
before writing anything, as the kernel does when a filesystem fills up. With ``at=None`` nothing
fails and the block only counts, which is how a test learns how many writes a command makes and so
which N are the first, a middle and the last one.

The fault is a function of the write count only (never of time), so it lands at the same place on
every run. It works in threads of this process (the threaded and synchronous Dask schedulers, a
``LocalCluster(processes=False)``), not in worker processes.

Writes that bypass Python file objects (``os.write`` on a raw descriptor, ``os.sendfile`` inside
``shutil.copyfile``) are not counted; topicflow's writers do not use them (``shutil.copytree`` of the
legacy-model conversion does, and is not covered).
"""
from __future__ import annotations

import builtins
import contextlib
import errno
import io
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

__all__ = ["WriteCounter", "disk_full"]

_WRITE_MODES = frozenset("wax+")


@dataclass
class WriteCounter:
    """What :func:`disk_full` saw: the writes under the watched directory, and the fault it raised.

    Attributes
    ----------
    under : str
        The watched directory (resolved).
    at : frozenset of int
        The write numbers (from 1) that fail.
    error_number : int
        ``errno.ENOSPC`` or ``errno.EDQUOT``.
    writes : int
        Write calls counted so far (the failed ones included).
    files : list of str
        The file of each counted write, in order.
    failed : list of str
        The files whose write raised.
    """

    under: str
    at: frozenset[int]
    error_number: int
    writes: int = 0
    files: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def count(self, filename: str) -> None:
        """Count one write to ``filename``; raise the injected error if it is one of ``at``.

        Parameters
        ----------
        filename : str

        Raises
        ------
        OSError
            With ``errno`` :attr:`error_number`, on the writes numbered in :attr:`at`.
        """
        with self.lock:
            self.writes += 1
            self.files.append(filename)
            fail = self.writes in self.at
            if fail:
                self.failed.append(filename)
        if fail:
            raise OSError(self.error_number, os.strerror(self.error_number), filename)


class _FullFile:
    """A file object opened for writing whose writes go through a :class:`WriteCounter` first."""

    def __init__(self, handle: Any, filename: str, counter: WriteCounter) -> None:
        self._handle = handle
        self._filename = filename
        self._counter = counter

    def write(self, data: Any) -> Any:
        self._counter.count(self._filename)
        return self._handle.write(data)

    def writelines(self, lines: Iterable[Any]) -> None:
        self._counter.count(self._filename)
        self._handle.writelines(lines)

    def __enter__(self) -> _FullFile:
        self._handle.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._handle.__exit__(*exc)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def _is_under(filename: str, under: str) -> bool:
    resolved = os.path.realpath(os.path.abspath(filename))
    return resolved == under or resolved.startswith(under + os.sep)


def _watching_open(original: Callable[..., Any], counter: WriteCounter) -> Callable[..., Any]:
    def open_watched(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
        handle = original(file, mode, *args, **kwargs)
        if isinstance(file, int) or not _WRITE_MODES.intersection(mode):
            return handle
        filename = os.fsdecode(os.fspath(file))
        if not _is_under(filename, counter.under):
            return handle
        return _FullFile(handle, filename, counter)

    return open_watched


@contextlib.contextmanager
def disk_full(under: str | os.PathLike[str], *, at: int | Iterable[int] | None = None,
              error_number: int = errno.ENOSPC) -> Iterator[WriteCounter]:
    """Make the ``at``-th write of a file under ``under`` fail as on a full disk (or only count writes).

    Parameters
    ----------
    under : path
        Directory whose files (at any depth) are watched; writes elsewhere are neither counted nor failed.
    at : int or iterable of int, optional
        Which writes fail, counted from 1 over all watched files. None: none fails (count only).
    error_number : int
        ``errno.ENOSPC`` (no space left on device) or ``errno.EDQUOT`` (disk quota exceeded).

    Yields
    ------
    WriteCounter
        The count so far; read ``writes`` and ``failed`` after the block.

    Examples
    --------
    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as tmp, disk_full(tmp, at=2) as counter:
    ...     with open(os.path.join(tmp, "f"), "w") as handle:
    ...         _ = handle.write("one")
    ...         try:
    ...             _ = handle.write("two")
    ...         except OSError as exc:
    ...             print(errno.errorcode[exc.errno])
    ENOSPC
    >>> counter.writes
    2
    """
    failing = frozenset() if at is None else frozenset([at] if isinstance(at, int) else at)
    counter = WriteCounter(under=os.path.realpath(Path(under).absolute()), at=failing, error_number=error_number)
    original = io.open
    patched = _watching_open(original, counter)
    io.open = patched
    builtins.open = patched
    try:
        yield counter
    finally:
        io.open = original
        builtins.open = original
