"""Document-topic outputs (``fit --doc-topics``, ``infer --out``): one zarr group per corpus shard.

Layout::

    OUT.zarr/
      zarr.json                          attributes.topicflow = {kind, format_version, n_topics, topic_names}
      parts/<shard_id>/doc_topic         (n_docs_in_shard, n_topics) float64, rows sum to 1
      parts/<shard_id>/doc_ids           (n_docs_in_shard,) str

Each shard's rows are written by the task that computed them, so nothing is gathered on the driver.
Parts follow the corpus shard order; :class:`DocTopics` reads them back lazily.

On local disk the output is built in a temporary sibling and renamed into place. On object storage
(a URL, docs/storage.md) the tasks write the parts directly under the URL (workers need no shared
disk), after :func:`~topicflow.io.output_paths.begin_remote_output` marked the prefix unfinished;
the root ``zarr.json``, which :meth:`DocTopics.open` requires, is put last (conditionally), so a
reader never takes an unfinished output for a complete one, and the next write removes leftovers.
"""
from __future__ import annotations

import contextlib
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence, cast

import numpy as np
import zarr

from topicflow.errors import CorpusFormatError, StoreExistsError, StoreNotFoundError
from topicflow.io import storage
from topicflow.io._atomic import (
    commit_directory,
    disk_full_error,
    final_of_temporary,
    is_disk_full,
    temporary_sibling,
)
from topicflow.io._zarr import group_array
from topicflow.io.output_paths import (
    begin_remote_output,
    end_remote_output,
    output_location,
    prepare_output,
    remote_output_writer,
)
from topicflow.io.storage import Location, StoragePath

DOC_TOPICS_FORMAT = "topicflow-doc-topics"
DOC_TOPICS_VERSION = 1
#: The object that makes a prefix (or directory) a document-topic output: the root group, written last.
DOC_TOPICS_MARKERS = ("zarr.json",)
#: What an unfinished output on object storage holds besides its PENDING object (removed by the next write).
DOC_TOPICS_LEFTOVERS = ("parts",)
#: Where a document-topic output is given on the command line.
DOC_TOPICS_OPTION = "infer --out, fit --doc-topics"


def create_doc_topics(path: Path | str | StoragePath, *, n_topics: int, topic_names: Sequence[str],
                      shard_ids: Sequence[str], overwrite: bool, writer: str = "") -> Location:
    """Start a document-topic output that :func:`write_doc_topic_part` fills; returns where the parts go.

    Parameters
    ----------
    path : path or URL
        Final location of the output.
    n_topics : int
    topic_names : sequence of str
    shard_ids : sequence of str
        The parts, in corpus order.
    overwrite : bool
        Replace an existing output (the output-path rules: :func:`~topicflow.io.output_paths.prepare_output`).
    writer : str, optional
        On object storage, an id of this write (give the same to :func:`commit_doc_topics` and
        :func:`discard`), by which they tell that another writer took the output over meanwhile.

    Returns
    -------
    Path or StoragePath
        A temporary sibling of ``path`` on local disk; the URL itself on object storage.
    """
    location = prepare_output(path, what="document-topic output", option=DOC_TOPICS_OPTION, overwrite=overwrite,
                              markers=DOC_TOPICS_MARKERS, leftovers=DOC_TOPICS_LEFTOVERS)
    if isinstance(location, StoragePath):
        begin_remote_output(location, markers=DOC_TOPICS_MARKERS, writer=writer)
        return location
    tmp = temporary_sibling(location)
    with _disk_full_guard(tmp):
        try:
            _create_root(tmp, n_topics=n_topics, topic_names=topic_names, shard_ids=shard_ids)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    return tmp


def _create_root(directory: Path, *, n_topics: int, topic_names: Sequence[str], shard_ids: Sequence[str]) -> None:
    root = zarr.open_group(str(directory), mode="w-")
    root.attrs["topicflow"] = {
        "kind": DOC_TOPICS_FORMAT, "format_version": DOC_TOPICS_VERSION, "n_topics": n_topics,
        "topic_names": list(topic_names), "parts": list(shard_ids),
    }
    root.create_group("parts")


def write_doc_topic_part(tmp: str, shard_id: str, doc_ids: np.ndarray, doc_topic: np.ndarray) -> int:
    """Write one shard's rows (called inside a task); returns the number of rows written.

    Parameters
    ----------
    tmp : str
        What :func:`create_doc_topics` returned, as a string (a local directory or a URL).
    shard_id : str
    doc_ids : ndarray of shape (n_docs_in_shard,)
    doc_topic : ndarray of shape (n_docs_in_shard, n_topics)

    Returns
    -------
    int
    """
    with _disk_full_guard(tmp):
        try:
            group = zarr.open_group(storage.zarr_store(f"{tmp}/parts/{shard_id}"), mode="w-")
        except FileExistsError as exc:  # object storage: another writer's part (a local tmp is this run's own)
            raise _taken_over(StoragePath(str(tmp))) from exc
        group.create_array("doc_topic", data=np.asarray(doc_topic, dtype=np.float64))
        ids = group.create_array("doc_ids", shape=(len(doc_ids),), dtype=str, chunks=(max(1, len(doc_ids)),))
        if len(doc_ids):
            ids[:] = np.asarray(doc_ids, dtype=object)
    return len(doc_ids)


