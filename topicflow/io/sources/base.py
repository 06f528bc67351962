"""Input sources of ingest and append: the :class:`CorpusSource` seam, partition descriptors, records.

This module owns what every input format shares: which fields to read (:class:`FieldSpec`), the
record a reader yields (:class:`Record`, or :class:`RecordError` for a bad one), the picklable
:class:`InputPartition` descriptor that a Dask task reads, and the discovery of the input kind from
paths. Format details live in one module per format (``text``, ``jsonl``, ``parquet``), each of which
registers a :class:`SourceFormat` in :data:`SOURCES`; :mod:`topicflow.io.sources` imports them all and
dispatches through that dict. Nothing here tokenizes or touches Dask.

Glossary: a *partition* is a contiguous slice of one input (lines of a JSONL file, rows of a parquet
file, files of a directory); one partition becomes one shard of the store.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable, Iterator, Mapping, Protocol

from topicflow._typing import InputKind, LocationUnit
from topicflow.errors import InputError, InvalidParameterError
from topicflow.io.corpus.layout import DEFAULT_LANGUAGE

if TYPE_CHECKING:
    import pyarrow as pa

#: How a record's position is named in messages: a line of a file, a row of a table, or a whole file.

JSONL_SUFFIXES = (".jsonl", ".ndjson", ".json")
PARQUET_SUFFIXES = (".parquet", ".pq")


@dataclass(frozen=True, slots=True)
class FieldSpec:
    """Which fields of a record hold what (JSONL keys or parquet columns).

    Attributes
    ----------
    id_field : str or None
        Document id; when absent from a record the id is ``<file>:<line>`` (``<file>:<row>``).
    text_field : str
        Text of a monolingual corpus.
    lang_fields : tuple of (language, field) pairs
        Text field per language of a multilingual corpus; empty for a monolingual one.
    label_field, timestamp_field : str or None
    label_from_dir : bool
        Text directories: the label is the name of the file's parent folder.
    """

    id_field: str | None = "id"
    text_field: str = "text"
    lang_fields: tuple[tuple[str, str], ...] = ()
    label_field: str | None = None
    timestamp_field: str | None = None
    label_from_dir: bool = False

    def __post_init__(self) -> None:
        langs = [lang for lang, _ in self.lang_fields]
        if len(set(langs)) != len(langs):
            raise InvalidParameterError(f"a language is given twice in --lang-field: {langs!r}.")
        for lang in langs:
            if not lang or "/" in lang or lang.startswith("."):
                raise InvalidParameterError(
                    f"language name {lang!r} cannot be a directory name; use codes like 'en'."
                )

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(lang for lang, _ in self.lang_fields) or (DEFAULT_LANGUAGE,)

    @property
    def text_fields(self) -> tuple[tuple[str, str], ...]:
        """``(language, field)`` pairs to read text from."""
        return self.lang_fields or ((DEFAULT_LANGUAGE, self.text_field),)

    @property
    def has_labels(self) -> bool:
        return self.label_field is not None or self.label_from_dir

    @property
    def has_timestamps(self) -> bool:
        return self.timestamp_field is not None

    @property
    def is_multilingual(self) -> bool:
        return bool(self.lang_fields)


@dataclass(frozen=True, slots=True)
class Record:
    """One input document before tokenization.

    Attributes
    ----------
    doc_id : str
    texts : dict of str to (str or None)
        Text per language; None when the document lacks that language.
    label : str or None
    timestamp : int or None
        Seconds since the epoch, UTC.
    path : str
        Input file the record came from.
    line : int or None
        1-based line (JSONL, text) or row (parquet); None for a whole file.
    unit : {"line", "row", "file"}
    """

    doc_id: str
    texts: dict[str, str | None]
    label: str | None
    timestamp: int | None
    path: str
    line: int | None
    unit: LocationUnit = "line"

    @property
    def location(self) -> str:
        return describe_location(self.path, self.line, self.unit)


@dataclass(frozen=True, slots=True)
class RecordColumns:
    """The valid records of one partition as columns (what a columnar reader returns).

    Equal, record for record, to the :class:`Record` objects the format's ``read_partition`` yields
    when every record is valid; a columnar reader returns None instead whenever a record is not.

    Attributes
    ----------
    doc_ids : list of str
    texts : dict of str to (list of (str or None) or pyarrow.Array)
        Per language, the text of each record (None/null: the record lacks the language); a columnar
        reader may give an Arrow string array.
    labels : list of (str or None)
    timestamps : list of (int or None)
    lines : list of int
        1-based line (or row) of each record.
    """

    doc_ids: list[str]
    texts: dict[str, list[str | None] | pa.Array]
    labels: list[str | None]
    timestamps: list[int | None]
    lines: list[int]

    @classmethod
    def of(cls, records: list[Record], languages: tuple[str, ...]) -> RecordColumns:
        """The columns of ``records``."""
        return cls([r.doc_id for r in records], {lang: [r.texts[lang] for r in records] for lang in languages},
                   [r.label for r in records], [r.timestamp for r in records],
                   [-1 if r.line is None else r.line for r in records])


@dataclass(frozen=True, slots=True)
class RecordError:
    """A record that cannot be read; raised or skipped (and counted by ``reason``) by the caller.

    ``reason`` is one of ``invalid_utf8``, ``malformed_json``, ``missing_field``, ``bad_value``.
    """

    reason: str
    error: InputError


def describe_location(path: str, line: int | None, unit: LocationUnit) -> str:
    """``line 4 of 'in.jsonl'``, ``row 3 of 'x.parquet'`` or ``file 'docs/a.txt'``."""
    if unit == "file" or line is None:
        return f"file {path!r}"
    return f"{unit} {line} of {path!r}"


@dataclass(frozen=True, slots=True)
class InputPartition:
    """A contiguous slice of one input: what one Dask task reads and one shard holds.

    Attributes
    ----------
    kind : {"text", "jsonl", "parquet"}
    path : str
        The input file (JSONL, parquet) or directory (text).
    index : int
        Position of the partition over the whole input, which fixes its shard's position.
    start, stop : int
        Byte offsets (JSONL), rows (parquet) or positions in ``files`` (text).
    first_line : int
        1-based number of the first line (JSONL) or row (parquet) of the partition.
    files : tuple of str
        Text: file paths relative to ``path``, sorted.
    """

    kind: InputKind
    path: str
    index: int
    start: int
    stop: int
    first_line: int = 1
    files: tuple[str, ...] = field(default=())


class CorpusSource(Protocol):
    """One input (file or directory) of one format; implement it to add a format.

    ``partitions`` runs on the driver and must only scan (never load) the input; ``read`` runs in a
    task, reads one partition and yields its records in input order.
    """

    @property
    def kind(self) -> InputKind:
        """The input format."""
        ...

    @property
    def path(self) -> str:
        """The input file or directory."""
        ...

    def partitions(self, partition_size: int, first_index: int) -> list[InputPartition]: ...

    def read(self, partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]: ...

    def n_bytes(self) -> int: ...


# ----------------------------------------------------------------------------- field values


def record_from_fields(
    values: Mapping[str, Any], fields: FieldSpec, *, path: str, line: int | None, unit: LocationUnit
) -> Record | RecordError:
    """Validate one parsed JSON object or table row into a :class:`Record`."""
    where = describe_location(path, line, unit)
    texts: dict[str, str | None] = {}
    for lang, name in fields.text_fields:
        value = values.get(name)
        if value is not None and not isinstance(value, str):
            return _bad("bad_value", f"{where}: field {name!r} holds {type(value).__name__} "
                        f"{_short(value)}, expected a string of text.", path, line)
        texts[lang] = value
    if all(t is None for t in texts.values()):
        wanted = " or ".join(repr(name) for _, name in fields.text_fields)
        return _bad("missing_field", f"{where}: the record has no text field {wanted} (its fields are "
                    f"{sorted(values)!r}); name the text field with --text-field/--lang-field, or pass "
                    "--on-error skip to skip such records.", path, line)
    doc_id = values.get(fields.id_field) if fields.id_field else None
    if doc_id is None:
        doc_id = f"{path}:{line}"
    elif isinstance(doc_id, bool) or not isinstance(doc_id, (str, int)):
        return _bad("bad_value", f"{where}: id field {fields.id_field!r} holds {_short(doc_id)}, expected "
                    "a string or an integer.", path, line)
    label = None
    if fields.label_field is not None:
        label = values.get(fields.label_field)
        if label is None:
            return _bad("missing_field", f"{where}: the record has no label field {fields.label_field!r}; "
                        "every document needs a label when --label-field is given (or pass --on-error "
                        "skip).", path, line)
        if isinstance(label, bool) or not isinstance(label, (str, int)):
            return _bad("bad_value", f"{where}: label field {fields.label_field!r} holds {_short(label)}, "
                        "expected a string or an integer.", path, line)
    timestamp = None
    if fields.timestamp_field is not None:
        raw = values.get(fields.timestamp_field)
        if raw is None:
            return _bad("missing_field", f"{where}: the record has no timestamp field "
                        f"{fields.timestamp_field!r}; every document needs one when --timestamp-field is "
                        "given (or pass --on-error skip).", path, line)
        try:
            timestamp = parse_timestamp(raw)
        except ValueError as exc:
            return _bad("bad_value", f"{where}: timestamp field {fields.timestamp_field!r}: {exc}", path, line)
    return Record(str(doc_id), texts, None if label is None else str(label), timestamp, path, line, unit)


def _bad(reason: str, message: str, path: str, line: int | None) -> RecordError:
    return RecordError(reason, InputError(message, path=path, line=line))


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


#: Range of epoch seconds :func:`parse_timestamp` accepts: the years 1 to 9999 (what ``datetime`` and
#: ISO-8601 can express; far inside int64, in which the store keeps timestamps).
EARLIEST_TIMESTAMP = -62_135_596_800
LATEST_TIMESTAMP = 253_402_300_799


def parse_timestamp(value: Any) -> int:
    """Convert an ISO-8601 string, a number of seconds or a datetime to seconds since the epoch (UTC).

    Strings without a UTC offset are taken as UTC. Fractional seconds are floored.

    Raises
    ------
    ValueError
        The value is neither, or a number outside the years 1 to 9999; the message says what is accepted.

    Examples
    --------
    >>> parse_timestamp("2024-01-02T03:04:05Z"), parse_timestamp(1704164645.9)
    (1704164645, 1704164645)
    """
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return math.floor(moment.timestamp())
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a time; give ISO-8601 text or epoch seconds.")
    if isinstance(value, (int, float)):
        if not math.isfinite(value):
            raise ValueError(f"{value!r} is not a finite number of epoch seconds.")
        if not EARLIEST_TIMESTAMP <= value <= LATEST_TIMESTAMP:
            raise ValueError(f"{_short(value)} epoch seconds is outside the years 1 to 9999.")
        return math.floor(value)
    if isinstance(value, str):
        text = value.strip()
        try:
            number = float(text)
        except ValueError:
            pass
        else:
            return parse_timestamp(number)
        try:
            return parse_timestamp(datetime.fromisoformat(text))
        except ValueError:
            raise ValueError(
                f"{_short(value)} is not an ISO-8601 time (e.g. '2024-05-01T12:00:00Z') nor epoch seconds."
            ) from None
    raise ValueError(f"{_short(value)} is not a time; give ISO-8601 text or epoch seconds.")


@dataclass(frozen=True, slots=True)
class SourceFormat:
    """One input format, as registered by its module in :data:`SOURCES`."""

    #: The ``kind`` of its sources and partitions.
    kind: InputKind
    #: File name suffixes it reads (lower case); empty for a directory format.
    suffixes: tuple[str, ...]
    #: Whether its input is a directory.
    directory: bool
    #: ``open(path, fields)``: the source of one input path.
    open: Callable[[str, FieldSpec], CorpusSource]
    #: ``read_partition(partition, fields)``: the records of one partition in input order.
    read_partition: Callable[[InputPartition, FieldSpec], Iterator[Record | RecordError]]
    #: ``read_columns(partition, fields)``: the same records as columns when every one is valid, else
    #: None (the caller then uses ``read_partition``); None when the format has no columnar reader.
    read_columns: Callable[[InputPartition, FieldSpec], RecordColumns | None] | None = None


#: Input formats by kind, filled by the format modules (:func:`register_source`).
SOURCES: dict[str, SourceFormat] = {}


def register_source(source_format: SourceFormat) -> SourceFormat:
    """Add ``source_format`` to :data:`SOURCES` (each format module calls this once).

    Parameters
    ----------
    source_format : SourceFormat
        The format to register under its ``kind``.

    Returns
    -------
    SourceFormat
        ``source_format`` itself.
    """
    SOURCES[source_format.kind] = source_format
    return source_format
