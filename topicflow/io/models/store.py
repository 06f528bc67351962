"""Saved models: versioned directories of zarr arrays plus JSON; written atomically, never pickled.

This module owns the model directory format (spec in docs/model-format.md): writing and reading one
model, and the version index. The lifecycle of versions (commit, list, rollback, prune, the lock)
lives in :mod:`topicflow.io.models.versions`.

Layout::

    MODEL/
      versions.json                     index: current version, every version's kind/created/summary, history
      .lock                             advisory lock of whoever commits, rolls back or prunes versions
      .lease.json                       the same lock on object storage: a lease (holder, expiry), see lease.py
      versions/<NNNNNN>/                one complete model per version (zero-padded, 000001 first):
        model.json                      format, kind, topics, languages, topic names, settings, traces
        arrays/topic_word_var/<lang>    lambda, (n_topics, n_terms) float64
        arrays/sampler_state/<name>     streaming samplers only: their exact state (e.g. SGS's decayed counts)
        arrays/doc_topic_prior          alpha, (n_topics,) float64
        arrays/topic_word_prior/<lang>  eta as a matrix (informed priors only; else a scalar in JSON)
        vocab/<lang>/                   terms, doc_freq, corpus_freq (same arrays as a corpus store)

``versions.json`` is the commit point: a directory under ``versions/`` that it does not list is
unfinished work and is removed by the next commit. A legacy model (written before versions existed)
is a single model directory at ``MODEL/`` itself; it loads as version 1 and is converted to this
layout by the first :func:`topicflow.io.models.versions.commit_version`.

On object storage (a URL, docs/storage.md) the layout is the same. :func:`save_model` uploads the
version's objects under their own prefix and then ``versions.json`` with a conditional put (the
commit); :func:`load_model` reads ``versions.json`` and then that prefix. The lock there is a lease
object, ``MODEL/.lease.json`` instead of ``MODEL/.lock`` (:mod:`topicflow.io.models.lease`), on object
stores with conditional writes (s3://, memory://); elsewhere whatever needs it (update, rollback,
prune) is refused (:func:`refuse_remote_lock`).
"""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Union, cast

import numpy as np
import zarr
from zarr.codecs import ZstdCodec

from topicflow._typing import VersionKind, choices
from topicflow._version import __version__
from topicflow.errors import (
    CorpusFormatError,
    InvalidParameterError,
    LockedError,
    ModelFormatError,
    ModelNotFoundError,
    StoreExistsError,
)
from topicflow.io import storage
from topicflow.io._atomic import (
    atomic_output_file,
    atomic_write_json,
    check_output_path,
    commit_directory,
    disk_full_guard,
    exclusive_lock,
    final_of_temporary,
    read_json,
    temporary_sibling,
)
from topicflow.io._zarr import check_format, read_arrays
from topicflow.io.corpus.reader import read_vocabulary
from topicflow.io.corpus.writer import write_vocabulary
from topicflow.io.models import lease as lease_module
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.lease import LEASE_FILE as LEASE_FILE_REMOTE
from topicflow.io.models.lease import ModelLease
from topicflow.io.models.validation import model_problems
from topicflow.io.storage import Location, StoragePath, url_of
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState

MODEL_FORMAT = "topicflow-model"
#: Where a saved model is named on the command line (for the "not on object storage yet" message).
MODEL_ARGUMENT = "the MODEL argument of topics, infer, evaluate, export, update, versions"
MODEL_FORMAT_VERSION = 1
VERSIONS_FORMAT = "topicflow-model-versions"
VERSIONS_FORMAT_VERSION = 1
MODEL_JSON = "model.json"
VERSIONS_JSON = "versions.json"
VERSIONS_DIR = "versions"
LOCK_FILE = ".lock"
#: Compression of a model's arrays: zarr's default zstd (level 0) plus zstd's frame checksum, so a
#: damaged chunk fails to decode instead of decoding to plausible wrong numbers (readers of every
#: version verify it; models written without it still read).
MODEL_COMPRESSOR = ZstdCodec(level=0, checksum=True)
#: What a legacy (unversioned) model directory holds at its top level.
LEGACY_ENTRIES = (MODEL_JSON, "arrays", "vocab")

#: How a version was made: a full fit, or an incremental update of the previous current version.
VERSION_KINDS: tuple[str, ...] = choices(VersionKind)


