"""Versions of a saved model: commit a new one, list, roll back, prune; the lock that serializes them.

Nightly updates never overwrite a model: each writes a new version under ``MODEL/versions/`` and
then makes it current by atomically rewriting ``MODEL/versions.json`` (the layout is owned by
:mod:`topicflow.io.models.store`; spec in docs/model-format.md). A crash at any point leaves the
previous current version loadable and untouched, and rerunning the update redoes the work and
removes what the crashed run left. This module does file operations only; it never fits.

On object storage (s3://, memory://) the same functions work on a URL: the lock is a lease object
(:mod:`topicflow.io.models.lease`), a new version's objects are uploaded under ``versions/<N>/`` first,
the lease is renewed (so nobody took it over meanwhile) and ``versions.json`` is then replaced by a
conditional put (``If-Match`` on the ETag read under the lease): that put is the only thing that changes
the current version. Other object stores are refused (docs/storage.md).

Typical use by an update driver::

    with model_lock(path, action="update"):
        model = load_model(path)
        new_model = ...                                   # the online VB step
        commit_version(path, new_model, kind="update", summary={"n_docs": 1200})
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, cast

from topicflow.errors import InvalidParameterError, LockedError
from topicflow.io import storage
from topicflow.io._atomic import (
    disk_full_guard,
    fsync_directory,
    read_json,
    temporary_sibling,
)
from topicflow.io.models import store as model_store
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import (
    LEGACY_ENTRIES,
    MODEL_JSON,
    VERSIONS_DIR,
    VERSIONS_JSON,
    SavedModel,
    VersionIndex,
    VersionRecord,
    held_lease,
    holds_model_lock,
    index_bytes,
    is_legacy_model,
    model_not_found,
    parse_version_kind,
    read_remote_index,
    read_version_index,
    remove_remote_debris,
    summary_of,
    upload_version,
    utc_now,
    version_name,
    version_path,
    write_model_dir,
    write_version_index,
)
from topicflow.io.storage import Location, StoragePath, as_location, url_of

#: A model's location as callers give it: a local path, a URL string, or a StoragePath.
ModelPath = str | os.PathLike[str] | StoragePath

__all__ = ["VersionInfo", "commit_version", "list_versions", "model_lock", "prune_versions", "rollback"]


@dataclass(frozen=True, slots=True)
class VersionInfo:
    """One version of a model, as :func:`list_versions` reports it.

    Attributes
    ----------
    version : int
    created : str
        ISO-8601 UTC time of the commit.
    kind : {"fit", "update"}
    summary : dict
        Free JSON given at commit (documents processed, store, ...).
    is_current : bool
        Whether :func:`~topicflow.io.models.store.load_model` reads this version by default.
    parent : int or None
        The version that was current when this one was committed.
    """

    version: int
    created: str
    kind: str
    summary: dict[str, Any] = field(default_factory=dict)
    is_current: bool = False
    parent: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "created": self.created, "kind": self.kind,
                "summary": dict(self.summary), "is_current": self.is_current, "parent": self.parent}


def model_lock(path: ModelPath, *, action: str = "change") -> contextlib.AbstractContextManager[None]:
    """Context manager holding the model's exclusive lock, so two updates of one model cannot run at once.

    On a local disk the lock is advisory (``fcntl.flock`` on ``MODEL/.lock``), taken without waiting,
    and released when the block exits or the process dies, so a crash never leaves a stale lock. On
    object storage (s3://, memory://) it is a lease object, ``MODEL/.lease.json``, created or taken over
    by a conditional put, renewed from a background thread every third of its duration
    (``topicflow.model-lease-seconds``, default 600 s) and released when the block exits; a killed
    holder's lease expires after at most that duration (at once for a rerun on the same machine). It
    is re-entrant within one thread: :func:`rollback` and :func:`prune_versions` take it themselves and
    also work inside the block.

    Parameters
    ----------
    path : path or URL
        The model directory.
    action : str
        What the holder is about to do, a noun for the error message (``"update"``, ``"rollback"``, ...).

    Returns
    -------
    context manager

    Raises
    ------
    LockedError
        Another process (or thread) holds the lock; the message says who, what it does and, on object
        storage, until when.
    ModelNotFoundError
        No model at ``path``.
    UnsupportedStorageError
        A URL on an object store without the conditional writes the lease needs (gs://, az://).

    Examples
    --------
    >>> with model_lock("model", action="update"):                      # doctest: +SKIP
    ...     commit_version("model", new_model, kind="update", summary={"n_docs": 1200})
    """
    return model_store.model_lock(_where(path), action=action)


def commit_version(path: ModelPath, model: SavedModel, *, kind: str,
                   summary: Mapping[str, Any]) -> int:
    """Write ``model`` as the next version of the model at ``path`` and make it current.

    The caller holds :func:`model_lock`. On object storage (a URL) the version's objects are uploaded
    under ``versions/<N>/``, the lease is renewed and ``versions.json`` replaced by a conditional put;
    on a local disk the steps are: convert a legacy (unversioned) model to the
    versioned layout (its content becomes version 1); remove unlisted directories under
    ``versions/`` left by a crashed earlier commit; write the new version under a hidden temporary
    name in ``versions/``; rename it to the next number; atomically rewrite ``versions.json`` with
    the new version current. Until that last write, ``versions.json`` still names the previous
    version, so a crash anywhere leaves it current and untouched; a rerun redoes the work.

    Parameters
    ----------
    path : path
        An existing model (versioned or legacy).
    model : SavedModel
        The new version's state, vocabularies and info (written to its ``model.json``).
    kind : {"fit", "update"}
    summary : mapping
        JSON-able description shown by ``topicflow versions`` (e.g. documents processed).

    Returns
    -------
    int
        The new version's number (one more than the highest listed before).

    Raises
    ------
    ModelNotFoundError
        No model at ``path`` (the first version is written by :func:`~topicflow.io.models.store.save_model`).
    InvalidParameterError
        Unknown ``kind`` or a ``summary`` that is not JSON-able.
    RuntimeError
        The calling thread does not hold :func:`model_lock` on ``path``.

    Examples
    --------
    >>> with model_lock("model", action="update"):                      # doctest: +SKIP
    ...     commit_version("model", new_model, kind="update", summary={"n_docs": 1200})
    2
    """
    kind = parse_version_kind(kind)
    summary = _json_dict(summary)
    url = _url(path)
    if url is not None:
        return _commit_remote(url, model, kind=kind, summary=summary)
    path = Path(cast(Path, path))
    if not holds_model_lock(path):
        raise RuntimeError(f"commit_version({str(path)!r}) must run inside `with model_lock({str(path)!r}):`.")
    current = _read_index(path).current
    with disk_full_guard(path, what="model", unchanged=f"nothing was changed: version {current} is still current."):
        index = _index_converting_legacy(path)
        remove_version_debris(path, index)
        new_index = index.with_new_version(kind=kind, summary=summary)
        final = version_path(path, new_index.current)
        tmp = temporary_sibling(final)
        try:
            write_model_dir(tmp, model)
            os.replace(tmp, final)
            fsync_directory(final.parent)
            write_version_index(path, new_index)
        except Exception:  # an error the process survives (a full disk): leave nothing behind
            shutil.rmtree(tmp, ignore_errors=True)
            _remove_unlisted(path, final, new_index.current)
            raise
        except BaseException:  # interrupted as if killed: the next commit removes the unlisted version
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return new_index.current


def list_versions(path: ModelPath) -> list[VersionInfo]:
    """Every version of the model at ``path``, oldest first, the current one marked.

    A legacy (unversioned) model lists as its single version 1, without being converted.

    Parameters
    ----------
    path : path

    Returns
    -------
    list of VersionInfo

    Raises
    ------
    ModelNotFoundError
        No model at ``path``.

    Examples
    --------
    >>> [(v.version, v.kind, v.is_current) for v in list_versions("model")]   # doctest: +SKIP
    [(1, 'fit', False), (2, 'update', True)]
    """
    index = _read_index(_where(path))
    return [VersionInfo(version=r.version, created=r.created, kind=r.kind, summary=dict(r.summary),
                        is_current=r.version == index.current, parent=r.parent) for r in index.versions]


def rollback(path: ModelPath, version: int) -> None:
    """Make ``version`` the current version of the model at ``path`` (under the model's lock).

    Nothing is deleted: later versions stay listed (roll forward by rolling back to them), and the
    next commit gets a new number whose parent is ``version``. The change is one atomic rewrite of
    ``versions.json``, recorded in its history.

    Parameters
    ----------
    path : path
    version : int
        One of the listed versions.

    Raises
    ------
    ModelNotFoundError
        No model at ``path``, or no such version (the message lists the available ones).
    LockedError
        Another process is changing the model.

    Examples
    --------
    >>> rollback("model", 1)                                   # doctest: +SKIP
    """
    url = _url(path)
    if url is not None:
        _rollback_remote(url, version)
        return
    path = Path(cast(Path, path))
    with model_lock(path, action="rollback"):
        index = _read_index(path)
        index.require(version, path=str(path))
        if version == index.current:  # includes a legacy model's only version
            return
        event = {"action": "rollback", "time": utc_now(), "from": index.current, "to": version}
        write_version_index(path, VersionIndex(current=version, versions=index.versions,
                                               history=index.history + (event,)))


def prune_versions(path: ModelPath, keep: int) -> list[int]:
    """Remove the oldest versions beyond the newest ``keep`` (never the current one), under the lock.

    ``versions.json`` is rewritten first and the directories deleted after, so a crash in between
    leaves unlisted directories that the next commit or prune removes. On object storage the rewrite
    is a conditional put under the model's lease, and only prefixes the new index does not list are
    deleted: never the current version, and never a version being written (only the lease holder
    writes one, and that is this call).

    Parameters
    ----------
    path : path
    keep : int
        Positive: how many of the newest versions to keep (the current one is kept in addition
        when it is older).

    Returns
    -------
    list of int
        The removed version numbers, ascending (empty when nothing was removed).

    Raises
    ------
    InvalidParameterError
        ``keep`` is not a positive integer.
    ModelNotFoundError
        No model at ``path``.
    LockedError
        Another process is changing the model.

    Examples
    --------
    >>> prune_versions("model", keep=7)                        # doctest: +SKIP
    [1, 2]
    """
    if isinstance(keep, bool) or not isinstance(keep, int) or keep < 1:
        raise InvalidParameterError(f"keep must be a positive integer, got {keep!r}.")
    url = _url(path)
    if url is not None:
        return _prune_remote(url, keep)
    path = Path(cast(Path, path))
    with model_lock(path, action="prune"):
        index = read_version_index(path)
        if index is None:  # a legacy model: one version, always current
            return []
        newest = set(index.numbers[-keep:])
        removed = [n for n in index.numbers if n not in newest and n != index.current]
        if removed:
            event = {"action": "prune", "time": utc_now(), "removed": removed, "keep": keep}
            index = VersionIndex(current=index.current,
                                 versions=tuple(r for r in index.versions if r.version not in removed),
                                 history=index.history + (event,))
            with disk_full_guard(path, what="model", unchanged=(
                    f"nothing was removed: version {index.current} is still current and every version is kept.")):
                write_version_index(path, index)
        remove_version_debris(path, index)
        return removed


def remove_version_debris(path: Path, index: VersionIndex) -> list[str]:
    """Delete what ``index`` does not reference and return the removed paths.

    That is: unlisted version directories, hidden temporary ones under ``versions/``, and top-level
    legacy files left by an interrupted conversion. Only for a versioned model (``versions.json``
    exists) or, with an empty ``index``, during the conversion of a legacy one. The removed paths are
    returned relative to the model.
    """
    path = Path(path)
    removed = []
    listed = {version_name(n) for n in index.numbers}
    versions = path / VERSIONS_DIR
    if versions.is_dir():
        for child in sorted(versions.iterdir()):
            if child.name not in listed and (child.name.startswith(".") or child.name.isdigit()):
                _remove(child)
                removed.append(f"{VERSIONS_DIR}/{child.name}")
    if (path / VERSIONS_JSON).is_file():
        for name in LEGACY_ENTRIES:
            if (path / name).exists():
                _remove(path / name)
                removed.append(name)
    return removed


# ----------------------------------------------------------------------------- helpers


def _url(path: Any) -> str | None:
    """The model's URL without a trailing slash (one lease key per model), or None for a local path."""
    url = url_of(path)
    return None if url is None else StoragePath(url).url


def _where(path: ModelPath | Location) -> Location:
    """A local :class:`~pathlib.Path`, or the URL (also one ``pathlib`` collapsed) as a StoragePath."""
    url = _url(path)
    return as_location(url) if url is not None else Path(cast(Path, path))


def _lease_of(url: str, caller: str) -> Any:
    lease = held_lease(url)
    if lease is None:
        raise RuntimeError(f"{caller}({url!r}) must run inside `with model_lock({url!r}):`.")
    return lease


def _commit_index(url: str, index: VersionIndex, previous: tuple[bytes, str | None], *, action: str) -> None:
    """Replace ``URL/versions.json`` by ``index`` if it still is ``previous``, after renewing the lease."""
    _lease_of(url, action).renew()  # safe point: raises if another process took the lease over
    try:
        storage.replace_object(f"{url}/{VERSIONS_JSON}", index_bytes(index), previous=previous)
    except FileExistsError as exc:
        raise LockedError(
            f"model {url!r} was changed by another writer during this {action} (its {VERSIONS_JSON} is no longer "
            f"the one read under the lease), so this {action} did not commit; the other writer's version is "
            "current. Run it again.", path=url) from exc


def _commit_remote(url: str, model: SavedModel, *, kind: str, summary: dict[str, Any]) -> int:
    """:func:`commit_version` on object storage: upload ``versions/<N>/``, renew, conditional put of the index."""
    _lease_of(url, "commit_version")
    index, previous = read_remote_index(url)
    remove_remote_debris(url, index)  # leftovers of a killed commit; the lease holder is the only writer
    new_index = index.with_new_version(kind=kind, summary=summary)
    upload_version(url, new_index.current, model)
    _commit_index(url, new_index, previous, action="commit")
    return new_index.current


def _rollback_remote(url: str, version: int) -> None:
    with model_lock(url, action="rollback"):
        index, previous = read_remote_index(url)
        index.require(version, path=url)
        if version == index.current:
            return
        event = {"action": "rollback", "time": utc_now(), "from": index.current, "to": version}
        _commit_index(url, VersionIndex(current=version, versions=index.versions, history=index.history + (event,)),
                      previous, action="rollback")


def _prune_remote(url: str, keep: int) -> list[int]:
    with model_lock(url, action="prune"):
        index, previous = read_remote_index(url)
        newest = set(index.numbers[-keep:])
        removed = [n for n in index.numbers if n not in newest and n != index.current]
        if removed:
            event = {"action": "prune", "time": utc_now(), "removed": removed, "keep": keep}
            index = VersionIndex(current=index.current,
                                 versions=tuple(r for r in index.versions if r.version not in removed),
                                 history=index.history + (event,))
            _commit_index(url, index, previous, action="prune")
        remove_remote_debris(url, index)  # after the commit: only prefixes the index no longer lists
        return removed


def _read_index(path: Location) -> VersionIndex:
    """The model's index; a legacy model reads as one version, 1, without being converted."""
    url = _url(path)
    if url is not None:
        return read_remote_index(url)[0]
    path = Path(cast(Path, path))
    index = read_version_index(path)
    if index is not None:
        return index
    if not is_legacy_model(path):
        raise model_not_found(path)
    return _legacy_index(path)


def _legacy_index(path: Path) -> VersionIndex:
    info = read_json(path / MODEL_JSON)
    record = VersionRecord(version=1, created=str(info.get("saved") or utc_now()), kind="fit",
                           summary=summary_of(ModelInfo.from_json(info, where=str(path / MODEL_JSON))))
    return VersionIndex(current=1, versions=(record,))


def _index_converting_legacy(path: Path) -> VersionIndex:
    """The model's index, after converting a legacy model in place (its content becomes version 1).

    The legacy files are copied (never moved) to ``versions/000001`` through a temporary name,
    then ``versions.json`` is written (the commit: from then on the versioned layout is read), then
    the legacy files are deleted. A crash before the commit leaves the legacy model as it was; a
    crash after it leaves legacy files that :func:`remove_version_debris` deletes.
    """
    index = read_version_index(path)
    if index is not None:
        return index
    if not is_legacy_model(path):
        raise model_not_found(path)
    remove_version_debris(path, VersionIndex.empty())
    final = version_path(path, 1)
    final.parent.mkdir(exist_ok=True)
    tmp = temporary_sibling(final)
    try:
        tmp.mkdir()
        for name in LEGACY_ENTRIES:
            if (path / name).is_dir():
                shutil.copytree(path / name, tmp / name)
            elif (path / name).exists():
                shutil.copy2(path / name, tmp / name)
        os.replace(tmp, final)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    fsync_directory(final.parent)
    legacy = _legacy_index(path)
    event = {"action": "convert", "time": utc_now(),
             "detail": "unversioned (legacy) model directory became version 1"}
    index = VersionIndex(current=1, versions=legacy.versions, history=(event,))
    write_version_index(path, index)
    remove_version_debris(path, index)
    return index


def _remove_unlisted(path: Path, directory: Path, version: int) -> None:
    """Delete ``directory`` (the new version of a failed commit) unless ``versions.json`` names it current.

    Called while a commit fails: if the index was replaced before the failure (an error after the
    rename, such as the directory fsync), the new version is current and stays.
    """
    try:
        index = read_version_index(path)
    except Exception:  # the index cannot be read: leave everything for the next commit to sort out
        return
    if index is not None and version not in index.numbers:
        shutil.rmtree(directory, ignore_errors=True)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _json_dict(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``summary`` as a plain dict, checked to be JSON-able now rather than at the commit point."""
    try:
        json.dumps(dict(summary))
    except (TypeError, ValueError) as exc:
        raise InvalidParameterError(
            f"a version summary must be a JSON-able mapping (str keys; str, numbers, lists, dicts); "
            f"{exc}. Convert numpy values with int()/float()/.tolist().",
        ) from exc
    return dict(summary)

