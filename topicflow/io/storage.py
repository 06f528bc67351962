"""Where topicflow's files live: local paths, or URLs on object storage through fsspec.

A path a user gives is either a local path (``news.zarr``, ``file:///data/news.zarr``) or a URL that
fsspec understands (``s3://bucket/news.zarr``, ``memory://news.zarr``; ``gs://`` and ``az://`` with
gcsfs or adlfs installed). :func:`as_location` turns it into a :class:`~pathlib.Path` for local paths,
so local reads and writes are exactly what they always were, or a :class:`StoragePath` for URLs, which
offers the few path operations the corpus store uses (``/``, ``name``, ``exists``, ``is_dir``...).

Storage options (credentials, endpoint, region) come, later ones winning, from

1. the environment, as each fsspec backend reads it (s3fs: ``AWS_ACCESS_KEY_ID``,
   ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_PROFILE``, ``AWS_ENDPOINT_URL``...);
2. the ``topicflow.storage-options`` setting of dask.config (a config file, or
   ``DASK_TOPICFLOW__STORAGE_OPTIONS``): a mapping applied to every URL, whose entries named after a
   protocol (``s3: {endpoint_url: ...}``) apply to that protocol only;
3. ``--storage-option KEY=VALUE`` on the command line, which the CLI writes into that setting.

Worker processes resolve them from their own dask config and environment: a local cluster's workers
inherit both from the command; remote workers need them in their own config or environment.

Object stores have no atomic rename. Stores are therefore published by uploading every file first and
the commit file (``manifest.json``) last, with a conditional put (``If-None-Match: *``) where the
backend supports it (:func:`publish_directory`); a store without its manifest is not a store to any
reader.
"""
from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Mapping

from topicflow import config
from topicflow.errors import (
    StorageError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedStorageError,
)

log = logging.getLogger(__name__)

#: Characters that make a URL a glob pattern (expanded by :func:`expand_inputs`).
GLOB_CHARS = ("*", "?", "[")

#: Objects uploaded concurrently per request batch by :func:`publish_directory`.
UPLOAD_BATCH = 64

#: Called with the URL of every object :func:`publish_directory` is about to write (tests use it to fail
#: at the Nth write; nothing else should set it).
before_write: Callable[[str], None] | None = None


def is_url(path: Any) -> bool:
    """Whether ``path`` names a location on a filesystem other than the local one.

    Parameters
    ----------
    path : str, os.PathLike or StoragePath
        A path or URL as a user gave it.

    Returns
    -------
    bool
        True for ``s3://``, ``memory://``, ``gs://``...; False for local paths and ``file://`` URLs.
    """
    if isinstance(path, StoragePath):
        return True
    if not isinstance(path, str):
        return False
    protocol, sep, _ = path.partition("://")
    return bool(sep) and protocol not in ("file", "local") and protocol.replace("+", "").isalnum()


def _local(path: str | os.PathLike[str]) -> Path:
    text = os.fspath(path)
    for prefix in ("file://", "local://"):
        if text.startswith(prefix):
            return Path(text[len(prefix):])
    return Path(text)