@dataclass(frozen=True)
class SavedModel:
    """A model as stored: its state, the vocabulary of each language and its JSON description."""

    state: LDAState
    vocabularies: dict[str, Vocabulary]
    #: What the model says about itself: family, how it was made, settings, trace, provenance. A
    #: mapping is read as ``model.json`` would be (:meth:`ModelInfo.from_json`).
    info: ModelInfo = field(default_factory=ModelInfo)
    #: Version it was loaded from (None for a model not read from disk); never written.
    version: int | None = None
    #: Exact state of a streaming sampler that continues the model (e.g. SGS's decayed counts), by name.
    sampler_state: dict[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not isinstance(self.info, ModelInfo):
            object.__setattr__(self, "info", ModelInfo.from_json(self.info))


# ----------------------------------------------------------------------------- version index


def utc_now() -> str:
    """The current time as ISO-8601 UTC (what ``created`` and history entries hold)."""
    return datetime.now(timezone.utc).isoformat()


def parse_version_kind(kind: str) -> VersionKind:
    """``kind`` if it is one of :data:`VERSION_KINDS`, else InvalidParameterError listing them."""
    if kind not in VERSION_KINDS:
        raise InvalidParameterError(f"version kind must be one of {list(VERSION_KINDS)!r}, got {kind!r}.")
    return kind  # type: ignore[return-value]


@dataclass(frozen=True, slots=True)
class VersionRecord:
    """One version as ``versions.json`` lists it.

    Attributes
    ----------
    version : int
        Positive; also the name of its directory, ``versions/<version:06d>``.
    created : str
        ISO-8601 UTC time of the commit.
    kind : {"fit", "update"}
    summary : dict
        Free JSON given by whoever committed it (documents processed, store, ELBO, ...).
    parent : int or None
        The version that was current when this one was committed (None for the first).
    """

    version: int
    created: str
    kind: str
    summary: dict[str, Any]
    parent: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version, "created": self.created, "kind": self.kind,
                "summary": dict(self.summary), "parent": self.parent}

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> VersionRecord:
        if not isinstance(payload, Mapping):
            raise TypeError(f"a version entry is a JSON {type(payload).__name__}, not an object")
        parent = payload.get("parent")
        summary = payload.get("summary") or {}
        if not isinstance(summary, Mapping):
            raise TypeError(f"the summary of a version is {summary!r}, not an object")
        return cls(version=_version_number(payload["version"], "version"), created=str(payload["created"]),
                   kind=str(payload["kind"]), summary=dict(summary),
                   parent=None if parent is None else _version_number(parent, "parent"))


