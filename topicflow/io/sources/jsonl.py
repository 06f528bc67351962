"""JSON Lines input: one JSON object per line.

This module owns splitting a JSONL file into partitions of a fixed number of lines by a streaming
byte-offset scan on the driver (so every record's line number is known without parsing), and reading
one partition into records. It never holds more than one partition (or one scan buffer) in memory.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.json as pa_json

from topicflow._typing import InputKind
from topicflow.errors import InputError
from topicflow.io.sources.base import (
    JSONL_SUFFIXES,
    FieldSpec,
    InputPartition,
    Record,
    RecordColumns,
    RecordError,
    SourceFormat,
    describe_location,
    record_from_fields,
    register_source,
)
from topicflow.io.storage import file_size, open_input

#: Bytes read per step of the driver's newline scan.
SCAN_BUFFER = 1 << 22


def line_offsets(path: str, lines_per_partition: int) -> tuple[list[int], int]:
    """Byte offsets where every ``lines_per_partition``-th line starts, and the file size.

    Returns ``([0, o_1, o_2, ...], size)``: partition ``i`` spans bytes ``[o_i, o_{i+1})`` (the last
    one up to ``size``) and starts at line ``i * lines_per_partition + 1``. A final line without a
    newline counts as a line.
    """
    offsets = [0]
    lines_seen = 0
    position = 0
    with open_input(path) as handle:
        while chunk := handle.read(SCAN_BUFFER):
            newlines = np.flatnonzero(np.frombuffer(chunk, dtype=np.uint8) == 0x0A)
            # Line number (1-based) ended by each newline; a boundary follows every multiple.
            ends = lines_seen + 1 + np.arange(len(newlines))
            at_boundary = newlines[ends % lines_per_partition == 0]
            offsets.extend((position + at_boundary + 1).tolist())
            lines_seen += len(newlines)
            position += len(chunk)
    if offsets and offsets[-1] >= position:
        offsets.pop()
    return offsets, position


@dataclass(frozen=True, slots=True)
class JsonlSource:
    """A JSON Lines file (one object per line; blank lines are ignored)."""

    path: str
    kind: InputKind = "jsonl"

    def partitions(self, partition_size: int, first_index: int) -> list[InputPartition]:
        offsets, size = line_offsets(self.path, partition_size)
        bounds = offsets + [size]
        return [
            InputPartition("jsonl", self.path, first_index + i, start, stop,
                           first_line=i * partition_size + 1)
            for i, (start, stop) in enumerate(zip(bounds, bounds[1:]))
        ]

    def read(self, partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]:
        return read_partition(partition, fields)

    def n_bytes(self) -> int:
        return file_size(self.path)


def read_partition(partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]:
    """Parse the lines of one partition into records, with their line numbers (blank lines skipped).

    Parameters
    ----------
    partition : InputPartition
        Byte range ``[start, stop)`` of one JSONL file, starting at line ``first_line``.
    fields : FieldSpec
        Which JSON fields hold the text, id, label and timestamp.

    Yields
    ------
    Record or RecordError
        One per non-blank line, in file order; a line that cannot be parsed gives a RecordError.
    """
    data = _partition_bytes(partition)
    # Split on "\n" only, as the offset scan counts lines; a "\r" before it is JSON whitespace.
    for number, raw in enumerate(data.split(b"\n"), start=partition.first_line):
        if not raw.strip():
            continue
        yield parse_line(raw, fields, path=partition.path, line=number)


def _partition_bytes(partition: InputPartition) -> bytes:
    """The bytes ``[start, stop)`` of the partition's file."""
    with open_input(partition.path) as handle:
        handle.seek(partition.start)
        return handle.read(partition.stop - partition.start)


def read_columns(partition: InputPartition, fields: FieldSpec) -> RecordColumns | None:
    """The records of one partition as columns, parsed by Arrow's JSON reader; None unless all are valid.

    A fast path for :func:`read_partition`: when it returns columns they hold exactly the records
    ``read_partition`` yields (same ids, texts, labels and line numbers). It returns None, and the
    caller reads the partition line by line, whenever a line could give a :class:`RecordError` or
    could be read differently by Arrow than by ``json.loads``: invalid UTF-8, a non-blank line that
    does not start with ``{`` (blank lines with spaces or ``\\r``, a byte-order mark, arrays, ``null``),
    more than one object on a line, a used field of another type than a string (integer ids and
    labels), a field given twice, a record without text or label, and always with a timestamp field.
    """
    if fields.timestamp_field is not None or fields.label_from_dir:
        return None
    return parse_columns(_partition_bytes(partition), fields, path=partition.path, first_line=partition.first_line)


