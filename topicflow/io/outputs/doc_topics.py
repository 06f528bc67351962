"""Document-topic outputs (``fit --doc-topics``, ``infer --out``): one zarr group per corpus shard.

Layout::

    OUT.zarr/
      zarr.json                          attributes.topicflow = {kind, format_version, n_topics, topic_names}
      parts/<shard_id>/doc_topic         (n_docs_in_shard, n_topics) float64, rows sum to 1
      parts/<shard_id>/doc_ids           (n_docs_in_shard,) str

Each shard's rows are written by the task that computed them, so nothing is gathered on the driver.
Parts follow the corpus shard order; :class:`DocTopics` reads them back lazily.
"""
from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Iterator, Sequence, cast

import numpy as np
import zarr

from topicflow.errors import CorpusFormatError, StoreNotFoundError
from topicflow.io._atomic import check_output_path, commit_directory, temporary_sibling
from topicflow.io._zarr import group_array

DOC_TOPICS_FORMAT = "topicflow-doc-topics"
DOC_TOPICS_VERSION = 1


def create_doc_topics(path: Path, *, n_topics: int, topic_names: Sequence[str], shard_ids: Sequence[str],
                      overwrite: bool) -> Path:
    """Create the temporary directory that :func:`write_doc_topic_part` fills; returns its path."""
    path = Path(path)
    check_output_path(path, overwrite=overwrite, what="document-topic output")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    root = zarr.open_group(str(tmp), mode="w-")
    root.attrs["topicflow"] = {
        "kind": DOC_TOPICS_FORMAT, "format_version": DOC_TOPICS_VERSION, "n_topics": n_topics,
        "topic_names": list(topic_names), "parts": list(shard_ids),
    }
    root.create_group("parts")
    return tmp


def write_doc_topic_part(tmp: str, shard_id: str, doc_ids: np.ndarray, doc_topic: np.ndarray) -> int:
    """Write one shard's rows (called inside a task); returns the number of rows written."""
    group = zarr.open_group(str(Path(tmp) / "parts" / shard_id), mode="w-")
    group.create_array("doc_topic", data=np.asarray(doc_topic, dtype=np.float64))
    ids = group.create_array("doc_ids", shape=(len(doc_ids),), dtype=str, chunks=(max(1, len(doc_ids)),))
    if len(doc_ids):
        ids[:] = np.asarray(doc_ids, dtype=object)
    return len(doc_ids)


def commit_doc_topics(tmp: Path, path: Path, *, overwrite: bool) -> None:
    """Move the finished output from ``tmp`` to ``path`` atomically.

    Parameters
    ----------
    tmp : Path
        Directory returned by :func:`create_doc_topics`, with every part written.
    path : Path
        Final location of the output.
    overwrite : bool
        Replace an existing output at ``path``; without it an existing path is an error.
    """
    commit_directory(Path(tmp), Path(path), overwrite=overwrite)


def discard(tmp: Path) -> None:
    """Delete an unfinished output directory (after a failure); missing files are ignored.

    Parameters
    ----------
    tmp : Path
        Directory returned by :func:`create_doc_topics`.
    """
    shutil.rmtree(tmp, ignore_errors=True)


class DocTopics:
    """Read a document-topic output lazily, part by part."""

    def __init__(self, path: Path, attrs: dict[str, Any]) -> None:
        self.path = Path(path)
        self.n_topics = int(attrs["n_topics"])
        self.topic_names = list(attrs["topic_names"])
        self.parts = list(attrs["parts"])

    @classmethod
    def open(cls, path: str | Path) -> DocTopics:
        path = Path(path)
        if not (path / "zarr.json").is_file():
            raise StoreNotFoundError(f"no document-topic output at {str(path)!r}", path=str(path))
        # create_doc_topics writes a JSON object under "topicflow".
        attrs = cast(dict[str, Any], dict(zarr.open_group(str(path), mode="r").attrs).get("topicflow", {}))
        if attrs.get("kind") != DOC_TOPICS_FORMAT:
            raise CorpusFormatError(f"{str(path)!r} is not a topicflow document-topic output", path=str(path))
        return cls(path, attrs)

    def read_part(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(doc_ids, doc_topic) of one part."""
        group = zarr.open_group(str(self.path / "parts" / self.parts[index]), mode="r")
        return (np.asarray(group_array(group, "doc_ids")[:], dtype=object),
                np.asarray(group_array(group, "doc_topic")[:]))

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for index in range(len(self.parts)):
            yield self.read_part(index)

    def to_dask_array(self) -> Any:
        """All rows as a lazy ``(n_docs, n_topics)`` dask array, one chunk per part."""
        import dask.array as da

        return da.concatenate(
            [da.from_zarr(str(self.path / "parts" / part / "doc_topic")) for part in self.parts], axis=0
        )