def _version_number(value: Any, field: str) -> int:
    """``value`` if it is a version number (an integer from 1), else TypeError naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise TypeError(f"{field} is {value!r}, expected an integer from 1")
    return value


@dataclass(frozen=True, slots=True)
class VersionIndex:
    """The content of ``versions.json``: which versions exist and which one is current.

    Attributes
    ----------
    current : int
        The version :func:`load_model` reads by default; always one of ``versions``.
    versions : tuple of VersionRecord
        In increasing version order.
    history : tuple of dict
        Events in order: ``{"action": "commit" | "rollback" | "prune" | "convert", "time": ..., ...}``.
    """

    current: int
    versions: tuple[VersionRecord, ...]
    history: tuple[dict[str, Any], ...] = ()

    @property
    def numbers(self) -> list[int]:
        return [r.version for r in self.versions]

    @property
    def next_version(self) -> int:
        """Number of the next commit: one more than the highest listed (pruning never removes it)."""
        return max(self.numbers, default=0) + 1

    def require(self, version: int, *, path: str) -> VersionRecord:
        """The record of ``version``, or ModelNotFoundError listing the available versions."""
        for record in self.versions:
            if record.version == version:
                return record
        raise ModelNotFoundError(
            f"model {path!r} has no version {version!r}; it has versions {self.numbers} (current "
            f"{self.current}). See `topicflow versions {path}`.",
            path=path,
        )

    def with_new_version(self, *, kind: str, summary: Mapping[str, Any]) -> VersionIndex:
        """This index with version :attr:`next_version` added and made current."""
        parent = self.current if self.versions else None
        record = VersionRecord(version=self.next_version, created=utc_now(), kind=parse_version_kind(kind),
                               summary=dict(summary), parent=parent)
        event = {"action": "commit", "time": record.created, "version": record.version, "kind": record.kind,
                 "previous": parent}
        return VersionIndex(current=record.version, versions=self.versions + (record,),
                            history=self.history + (event,))

    @classmethod
    def empty(cls) -> VersionIndex:
        """The index of a model with no version yet (never written as is)."""
        return cls(current=0, versions=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": VERSIONS_FORMAT,
            "format_version": VERSIONS_FORMAT_VERSION,
            "current": self.current,
            "versions": [r.to_dict() for r in self.versions],
            "history": list(self.history),
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any], *, path: str) -> VersionIndex:
        check_format(payload, path=path, name=VERSIONS_FORMAT, version=VERSIONS_FORMAT_VERSION)
        try:
            versions = payload["versions"]
            history = payload.get("history", ())
            if not isinstance(versions, list) or not isinstance(history, list | tuple):
                raise TypeError(f"'versions' is {type(versions).__name__} and 'history' {type(history).__name__}; "
                                "both must be lists")
            index = cls(current=_version_number(payload["current"], "current"),
                        versions=tuple(sorted((VersionRecord.from_dict(v) for v in versions),
                                              key=lambda r: r.version)),
                        history=tuple(history))
        except (KeyError, TypeError, ValueError) as exc:
            raise CorpusFormatError(
                f"version index {path!r} is damaged ({exc!r}); restore it from a copy or refit the model.",
                path=path,
            ) from exc
        if index.current not in index.numbers:
            raise CorpusFormatError(
                f"version index {path!r} is damaged: current version {index.current} is not among the "
                f"listed versions {index.numbers}; restore it from a copy or refit the model.",
                path=path,
            )
        return index


#: What the model functions take: a local path (``str`` or path-like) or a URL (``str`` or StoragePath).
ModelPath = Union[str, os.PathLike[str], StoragePath]


def _local_path(path: ModelPath) -> Path:
    """``path`` as a local :class:`~pathlib.Path` (callers have handled URLs with :func:`url_of` first)."""
    return Path(cast("str | os.PathLike[str]", path))


def version_name(version: int) -> str:
    """Directory name of ``version`` under ``versions/``: six digits, zero-padded."""
    return f"{version:06d}"


def version_path(path: Path, version: int) -> Path:
    """The model directory of ``version`` of the model at ``path``."""
    return Path(path) / VERSIONS_DIR / version_name(version)


def read_version_index(path: ModelPath) -> VersionIndex | None:
    """The index of the model at ``path``, or None when it has none (legacy layout, or no model)."""
    url = url_of(path)
    if url is not None:
        tagged = storage.read_tagged(f"{url}/{VERSIONS_JSON}")
        return None if tagged is None else _parse_index(tagged[0], f"{url}/{VERSIONS_JSON}")
    file = Path(cast(Path, path)) / VERSIONS_JSON
    if not file.is_file():
        return None
    try:
        payload = read_json(file)
    except ValueError as exc:
        raise CorpusFormatError(
            f"{str(file)!r} is not valid JSON ({exc}); restore it from a copy or refit the model.",
            path=str(path),
        ) from exc
    return VersionIndex.from_dict(payload, path=str(file))


def read_remote_index(url: str) -> tuple[VersionIndex, tuple[bytes, str | None]]:
    """The index of the model at ``url`` and ``versions.json`` as read (what a conditional commit compares with).

    Raises
    ------
    ModelNotFoundError
        No ``versions.json`` at ``url``.
    """
    index_url = f"{url}/{VERSIONS_JSON}"
    tagged = storage.read_tagged(index_url)
    if tagged is None:
        raise ModelNotFoundError(
            f"no topicflow model at {url!r} (no {VERSIONS_JSON}; an interrupted save leaves none); fit one with "
            f"`topicflow fit STORE --model {url}`.", path=url)
    return _parse_index(tagged[0], index_url), tagged


def _parse_index(data: bytes, where: str) -> VersionIndex:
    try:
        payload = json.loads(data)
    except ValueError as exc:
        raise CorpusFormatError(f"{where!r} is not valid JSON ({exc}); restore it from a copy or refit the model.",
                                path=where) from exc
    return VersionIndex.from_dict(payload, path=where)


def index_bytes(index: VersionIndex) -> bytes:
    """``versions.json`` as written: indented, key-sorted JSON (the bytes :func:`write_version_index` writes)."""
    return (json.dumps(index.to_dict(), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode("utf-8")


def write_version_index(path: Path, index: VersionIndex) -> None:
    """Commit point of every version change: atomically replace ``versions.json``."""
    atomic_write_json(Path(path) / VERSIONS_JSON, index.to_dict())


def is_legacy_model(path: Path) -> bool:
    """Whether ``path`` holds a model written before versions existed (``model.json`` at the top)."""
    path = Path(path)
    return not (path / VERSIONS_JSON).is_file() and (path / MODEL_JSON).is_file()


def model_not_found(path: Path) -> ModelNotFoundError:
    """The error for a path that holds no model, saying what to do."""
    where = str(path)
    detail = (" (the directory has neither versions.json nor model.json)" if Path(path).is_dir() else "")
    return ModelNotFoundError(
        f"no topicflow model at {where!r}{detail}; fit one with `topicflow fit STORE --model {where}`.",
        path=where,
    )


def summary_of(info: ModelInfo) -> dict[str, Any]:
    """A short version summary taken from a model's ``info`` (what ``topicflow versions`` shows)."""
    corpus = info.corpus
    summary: dict[str, Any] = {}
    for key, value in (("method", info.method), ("store", corpus.get("path")),
                       ("n_docs", corpus.get("n_docs")), ("n_tokens", corpus.get("n_tokens")),
                       ("converged", info.converged if info.kind == "vb_lda" else None),
                       ("topics_in_use", info.topics_in_use)):
        if value is not None:
            summary[key] = value
    if info.trace:
        summary["n_iterations"] = len(info.trace)
    return summary


# ----------------------------------------------------------------------------- lock


#: Model locks this process holds, by resolved lock path, with the thread holding each.
_HELD_LOCKS: dict[str, int] = {}
_HELD_LOCKS_GUARD = threading.Lock()


def lock_key(path: Path) -> str:
    """The resolved path of the model's lock file, identifying the lock within this process."""
    return str((Path(path) / LOCK_FILE).resolve())


def holds_model_lock(path: ModelPath) -> bool:
    """Whether the calling thread holds :func:`model_lock` on the model at ``path`` (local or URL)."""
    url = url_of(path)
    if url is not None:
        return held_lease(url) is not None
    with _HELD_LOCKS_GUARD:
        return _HELD_LOCKS.get(lock_key(cast(Path, path))) == threading.get_ident()