class StoragePath:
    """A location on object storage, with the path operations the corpus store uses.

    Parameters
    ----------
    url : str
        ``protocol://bucket/key/...``; a trailing slash is dropped.

    Examples
    --------
    >>> store = StoragePath("s3://bucket/news.zarr")
    >>> str(store / "shards" / "000000")
    's3://bucket/news.zarr/shards/000000'
    >>> store.name, str(store.parent)
    ('news.zarr', 's3://bucket')
    """

    __slots__ = ("url",)

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/") if not url.endswith("://") else url

    def __truediv__(self, part: str) -> StoragePath:
        return StoragePath(f"{self.url}/{str(part).strip('/')}")

    def __str__(self) -> str:
        return self.url

    def __repr__(self) -> str:
        return f"StoragePath({self.url!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, StoragePath) and other.url == self.url

    def __hash__(self) -> int:
        return hash(("StoragePath", self.url))

    def __reduce__(self) -> tuple[Any, ...]:
        return (StoragePath, (self.url,))

    @property
    def protocol(self) -> str:
        """The URL's protocol (``s3``, ``memory``...)."""
        return self.url.partition("://")[0]

    @property
    def name(self) -> str:
        """The last part of the path."""
        return self.url.rsplit("/", 1)[-1]

    @property
    def parent(self) -> StoragePath:
        """The location one level up."""
        head, _, _ = self.url.rpartition("/")
        return StoragePath(head if "://" in head and not head.endswith(":/") else self.url)

    def resolve(self) -> StoragePath:
        """Itself (a URL is already absolute); for code written against :class:`~pathlib.Path`."""
        return self

    def absolute(self) -> StoragePath:
        """Itself; see :meth:`resolve`."""
        return self

    def exists(self) -> bool:
        """Whether an object or a prefix with objects exists here."""
        fs, path = filesystem(self.url)
        return bool(_call(self.url, fs.exists, path))

    def is_dir(self) -> bool:
        """Whether objects exist under this prefix."""
        fs, path = filesystem(self.url)
        return bool(_call(self.url, fs.isdir, path))

    def is_file(self) -> bool:
        """Whether an object exists at exactly this key."""
        fs, path = filesystem(self.url)
        return bool(_call(self.url, fs.isfile, path))

    def read_bytes(self) -> bytes:
        """The whole object."""
        fs, path = filesystem(self.url)
        return bytes(_call(self.url, fs.cat_file, path))

    def iterdir(self) -> Iterator[StoragePath]:
        """The locations directly under this prefix, sorted."""
        fs, path = filesystem(self.url)
        for entry in sorted(_call(self.url, fs.ls, path, detail=False)):
            yield self / str(entry).rstrip("/").rsplit("/", 1)[-1]


#: A local path or a URL on object storage.
Location = Path | StoragePath


def as_location(path: str | os.PathLike[str] | StoragePath) -> Location:
    """A :class:`~pathlib.Path` for a local path or ``file://`` URL, else a :class:`StoragePath`.

    Parameters
    ----------
    path : str, os.PathLike or StoragePath

    Returns
    -------
    Path or StoragePath
    """
    if isinstance(path, StoragePath):
        return path
    if is_url(path):
        return StoragePath(str(path))
    return _local(path)


def storage_options(url: str) -> dict[str, Any]:
    """The storage options for ``url`` from the ``topicflow.storage-options`` setting.

    Parameters
    ----------
    url : str
        A URL (its protocol picks the protocol-specific entries).

    Returns
    -------
    dict
        Options for the fsspec filesystem of ``url`` (the environment is read by the backend itself).
    """
    protocol = url.partition("://")[0]
    configured = config.get("storage-options") or {}
    if not isinstance(configured, Mapping):
        raise StorageError(f"the topicflow.storage-options setting must be a mapping, got {configured!r}.")
    options = {k: v for k, v in configured.items() if not (isinstance(v, Mapping) and _is_protocol(k))}
    specific = configured.get(protocol)
    if isinstance(specific, Mapping):
        options.update(specific)
    return options


def _is_protocol(name: str) -> bool:
    from fsspec.registry import known_implementations

    return name in known_implementations


def filesystem(url: str) -> tuple[Any, str]:
    """The fsspec filesystem of ``url`` (with :func:`storage_options`) and the path inside it.

    Parameters
    ----------
    url : str

    Returns
    -------
    fs : fsspec.AbstractFileSystem
    path : str

    Raises
    ------
    StorageError
        The protocol's package is not installed (e.g. s3fs for ``s3://``).
    """
    import fsspec.core

    try:
        return fsspec.core.url_to_fs(url, **storage_options(url))
    except ImportError as exc:
        raise StorageError(
            f"cannot open {url!r}: {exc}. Install the package fsspec names for this protocol "
            "(s3://: pip install 'topicflow[s3]', i.e. s3fs; gs://: gcsfs; az://: adlfs).",
            path=url,
        ) from exc


