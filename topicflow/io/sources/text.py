"""Directories of plain-text files: one document per file.

This module owns listing a directory's files (recursively, sorted, hidden files skipped) into
partitions of a fixed number of files, and reading one partition. Document ids are the file paths
relative to the parent of the given directory (``<dirname>/<sub>/<file>``); with ``label_from_dir``
the label is the name of the file's parent folder.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from topicflow._typing import InputKind
from topicflow.errors import InputError
from topicflow.io.corpus.layout import DEFAULT_LANGUAGE
from topicflow.io.sources.base import (
    FieldSpec,
    InputPartition,
    Record,
    RecordError,
    SourceFormat,
    register_source,
)
from topicflow.io.storage import StoragePath, as_location, file_size, is_url, list_files


def list_text_files(root: str) -> list[str]:
    """Return the paths (POSIX, relative to ``root``) of every non-hidden file under ``root``, sorted.

    ``root`` may be a URL (``s3://bucket/texts``): its objects are listed through fsspec.
    """
    if is_url(root):
        return [name for name in list_files(root) if not any(part.startswith(".") for part in name.split("/"))]
    found = []
    for directory, subdirs, files in os.walk(root):
        subdirs[:] = sorted(d for d in subdirs if not d.startswith("."))
        for name in files:
            if not name.startswith("."):
                found.append(Path(directory, name).relative_to(root).as_posix())
    return sorted(found)


@dataclass(frozen=True, slots=True)
class TextDirectorySource:
    """A directory tree of UTF-8 text files."""

    path: str
    kind: InputKind = "text"

    def partitions(self, partition_size: int, first_index: int) -> list[InputPartition]:
        files = list_text_files(self.path)
        return [
            InputPartition("text", self.path, first_index + i, start, min(start + partition_size, len(files)),
                           files=tuple(files[start:start + partition_size]))
            for i, start in enumerate(range(0, len(files), partition_size))
        ]

    def read(self, partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]:
        return read_partition(partition, fields)

    def n_bytes(self) -> int:
        return sum(file_size(as_location(self.path) / f) for f in list_text_files(self.path))


def read_partition(partition: InputPartition, fields: FieldSpec) -> Iterator[Record | RecordError]:
    """Read each file of the partition as one record, in sorted path order.

    Parameters
    ----------
    partition : InputPartition
        A text directory (``path``) and the relative paths of its files in this partition.
    fields : FieldSpec
        How ids and labels are derived from the file paths.

    Yields
    ------
    Record or RecordError
        One per file; a file that cannot be read or decoded gives a RecordError.
    """
    root = as_location(partition.path)
    for relative in partition.files:
        yield read_text_file(root, relative, fields)


def read_text_file(root: Path | StoragePath, relative: str, fields: FieldSpec) -> Record | RecordError:
    """One file as a record; invalid UTF-8 is reported with its line number."""
    file_path = root / relative
    shown = str(file_path)
    data = file_path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        return RecordError("invalid_utf8", InputError(
            f"line {line} of {shown!r}: invalid UTF-8 ({exc.reason} at byte {exc.start} of the file); "
            "re-encode the file as UTF-8 (e.g. `iconv -f latin1 -t utf-8`) or pass --on-error skip.",
            path=shown, line=line))
    label = file_path.parent.name if fields.label_from_dir else None
    doc_id = f"{root.resolve().name}/{relative}"
    return Record(doc_id, {DEFAULT_LANGUAGE: text}, label, None, shown, None, "file")


register_source(SourceFormat(kind="text", suffixes=(), directory=True,
                            open=lambda path, fields: TextDirectorySource(path), read_partition=read_partition))