@contextlib.contextmanager
def model_lock(path: ModelPath, *, action: str = "change") -> Iterator[None]:
    """Hold the model's lock or fail at once with LockedError.

    On a local disk the lock is advisory (``fcntl.flock`` on ``MODEL/.lock``); on object storage it is
    a lease object, ``MODEL/.lease.json``, taken and renewed by conditional writes
    (:mod:`topicflow.io.models.lease`). Re-entrant within one thread, so a caller holding the lock can
    also call :func:`~topicflow.io.models.versions.rollback` or
    :func:`~topicflow.io.models.versions.prune_versions`. See
    :func:`topicflow.io.models.versions.model_lock`, which documents it in full.

    Parameters
    ----------
    path : Path or URL
        Model directory.
    action : str, default "change"
        What the caller is about to do, named in the error message.

    Yields
    ------
    None
        The lock is held while the ``with`` block runs.

    Raises
    ------
    ModelNotFoundError
        If ``path`` holds no model.
    LockedError
        If another process holds the lock (on object storage: an unexpired lease).
    UnsupportedStorageError
        A URL whose object store has no conditional writes topicflow uses (``gs://``, ``az://``).
    """
    url = url_of(path)
    if url is not None:
        with remote_model_lock(url, action=action, require_model=True):
            yield
        return
    path = Path(cast(Path, path))
    if not (path / VERSIONS_JSON).is_file() and not (path / MODEL_JSON).is_file():
        raise model_not_found(path)
    if holds_model_lock(path):
        yield
        return
    stack = contextlib.ExitStack()
    with stack:
        try:
            stack.enter_context(exclusive_lock(path / LOCK_FILE, what=f"model {str(path)!r}"))
        except LockedError as exc:
            raise LockedError(
                f"model {str(path)!r} is locked by another topicflow process, which is changing it (an "
                f"update, rollback, prune or fit --overwrite holds {str(path / LOCK_FILE)!r}), so this "
                f"{action} did not start. Wait for that process to finish, then retry; the lock is released "
                "when it exits, so nothing needs deleting.",
                path=str(path),
            ) from exc
        key = lock_key(path)
        with _HELD_LOCKS_GUARD:
            _HELD_LOCKS[key] = threading.get_ident()
        try:
            yield
        finally:
            with _HELD_LOCKS_GUARD:
                _HELD_LOCKS.pop(key, None)


#: Leases this process holds on models on object storage, by lease URL (beside :data:`_HELD_LOCKS`).
_HELD_LEASES: dict[str, ModelLease] = {}


@contextlib.contextmanager
def remote_model_lock(url: str, *, action: str, require_model: bool = True,
                      clock: lease_module.Clock | None = None) -> Iterator[ModelLease]:
    """Hold the lease of the model at ``url`` (``URL/.lease.json``), renewed in the background.

    Parameters
    ----------
    url : str
        The model's URL.
    action : str
        Named in the lease and in errors.
    require_model : bool, default True
        Refuse a URL without ``versions.json`` (False for :func:`save_model` of a new model).
    clock : callable, optional
        Seconds since the epoch (default :func:`time.time`); tests inject one.

    Yields
    ------
    ModelLease
        The held lease (the same object for a re-entrant use by the holding thread).

    Raises
    ------
    LockedError
        Another process holds an unexpired lease.
    UnsupportedStorageError
        The object store has no conditional writes topicflow uses.
    """
    url = StoragePath(url).url  # one key per model, whatever trailing slash it was given with
    refuse_remote_lock(url, action=action)
    storage.check_bucket(StoragePath(url))
    if require_model and storage.read_tagged(f"{url}/{VERSIONS_JSON}") is None:
        raise ModelNotFoundError(
            f"no topicflow model at {url!r} (no {VERSIONS_JSON}); fit one with `topicflow fit STORE --model {url}`.",
            path=url)
    key = f"{url}/{LEASE_FILE_REMOTE}"
    with _HELD_LOCKS_GUARD:
        mine = _HELD_LOCKS.get(key) == threading.get_ident()
        held = _HELD_LEASES.get(key)
    if mine and held is not None:
        yield held
        return
    lease = ModelLease.acquire(key, action=action, model=url, clock=time.time if clock is None else clock)
    with _HELD_LOCKS_GUARD:
        _HELD_LOCKS[key], _HELD_LEASES[key] = threading.get_ident(), lease
    try:
        lease.start_renewing()
        yield lease
    finally:
        with _HELD_LOCKS_GUARD:
            _HELD_LOCKS.pop(key, None)
            _HELD_LEASES.pop(key, None)
        lease.release()


def held_lease(url: str) -> ModelLease | None:
    """The lease the calling thread holds on the model at ``url``, or None."""
    key = f"{StoragePath(url).url}/{LEASE_FILE_REMOTE}"
    with _HELD_LOCKS_GUARD:
        if _HELD_LOCKS.get(key) != threading.get_ident():
            return None
        return _HELD_LEASES.get(key)


