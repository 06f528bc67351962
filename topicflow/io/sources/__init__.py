"""Input formats of ingest and append: the one module that imports every format.

Each format module (:mod:`~topicflow.io.sources.text`, :mod:`~topicflow.io.sources.jsonl`,
:mod:`~topicflow.io.sources.parquet`) registers itself in :data:`topicflow.io.sources.base.SOURCES`
when imported, as xarray's backends and zarr's codecs do; this module imports them all and dispatches
through that dict, so adding a format is one new module and one import line here.
"""
from __future__ import annotations

import os
from typing import Iterator, Sequence

from topicflow.errors import EmptyInputError, InputError, InvalidParameterError
from topicflow.io.sources import jsonl as _jsonl  # noqa: F401  (registers "jsonl")
from topicflow.io.sources import parquet as _parquet  # noqa: F401  (registers "parquet")
from topicflow.io.sources import text as _text  # noqa: F401  (registers "text")
from topicflow.io.sources.base import (
    JSONL_SUFFIXES,
    PARQUET_SUFFIXES,
    SOURCES,
    CorpusSource,
    FieldSpec,
    InputPartition,
    Record,
    RecordColumns,
    RecordError,
)
from topicflow.io.storage import StoragePath, as_location, check_bucket, expand_inputs

__all__ = ["check_label_source", "discover_partitions", "read_columns", "read_partition", "source_for_path"]


def source_for_path(path: str | os.PathLike[str] | StoragePath, fields: FieldSpec) -> CorpusSource:
    """The source for one input path or URL, chosen by what it is (directory) or its suffix.

    Raises
    ------
    InputError
        The path does not exist or its kind is unknown; the message lists the accepted kinds.
    """
    path = as_location(path)
    if not path.exists():
        if isinstance(path, StoragePath):
            check_bucket(path)
        raise InputError(f"input {str(path)!r} does not exist.", path=str(path))
    name = path.name.lower()
    for source_format in SOURCES.values():
        if source_format.directory != path.is_dir():
            continue
        if source_format.directory and fields.is_multilingual:
            raise InputError(
                f"input {str(path)!r} is a directory of text files, which holds one language; a "
                "multilingual corpus (--lang-field) must come from JSONL or parquet.",
                path=str(path),
            )
        if source_format.directory or name.endswith(source_format.suffixes):
            return source_format.open(str(path), fields)
    raise InputError(
        f"input {str(path)!r} is of an unknown kind; give a directory of text files, a JSON Lines "
        f"file ({', '.join(JSONL_SUFFIXES)}) or a parquet file ({', '.join(PARQUET_SUFFIXES)}).",
        path=str(path),
    )


def discover_partitions(
    paths: Sequence[str | os.PathLike[str]], fields: FieldSpec, partition_size: int
) -> tuple[list[CorpusSource], list[InputPartition]]:
    """Return the sources and partitions of every input, in the order given (scanned, never loaded).

    Raises
    ------
    EmptyInputError
        No input, or no input holds a record.
    InputError
        An input cannot be used (see :func:`source_for_path`, and each format's checks).
    """
    if partition_size < 1:
        raise InvalidParameterError(f"shard size must be a positive integer, got {partition_size!r}.")
    if not paths:
        raise EmptyInputError("no input given; pass directories of text files, JSONL or parquet files.")
    sources: list[CorpusSource] = []
    partitions: list[InputPartition] = []
    for path in expand_inputs(list(paths)):
        source = source_for_path(path, fields)
        check_label_source(source, fields)
        sources.append(source)
        partitions.extend(source.partitions(partition_size, len(partitions)))
    if not partitions:
        names = ", ".join(repr(str(p)) for p in paths)
        raise EmptyInputError(
            f"the input holds no document ({names} are empty); check the paths.", path=str(paths[0])
        )
    return sources, partitions


def check_label_source(source: CorpusSource, fields: FieldSpec) -> None:
    """Check that labels and timestamps come from every input or from none, so all shards agree."""
    if source.kind == "text" and fields.timestamp_field is not None:
        raise InputError(
            f"input {source.path!r} is a text directory, whose files have no {fields.timestamp_field!r} "
            "field; drop --timestamp-field or give the documents as JSONL or parquet.",
            path=source.path,
        )
    if source.kind == "text" and fields.label_field is not None and not fields.label_from_dir:
        raise InputError(
            f"input {source.path!r} is a text directory, whose files have no {fields.label_field!r} "
            "field; use --label-from-dir to take labels from folder names.",
            path=source.path,
        )
    if source.kind != "text" and fields.label_from_dir and fields.label_field is None:
        raise InputError(
            f"--label-from-dir applies to text directories, but {source.path!r} is {source.kind}; "
            "name its label field with --label-field.",
            path=source.path,
        )


def read_partition(partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]:
    """Return the records of one partition in input order (dispatches on ``partition.kind``)."""
    return SOURCES[partition.kind].read_partition(partition, fields)


def read_columns(partition: InputPartition, fields: FieldSpec) -> RecordColumns | None:
    """The records of one partition as columns, when its format reads them so and all are valid; else None.

    A fast path only: None means "use :func:`read_partition`", which then gives every record or error.
    """
    reader = SOURCES[partition.kind].read_columns
    return None if reader is None else reader(partition, fields)
