"""Damaged ingest inputs, fuzzed (issue 26 item 4): JSONL files and text directories of odd bytes.

Random bytes, random Unicode with control characters, a byte-order mark, CRLF line ends, empty lines,
a very long line and a text (id, label, timestamp) field of every JSON type go through the source
readers as ingest calls them. Every record is either read (a string id, string or missing texts, the
line it came from) or a :class:`~topicflow.io.sources.base.RecordError` whose
:class:`~topicflow.errors.InputError` names the file and the line; nothing else is raised. Arrow's
columnar fast path, when it answers, gives exactly the records of the line-by-line reader.
"""
from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicflow.errors import InputError, TopicflowError
from topicflow.io.sources import discover_partitions, read_columns, read_partition
from topicflow.io.sources.base import FieldSpec, Record, RecordColumns, RecordError

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow])

#: Every JSON type, and the odd numbers, as a field value.
JSON_VALUES = st.sampled_from([None, True, False, 0, -1, 10**30, 1.5, "NaN", "Infinity", "", "a b", "\x00\x1f",
                               "2024-05-01T12:00:00Z", [], ["x"], {}, {"t": "x"}]).map(
    lambda v: v if v not in ("NaN", "Infinity") else float(v))

CONTROL_TEXT = st.text(st.characters(codec="utf-8", categories=("Cc", "Cf", "Zs", "L", "N", "P")), max_size=30)


@st.composite
def jsonl_lines(draw: st.DrawFn) -> bytes:
    """A JSONL file mixing good records, odd values, odd bytes, blank lines and line ends."""
    parts = []
    for number in range(draw(st.integers(1, 6))):
        kind = draw(st.sampled_from(["good", "field", "unicode", "bytes", "blank", "long", "not-object"]))
        if kind == "good":
            line = json.dumps({"id": f"d{number}", "text": draw(CONTROL_TEXT), "label": "x", "time": 1})
        elif kind == "field":
            record: dict[str, Any] = {"id": f"d{number}", "text": "a b", "label": "x", "time": 1}
            record[draw(st.sampled_from(["id", "text", "label", "time"]))] = draw(JSON_VALUES)
            line = json.dumps(record, ensure_ascii=draw(st.booleans()))
        elif kind == "unicode":
            line = draw(CONTROL_TEXT)
        elif kind == "bytes":
            parts.append(draw(st.binary(max_size=30)))
            continue
        elif kind == "blank":
            line = draw(st.sampled_from(["", " ", "\t", "\r"]))
        elif kind == "long":
            line = json.dumps({"id": f"d{number}", "text": "word " * 20_000, "label": "x", "time": 1})
        else:
            line = json.dumps(draw(JSON_VALUES))
        parts.append(line.encode("utf-8"))
    end = draw(st.sampled_from([b"\n", b"\r\n"]))
    data = end.join(parts) + draw(st.sampled_from([b"", end]))
    return (b"\xef\xbb\xbf" if draw(st.booleans()) else b"") + data


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz-sources")


def check_records(items: list[Record | RecordError], path: str, n_lines: int | None) -> list[Record]:
    """Every item is a sane record or an InputError naming ``path`` (and the line, for JSONL)."""
    records = []
    for item in items:
        if isinstance(item, RecordError):
            error = item.error
            assert isinstance(error, InputError) and error.path == path and repr(path) in str(error), error
            if n_lines is not None:
                assert error.line is not None and 1 <= error.line <= n_lines and f"line {error.line} " in str(error)
            continue
        assert isinstance(item, Record) and isinstance(item.doc_id, str), item
        assert all(t is None or isinstance(t, str) for t in item.texts.values()), item
        assert item.label is None or isinstance(item.label, str)
        assert item.timestamp is None or isinstance(item.timestamp, int)
        if n_lines is not None:
            assert item.line is not None and 1 <= item.line <= n_lines
        records.append(item)
    return records


@FUZZ
@given(data=jsonl_lines(), fields=st.sampled_from([
    FieldSpec(), FieldSpec(label_field="label"), FieldSpec(timestamp_field="time"),
    FieldSpec(id_field=None, lang_fields=(("en", "text"), ("de", "label")))]))