def refuse_remote_lock(path: Any, *, action: str) -> None:
    """Refuse an ``action`` that needs the model's lock (update, rollback, prune) where no lock can be kept.

    A local path, ``s3://`` and ``memory://`` pass (a file lock, or a lease object: docs/storage.md);
    other object stores are refused, saying why.

    Parameters
    ----------
    path : path or URL
    action : str
        What was asked (``"update"``...), named in the message.

    Raises
    ------
    UnsupportedStorageError
        ``path`` is a URL on an object store without the conditional writes the lease needs.
    """
    url = url_of(path)
    if url is not None:
        lease_module.require_lease_support(url, action=action)


# ----------------------------------------------------------------------------- one model


def save_model(path: ModelPath, model: SavedModel, *, overwrite: bool = False) -> None:
    """Write ``model`` as a new versioned model directory whose only version, 1, is a ``"fit"``.

    The whole directory is built in a temporary sibling and renamed into place, so ``path`` is
    either absent (or the old model) or complete. Replacing an existing model (``overwrite``)
    discards its versions and takes its lock, so it fails while an update is running. For a URL
    (also one ``pathlib`` collapsed, ``s3:/bucket/m``) the version's objects are uploaded first and
    ``versions.json`` last by a conditional put, and no lock is taken (docs/storage.md).

    Parameters
    ----------
    path : path or URL
        Model directory to create (``s3://bucket/models/news``, ``memory://...`` work too).
    model : SavedModel
    overwrite : bool
        Replace an existing ``path`` once the new model is complete.

    Raises
    ------
    StoreExistsError
        ``path`` exists and ``overwrite`` is False.
    LockedError
        ``overwrite`` of a model that another process is changing.

    Examples
    --------
    >>> save_model(Path("model"), estimator.model_)   # doctest: +SKIP
    >>> load_model(Path("model")).version              # doctest: +SKIP
    1
    """
    url = url_of(path)
    if url is not None:
        _save_remote(url, model, overwrite=overwrite)
        return
    path = _local_path(path)
    check_output_path(path, overwrite=overwrite, what="model")
    path.parent.mkdir(parents=True, exist_ok=True)
    unchanged = (f"the model already at {str(path)!r} was left as it was." if path.exists()
                 else f"nothing was written at {str(path)!r}.")
    tmp = temporary_sibling(path)
    with disk_full_guard(path, what="model", unchanged=unchanged):
        try:
            write_model_dir(tmp / VERSIONS_DIR / version_name(1), model)
            write_version_index(tmp, VersionIndex.empty().with_new_version(kind="fit",
                                                                           summary=summary_of(model.info)))
            replacing_model = overwrite and ((path / VERSIONS_JSON).is_file() or (path / MODEL_JSON).is_file())
            with model_lock(path, action="overwrite") if replacing_model else contextlib.nullcontext():
                commit_directory(tmp, path, overwrite=overwrite)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise


def write_model_dir(directory: Path, model: SavedModel) -> None:
    """Write one model (``model.json``, ``arrays/``, ``vocab/``) into the new directory ``directory``.

    Not atomic by itself: callers write to a temporary name and rename (:func:`save_model`,
    :func:`topicflow.io.models.versions.commit_version`).
    """
    state = model.state
    arrays = zarr.open_group(str(directory / "arrays"), mode="w")
    arrays.create_array("doc_topic_prior", data=np.asarray(state.doc_topic_prior, dtype=np.float64),
                        compressors=MODEL_COMPRESSOR)
    lam_group = arrays.create_group("topic_word_var")
    prior_group = arrays.create_group("topic_word_prior")
    priors: dict[str, Any] = {}
    for lang in state.languages:
        lam = np.asarray(state.topic_word_var[lang], dtype=np.float64)
        lam_group.create_array(lang, data=lam, chunks=(lam.shape[0], max(1, min(lam.shape[1], 65536))),
                               compressors=MODEL_COMPRESSOR)
        prior = state.topic_word_prior[lang]
        if np.ndim(prior) == 0:
            priors[lang] = float(prior)
        else:
            prior_group.create_array(lang, data=np.asarray(prior, dtype=np.float64), compressors=MODEL_COMPRESSOR)
            priors[lang] = "matrix"
        write_vocabulary(directory / "vocab" / lang, model.vocabularies[lang])
    if model.sampler_state:
        sampler_group = arrays.create_group("sampler_state")
        for name, value in model.sampler_state.items():
            sampler_group.create_array(name, data=np.asarray(value), compressors=MODEL_COMPRESSOR)
    payload = model.info.to_json()
    payload.update(
        format=MODEL_FORMAT,
        format_version=MODEL_FORMAT_VERSION,
        topicflow_version=__version__,
        saved=datetime.now(timezone.utc).isoformat(),
        n_topics=state.n_topics,
        languages=list(state.languages),
        vocab_sizes={lang: state.n_terms(lang) for lang in state.languages},
        topic_names=list(state.topic_names),
        topic_word_prior=priors,
        sampler_state=sorted(model.sampler_state),
    )
    atomic_write_json(directory / "model.json", payload)