@contextlib.contextmanager
def _disk_full_guard(tmp: Location | str) -> Iterator[None]:
    """:func:`~topicflow.io._atomic.disk_full_guard` for a local output being written at ``tmp``.

    The message names the final output (not the temporary name), which the failed run's caller
    deletes (:func:`discard`): the output at the final path is as before.
    """
    try:
        yield
    except OSError as exc:
        if not is_disk_full(exc):
            raise
        final = final_of_temporary(Path(str(tmp)))
        unchanged = (f"the output already at {str(final)!r} was left as it was." if final.exists()
                     else f"nothing was written at {str(final)!r}.")
        raise disk_full_error(exc, final, what="document-topic output", unchanged=unchanged) from exc


def commit_doc_topics(tmp: Location | str, path: Path | str | StoragePath, *, overwrite: bool,
                      n_topics: int | None = None, topic_names: Sequence[str] = (),
                      shard_ids: Sequence[str] = (), writer: str = "") -> None:
    """Make the finished output visible at ``path``.

    Parameters
    ----------
    tmp : Path or StoragePath
        What :func:`create_doc_topics` returned, with every part written.
    path : path or URL
        Final location of the output.
    overwrite : bool
        Replace an existing output at ``path``; without it an existing path is an error.
    n_topics : int, optional
        On object storage only (with ``topic_names`` and ``shard_ids``): the root group's description,
        as given to :func:`create_doc_topics`, put last.
    topic_names : sequence of str, optional
    shard_ids : sequence of str, optional
    writer : str, optional
        On object storage, the id given to :func:`create_doc_topics`.

    Raises
    ------
    StoreExistsError
        On object storage, another writer committed an output at ``path`` meanwhile, or took the
        unfinished output over (its start removed what this one had written).
    """
    location = output_location(path)
    if not isinstance(location, StoragePath):
        commit_directory(Path(str(tmp)), location, overwrite=overwrite, what="document-topic output")
        return
    if n_topics is None:
        raise ValueError("commit_doc_topics on object storage needs n_topics, topic_names and shard_ids")
    if remote_output_writer(location) != writer:  # not atomic with the put below; see docs/reliability.md
        raise _taken_over(location)
    staging = Path(tempfile.mkdtemp(prefix="topicflow-out-", dir=storage.staging_root()))
    try:
        _create_root(staging / "root", n_topics=n_topics, topic_names=topic_names, shard_ids=shard_ids)
        storage.write_object(f"{location.url}/parts/zarr.json", (staging / "root" / "parts" / "zarr.json").read_bytes())
        try:
            storage.write_object(f"{location.url}/zarr.json", (staging / "root" / "zarr.json").read_bytes(),
                                 create_only=True)
        except FileExistsError as exc:
            raise StoreExistsError(f"document-topic output {location.url!r} was written by another writer "
                                   "meanwhile; run again with another --out.", path=location.url) from exc
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    end_remote_output(location)


def _taken_over(location: StoragePath) -> StoreExistsError:
    return StoreExistsError(
        f"document-topic output {location.url!r} was taken over by another writer while this one ran (on object "
        "storage a new write removes what it takes for an interrupted write's leftovers); nothing of this run was "
        "committed. Run again with another --out, or use the other writer's output.", path=location.url)


def discard(tmp: Location | str, *, writer: str = "") -> None:
    """Delete an unfinished output (after a failure); missing files are ignored.

    Parameters
    ----------
    tmp : Path or StoragePath
        What :func:`create_doc_topics` returned (on object storage: the URL, whose root is not written
        yet, so only leftovers are deleted).
    writer : str, optional
        On object storage, the id given to :func:`create_doc_topics`: nothing is deleted once another
        writer has taken the prefix over.
    """
    location = output_location(tmp)
    if isinstance(location, StoragePath):
        if not (location / "zarr.json").is_file() and remote_output_writer(location) == writer:
            storage.remove_prefix(location.url)
        return
    shutil.rmtree(location, ignore_errors=True)


class DocTopics:
    """Read a document-topic output lazily, part by part."""

    def __init__(self, path: Location, attrs: dict[str, Any]) -> None:
        self.path = path
        self.n_topics = int(attrs["n_topics"])
        self.topic_names = list(attrs["topic_names"])
        self.parts = list(attrs["parts"])

    @classmethod
    def open(cls, path: str | Path | StoragePath) -> DocTopics:
        """Open the output at ``path`` (a local path or a URL).

        Parameters
        ----------
        path : path or URL

        Returns
        -------
        DocTopics
        """
        path = output_location(path)
        if not (path / "zarr.json").is_file():
            raise StoreNotFoundError(f"no document-topic output at {str(path)!r}", path=str(path))
        # create_doc_topics writes a JSON object under "topicflow".
        root = zarr.open_group(storage.zarr_store(path, read_only=True), mode="r")
        attrs = cast(dict[str, Any], dict(root.attrs).get("topicflow", {}))
        if attrs.get("kind") != DOC_TOPICS_FORMAT:
            raise CorpusFormatError(f"{str(path)!r} is not a topicflow document-topic output", path=str(path))
        return cls(path, attrs)

    def read_part(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """(doc_ids, doc_topic) of one part."""
        group = zarr.open_group(storage.zarr_store(self.path / "parts" / self.parts[index], read_only=True), mode="r")
        return (np.asarray(group_array(group, "doc_ids")[:], dtype=object),
                np.asarray(group_array(group, "doc_topic")[:]))

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        for index in range(len(self.parts)):
            yield self.read_part(index)

    def to_dask_array(self) -> Any:
        """All rows as a lazy ``(n_docs, n_topics)`` dask array, one chunk per part."""
        import dask.array as da

        return da.concatenate(
            [da.from_zarr(storage.zarr_store(self.path / "parts" / part / "doc_topic", read_only=True))
             for part in self.parts], axis=0
        )
