"""Input discovery and the per-format readers: partitions, line numbers, errors, timestamps."""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicflow.errors import EmptyInputError, InputError
from topicflow.io.sources import jsonl as jsonl_ingest
from topicflow.io.sources.jsonl import line_offsets
from topicflow.io.sources.base import FieldSpec, Record, RecordError, parse_timestamp
from topicflow.io.sources import discover_partitions, read_partition


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lines=st.lists(st.binary(max_size=12).map(lambda b: b.replace(b"\n", b"")), max_size=30),
       trailing=st.booleans(), size=st.integers(1, 7), buffer=st.sampled_from([1, 3, 64]))
def test_line_offsets_split_at_every_nth_line(tmp_path_factory: pytest.TempPathFactory, lines: list[bytes],
                                              trailing: bool, size: int, buffer: int) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing and lines else b"")
    path = tmp_path_factory.mktemp("lines") / "f.jsonl"
    path.write_bytes(data)
    jsonl_ingest.SCAN_BUFFER, saved = buffer, jsonl_ingest.SCAN_BUFFER
    try:
        offsets, total = line_offsets(str(path), size)
    finally:
        jsonl_ingest.SCAN_BUFFER = saved
    assert total == len(data)
    starts = [0]
    for line in lines[:-1] if not (trailing and lines) else lines:
        starts.append(starts[-1] + len(line) + 1)
    expected = [s for i, s in enumerate(starts) if i % size == 0 and s < len(data)]
    assert offsets == expected


def jsonl(path: Path, rows: list[object]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def records(paths: list[Path], fields: FieldSpec, size: int) -> list[Record | RecordError]:
    _, partitions = discover_partitions(paths, fields, size)
    return [r for p in partitions for r in read_partition(p, fields)]


def test_jsonl_partitions_keep_line_numbers_and_skip_blank_lines(tmp_path: Path) -> None:
    path = jsonl(tmp_path / "a.jsonl", [{"id": 7, "text": "x"}, "", {"text": "y"}, "   ", {"id": "z", "text": "w"}])
    got = records([path], FieldSpec(), 2)
    assert [(r.doc_id, r.line) for r in got] == [("7", 1), (f"{path}:3", 3), ("z", 5)]
    assert got[0].location == f"line 1 of {str(path)!r}"


def test_record_errors_name_place_and_reason(tmp_path: Path) -> None:
    path = tmp_path / "b.jsonl"
    path.write_bytes(b'[1, 2]\n{"text": 5}\n{"id": true, "text": "x"}\n{"text": "ok", "lab": [1]}\n')
    got = records([path], FieldSpec(label_field="lab"), 10)
    assert [r.reason for r in got] == ["malformed_json", "bad_value", "bad_value", "bad_value"]
    assert all(isinstance(r, RecordError) and r.error.path == str(path) for r in got)
    assert [r.error.line for r in got] == [1, 2, 3, 4]
    assert "line 2 of" in str(got[1].error) and "expected a string of text" in str(got[1].error)


def test_discovery_errors(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(EmptyInputError, match="holds no document"):
        discover_partitions([tmp_path / "empty"], FieldSpec(), 5)
    with pytest.raises(InputError, match="multilingual corpus .* must come from JSONL or parquet"):
        discover_partitions([tmp_path / "empty"], FieldSpec(lang_fields=(("en", "a"), ("de", "b"))), 5)
    with pytest.raises(InputError, match="text directory, whose files have no 'ts' field"):
        discover_partitions([tmp_path / "empty"], FieldSpec(timestamp_field="ts"), 5)
    path = jsonl(tmp_path / "a.jsonl", [{"text": "x"}])
    with pytest.raises(InputError, match="--label-from-dir applies to text directories"):
        discover_partitions([path], FieldSpec(label_from_dir=True), 5)
    with pytest.raises(EmptyInputError, match="no input given"):
        discover_partitions([], FieldSpec(), 5)


def test_parquet_partitions_read_each_row_once_with_row_numbers(tmp_path: Path) -> None:
    n = 23
    table = pa.table({"id": list(range(n)), "text": [f"t{i}" for i in range(n)],
                      "when": pa.array([datetime(2024, 1, 1, tzinfo=timezone.utc)] * n)})
    pq.write_table(table, tmp_path / "t.parquet", row_group_size=5)
    got = records([tmp_path / "t.parquet"], FieldSpec(timestamp_field="when"), 4)
    assert [r.doc_id for r in got] == [str(i) for i in range(n)]
    assert [r.line for r in got] == list(range(1, n + 1))
    assert {r.timestamp for r in got} == {1704067200}
    assert "row 3 of" in got[2].location


def test_text_directory_records(tmp_path: Path) -> None:
    root = tmp_path / "corpus"
    (root / "b").mkdir(parents=True)
    (root / "a.txt").write_text("hello")
    (root / "b" / "c.txt").write_text("world")
    got = records([root], FieldSpec(label_from_dir=True), 1)
    assert [(r.doc_id, r.label, r.texts) for r in got] == [
        ("corpus/a.txt", "corpus", {"default": "hello"}), ("corpus/b/c.txt", "b", {"default": "world"})]


@pytest.mark.parametrize("value,expected", [
    ("2024-01-02T03:04:05Z", 1704164645),
    ("2024-01-02T04:04:05+01:00", 1704164645),
    ("2024-01-02T03:04:05", 1704164645),
    ("2024-01-02", 1704153600),
    (1704164645, 1704164645),
    (1704164645.7, 1704164645),
    ("1704164645", 1704164645),
    (-1.5, -2),
])
def test_parse_timestamp(value: object, expected: int) -> None:
    assert parse_timestamp(value) == expected


@pytest.mark.parametrize("value", ["yesterday", True, [1], float("nan"), "inf"])
def test_parse_timestamp_rejects(value: object) -> None:
    with pytest.raises(ValueError, match="ISO-8601|epoch seconds|finite"):
        parse_timestamp(value)