def load_model(path: ModelPath, version: int | None = None) -> SavedModel:
    """Read the current version (or ``version``) of the model at ``path``.

    Parameters
    ----------
    path : path or URL
        A model directory written by :func:`save_model` (local, or a URL on object storage), or a
        legacy one (``model.json`` at its top, written before versions existed), which loads as version 1.
    version : int, optional
        Default: the current version (see ``topicflow versions MODEL``).

    Returns
    -------
    SavedModel
        With :attr:`SavedModel.version` set to the version read.

    Raises
    ------
    ModelNotFoundError
        No model at ``path``, or no such version (the message lists the available ones).
    FormatVersionError
        The model was written by a newer topicflow.
    CorpusFormatError
        The model is damaged or incomplete.

    Examples
    --------
    >>> model = load_model(Path("model"))              # doctest: +SKIP
    >>> previous = load_model(Path("model"), version=model.version - 1)  # doctest: +SKIP
    """
    url = url_of(path)
    if url is not None:
        directory, number = _remote_version(url, version)
        return read_model_dir(directory, model_path=StoragePath(url), version=number)
    path = _local_path(path)
    index = read_version_index(path)
    if index is None:
        if not (path / MODEL_JSON).is_file():
            raise model_not_found(path)
        if version is not None and version != 1:
            raise ModelNotFoundError(
                f"model {str(path)!r} has no version {version!r}; it is an unversioned (legacy) model, "
                "which only has version 1.",
                path=str(path),
            )
        return read_model_dir(path, model_path=path, version=1)
    number = index.current if version is None else index.require(version, path=str(path)).version
    return read_model_dir(version_path(path, number), model_path=path, version=number)


def read_model_info(path: ModelPath, version: int | None = None) -> ModelInfo:
    """Read only what a version of the model at ``path`` says about itself (its ``model.json``).

    Cheaper than :func:`load_model` when the arrays are not needed (a report reading the trace of
    every version).

    Parameters
    ----------
    path : path or URL
        A model directory (versioned or legacy), local or on object storage.
    version : int, optional
        Default: the current version.

    Returns
    -------
    ModelInfo

    Raises
    ------
    ModelNotFoundError
        No model at ``path``, or no such version.
    ModelFormatError
        ``model.json`` is missing, not JSON, or written by a newer topicflow.
    """
    url = url_of(path)
    directory: Location
    if url is not None:
        directory, number = _remote_version(url, version)
        info = _read_model_json(directory, StoragePath(url), number)
        return ModelInfo.from_json(info, where=f"model {url!r} version {number}: {MODEL_JSON}")
    path = _local_path(path)
    index = read_version_index(path)
    if index is None:
        if not (path / MODEL_JSON).is_file():
            raise model_not_found(path)
        number, directory = 1, path
    else:
        number = index.current if version is None else index.require(version, path=str(path)).version
        directory = version_path(path, number)
    info = _read_model_json(directory, path, number)
    return ModelInfo.from_json(info, where=f"model {str(path)!r} version {number}: {MODEL_JSON}")


def damaged_model(model_path: Location, version: int | None, field: str, problem: str) -> ModelFormatError:
    """The error of a model that cannot be used: where, which field, what is wrong and what to do.

    Parameters
    ----------
    model_path : Path or StoragePath
        The model directory (as the user named it).
    version : int or None
        The version read.
    field : str
        The inconsistent ``model.json`` key or array (``"doc_topic_prior"``, ``"topic_word_var/en"``, ...).
    problem : str
        What is wrong, as clauses naming their subjects, joined by ``"; "``.

    Returns
    -------
    ModelFormatError
        Whose message ends with what to do: refit, or roll back to a sound version.
    """
    where = repr(str(model_path)) + ("" if version is None else f" version {version}")
    return ModelFormatError(
        f"model {where} is damaged: {problem}; refit the model, or make an earlier version current with "
        f"`topicflow rollback {model_path} VERSION` (`topicflow versions {model_path}` lists them).",
        path=str(model_path),
        version=version,
        field=field,
        problem=problem,
    )


def _read_model_json(directory: Location, model_path: Location, version: int | None) -> dict[str, Any]:
    """``model.json`` of ``directory``, checked to be a model description this topicflow reads."""
    try:
        info = read_json(directory / MODEL_JSON)
    except FileNotFoundError as exc:
        raise damaged_model(model_path, version, MODEL_JSON,
                            f"it is incomplete (no {MODEL_JSON} in {str(directory)!r})") from exc
    except ValueError as exc:
        raise damaged_model(model_path, version, MODEL_JSON, f"{MODEL_JSON} is not valid JSON ({exc})") from exc
    if not isinstance(info, dict):
        raise damaged_model(model_path, version, MODEL_JSON, f"{MODEL_JSON} holds a {type(info).__name__}, "
                                                             "not an object")
    check_format(info, path=str(directory), name=MODEL_FORMAT, version=MODEL_FORMAT_VERSION)
    expected = {"languages": (list, "a non-empty list of languages"),
                "topic_word_prior": (dict, "an object giving each language's prior"),
                "sampler_state": (list, "a list of array names")}
    for key, (kind, what) in expected.items():
        required = key != "sampler_state"
        if (required or key in info) and not (isinstance(info.get(key), kind) and (info[key] or not required)):
            raise damaged_model(model_path, version, key, f"{key} is {info.get(key)!r} in {MODEL_JSON}, "
                                                          f"expected {what}")
    return info