def test_damaged_jsonl(work: Path, data: bytes, fields: FieldSpec) -> None:
    path = work / "in.jsonl"
    path.write_bytes(data)
    try:
        _, partitions = discover_partitions([str(path)], fields, partition_size=2)
    except TopicflowError as exc:  # e.g. a file holding no record
        assert str(path) in str(exc)
        return
    n_lines = data.count(b"\n") + 1
    for partition in partitions:
        records = check_records(list(read_partition(partition, fields)), str(path), n_lines)
        columns = read_columns(partition, fields)
        if columns is not None:  # the fast path answers only when every record is valid, and agrees
            assert len(records) == len(columns.lines)
            expected = RecordColumns.of(records, fields.languages)
            assert columns.doc_ids == expected.doc_ids and columns.lines == expected.lines
            assert columns.labels == expected.labels
            for lang in fields.languages:
                got = columns.texts[lang]
                assert (got if isinstance(got, list) else got.to_pylist()) == expected.texts[lang]


def test_a_byte_order_mark_and_crlf_are_read_as_plain_jsonl(work: Path) -> None:
    path = work / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"id": "a", "text": "x y"}\r\n\r\n{"id": "b", "text": "z"}\r\n')
    _, partitions = discover_partitions([str(path)], FieldSpec(), partition_size=10)
    records = [r for p in partitions for r in read_partition(p, FieldSpec())]
    assert [(r.doc_id, r.texts, r.line) for r in records if isinstance(r, Record)] == [
        ("a", {"default": "x y"}, 1), ("b", {"default": "z"}, 3)]


@FUZZ
@given(files=st.lists(st.one_of(st.binary(max_size=40), CONTROL_TEXT.map(lambda t: t.encode("utf-8")),
                                st.just(b"\xef\xbb\xbfword\r\nother\r\n"), st.just(b"x" * 100_000)),
                      min_size=1, max_size=4))
def test_damaged_text_directory(work: Path, files: list[bytes]) -> None:
    root = work / "texts"
    root.mkdir(exist_ok=True)
    for old in root.iterdir():
        old.unlink()
    for number, content in enumerate(files):
        (root / f"{number}.txt").write_bytes(content)
    _, partitions = discover_partitions([str(root)], FieldSpec(), partition_size=3)
    items = [item for p in partitions for item in read_partition(p, FieldSpec())]
    assert len(items) == len(files)
    for item in items:
        path = item.error.path if isinstance(item, RecordError) else item.path
        assert path is not None and Path(path).parent == root
        check_records([item], path, None)


def test_a_timestamp_of_every_json_type_is_read_or_refused_by_line(work: Path) -> None:
    values = [None, True, 0, -1, 10**30, 1.5, math.nan, math.inf, "", "2024-05-01", [], {}]
    path = work / "times.jsonl"
    path.write_text("\n".join(json.dumps({"id": str(i), "text": "a", "time": v}) for i, v in enumerate(values)))
    _, partitions = discover_partitions([str(path)], FieldSpec(timestamp_field="time"), partition_size=100)
    items = list(read_partition(partitions[0], FieldSpec(timestamp_field="time")))
    read = {r.doc_id: r.timestamp for r in check_records(items, str(path), len(values))}
    assert read == {"2": 0, "3": -1, "5": 1, "9": 1714521600}  # 10**30 s: past the year 9999, refused


@pytest.fixture(scope="module")
def good_parquet(work: Path) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"id": ["a", "b"], "text": ["x y", "z"]}), work / "good.parquet")
    return (work / "good.parquet").read_bytes()


@pytest.mark.parametrize("damage", ["empty", "garbage", "half", "no-footer"])
def test_a_damaged_parquet_file_is_refused_naming_it(work: Path, good_parquet: bytes, damage: str) -> None:
    data = {"empty": b"", "garbage": b"PAR1\x00\x01garbage", "half": good_parquet[: len(good_parquet) // 2],
            "no-footer": good_parquet[:-3]}[damage]
    path = work / f"{damage}.parquet"
    path.write_bytes(data)
    with pytest.raises(InputError, match="is not a readable parquet file") as caught:
        discover_partitions([str(path)], FieldSpec(), partition_size=10)
    assert str(path) in str(caught.value)


@pytest.mark.parametrize("values", [[1, 2], [1.5, None], [["a"], []], [{"x": 1}, {"x": 2}], [True, False],
                                    [b"\xff", b"a"]])
def test_a_parquet_text_column_of_another_type_is_refused_naming_it(work: Path, values: list[Any]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = work / "typed.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": pa.array(values)}), path)
    with pytest.raises(InputError, match=r"column 'text' has type .*, but the text \(string\) is expected") as caught:
        discover_partitions([str(path)], FieldSpec(), partition_size=10)
    assert str(path) in str(caught.value)