def storage_error(url: str, exc: BaseException) -> StorageError:
    """A :class:`StorageError` naming ``url`` and what to check, for what a backend raised."""
    name = type(exc).__name__
    text = str(exc)
    if name in ("NoCredentialsError", "PartialCredentialsError") or "credentials" in text.lower():
        hint = ("no usable credentials: set AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (or AWS_PROFILE), or pass "
                "--storage-option key=... --storage-option secret=... (docs/storage.md)")
    elif isinstance(exc, PermissionError) or "AccessDenied" in text or "Forbidden" in text:
        hint = "access was refused: check the credentials and the bucket's permissions"
    elif "NoSuchBucket" in text or "bucket" in text.lower() and isinstance(exc, FileNotFoundError):
        hint = "the bucket does not exist: create it first, or check the URL and the endpoint (endpoint_url)"
    else:
        hint = "check the URL, the endpoint and the credentials (docs/storage.md)"
    return StorageError(f"cannot use {url!r}: {hint} ({name}: {text})", path=url)


def _call(url: str, function: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call a filesystem method; turn credential, permission and bucket errors into StorageError."""
    try:
        return function(*args, **kwargs)
    except FileNotFoundError as exc:
        if "bucket" in str(exc).lower():
            raise storage_error(url, exc) from exc
        raise
    except (PermissionError, FileExistsError, StorageError):  # FileExistsError: a conditional put lost
        raise
    except OSError as exc:
        raise storage_error(url, exc) from exc
    except Exception as exc:  # botocore's NoCredentialsError and friends are no OSError
        if type(exc).__module__.startswith(("botocore", "aiobotocore", "s3fs")):
            raise storage_error(url, exc) from exc
        raise


def check_bucket(location: StoragePath) -> None:
    """Raise a clear :class:`StorageError` if the bucket of ``location`` is missing or unreachable.

    Parameters
    ----------
    location : StoragePath

    Raises
    ------
    StorageError
        The bucket does not exist, or the credentials are missing or refused; the message names the URL.
    """
    fs, inner = filesystem(location.url)
    bucket = inner.split("/", 1)[0]
    if location.protocol == "memory" or not bucket:
        return
    try:
        _call(location.url, fs.info, bucket)
    except FileNotFoundError:
        raise StorageError(
            f"cannot use {location.url!r}: bucket {bucket!r} does not exist (or these credentials cannot see "
            "it); create it first, or check the URL, the endpoint (endpoint_url) and the credentials "
            "(docs/storage.md).", path=location.url) from None


def zarr_store(location: str | os.PathLike[str] | StoragePath, *, read_only: bool = False) -> Any:
    """What to pass to ``zarr.open_group`` for ``location``.

    Parameters
    ----------
    location : path or URL
    read_only : bool, default False

    Returns
    -------
    str or zarr.storage.FsspecStore
        The local path as a string (zarr's LocalStore, exactly as before), or an FsspecStore over the
        URL with :func:`storage_options`.
    """
    if not is_url(location):
        return str(_local(location)) if not isinstance(location, StoragePath) else str(location)
    from zarr.storage import FsspecStore

    url = str(location)
    try:
        return FsspecStore.from_url(url, storage_options=storage_options(url), read_only=read_only)
    except ImportError as exc:
        raise StorageError(f"cannot open {url!r}: {exc}. For s3:// install 'topicflow[s3]' (s3fs).",
                           path=url) from exc


def open_input(path: str | os.PathLike[str] | StoragePath, mode: str = "rb") -> IO[Any]:
    """Open a file to read: the builtin ``open`` for a local path, fsspec's file for a URL.

    Parameters
    ----------
    path : path or URL
    mode : str, default "rb"

    Returns
    -------
    file object
        Seekable; a context manager.
    """
    if not isinstance(path, StoragePath) and not is_url(path):
        return open(_local(path), mode)
    url = str(path)
    fs, inner = filesystem(url)
    return _call(url, fs.open, inner, mode)


def file_size(path: str | os.PathLike[str] | StoragePath) -> int:
    """Size in bytes of a local file or an object."""
    if not isinstance(path, StoragePath) and not is_url(path):
        return _local(path).stat().st_size
    url = str(path)
    fs, inner = filesystem(url)
    return int(_call(url, fs.size, inner))


def expand_inputs(paths: list[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """Expand glob patterns in URLs (``s3://bucket/in/*.jsonl``) into the sorted URLs they match.

    Local paths and URLs without a pattern are returned as given (the shell expands local globs).

    Parameters
    ----------
    paths : list of path or URL

    Returns
    -------
    list of path or URL

    Raises
    ------
    StorageError
        A pattern matches nothing.
    """
    out: list[str | os.PathLike[str]] = []
    for path in paths:
        text = str(path)
        if not (is_url(text) and any(c in text.split("://", 1)[1] for c in GLOB_CHARS)):
            out.append(path)
            continue
        fs, inner = filesystem(text)
        protocol = text.partition("://")[0]
        matches = sorted(_call(text, fs.glob, inner))
        if not matches:
            raise StorageError(f"input pattern {text!r} matches no object; check the URL.", path=text)
        out.extend(f"{protocol}://{m}" for m in matches)
    return out


def list_files(root: str | StoragePath) -> list[str]:
    """Every object under the prefix ``root``, as paths relative to it, sorted."""
    url = str(root).rstrip("/")
    fs, inner = filesystem(url)
    inner = inner.rstrip("/")
    found = _call(url, fs.find, inner)
    return sorted(str(f)[len(inner) + 1:] for f in found if str(f).startswith(inner + "/"))


def require_local(path: Any, *, what: str, option: str) -> None:
    """Refuse a URL where only local paths are supported so far, naming the option.

    Parameters
    ----------
    path : path or URL
    what : str
        What the path is for, e.g. ``"model directory"``.
    option : str
        Where it was given, e.g. ``"fit --model"``.

    Raises
    ------
    UnsupportedStorageError
        ``path`` is a URL.
    """
    if is_url(path) or _mangled_url(path):
        shown = str(path) if is_url(path) else os.fspath(path).replace(":/", "://", 1)
        raise UnsupportedStorageError(
            f"{what} {shown!r} ({option}) is a URL on object storage, where topicflow does not keep this "
            f"{what} yet (docs/storage.md, 'What works on which storage'); give a local path.",
            path=shown,
        )


def url_of(path: Any) -> str | None:
    """The URL ``path`` names, also when ``pathlib`` collapsed it (``Path("s3://b/m")`` is ``s3:/b/m``).

    Parameters
    ----------
    path : path, URL or StoragePath

    Returns
    -------
    str or None
        The URL, or None for a local path (or a ``file://`` URL).
    """
    if isinstance(path, StoragePath):
        return path.url
    if is_url(path):
        return str(path)
    if _mangled_url(path):
        return os.fspath(path).replace(":/", "://", 1)
    return None


def _mangled_url(path: Any) -> bool:
    """Whether ``path`` is a URL that ``pathlib`` collapsed (``Path("s3://b/m")`` is ``s3:/b/m``)."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    text = os.fspath(path)
    protocol, sep, rest = text.partition(":/")
    if not sep or rest.startswith("/") or not protocol.isalnum() or protocol in ("file", "local"):
        return False
    from fsspec.registry import known_implementations

    return protocol in known_implementations


# ----------------------------------------------------------------------------- publishing stores


#: What a backend's error says when a conditional put lost to another writer: S3's 412 PreconditionFailed
#: (``If-Match``/``If-None-Match`` not met) and 409 ConditionalRequestConflict (a concurrent conditional
#: write to the same key), as botocore and s3fs word them.
CONDITIONAL_CONFLICT_SIGNS = ("PreconditionFailed", "pre-condition", "412", "ConditionalRequestConflict",
                              "conditional operation")


def lost_conditional_write(exc: BaseException) -> bool:
    """Whether ``exc`` says a conditional put lost to another writer, looking through its ``__cause__`` chain.

    s3fs wraps botocore's ``ClientError`` (whose message names the S3 error code) in an ``OSError``
    whose own text may not name it, so every exception of the chain is read.

    Parameters
    ----------
    exc : BaseException
        What the put raised.

    Returns
    -------
    bool
        True for a ``FileExistsError`` and for a 412 PreconditionFailed or 409
        ConditionalRequestConflict anywhere in the chain.
    """
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, FileExistsError):
            return True
        if any(sign in repr(seen) or sign in str(seen) for sign in CONDITIONAL_CONFLICT_SIGNS):
            return True
        seen = seen.__cause__
    return False


def _put(url: str, data: bytes, *, create_only: bool) -> None:
    fs, inner = filesystem(url)
    if before_write is not None:
        before_write(url)
    if create_only:
        try:
            _call(url, fs.pipe_file, inner, data, mode="create")
            return
        except FileExistsError:
            raise
        except StorageError as exc:  # _call's wrapping of a backend error: a lost race is no storage failure
            if lost_conditional_write(exc):
                raise FileExistsError(url) from exc
            raise
        except (TypeError, NotImplementedError):
            if _call(url, fs.exists, inner):  # a backend without conditional puts: check, then write
                raise FileExistsError(url) from None
    _call(url, fs.pipe_file, inner, data)


def write_object(url: str, data: bytes, *, create_only: bool = False) -> None:
    """Write one object; with ``create_only`` only if none exists there (a conditional put).

    Parameters
    ----------
    url : str
    data : bytes
    create_only : bool, default False
        Use ``If-None-Match: *`` where the backend supports it (s3fs, memory), else check first.

    Raises
    ------
    FileExistsError
        ``create_only`` and an object exists at ``url``.
    """
    _put(url, data, create_only=create_only)


def read_tagged(url: str) -> tuple[bytes, str | None] | None:
    """An object's bytes and its ETag (None where the backend has none), or None if there is no object.

    Parameters
    ----------
    url : str

    Returns
    -------
    tuple of (bytes, str or None), or None
        What :func:`replace_object` takes as ``previous``.
    """
    fs, inner = filesystem(url)
    with contextlib.suppress(AttributeError):
        fs.invalidate_cache(inner)  # another process may have replaced it since this one listed it
    try:
        info = _call(url, fs.info, inner)
        data = bytes(_call(url, fs.cat_file, inner))
    except FileNotFoundError:
        return None
    etag = info.get("ETag") or info.get("etag")
    return data, (str(etag) if etag else None)


def replace_object(url: str, data: bytes, *, previous: tuple[bytes, str | None] | None) -> None:
    """Write ``url`` only if it still is ``previous`` (as :func:`read_tagged` returned it): a compare-and-swap.

    ``previous`` None: only if no object exists (``If-None-Match: *``). Else, on S3, ``If-Match`` on
    the ETag read before, one conditional request; on backends without it (``memory://``, some
    others), the object is read again and compared first: two requests, so not safe against a writer
    committing in between.

    Parameters
    ----------
    url : str
    data : bytes
    previous : tuple of (bytes, str or None), or None

    Raises
    ------
    FileExistsError
        The object is no longer ``previous`` (another writer replaced or created it).
    """
    if previous is None:
        _put(url, data, create_only=True)
        return
    body, etag = previous
    fs, inner = filesystem(url)
    if before_write is not None:
        before_write(url)
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    if etag and "s3" in protocols:
        try:
            fs.pipe_file(inner, data, IfMatch=etag)
        except Exception as exc:
            if lost_conditional_write(exc):
                raise FileExistsError(url) from exc
            raise storage_error(url, exc) from exc
        return
    current = read_tagged(url)
    if current is None or current[0] != body:
        raise FileExistsError(url)
    _call(url, fs.pipe_file, inner, data)


def remove_prefix(url: str) -> None:
    """Delete every object under ``url`` (no error if there is none)."""
    fs, inner = filesystem(url)
    try:
        if _call(url, fs.exists, inner):
            _call(url, fs.rm, inner, recursive=True)
    except FileNotFoundError:
        pass


def upload_files(local: Path, url: str, names: list[str] | None = None) -> None:
    """Upload files of the local directory ``local`` under the prefix ``url``, concurrently in batches.

    Parameters
    ----------
    local : Path
    url : str
    names : list of str, optional
        Paths relative to ``local`` (default: every file under it, sorted).
    """
    if names is None:
        names = sorted(p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    fs, inner = filesystem(url)
    for start in range(0, len(names), UPLOAD_BATCH):
        batch = {}
        for name in names[start:start + UPLOAD_BATCH]:
            if before_write is not None:
                before_write(f"{url}/{name}")
            batch[f"{inner.rstrip('/')}/{name}"] = (local / name).read_bytes()
        _call(url, fs.pipe, batch)  # concurrent puts on async backends (s3fs, gcsfs, adlfs)


def publish_directory(local: Path, url: str, *, commit_file: str, files: list[str] | None = None,
                      create_commit: bool = True) -> None:
    """Upload a finished local directory to ``url``, its commit file last.

    Parameters
    ----------
    local : Path
        The finished directory (e.g. a corpus store built in a staging directory).
    url : str
        Target prefix.
    commit_file : str
        Relative path of the file that makes the upload visible (``manifest.json``); written last.
    files : list of str, optional
        Relative paths to upload (default: every file under ``local``). The commit file is always
        uploaded, last.
    create_commit : bool, default True
        Write the commit file only if none exists yet (a conditional put): a second writer racing for
        the same new store fails instead of overwriting the first one's manifest.

    Raises
    ------
    StoreExistsError
        ``create_commit`` and the commit file appeared meanwhile.
    """
    names = files if files is not None else sorted(
        p.relative_to(local).as_posix() for p in local.rglob("*") if p.is_file())
    upload_files(local, url, [name for name in names if name != commit_file and not name.endswith(".lock")])
    try:
        _put(f"{url}/{commit_file}", (local / commit_file).read_bytes(), create_only=create_commit)
    except FileExistsError as exc:
        raise StoreExistsError(
            f"{url!r} was created by another writer while this one uploaded; choose another URL.", path=url
        ) from exc


def staging_root() -> str | None:
    """Where staging directories go: ``topicflow.scratch-dir`` (created if missing), else None (the system's)."""
    root = config.get("scratch-dir")
    if root:
        Path(root).mkdir(parents=True, exist_ok=True)
    return root


@contextlib.contextmanager
def staged_new_store(url: str, *, overwrite: bool, commit_file: str) -> Iterator[Path]:
    """Build a new store locally and publish it to ``url`` when the ``with`` block succeeds.

    The block gets a local path that does not exist yet (in ``topicflow.scratch-dir`` or the system's
    temporary directory; the workers of a local cluster see it). On success every file is uploaded and
    the commit file last, conditionally (:func:`publish_directory`); on any failure, what was uploaded
    is deleted again, and in any case no commit file was written, so no reader takes it for a store.

    Parameters
    ----------
    url : str
        Target; no store (commit file) may exist there.
    overwrite : bool
        Not supported on object storage yet: raises if True and something exists at ``url``.
    commit_file : str

    Yields
    ------
    Path
        Where to build the store.

    Raises
    ------
    StoreExistsError
        A store (or leftovers of an interrupted one) exists at ``url``.
    """
    target = StoragePath(url)
    if (target / commit_file).is_file():
        if overwrite:
            raise StoreExistsError(
                f"store {url!r} exists; --overwrite (overwrite=True) is not supported on object storage yet "
                "(no atomic replace): delete the store first or choose another URL.", path=url)
        raise StoreExistsError(f"store path {url!r} exists already; choose another URL (or delete it).", path=url)
    if target.exists():
        if not _is_topicflow_debris(target):
            raise StoreExistsError(
                f"{url!r} holds objects that are not a topicflow store; ingest writes only to an empty prefix "
                "(or over the leftovers of an interrupted ingest): choose another URL.", path=url)
        log.warning("removing objects under %s left by an interrupted ingest (no %s)", url, commit_file)
        remove_prefix(url)
    staging = Path(tempfile.mkdtemp(prefix="topicflow-stage-", dir=staging_root()))
    published = False
    try:
        local = staging / "store"
        yield local
        try:
            publish_directory(local, target.url, commit_file=commit_file, create_commit=True)
            published = True
        finally:
            if not published:
                _remove_quietly(target.url, commit_file)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _is_topicflow_debris(target: StoragePath) -> bool:
    """Whether the objects under ``target`` are an unfinished topicflow store (its root group says so)."""
    import json

    try:
        root = json.loads((target / "zarr.json").read_bytes())
    except (FileNotFoundError, ValueError):
        return False
    return isinstance(root, dict) and "topicflow" in (root.get("attributes") or {})


def _remove_quietly(url: str, commit_file: str) -> None:
    try:
        if not (StoragePath(url) / commit_file).is_file():
            remove_prefix(url)
    except Exception as exc:  # the upload's error is the one to report; leftovers carry no manifest
        log.warning("could not remove the partial upload under %s (%s); it has no %s, so no reader uses it",
                    url, exc, commit_file)


def _snapshot(root: Path) -> dict[str, tuple[int, int]]:
    return {p.relative_to(root).as_posix(): (p.stat().st_size, p.stat().st_mtime_ns)
            for p in root.rglob("*") if p.is_file()}


@contextlib.contextmanager
def staged_store_copy(url: str, *, commit_file: str) -> Iterator[Path]:
    """Change an existing store through a local copy; publish what changed, the commit file last.

    The store is downloaded to a staging directory; the block changes it there (as on a local disk,
    where only new files and the commit file may change); then new files are uploaded, the commit
    file is overwritten last, and files the block deleted are deleted (after the commit: garbage by
    then). Before the commit, the commit file on the store must still be the one downloaded; otherwise
    another writer changed the store meanwhile and nothing is committed.

    Parameters
    ----------
    url : str
        An existing store.
    commit_file : str

    Yields
    ------
    Path
        The local copy.
    """
    target = StoragePath(url)
    fs, inner = filesystem(url)
    staging = Path(tempfile.mkdtemp(prefix="topicflow-stage-", dir=staging_root()))
    try:
        local = staging / "store"
        if not (target / commit_file).is_file():
            raise StoreNotFoundError(
                f"no corpus store at {url!r} (no {commit_file}); create one with `topicflow ingest INPUT "
                f"--out {url}`.", path=url)
        _call(url, fs.get, inner.rstrip("/") + "/", str(local), recursive=True)
        original = (local / commit_file).read_bytes()
        before = _snapshot(local)
        yield local
        after = _snapshot(local)
        changed = sorted(name for name, stat in after.items() if before.get(name) != stat and name != commit_file)
        if (local / commit_file).read_bytes() == original:
            return  # nothing committed locally: nothing to publish
        if _call(url, fs.cat_file, f"{inner.rstrip('/')}/{commit_file}") != original:
            raise StoreExistsError(
                f"store {url!r} was changed by another writer during this one; run it again.", path=url)
        publish_directory(local, target.url, commit_file=commit_file, files=changed, create_commit=False)
        for name in sorted(set(before) - set(after)):
            try:
                _call(url, fs.rm, f"{inner.rstrip('/')}/{name}")
            except Exception as exc:  # committed: leftovers are garbage a later append removes
                log.warning("could not delete %s/%s after the commit (%s)", url, name, exc)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
