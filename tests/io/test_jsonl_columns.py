"""The columnar JSON Lines reader (Arrow's JSON parser) gives exactly the line-by-line reader's records.

``read_columns`` is a fast path: for any input it must either return the records that
``read_partition`` (``json.loads`` per line, then field checks) yields, value for value and with
the same line numbers, or return None so that the caller reads line by line. The inputs mix valid
records with every kind of line the two parsers could read differently.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicflow.io.sources import discover_partitions, read_columns
from topicflow.io.sources.base import FieldSpec, InputPartition, Record, RecordColumns
from topicflow.io.sources.jsonl import parse_columns, read_partition

FIELDS = [FieldSpec(), FieldSpec(label_field="label"), FieldSpec(id_field=None),
          FieldSpec(lang_fields=(("en", "en"), ("de", "de")))]

#: Lines the two parsers might read differently, or that are not valid records.
ODD_LINES = [
    b"", b"   ", b"\r", b"null", b"[1, 2]", b'"text"', b"{}", b'\xef\xbb\xbf{"id": "b", "text": "bom"}',
    b'{"id": "a", "text": "x"} {"id": "b", "text": "y"}', b'{"id": "a", "text": "x"}}', b'{"id": "a", "text": "x",}',
    b'{"id": "a", "text": "x", "text": "y"}', b'{"id": "a", "text": "x", "v": NaN}', b'{"id": 7, "text": "int id"}',
    b'{"id": 1.5, "text": "x"}', b'{"id": true, "text": "x"}', b'{"id": "a", "text": 5}', b'{"id": "a", "text": null}',
    b'{"id": "a", "text": ["x"]}', b'{"id": "a", "text": "\\ud800 lone"}', b'{"id": "a", "text": "\\ud83d\\ude00 pair"}',
    b'{"id": "a", "text": "tab\tinside"}', b'{"id": "a", "text": "bad \xff utf8"}', b'{"id": "a", "text": "x", "m": {"q": 1, "q": 2}}',
    b'{"id": "a", "text": "x", "v": 1e999}', b'{"id": "a", "text": "x", "v": 01}', b'{"id": "a", "text": "x"', b"{",
    b'{"id": "a", "text": "x"} // comment', b'{"id": null, "text": "no id"}', b'{"text": "2024-01-02"}',
    b'{"id": "a", "label": 3, "text": "int label"}', b'{"id": "a", "text": "no label"}', b'{"en": "only en"}',
    b'{"id": "a", "en": null, "de": "nur de"}', b'{"id": "a", "text": "nul \\u0000 char", "label": "L"}',
]


def record_line(i: int, text: str) -> bytes:
    return json.dumps({"id": f"d{i}", "text": text, "en": text, "de": text[::-1], "label": f"L{i % 3}",
                       "other": {"nested": [1, None, "x"]}}, ensure_ascii=i % 2 == 0).encode()


def check(tmp_path: Path, data: bytes, fields: FieldSpec) -> RecordColumns | None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(data)
    columns = parse_columns(data, fields, path=str(path), first_line=5)
    if columns is None:
        return None
    slow = list(read_partition(InputPartition("jsonl", str(path), 0, 0, len(data), first_line=5), fields))
    assert all(isinstance(r, Record) for r in slow), "the fast path accepted a partition with a bad record"
    plain = RecordColumns(columns.doc_ids, {k: list(v.to_pylist()) for k, v in columns.texts.items()},
                          columns.labels, columns.timestamps, columns.lines)
    assert plain == RecordColumns.of(slow, fields.languages)
    return columns


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(lines=st.lists(st.one_of(st.sampled_from(ODD_LINES),
                                st.builds(record_line, st.integers(0, 99), st.text(max_size=30))), max_size=8),
       fields=st.sampled_from(FIELDS), final_newline=st.booleans())
def test_columns_equal_the_line_by_line_records_or_are_refused(
        tmp_path: Path, lines: list[bytes], fields: FieldSpec, final_newline: bool) -> None:
    check(tmp_path, b"\n".join(lines) + (b"\n" if final_newline else b""), fields)


@pytest.mark.parametrize("fields", FIELDS)
def test_plain_records_take_the_fast_path(tmp_path: Path, fields: FieldSpec) -> None:
    lines = [record_line(i, t) for i, t in enumerate(["The cat sat.", "Straße ΣΑΣ İstanbul", "", "東京 🙂"])]
    data = b"\n".join(lines[:2]) + b"\n\n" + b"\n".join(lines[2:]) + b"\n"    # a blank line is fine
    columns = check(tmp_path, data, fields)
    assert columns is not None and columns.lines == [5, 6, 8, 9]
    if fields.id_field is None:
        assert columns.doc_ids[0] == f"{tmp_path / 'in.jsonl'}:5"


@pytest.mark.parametrize("line", ODD_LINES[:12] + ODD_LINES[13:16] + ODD_LINES[18:20] + ODD_LINES[22:23])
def test_lines_that_could_be_read_differently_are_refused(tmp_path: Path, line: bytes) -> None:
    data = record_line(0, "fine") + b"\n" + line + b"\n"
    assert check(tmp_path, data, FieldSpec()) is None or line.strip() == b""


def test_read_columns_reads_each_partition_and_refuses_timestamps(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"\n".join(record_line(i, f"text {i}") for i in range(7)) + b"\n")
    _, partitions = discover_partitions([path], FieldSpec(), 3)
    found = [read_columns(p, FieldSpec()) for p in partitions]
    assert [c.doc_ids for c in found if c is not None] == [["d0", "d1", "d2"], ["d3", "d4", "d5"], ["d6"]]
    assert [c.lines for c in found if c is not None] == [[1, 2, 3], [4, 5, 6], [7]]
    assert read_columns(partitions[0], FieldSpec(timestamp_field="ts")) is None