def parse_columns(data: bytes, fields: FieldSpec, *, path: str, first_line: int) -> RecordColumns | None:
    """:func:`read_columns` on the bytes of some whole lines that start at line ``first_line``.

    The texts are Arrow string arrays (tokenized without Python strings by
    :func:`topicflow.io.tokenizer.tokenize_arrow`).
    """
    if len(data) >= 2**31 - 1:
        return None
    try:
        if not data.isascii():  # ASCII is valid UTF-8; checking it makes no string
            data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    buffer = np.frombuffer(data, np.uint8)
    newlines = np.flatnonzero(buffer == 0x0A)
    starts = np.concatenate([[0], newlines + 1])
    ends = np.concatenate([newlines, [len(buffer)]])
    non_blank = ends > starts
    is_object = non_blank.copy()
    is_object[non_blank] = buffer[starts[non_blank]] == ord("{")
    if not np.array_equal(is_object, non_blank):
        return None
    lines = (np.flatnonzero(is_object) + first_line).tolist()
    used = dict.fromkeys([name for _, name in fields.text_fields]
                         + [name for name in (fields.id_field, fields.label_field) if name is not None])
    options = pa_json.ParseOptions(explicit_schema=pa.schema([(name, pa.string()) for name in used]),
                                   unexpected_field_behavior="ignore", newlines_in_values=False)
    try:
        table = pa_json.read_json(pa.BufferReader(data), parse_options=options,
                                  read_options=pa_json.ReadOptions(use_threads=False, block_size=len(data) + 1))
    except (pa.ArrowException, ValueError):
        return None
    if table.num_rows != len(lines):
        return None
    texts = {lang: table.column(name).combine_chunks() for lang, name in fields.text_fields}
    has_text = np.zeros(len(lines), np.bool_)
    for lang, name in fields.text_fields:
        has_text |= table.column(name).is_valid().to_numpy(zero_copy_only=False)
    if not has_text.all():
        return None
    labels: list[str | None] = [None] * len(lines)
    if fields.label_field is not None:
        if table.column(fields.label_field).null_count:
            return None
        labels = table.column(fields.label_field).to_pylist()
    if fields.id_field is None:
        doc_ids = [f"{path}:{line}" for line in lines]
    else:
        doc_ids = [f"{path}:{line}" if doc_id is None else doc_id
                   for doc_id, line in zip(table.column(fields.id_field).to_pylist(), lines)]
    return RecordColumns(doc_ids, texts, labels, [None] * len(lines), lines)


def parse_line(raw: bytes, fields: FieldSpec, *, path: str, line: int) -> Record | RecordError:
    """One JSONL line as a record, or the reason it cannot be one (a byte-order mark opening line 1 is skipped)."""
    where = describe_location(path, line, "line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RecordError("invalid_utf8", InputError(
            f"{where}: invalid UTF-8 ({exc.reason} at byte {exc.start} of the line); re-encode the "
            "file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or pass --on-error skip.",
            path=path, line=line))
    if line == 1 and text.startswith("\ufeff"):  # a byte-order mark some editors write: not part of the JSON
        text = text[1:]
    try:
        values = json.loads(text)
    except json.JSONDecodeError as exc:
        return RecordError("malformed_json", InputError(
            f"{where}: malformed JSON ({exc.msg} at column {exc.colno}); each line must hold one JSON "
            "object. Fix the line or pass --on-error skip.", path=path, line=line))
    if not isinstance(values, dict):
        return RecordError("malformed_json", InputError(
            f"{where}: the line holds a JSON {type(values).__name__}, expected an object "
            "({\"id\": ..., \"text\": ...}). Fix the line or pass --on-error skip.", path=path, line=line))
    return record_from_fields(values, fields, path=path, line=line, unit="line")


register_source(SourceFormat(kind="jsonl", suffixes=JSONL_SUFFIXES, directory=False,
                            open=lambda path, fields: JsonlSource(path), read_partition=read_partition,
                            read_columns=read_columns))
