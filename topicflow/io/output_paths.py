"""The one rule for every output path a command writes, on local disk and on object storage alike.

Every command that writes (``ingest --out``, ``fit --model``, ``fit --doc-topics``, ``fit --checkpoint``,
``infer --out``, ``export --out``, ``report --out``, ``stream --out``) asks :func:`prepare_output` first,
before any work, and gets the same answers (docs/storage.md, "Outputs and checkpoints"):

1. A missing parent directory is created (``mkdir -p``; object storage has no directories, so there
   is nothing to create). A parent that is a *file* is refused, naming it.
2. An output that exists is refused unless ``overwrite`` (``--overwrite``) is given.
3. A file where a directory output is expected (a store, a model, a doc-topics output, a stream
   output, a checkpoint), and a directory where a file output is expected (an export, a report), are
   refused even with ``--overwrite``: the message names the path and says what to do.
4. ``--overwrite`` replaces only an output of the same kind: a non-empty directory that holds none of
   the files that mark such an output is refused, so ``--overwrite`` never deletes an unrelated directory.

Writing helpers for outputs on either storage sit beside it: :func:`output_location` (a local
:class:`~pathlib.Path` or a :class:`~topicflow.io.storage.StoragePath`, also for a URL that
``pathlib`` collapsed), :func:`write_output_bytes` (atomic rename locally, one PUT on object storage,
which is atomic there too), :func:`staged_output_file` (write a local file, then publish it) and
:func:`remove_output`.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator, Literal, Sequence

from topicflow.errors import StorageError, StoreExistsError
from topicflow.io import storage
from topicflow.io._atomic import atomic_write_bytes, exclusive_lock, temporary_sibling
from topicflow.io.storage import Location, StoragePath

log = logging.getLogger(__name__)

#: Object a writer of a directory output on object storage puts first and deletes last: a prefix that
#: holds it but none of the output's markers is the leftover of an interrupted write, removed by the next.
PENDING = ".topicflow-pending"

#: Entries marking a saved model (``fit --model``): its version index, or a legacy model's JSON.
MODEL_MARKERS = ("versions.json", "model.json")
#: What an interrupted model save on object storage leaves (unlisted versions, removed by the next save).
MODEL_LEFTOVERS = ("versions",)
#: The entry marking a corpus store (``ingest --out``): its manifest, written last.
STORE_MARKERS = ("manifest.json",)
#: What an interrupted ingest on object storage leaves (removed by the next ingest).
STORE_LEFTOVERS = ("zarr.json", "shards", "vocab", "vocabs", "candidates")
#: Entries of which a stream output (``stream --out``) holds at least one.
STREAM_MARKERS = ("state", "summary.json", "trace.jsonl", "model", "init")

#: The lock file a writer of a local directory output holds inside it while it writes
#: (:func:`exclusive_output`); never deleted. A directory holding nothing else holds no output.
OUTPUT_LOCK = ".lock"

#: Whether an output is a directory (a prefix on object storage) or one file (one object).
OutputKind = Literal["directory", "file"]


def output_location(path: str | os.PathLike[str] | StoragePath) -> Location:
    """A local :class:`~pathlib.Path` or a :class:`~topicflow.io.storage.StoragePath` for ``path``.

    Unlike :func:`~topicflow.io.storage.as_location` this also recognizes a URL that ``pathlib``
    collapsed (``Path("s3://b/m")`` is ``s3:/b/m``), which code written against ``Path`` may still pass.

    Parameters
    ----------
    path : str, os.PathLike or StoragePath

    Returns
    -------
    Path or StoragePath
    """
    url = storage.url_of(path)
    return StoragePath(url) if url is not None else storage.as_location(path)


def prepare_output(path: str | os.PathLike[str] | StoragePath, *, what: str, option: str, overwrite: bool,
                   kind: OutputKind = "directory", markers: Sequence[str] = (),
                   leftovers: Sequence[str] = ()) -> Location:
    """Check an output path against the rules of the module docstring; create its missing parents.

    Parameters
    ----------
    path : path or URL
        Where the output goes, as the user gave it.
    what : str
        What the output is (``"model"``, ``"report"``...), named in the messages.
    option : str
        Where it was given (``"fit --model"``), named in the messages.
    overwrite : bool
        Whether an existing output of this kind may be replaced.
    kind : {"directory", "file"}, default "directory"
        A directory (a prefix of objects) or one file (one object).
    markers : sequence of str, optional
        Entries (relative paths) of which at least one is in every output of this kind; with
        ``overwrite``, an existing non-empty directory holding none of them is refused.
    leftovers : sequence of str, optional
        On object storage: top-level entries that an interrupted write of this kind leaves without a
        marker and that its writer removes or ignores; a prefix holding only these (and
        :data:`PENDING`) is not an existing output.

    Returns
    -------
    Path or StoragePath
        The output's location.

    Raises
    ------
    StoreExistsError
        The output exists and ``overwrite`` is False, or ``overwrite`` would replace a directory that
        is not such an output.
    StorageError
        A file where a directory is expected or the reverse, a parent that is a file, or a bucket that
        does not exist.
    """
    location = output_location(path)
    shown = str(location)
    where = f"{what} {shown!r} ({option})"
    if isinstance(location, StoragePath):
        storage.check_bucket(location)
        _check_remote_parents(location, where)
        is_file, exists = location.is_file(), location.exists()
        is_dir = exists and not is_file
        if is_dir and markers and _only_leftovers(location, markers, leftovers):
            return location  # leftovers of an interrupted write, which the writer removes or ignores
    else:
        _create_local_parents(location, where)
        is_file, exists, is_dir = location.is_file(), location.exists(), location.is_dir()
        if is_dir and _only_lock(location):
            return location  # what a writer killed before it wrote anything leaves (exclusive_output)
    if kind == "directory" and is_file:
        raise StorageError(f"{where} is a file, but {_a(what)} is a directory; remove the file or choose another "
                           "path.", path=shown)
    if kind == "file" and is_dir:
        raise StorageError(f"{where} is a directory, but {_a(what)} is a file; give the path of a file (it may be "
                           "inside that directory) or choose another path.", path=shown)
    if not exists:
        return location
    if not overwrite:
        raise StoreExistsError(f"{where} exists already; choose another path or pass --overwrite to replace it.",
                               path=shown)
    if kind == "directory" and markers and not _holds_output(location, markers):
        raise StoreExistsError(f"{where} is a directory that holds no {what} (none of {', '.join(markers)}); "
                               f"--overwrite replaces only {_a(what)}: choose another path, or empty it first.",
                               path=shown)
    return location


def _a(what: str) -> str:
    """``what`` with its indefinite article."""
    return f"{'an' if what[:1] in 'aeiou' else 'a'} {what}"


def _create_local_parents(location: Path, where: str) -> None:
    """Create the missing parents of ``location``; refuse a parent that is a file."""
    parent = location.parent
    for ancestor in (parent, *parent.parents):
        if ancestor.exists():
            if not ancestor.is_dir():
                raise StorageError(f"{where} cannot be created: {str(ancestor)!r} is a file, not a directory; "
                                   "choose a path whose parents are directories (or remove that file).",
                                   path=str(location))
            break
    parent.mkdir(parents=True, exist_ok=True)


def _check_remote_parents(location: StoragePath, where: str) -> None:
    """Refuse a URL one of whose parents is an object (a file where a directory is expected)."""
    parent = location.parent
    while parent.url != location.url and parent.url.count("/") >= 3:  # stop above the bucket
        if parent.is_file():
            raise StorageError(f"{where} cannot be created: {parent.url!r} is an object (a file), not a "
                               "directory; choose a path whose parents are not objects (or remove that object).",
                               path=location.url)
        location, parent = parent, parent.parent


def _only_leftovers(location: StoragePath, markers: Sequence[str], leftovers: Sequence[str]) -> bool:
    """Whether the prefix ``location`` holds no marker, and nothing but ``leftovers`` and :data:`PENDING`."""
    names = {child.name for child in location.iterdir()}
    return not names & set(markers) and names <= {*leftovers, PENDING}


def _only_lock(location: Path) -> bool:
    """Whether the local directory ``location`` holds :data:`OUTPUT_LOCK` and nothing else."""
    return {child.name for child in location.iterdir()} == {OUTPUT_LOCK}


@contextlib.contextmanager
def exclusive_output(location: Location, *, what: str, option: str, markers: Sequence[str],
                     overwrite: bool) -> Iterator[None]:
    """Be the only writer of the directory output ``location`` while the block runs.

    Two commands given the same new output both pass :func:`prepare_output` before either writes.
    On local disk the directory is created and :data:`OUTPUT_LOCK` in it is held: a second writer
    meanwhile is refused at once (:class:`~topicflow.errors.LockedError`), and one that comes after
    the first finished finds its output (:class:`~topicflow.errors.StoreExistsError` unless
    ``overwrite``). A directory this call created is removed again if the block fails before
    writing anything into it. On object storage nothing is locked (there is no lease for these
    outputs yet).

    Parameters
    ----------
    location : Path or StoragePath
        The output, as :func:`prepare_output` returned it.
    what, option : str
        What the output is and where it was given, named in the messages.
    markers : sequence of str
        Entries of which every output of this kind holds at least one.
    overwrite : bool
        Whether an existing output may be written over (``--overwrite``, ``--resume``).

    Yields
    ------
    None
        The lock is held while the block runs.

    Raises
    ------
    LockedError
        Another process writes the output.
    StoreExistsError
        The output was completed by another writer after :func:`prepare_output` checked it.
    """
    if isinstance(location, StoragePath):
        yield
        return
    created = not location.exists()
    location.mkdir(parents=True, exist_ok=True)
    where = f"{what} {str(location)!r} ({option})"
    with exclusive_lock(location / OUTPUT_LOCK, what=where):
        if not overwrite and any((location / marker).exists() for marker in markers):
            raise StoreExistsError(f"{where} was written by another command meanwhile; choose another path or pass "
                                   "--overwrite to replace it.", path=str(location))
        try:
            yield
        except BaseException:
            if created and _only_lock(location):  # a failed first write leaves no directory behind
                shutil.rmtree(location, ignore_errors=True)
            raise


def _holds_output(location: Location, markers: Sequence[str]) -> bool:
    """Whether the directory ``location`` is empty or holds one of ``markers``."""
    if isinstance(location, Path) and not any(location.iterdir()):
        return True
    return any((location / marker).exists() for marker in markers)


def begin_remote_output(location: StoragePath, *, markers: Sequence[str], writer: str = "") -> None:
    """Make way for a new directory output on object storage, which :func:`end_remote_output` completes.

    The markers of an existing output (checked and allowed by :func:`prepare_output`) are deleted
    first, so from then on no reader takes what is under the prefix for an output; then everything
    under it; then :data:`PENDING` is written, which marks what follows as unfinished until the
    writer puts its marker and calls :func:`end_remote_output`.

    Parameters
    ----------
    location : StoragePath
    markers : sequence of str
        The objects whose presence makes the prefix an output (written last by the writer).
    writer : str, optional
        An id of this write, kept in :data:`PENDING`: :func:`remote_output_writer` then tells whether
        another writer has taken the prefix over meanwhile (no lock exists on object storage).
    """
    if location.exists():
        if not any((location / name).exists() for name in (*markers, PENDING)):
            raise StoreExistsError(f"{location.url!r} holds objects that are not a topicflow output; choose another "
                                   "URL (or delete them first).", path=location.url)
        for marker in markers:
            storage.remove_prefix(f"{location.url}/{marker}")
        storage.remove_prefix(location.url)
    storage.write_object(f"{location.url}/{PENDING}", f"unfinished topicflow output\n{writer}\n".encode())


def remote_output_writer(location: StoragePath) -> str | None:
    """The ``writer`` recorded in :data:`PENDING` by :func:`begin_remote_output`, or None if there is none."""
    try:
        lines = (location / PENDING).read_bytes().decode().splitlines()
    except FileNotFoundError:
        return None
    return lines[1] if len(lines) > 1 else ""


def end_remote_output(location: StoragePath) -> None:
    """Delete :data:`PENDING` once the output's marker is written (a failure is logged: the output is complete).

    Parameters
    ----------
    location : StoragePath
    """
    try:
        storage.remove_prefix(f"{location.url}/{PENDING}")
    except Exception as exc:  # committed already: a stray PENDING beside a marker is ignored by readers
        log.warning("could not delete %s/%s (%s); the output is complete", location.url, PENDING, exc)


def write_output_bytes(location: str | os.PathLike[str] | StoragePath, data: bytes) -> None:
    """Write one output file: a temporary sibling and a rename locally, one PUT on object storage.

    Either way a reader sees the old file or the new one, never a part of it.

    Parameters
    ----------
    location : path or URL
    data : bytes
    """
    target = output_location(location)
    if isinstance(target, StoragePath):
        storage.write_object(target.url, data)
        return
    atomic_write_bytes(target, data)


def write_output_json(location: str | os.PathLike[str] | StoragePath, payload: Any) -> None:
    """Write ``payload`` as indented, key-sorted JSON with :func:`write_output_bytes`.

    Parameters
    ----------
    location : path or URL
    payload : JSON-able value
    """
    text = json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    write_output_bytes(location, text.encode("utf-8"))


@contextlib.contextmanager
def staged_output_file(location: str | os.PathLike[str] | StoragePath) -> Iterator[Path]:
    """A local path to write one output file to; published to ``location`` when the block succeeds.

    Locally the path is a temporary sibling of ``location``, renamed into place; on object storage it
    is in a staging directory and uploaded in one PUT. On failure nothing reaches ``location``.

    Parameters
    ----------
    location : path or URL

    Yields
    ------
    Path
        Where the block writes the file (it need not exist before).
    """
    target = output_location(location)
    if isinstance(target, Path):
        tmp = temporary_sibling(target)
        try:
            yield tmp
            os.replace(tmp, target)
        finally:
            tmp.unlink(missing_ok=True)
        return
    staging = Path(tempfile.mkdtemp(prefix="topicflow-out-", dir=storage.staging_root()))
    try:
        local = staging / target.name
        yield local
        storage.write_object(target.url, local.read_bytes())
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remove_output(location: str | os.PathLike[str] | StoragePath) -> None:
    """Delete an output directory (a prefix of objects) or file; nothing happens if there is none.

    Parameters
    ----------
    location : path or URL
    """
    target = output_location(location)
    if isinstance(target, StoragePath):
        storage.remove_prefix(target.url)
    elif target.is_dir():
        shutil.rmtree(target, ignore_errors=True)
    else:
        target.unlink(missing_ok=True)
