"""zarr helpers shared by the corpus store and the model store."""
from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any, Mapping, Sequence, cast

import numpy as np
import zarr
import zarr.api.asynchronous as zarr_async
from zarr.core.sync import sync as zarr_sync

from topicflow.errors import CorpusFormatError, FormatVersionError
from topicflow.io.storage import StoragePath, as_location, zarr_store


def check_format(payload: Mapping[str, Any], *, path: str, name: str, version: int) -> None:
    """Refuse files of another kind or of a newer format version, with a message saying what to do."""
    if not isinstance(payload, Mapping):
        raise CorpusFormatError(
            f"{path!r} is not a {name} file (it holds a JSON {type(payload).__name__}, not an object); restore "
            "it from a copy.",
            path=path,
        )
    if payload.get("format") != name:
        raise CorpusFormatError(
            f"{path!r} is not a {name} file (format={payload.get('format')!r}).", path=path
        )
    found = payload.get("format_version", 0)
    if isinstance(found, bool) or not isinstance(found, int) or found < 0:
        raise CorpusFormatError(
            f"{path!r} is damaged: its format_version is {found!r}, expected a non-negative integer; restore it "
            "from a copy.",
            path=path,
        )
    if found > version:
        raise FormatVersionError(
            f"{path!r} was written with {name} format version {found}, newer than version {version} "
            "that this topicflow reads; upgrade topicflow (pip install -U topicflow).",
            path=path,
        )


# ----------------------------------------------------------------------------- arrays on disk


def _write_array(group: zarr.Group, name: str, data: np.ndarray) -> None:
    if data.dtype == object or data.dtype.kind in "UT":
        array = group.create_array(name, shape=data.shape, dtype=str, chunks=(max(1, len(data)),))
        if len(data):
            array[:] = np.asarray(data, dtype=object)
        return
    group.create_array(name, data=data, chunks=(max(1, len(data)),))


def _as_read(array_dtype: Any, data: Any) -> np.ndarray:
    if array_dtype.kind in "UT" or str(array_dtype).startswith("StringDType"):
        return np.asarray(data, dtype=object)
    return np.asarray(data)


def group_array(group: zarr.Group, *names: str) -> zarr.Array:
    """Return the member ``group[names[0]][names[1]]...``, which the layout makes an array.

    zarr types a group's member as ``Array | Group``; the store layouts fix which members are
    arrays, so this only narrows the static type (it checks and reads nothing).

    Parameters
    ----------
    group : zarr.Group
        An open group.
    *names : str
        Member names, outermost first; all but the last name subgroups.

    Returns
    -------
    zarr.Array
    """
    node: Any = group
    for name in names:
        node = node[name]
    return cast(zarr.Array, node)


def write_arrays(directory: Path | StoragePath, arrays: Mapping[str, np.ndarray]) -> None:
    """A new zarr group at ``directory`` (a path or URL) holding ``arrays``, one chunk each."""
    group = zarr.open_group(zarr_store(directory), mode="w")
    for name, data in arrays.items():
        _write_array(group, name, data)


def _read_array(group: zarr.Group, name: str) -> np.ndarray:
    array = group_array(group, name)
    return _as_read(array.dtype, array[:])


#: What reading a damaged zarr array raises: numcodecs' codecs (RuntimeError: "Zstd decompression
#: error"), zarr's metadata and node errors (ValueError subclasses; a missing member is a KeyError), a
#: chunk that decodes to the wrong size (ValueError: "cannot reshape"), a missing file (OSError).
DECODE_ERRORS: tuple[type[Exception], ...] = (RuntimeError, ValueError, TypeError, LookupError, OSError)


def is_decode_error(exc: BaseException) -> bool:
    """Whether ``exc`` says the files of a zarr array are damaged or missing (not, say, unreadable by us).

    Parameters
    ----------
    exc : BaseException
        What a zarr read raised.

    Returns
    -------
    bool
        True for the errors of :data:`DECODE_ERRORS` except ``PermissionError``, which is no damage.
    """
    return isinstance(exc, DECODE_ERRORS) and not isinstance(exc, PermissionError)


def describe_read_failure(path: str, exc: BaseException) -> str:
    """What went wrong reading the zarr array at ``path``, for an error message.

    Parameters
    ----------
    path : str
        The array (or group) that failed.
    exc : BaseException
        What the read raised.

    Returns
    -------
    str
        ``'<path>' is missing (...)`` or ``'<path>' cannot be decoded (<Type>: <message>)``.
    """
    missing = isinstance(exc, (KeyError, FileNotFoundError))
    return f"{path!r} {'is missing' if missing else 'cannot be decoded'} ({type(exc).__name__}: {exc})"


async def _read_arrays_async(directory: Any, names: Sequence[str]) -> list[np.ndarray | BaseException]:
    group = await zarr_async.open_group(directory, mode="r")

    async def read_one(name: str) -> np.ndarray:
        array = cast("zarr.AsyncArray[Any]", await group.getitem(name))  # a member the layout makes an array
        return _as_read(array.dtype, await array.getitem(slice(None)))

    # return_exceptions: one damaged array must not leave the others' reads pending on zarr's loop.
    return list(await asyncio.gather(*(read_one(name) for name in names), return_exceptions=True))


def read_arrays(directory: Path | StoragePath, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Whole arrays ``directory/<name>``, read concurrently.

    zarr v3 spends about 1.5 ms of fixed cost per synchronous read (metadata, event-loop round trip),
    which for the small arrays of a shard is most of the read; one gather over zarr's own loop pays it
    about once per shard instead of once per array.

    Parameters
    ----------
    directory : Path or StoragePath
        A zarr group, local or on object storage.
    names : sequence of str
        Members of the group, e.g. ``"doc_ids"`` or ``"en/counts"``.

    Returns
    -------
    dict of str to ndarray
        Each array by name; strings as object arrays.

    Raises
    ------
    CorpusFormatError
        The group or an array is missing, or its files cannot be decoded (corrupt or truncated chunks,
        damaged metadata); the message names the first such array, and so does ``path`` (or the
        group, when it is the group that is missing). Callers add what to do.
    """
    try:
        results = zarr_sync(_read_arrays_async(zarr_store(directory, read_only=True), list(names)))
    except Exception as exc:
        if not is_decode_error(exc):
            raise
        raise CorpusFormatError(describe_read_failure(str(directory), exc), path=str(directory)) from exc
    arrays: dict[str, np.ndarray] = {}
    for name, result in zip(names, results):
        if isinstance(result, BaseException):
            if not is_decode_error(result):
                raise result
            raise CorpusFormatError(describe_read_failure(str(as_location(directory) / name), result),
                                    path=str(as_location(directory) / name)) from result
        arrays[name] = result
    return arrays
