"""Parquet input: one document per row, read with pyarrow in record batches.

This module owns checking a parquet file's schema against the requested fields (on the driver,
from the footer only), splitting the file into partitions of a fixed number of rows, and reading one
partition batch by batch. Rows are numbered from 1 in messages.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator

import pyarrow as pa
import pyarrow.parquet as pq

from topicflow._typing import InputKind
from topicflow.errors import InputError
from topicflow.io.sources.base import (
    PARQUET_SUFFIXES,
    FieldSpec,
    InputPartition,
    Record,
    RecordError,
    SourceFormat,
    record_from_fields,
    register_source,
)
from topicflow.io.storage import file_size, filesystem, is_url

#: Rows per pyarrow record batch while reading a partition.
BATCH_ROWS = 8192


def _is_text(kind: pa.DataType) -> bool:
    return pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind) or (
        pa.types.is_dictionary(kind) and _is_text(kind.value_type)
    ) or getattr(pa.types, "is_string_view", lambda _: False)(kind)


def _is_text_or_int(kind: pa.DataType) -> bool:
    return _is_text(kind) or pa.types.is_integer(kind)


def _is_time(kind: pa.DataType) -> bool:
    return (pa.types.is_timestamp(kind) or pa.types.is_integer(kind) or pa.types.is_floating(kind)
            or _is_text(kind))


def _arrow_source(path: str) -> tuple[str, Any]:
    """``(path, filesystem)`` for pyarrow: the local path and None, or a URL's path inside its fsspec filesystem."""
    if not is_url(path):
        return path, None
    from pyarrow.fs import FSSpecHandler, PyFileSystem

    fs, inner = filesystem(path)
    return inner, PyFileSystem(FSSpecHandler(fs))


def parquet_file(path: str) -> pq.ParquetFile:
    """Open a local or object-storage parquet file for reading (metadata only until rows are read).

    Parameters
    ----------
    path : str
        A local path or a URL (``s3://bucket/docs.parquet``).

    Returns
    -------
    pyarrow.parquet.ParquetFile
    """
    source, fs = _arrow_source(path)
    return pq.ParquetFile(source) if fs is None else pq.ParquetFile(source, filesystem=fs)


def check_schema(path: str, fields: FieldSpec) -> pa.Schema:
    """The file's schema, after checking that the requested columns exist with usable types.

    Raises
    ------
    InputError
        A column is missing or has the wrong type, or the file is not parquet; the message names
        the file, the column, the columns found and what to pass instead.
    """
    try:
        source, fs = _arrow_source(path)
        schema = pq.read_schema(source) if fs is None else pq.read_schema(source, filesystem=fs)
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{path!r} is not a readable parquet file ({exc}).", path=path) from exc
    wanted = [(name, "text (string)", _is_text) for _, name in fields.text_fields]
    if fields.label_field is not None:
        wanted.append((fields.label_field, "label (string or integer)", _is_text_or_int))
    if fields.timestamp_field is not None:
        wanted.append((fields.timestamp_field, "timestamp (timestamp, number or ISO-8601 string)", _is_time))
    if fields.id_field is not None and fields.id_field in schema.names:
        wanted.append((fields.id_field, "id (string or integer)", _is_text_or_int))
    for name, role, accepts in wanted:
        if name not in schema.names:
            raise InputError(
                f"parquet file {path!r} has no column {name!r} for the {role}; its columns are "
                f"{schema.names!r}. Name the right column with --text-field/--lang-field/--label-field/"
                "--timestamp-field.",
                path=path,
            )
        kind = schema.field(name).type
        if not accepts(kind):
            raise InputError(
                f"parquet file {path!r}: column {name!r} has type {kind}, but the {role} is expected; "
                "convert the column or name another one.",
                path=path,
            )
    return schema


def _columns(fields: FieldSpec, schema: pa.Schema) -> list[str]:
    names = [name for _, name in fields.text_fields]
    for name in (fields.id_field, fields.label_field, fields.timestamp_field):
        if name is not None and name in schema.names and name not in names:
            names.append(name)
    return names


@dataclass(frozen=True, slots=True)
class ParquetSource:
    """A parquet file whose rows are documents."""

    path: str
    fields: FieldSpec
    kind: InputKind = "parquet"

    def partitions(self, partition_size: int, first_index: int) -> list[InputPartition]:
        check_schema(self.path, self.fields)
        n_rows = parquet_file(self.path).metadata.num_rows
        return [
            InputPartition("parquet", self.path, first_index + i, start, min(start + partition_size, n_rows),
                           first_line=start + 1)
            for i, start in enumerate(range(0, n_rows, partition_size))
        ]

    def read(self, partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]:
        return read_partition(partition, fields)

    def n_bytes(self) -> int:
        return file_size(self.path)


def read_partition(partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]:
    """Read rows ``[start, stop)`` as records, reading only the row groups that overlap them.

    Parameters
    ----------
    partition : InputPartition
        Row range ``[start, stop)`` of one parquet file.
    fields : FieldSpec
        Which columns hold the text, id, label and timestamp.

    Yields
    ------
    Record or RecordError
        One per row, in file order; a row that cannot be used gives a RecordError.
    """
    handle = parquet_file(partition.path)
    columns = _columns(fields, handle.schema_arrow)
    groups: list[int] = []
    first_row, row = 0, 0
    for index in range(handle.metadata.num_row_groups):
        n = handle.metadata.row_group(index).num_rows
        if row + n > partition.start and row < partition.stop:
            if not groups:
                first_row = row
            groups.append(index)
        row += n
    row = first_row
    for batch in handle.iter_batches(batch_size=BATCH_ROWS, row_groups=groups, columns=columns):
        lo, hi = max(partition.start - row, 0), min(partition.stop - row, batch.num_rows)
        if lo < hi:
            for offset, values in enumerate(batch.slice(lo, hi - lo).to_pylist()):
                yield record_from_fields(values, fields, path=partition.path,
                                         line=row + lo + offset + 1, unit="row")
        row += batch.num_rows
        if row >= partition.stop:
            break


register_source(SourceFormat(kind="parquet", suffixes=PARQUET_SUFFIXES, directory=False,
                            open=ParquetSource, read_partition=read_partition))
