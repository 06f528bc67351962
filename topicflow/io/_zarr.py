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


def check_format(payload: Mapping[str, Any], *, path: str, name: str, version: int) -> None:
    """Refuse files of another kind or of a newer format version, with a message saying what to do."""
    if payload.get("format") != name:
        raise CorpusFormatError(
            f"{path!r} is not a {name} file (format={payload.get('format')!r}).", path=path
        )
    found = int(payload.get("format_version", 0))
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


def write_arrays(directory: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """A new zarr group at ``directory`` holding ``arrays``, one chunk each."""
    group = zarr.open_group(str(directory), mode="w")
    for name, data in arrays.items():
        _write_array(group, name, data)


def _read_array(group: zarr.Group, name: str) -> np.ndarray:
    array = group_array(group, name)
    return _as_read(array.dtype, array[:])


async def _read_arrays_async(directory: str, names: Sequence[str]) -> list[np.ndarray]:
    group = await zarr_async.open_group(directory, mode="r")

    async def read_one(name: str) -> np.ndarray:
        array = cast("zarr.AsyncArray[Any]", await group.getitem(name))  # a member the layout makes an array
        return _as_read(array.dtype, await array.getitem(slice(None)))

    return list(await asyncio.gather(*(read_one(name) for name in names)))


def read_arrays(directory: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Whole arrays ``directory/<name>``, read concurrently.

    zarr v3 spends about 1.5 ms of fixed cost per synchronous read (metadata, event-loop round trip),
    which for the small arrays of a shard is most of the read; one gather over zarr's own loop pays it
    about once per shard instead of once per array.
    """
    return dict(zip(names, zarr_sync(_read_arrays_async(str(directory), list(names)))))