def _read_model_arrays(directory: Location, names: list[str], model_path: Location,
                       version: int | None) -> dict[str, np.ndarray]:
    """The arrays ``directory/arrays/<name>``, any missing or undecodable one reported as damage."""
    try:
        return read_arrays(directory / "arrays", names)
    except CorpusFormatError as exc:
        failed, root = str(exc.path or directory / "arrays"), str(directory / "arrays")
        field = failed[len(root) + 1:] if failed.startswith(root + "/") else "arrays"
        raise damaged_model(model_path, version, field, str(exc)) from exc


def read_model_dir(directory: Location, *, model_path: Location, version: int | None) -> SavedModel:
    """Read and validate the model written by :func:`write_model_dir` at ``directory``.

    Every array is checked against ``model.json`` and for sound values
    (:func:`topicflow.io.models.validation.model_problems`) before the model is returned.

    Parameters
    ----------
    directory : Path
        The directory holding ``model.json``, ``arrays/`` and ``vocab/``.
    model_path : Path
        The model as the user named it (messages name it).
    version : int or None
        The version ``directory`` holds (messages name it).

    Returns
    -------
    SavedModel
        With :attr:`SavedModel.version` set to ``version``.

    Raises
    ------
    ModelFormatError
        A file is missing or cannot be decoded, or the arrays contradict ``model.json`` (sizes,
        languages, vocabulary lengths) or hold unsound values (non-finite, or not positive where a
        Dirichlet parameter must be); the message names the field.
    FormatVersionError
        The model was written by a newer topicflow.
    """
    info = _read_model_json(directory, model_path, version)
    languages = [str(lang) for lang in info["languages"]]
    matrices = [lang for lang, prior in info["topic_word_prior"].items() if prior == "matrix"]
    samplers = [str(name) for name in info.get("sampler_state", [])]
    names = (["doc_topic_prior"] + [f"topic_word_var/{lang}" for lang in languages]
             + [f"topic_word_prior/{lang}" for lang in matrices] + [f"sampler_state/{name}" for name in samplers])
    arrays = _read_model_arrays(directory, names, model_path, version)
    vocabularies = {}
    for lang in languages:
        try:
            vocabularies[lang] = read_vocabulary(directory / "vocab" / lang)
        except CorpusFormatError as exc:
            raise damaged_model(model_path, version, f"vocab/{lang}", str(exc)) from exc
    lam = {lang: arrays[f"topic_word_var/{lang}"] for lang in languages}
    priors: dict[str, Any] = {lang: arrays[f"topic_word_prior/{lang}"] if lang in matrices else prior
                              for lang, prior in info["topic_word_prior"].items()}
    sampler_state = {name: arrays[f"sampler_state/{name}"] for name in samplers}
    problems = model_problems(info, lam, arrays["doc_topic_prior"], priors, vocabularies, sampler_state)
    if problems:
        raise damaged_model(model_path, version, problems[0][0],
                            "; ".join(f"{field} {problem}" for field, problem in problems))
    state = LDAState(
        topic_word_var=lam,
        doc_topic_prior=arrays["doc_topic_prior"],
        topic_word_prior={lang: prior if lang in matrices else float(prior) for lang, prior in priors.items()},
        topic_names=tuple(info.get("topic_names") or ()),
    )
    where = str(model_path) if version is None else f"model {str(model_path)!r} version {version}"
    record = ModelInfo.from_json(info, where=f"{where}: {MODEL_JSON}")
    return SavedModel(state=state, vocabularies=vocabularies, info=record, version=version,
                      sampler_state=sampler_state)


# ----------------------------------------------------------------------------- models on object storage


def _remote_version(url: str, version: int | None) -> tuple[StoragePath, int]:
    """The prefix and number of ``version`` (default: the current one) of the model at ``url``."""
    storage.check_bucket(StoragePath(url))
    index = read_version_index(StoragePath(url))
    if index is None:
        raise ModelNotFoundError(
            f"no topicflow model at {url!r} (no {VERSIONS_JSON}; an interrupted save leaves none); fit one with "
            f"`topicflow fit STORE --model {url}`.", path=url)
    number = index.current if version is None else index.require(version, path=url).version
    return StoragePath(url) / VERSIONS_DIR / version_name(number), number


