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

from topicflow._typing import InputKind
from topicflow.errors import InputError
from topicflow.io.sources.base import (
    JSONL_SUFFIXES,
    FieldSpec,
    InputPartition,
    Record,
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
    with open_input(partition.path) as handle:
        handle.seek(partition.start)
        data = handle.read(partition.stop - partition.start)
    # Split on "\n" only, as the offset scan counts lines; a "\r" before it is JSON whitespace.
    for number, raw in enumerate(data.split(b"\n"), start=partition.first_line):
        if not raw.strip():
            continue
        yield parse_line(raw, fields, path=partition.path, line=number)


def parse_line(raw: bytes, fields: FieldSpec, *, path: str, line: int) -> Record | RecordError:
    """One JSONL line as a record, or the reason it cannot be one."""
    where = describe_location(path, line, "line")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return RecordError("invalid_utf8", InputError(
            f"{where}: invalid UTF-8 ({exc.reason} at byte {exc.start} of the line); re-encode the "
            "file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or pass --on-error skip.",
            path=path, line=line))
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
                            open=lambda path, fields: JsonlSource(path), read_partition=read_partition))