def _save_remote(url: str, model: SavedModel, *, overwrite: bool) -> None:
    """:func:`save_model` on object storage: the version's objects first, ``versions.json`` last, conditionally.

    The model's lease is held throughout (where the object store supports one: s3://, memory://), so
    no update, rollback or prune runs meanwhile. The new version goes under its own prefix,
    ``versions/<N>/``, with N one more than the highest version listed (1 for a new model), so the
    current version's objects are never touched. The commit is one conditional put of
    ``versions.json``: ``If-None-Match: *`` for a new model, ``If-Match`` on the ETag read before for an
    overwrite, so of two writers only one commits. After the commit, prefixes under ``versions/`` that
    the index does not list (old versions of an overwritten model, leftovers of a failed save) are
    deleted; a failure before it leaves the previous ``versions.json`` and every version it lists untouched.
    """
    storage.check_bucket(StoragePath(url))
    index_url = f"{url}/{VERSIONS_JSON}"
    if storage.read_tagged(index_url) is not None and not overwrite:
        raise StoreExistsError(
            f"model path {url!r} exists already; choose another path or pass --overwrite (overwrite=True) to "
            "replace it once the new model is complete.", path=url)
    locked = (remote_model_lock(url, action="overwrite" if overwrite else "save", require_model=False)
              if lease_module.supports_lease(url) else contextlib.nullcontext())
    with locked as lease:
        previous = storage.read_tagged(index_url)
        if previous is not None and not overwrite:
            raise StoreExistsError(
                f"model path {url!r} exists already; choose another path or pass --overwrite (overwrite=True) to "
                "replace it once the new model is complete.", path=url)
        number = 1 if previous is None else _parse_index(previous[0], index_url).next_version
        record = VersionRecord(version=number, created=utc_now(), kind="fit", summary=summary_of(model.info))
        event = {"action": "commit", "time": record.created, "version": number, "kind": "fit", "previous": None}
        index = VersionIndex(current=number, versions=(record,), history=(event,))
        upload_version(url, number, model)
        if lease is not None:
            lease.renew()  # safe point: nobody took the lease over while this one uploaded
        try:
            storage.replace_object(index_url, index_bytes(index), previous=previous)
        except FileExistsError as exc:
            raise StoreExistsError(
                f"model {url!r} was saved by another writer while this one uploaded (its {VERSIONS_JSON} "
                "changed), so this save did not commit; the other writer's model is current. Run it again to "
                "replace that one.", path=url) from exc
        remove_remote_debris(url, index)


def upload_version(url: str, number: int, model: SavedModel) -> str:
    """Write ``model`` under ``URL/versions/<number>/`` (built locally, then uploaded); return that prefix.

    Objects already under that prefix (leftovers of a failed or killed earlier write of the same
    number, which no index lists) are deleted first. Nothing lists the prefix until the caller
    commits ``versions.json``.
    """
    prefix = f"{url}/{VERSIONS_DIR}/{version_name(number)}"
    staging = Path(tempfile.mkdtemp(prefix="topicflow-model-", dir=storage.staging_root()))
    try:
        write_model_dir(staging / "version", model)
        storage.remove_prefix(prefix)  # leftovers of an earlier failed save of this number: never listed
        storage.upload_files(staging / "version", prefix)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return prefix


def remove_remote_debris(url: str, index: VersionIndex) -> list[str]:
    """Delete the prefixes under ``URL/versions/`` that ``index`` does not list; return their names.

    Failures are logged, not raised: what is left is unlisted, so no reader uses it, and the next save
    removes it.
    """
    import logging

    listed = {version_name(n) for n in index.numbers}
    removed = []
    try:
        root = StoragePath(url) / VERSIONS_DIR
        for child in list(root.iterdir()):
            if child.name not in listed:
                storage.remove_prefix(child.url)
                removed.append(f"{VERSIONS_DIR}/{child.name}")
    except Exception as exc:  # committed already: leftovers are garbage a later save removes
        logging.getLogger(__name__).warning("could not remove unlisted versions under %s (%s)", url, exc)
    return removed


def export_npz(path: Path, model: SavedModel) -> dict[str, tuple[int, ...]]:
    """Write ``topic_word`` (rows normalized), ``alpha`` and ``vocab`` per language to an ``.npz``.

    A monolingual model uses plain names; a polylingual one suffixes each with ``_<lang>``.
    Returns the names and shapes written.
    """
    path = Path(path)
    state = model.state
    topic_word = state.topic_word()
    multi = len(state.languages) > 1
    arrays: dict[str, np.ndarray] = {"alpha": np.asarray(state.doc_topic_prior)}
    arrays["topic_names"] = np.array([state.topic_label(k) for k in range(state.n_topics)], dtype=str)
    for lang in state.languages:
        suffix = f"_{lang}" if multi else ""
        arrays[f"topic_word{suffix}"] = topic_word[lang]
        arrays[f"vocab{suffix}"] = np.asarray(model.vocabularies[lang].terms, dtype=str)
    final = final_of_temporary(path)  # the CLI stages the file under a temporary name
    unchanged = (f"the file already at {str(final)!r} was left as it was." if final.exists()
                 else f"nothing was written at {str(final)!r}.")
    with disk_full_guard(final, what="export", unchanged=unchanged):
        with atomic_output_file(path) as tmp, open(tmp, "wb") as handle:
            np.savez(handle, **cast(dict[str, Any], arrays))  # savez's stubs type **kwds like allow_pickle
    return {name: tuple(a.shape) for name, a in arrays.items()}

