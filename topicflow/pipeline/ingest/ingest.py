"""Drivers of ``topicflow ingest`` and ``topicflow append``: build the pass graphs, compute, commit.

This module owns the order of the passes over the input, the decisions taken between them (duplicate
ids, vocabulary pruning, candidate terms), progress reporting and the atomic commit of the store.
Reading, tokenizing and writing shards happen in tasks (:mod:`topicflow.tasks.ingest`); only counts,
id hashes and shard descriptions ever come back to the driver, never documents or tokens.

Atomicity: on local disk, ingest builds the whole store in a temporary sibling of the target and
moves it into place with :func:`~topicflow.io._atomic.commit_directory`; append writes shards under
temporary names inside ``shards/``, renames them, and commits by rewriting ``manifest.json``. On
object storage (no rename) the workers write every shard straight into the target prefix, under a
name unique to the run and to the task attempt, and the driver writes the manifest last, listing
only the shards of the attempts whose results it received (:class:`_BuildLayout`). On any error the
new files are removed, so the target is either untouched or complete.

Vocabulary growth: an append with ``promote_min_df`` moves candidate terms (out-of-vocabulary terms
of this and earlier appends) found in at least that many documents to the end of the vocabulary,
forming vocabulary version v+1 under ``vocabs/<v+1>/``; the new shards are encoded with it. Existing
term ids never change, so old shards and fitted models stay valid.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, cast

import numpy as np

from topicflow import config
from topicflow._typing import OnError
from topicflow.errors import (
    EmptyInputError,
    InputError,
    InvalidParameterError,
    StoreExistsError,
)
from topicflow.io._atomic import (
    check_output_path,
    commit_directory,
    disk_full_guard,
    temporary_sibling,
)
from topicflow.io.corpus.id_index import extend_index, hash_ids
from topicflow.io.corpus.layout import (
    MANIFEST,
    Manifest,
    ShardInfo,
    store_format_version,
)
from topicflow.io.corpus.writer import (
    init_store,
    manifest_bytes,
    with_shards,
    write_manifest,
    write_vocabulary,
)
from topicflow.io.sources import discover_partitions
from topicflow.io.sources.base import FieldSpec, InputPartition
from topicflow.io.storage import (
    Location,
    StoragePath,
    check_bucket,
    filesystem,
    is_url,
    list_files,
    remove_prefix,
    url_of,
    write_object,
)
from topicflow.io.tokenizer import (
    PruneConfig,
    TermCounts,
    TokenizerConfig,
    prune_vocabulary,
    too_common_terms,
)
from topicflow.pipeline.cluster import compute, compute_list, current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.ingest import (
    IdOccurrence,
    PartitionSummary,
    ShardWritten,
    map_locate_ids,
    map_tokenize,
    map_write_tokenized,
    tree_merge,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class IngestResult:
    """Summary of one ingest (or append).

    Attributes
    ----------
    store : str
    n_read : int
        Valid records read (after ``on_error="skip"`` skipped the bad ones).
    n_kept : int
        Documents written.
    n_tokens, vocab_sizes : dict of str to int
        Per language: tokens written, vocabulary size.
    dropped : dict of str to int
        Documents not written, by reason (``no_tokens``, ``all_terms_pruned``, ...).
    skipped : dict of str to int
        Bad records skipped, by reason (``malformed_json``, ``duplicate_id``, ...).
    n_shards : int
        Shards written.
    n_bytes : int
        Input size on disk in bytes (parquet: its compressed size).
    elapsed : float
        Wall-clock seconds.
    """

    store: str
    n_read: int
    n_kept: int
    n_tokens: dict[str, int]
    vocab_sizes: dict[str, int]
    dropped: dict[str, int]
    skipped: dict[str, int]
    n_shards: int
    n_bytes: int
    elapsed: float

    @property
    def docs_per_second(self) -> float:
        return self.n_read / self.elapsed if self.elapsed > 0 else 0.0

    @property
    def mb_per_second(self) -> float:
        return self.n_bytes / 1e6 / self.elapsed if self.elapsed > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__dataclass_fields__}
        out.update(docs_per_second=self.docs_per_second, mb_per_second=self.mb_per_second)
        return out

    def summary_lines(self) -> list[str]:
        """The closing summary the CLI prints."""
        lines = [
            f"store          {self.store}",
            f"documents      {self.n_read} read, {self.n_kept} kept",
            f"tokens         {_per_language(self.n_tokens)}",
            f"vocabulary     {_per_language(self.vocab_sizes)}",
            f"dropped        {_reasons(self.dropped)}",
            f"skipped        {_reasons(self.skipped)}",
            f"shards         {self.n_shards} written",
            f"elapsed        {self.elapsed:.1f} s ({self.docs_per_second:,.0f} docs/s, "
            f"{self.mb_per_second:.1f} MB/s)",
        ]
        return lines


def absolute_inputs(inputs: Sequence[str | os.PathLike[str]]) -> list[str | os.PathLike[str]]:
    """The inputs with local paths made absolute (URLs as given).

    The tasks that read them run on the workers, whose working directory is not the driver's: a
    relative path sent as given would name another file there, or none.

    Parameters
    ----------
    inputs : sequence of path or URL

    Returns
    -------
    list of path or URL
    """
    return [p if is_url(p) or url_of(p) is not None else Path(p).absolute() for p in inputs]


def _per_language(values: Mapping[str, int]) -> str:
    if len(values) == 1:
        return f"{next(iter(values.values())):,}"
    return ", ".join(f"{lang}: {n:,}" for lang, n in values.items()) or "0"


def _reasons(values: Mapping[str, int]) -> str:
    return ", ".join(f"{n} {reason}" for reason, n in sorted(values.items())) or "none"


# ----------------------------------------------------------------------------- shared passes


def _settings(shard_size: int | None, split_every: int | None, on_error: str) -> tuple[int, int]:
    if on_error not in ("raise", "skip"):
        raise InvalidParameterError(f"on_error must be 'raise' or 'skip', got {on_error!r}.")
    split = int(split_every or config.get("split-every"))
    if split < 2:
        raise InvalidParameterError(f"split_every must be at least 2, got {split!r}.")
    return int(shard_size or config.get("shard-size")), split


def _summarize(parts: Sequence[Any], split_every: int, client: Any, progress: ProgressReporter) -> PartitionSummary:
    """Tree-merge the partitions' summaries (counts as Counters); per-partition progress on a distributed client."""
    root = tree_merge(parts, split_every=split_every)
    client = current_client(client)
    if client is None or progress is NO_PROGRESS:
        return compute(root, client=client)[0].with_counters()
    from distributed import as_completed

    # Holding the partitions' futures lets the tree reuse their results instead of recomputing.
    futures = client.compute(parts)
    for _ in progress.track(as_completed(futures), total=len(futures), desc="counting", unit="partition"):
        pass
    summary = compute(root, client=client)[0]
    del futures
    return summary.with_counters()


def _resolve_duplicates(
    summary: PartitionSummary, partitions: Sequence[InputPartition], fields: FieldSpec,
    tokenizer: TokenizerConfig, on_error: OnError, store_ids: Mapping[str, str], store: str,
    client: Any, progress: ProgressReporter,
) -> tuple[PartitionSummary, dict[int, frozenset[int]]]:
    """Confirm candidate duplicate ids on the ids themselves; raise, or plan which records to skip.

    ``store_ids`` maps ids already in the store (only those whose hash matched the input's) to
    their shard. Returns the summary with skipped records' counts removed, and per partition the
    positions of records to leave out.
    """
    hashes = np.union1d(summary.ids.repeated, hash_ids(list(store_ids))).astype(np.uint64)
    if not len(hashes):
        return summary, {}
    located = compute_list(map_locate_ids(partitions, fields, tokenizer, on_error, hashes),
                           client=client, progress=progress, desc="checking ids", unit="partition")
    by_id: dict[str, list[IdOccurrence]] = defaultdict(list)
    for occurrence in (o for found in located for o in found):
        by_id[occurrence.doc_id].append(occurrence)
    to_skip: list[IdOccurrence] = []
    for doc_id, occurrences in sorted(by_id.items()):
        occurrences.sort(key=lambda o: (o.partition, o.position))
        if doc_id in store_ids:
            if on_error == "raise":
                raise InputError(
                    f"document id {doc_id!r} ({occurrences[0].location}) is already in store {store!r} "
                    f"(shard {store_ids[doc_id]!r}); ids must be unique across appends. Give the "
                    "document another id, or pass --on-error skip to leave such documents out.",
                    path=occurrences[0].location, doc_id=doc_id,
                )
            to_skip.extend(occurrences)
        elif len(occurrences) > 1:
            if on_error == "raise":
                raise InputError(
                    f"document id {doc_id!r} appears more than once: at {occurrences[0].location} and at "
                    f"{occurrences[1].location}; ids must be unique. Fix the input, or pass --on-error "
                    "skip to keep only the first.",
                    path=occurrences[1].location, doc_id=doc_id,
                )
            to_skip.extend(occurrences[1:])
    return _without(summary, to_skip), _skip_plan(to_skip)


def _without(summary: PartitionSummary, skipped: Sequence[IdOccurrence]) -> PartitionSummary:
    if not skipped:
        return summary
    removed = TermCounts()
    for occurrence in skipped:
        removed = removed.merge(occurrence.counts)
    reasons = Counter(summary.skipped)
    reasons["duplicate_id"] += len(skipped)
    return replace(summary, counts=summary.term_counts().without(removed),
                   n_records=summary.n_records - len(skipped), skipped=dict(reasons))


def _skip_plan(skipped: Iterable[IdOccurrence]) -> dict[int, frozenset[int]]:
    plan: dict[int, set[int]] = defaultdict(set)
    for occurrence in skipped:
        plan[occurrence.partition].add(occurrence.position)
    return {index: frozenset(positions) for index, positions in plan.items()}


def _place_shards(written: Sequence[ShardWritten], shards_dir: Path, manifest: Manifest,
                  vocab_version: int | None = None) -> list[ShardInfo]:
    """Rename the written shards to their final sequential ids (in partition order).

    ``vocab_version`` is the vocabulary version they were encoded with (default: the manifest's).
    """
    version = manifest.vocab_version if vocab_version is None else vocab_version
    infos: list[ShardInfo] = []
    for result in sorted(written, key=lambda w: w.partition):
        if result.checksum is None:
            continue
        shard_id = manifest.next_shard_id(len(infos))
        os.replace(result.shard_dir, shards_dir / shard_id)
        infos.append(ShardInfo(shard_id, 0, result.n_docs, result.n_tokens, result.checksum, version,
                               has_order=manifest.has_order))
    return infos


def _event(action: str, inputs: Sequence[str | os.PathLike[str]], fields: FieldSpec, summary: PartitionSummary,
           written: Sequence[ShardWritten], **extra: Any) -> dict[str, Any]:
    return {
        "action": action,
        "time": datetime.now(timezone.utc).isoformat(),
        "inputs": [str(p) for p in inputs],
        "fields": {"id": fields.id_field, "text": fields.text_field, "languages": dict(fields.lang_fields),
                   "label": fields.label_field, "timestamp": fields.timestamp_field,
                   "label_from_dir": fields.label_from_dir},
        "n_read": summary.n_records,
        "n_kept": sum(w.n_docs for w in written),
        "dropped": _sum_dicts(w.dropped for w in written),
        "skipped": dict(summary.skipped),
        **extra,
    }


def _sum_dicts(items: Iterable[Mapping[str, int]]) -> dict[str, int]:
    total: Counter[str] = Counter()
    for item in items:
        total.update(item)
    return dict(total)


def _check_records(summary: PartitionSummary, inputs: Sequence[str | os.PathLike[str]]) -> None:
    if summary.n_records == 0:
        skipped = f" ({_reasons(summary.skipped)} skipped)" if summary.skipped else ""
        raise EmptyInputError(
            f"no readable document in {[str(p) for p in inputs]!r}{skipped}; check the input and its "
            "field names.", path=str(inputs[0]),
        )


# ----------------------------------------------------------------------------- where a build writes


@dataclass(frozen=True, slots=True)
class _BuildLayout:
    """Where one ingest's tasks write, and how its shards become the manifest's.

    Local disk: the store is built in a hidden sibling directory; each partition's shard is written to
    ``shards/.part-<i>-<attempt>`` and renamed to its sequential id, then the directory is renamed
    into place. Object storage (no rename): every write goes into the target prefix itself, under
    names unique to this run (``<run>``) and to each task attempt: tokens under
    ``shards/.tokens-<run>/``, shards at ``shards/<run>-<i>-<attempt>``, whose names become the
    manifest's shard ids. Nothing is a store until ``manifest.json`` is written, last.
    """

    root: Location
    run: str
    token_paths: dict[int, str]
    shard_dirs: dict[int, str]

    @classmethod
    def of(cls, root: Location, partitions: Sequence[InputPartition], *, append: bool = False) -> _BuildLayout:
        """The layout of a new run writing into ``root`` (``append``: into an existing store on local disk)."""
        run = uuid.uuid4().hex[:12]
        if isinstance(root, StoragePath):
            tokens = root / "shards" / f".tokens-{run}"
            return cls(root, run, {p.index: str(tokens / f"{p.index:06d}") for p in partitions},
                       {p.index: str(root / "shards" / f"{run}-{p.index:06d}") for p in partitions})
        # An append's hidden names carry the run (an interrupted one's are removed by the next, under the lock).
        tokens_name, shard_name = (f".tokens-{run}-", f".append-{run}-") if append else (".tokens-", ".part-")
        return cls(root, run, {p.index: str(root / "shards" / f"{tokens_name}{p.index:06d}") for p in partitions},
                   {p.index: str(root / "shards" / f"{shard_name}{p.index:06d}") for p in partitions})

    @property
    def remote(self) -> bool:
        return isinstance(self.root, StoragePath)

    def place(self, written: Sequence[ShardWritten], manifest: Manifest,
              vocab_version: int | None = None) -> list[ShardInfo]:
        """The manifest entries of the written shards, in partition order (renamed first on local disk)."""
        if not self.remote:
            return _place_shards(written, cast(Path, self.root) / "shards", manifest, vocab_version)
        return _shard_infos(written, manifest, vocab_version)

    def remove_unplaced(self) -> None:
        """Local disk, before the commit: token files and shards of lost task attempts, never placed."""
        for child in (cast(Path, self.root) / "shards").iterdir():
            if child.name.startswith(".part-"):
                shutil.rmtree(child, ignore_errors=True)
            elif child.name.startswith(".tokens-"):
                child.unlink(missing_ok=True)

    def remove_unreferenced(self, manifest: Manifest) -> None:
        """After the commit: this run's tokens and the shards of lost task attempts (best effort).

        On local disk only an append leaves any (an ingest's are removed before its directory is renamed).
        """
        if not isinstance(self.root, StoragePath):
            for child in (self.root / "shards").glob(f".append-{self.run}-*"):
                shutil.rmtree(child, ignore_errors=True)
            return
        listed = {s.shard_id for s in manifest.shards}
        _remove_run_objects(self.root, self.run, keep=listed)
        with contextlib.suppress(Exception):  # best effort, as above: the published manifest is what counts
            remove_prefix(str(self.root / _RUN_MARKER))

    def claim(self) -> None:
        """Object storage: record this run as the prefix's writer (``.ingest-run``), after ``init_store``."""
        if isinstance(self.root, StoragePath):
            write_object(str(self.root / _RUN_MARKER), self.run.encode())

    def owner(self) -> str | None:
        """Object storage: the run recorded as the prefix's writer, or None once a manifest publishes a store."""
        root = cast(StoragePath, self.root)
        _forget_listings(root)
        if (root / MANIFEST).is_file():
            return None
        try:
            return (root / _RUN_MARKER).read_bytes().decode()
        except FileNotFoundError:
            return None

    def check_owned(self) -> None:
        """Object storage: raise unless this run still writes the prefix (before each store-level write).

        With no rename and no lock on object storage, a second ingest started on the same new URL takes
        the first one's objects for an interrupted ingest's leftovers, removes them and starts over; the
        first must then stop rather than write its vocabulary or index over the second's (or over the
        store the second published).

        Raises
        ------
        StoreExistsError
            Another ingest took the prefix over, or published a store there.
        """
        if not isinstance(self.root, StoragePath) or self.owner() == self.run:
            return
        raise StoreExistsError(
            f"{self.root.url!r} was taken over by another ingest while this one ran (on object storage a new "
            "ingest removes what it takes for an interrupted ingest's leftovers); nothing of this ingest was "
            "published. Choose another URL, or use the other ingest's store.", path=self.root.url)

    def remove_failed(self) -> None:
        """After a failure: everything this build wrote (a local directory, or this run's objects)."""
        if not isinstance(self.root, StoragePath):
            shutil.rmtree(self.root, ignore_errors=True)
            return
        root = self.root
        try:
            if self.owner() != self.run:  # another writer's store or build: remove only this run's objects
                _remove_run_objects(root, self.run, keep=set())
            else:
                remove_prefix(root.url)
        except Exception as exc:  # the failure is the error to report; leftovers carry no manifest
            log.warning("could not remove what the failed ingest wrote under %s (%s); no manifest lists it, "
                        "so no reader uses it", root, exc)


def written_hashes(written: Sequence[ShardWritten], infos: Sequence[ShardInfo]) -> dict[str, np.ndarray]:
    """The id hashes the write tasks computed, by the shard ids :meth:`_BuildLayout.place` gave them.

    ``infos`` are in partition order, one per written shard with documents (as ``place`` returns them).
    """
    kept = [w for w in sorted(written, key=lambda w: w.partition) if w.checksum is not None]
    return {info.shard_id: result.id_hashes for result, info in zip(kept, infos)
            if result.id_hashes is not None and result.n_docs == info.n_docs}


def _shard_infos(written: Sequence[ShardWritten], manifest: Manifest, vocab_version: int | None) -> list[ShardInfo]:
    """Manifest entries for shards written under their final names (object storage: no rename)."""
    version = manifest.vocab_version if vocab_version is None else vocab_version
    return [ShardInfo(result.shard_dir.rstrip("/").rsplit("/", 1)[-1], 0, result.n_docs, result.n_tokens,
                      result.checksum, version, has_order=manifest.has_order)
            for result in sorted(written, key=lambda w: w.partition) if result.checksum is not None]


def _remove_run_objects(root: StoragePath, run: str, *, keep: set[str]) -> None:
    """Delete run ``run``'s token files and its shards not in ``keep`` (best effort: a warning on failure).

    A shard of a lost attempt may still be written after this by a worker that was cut off but not
    dead; no manifest references it, and the next append on this store removes it.
    """
    try:
        _forget_listings(root)
        remove_prefix(str(root / "shards" / f".tokens-{run}"))
        for child in (root / "shards").iterdir():
            if child.name.startswith(f"{run}-") and child.name not in keep:
                remove_prefix(child.url)
    except Exception as exc:
        log.warning("could not remove this run's temporary objects under %s (%s); no manifest lists them, so "
                    "no reader uses them", root, exc)


def _forget_listings(root: StoragePath) -> None:
    """Drop fsspec's cached listings under ``root``: workers and zarr's own filesystem wrote there meanwhile."""
    fs, inner = filesystem(root.url)
    with contextlib.suppress(AttributeError):
        fs.invalidate_cache(inner)


def _check_new_remote_store(target: StoragePath, *, overwrite: bool) -> StoragePath:
    """Refuse a URL that holds a store or foreign objects; remove an interrupted ingest's leftovers."""
    check_bucket(target)
    _forget_listings(target)
    if (target / MANIFEST).is_file():
        if overwrite:
            raise StoreExistsError(
                f"store {target.url!r} exists; --overwrite (overwrite=True) is not supported on object storage yet "
                "(no atomic replace): delete the store first or choose another URL.", path=target.url)
        raise StoreExistsError(f"store path {target.url!r} exists already; choose another URL (or delete it).",
                               path=target.url)
    if target.exists():
        if not _is_unfinished_store(target):
            raise StoreExistsError(
                f"{target.url!r} holds objects that are not a topicflow store; ingest writes only to an empty prefix "
                "(or over the leftovers of an interrupted ingest): choose another URL.", path=target.url)
        log.warning("removing objects under %s left by an interrupted ingest (no %s)", target.url, MANIFEST)
        remove_prefix(target.url)
    return target


#: Names of the objects of one ingest run: its tokens and its shards under ``shards/`` (see
#: :class:`_BuildLayout`), and the marker naming the run that writes the prefix.
_RUN_OBJECT = re.compile(r"shards/(\.tokens-[0-9a-f]{12}/\d{6}|[0-9a-f]{12}-\d{6}-[0-9a-f]{8}/.+)|\.ingest-run")

#: Object storage: the object holding the id of the ingest run that writes a new store's prefix.
_RUN_MARKER = ".ingest-run"


def _is_unfinished_store(target: StoragePath) -> bool:
    """Whether the objects under ``target`` are an unfinished topicflow store.

    Either its root group says so, or every object is one of an ingest run's tokens or shards (written
    by a task still running when its failed run removed the rest).
    """
    try:
        root = json.loads((target / "zarr.json").read_bytes())
    except (FileNotFoundError, ValueError):
        return all(_RUN_OBJECT.fullmatch(name) for name in list_files(target))
    return isinstance(root, dict) and "topicflow" in (root.get("attributes") or {})


def _publish_remote(root: StoragePath, manifest: Manifest) -> None:
    """Write the manifest of a new store on object storage, only if none exists (a conditional put)."""
    try:
        write_object(str(root / MANIFEST), manifest_bytes(manifest), create_only=True)
    except FileExistsError as exc:
        raise StoreExistsError(
            f"{root.url!r} was created by another writer while this one ingested; choose another URL.",
            path=root.url) from exc


# ----------------------------------------------------------------------------- ingest


def ingest_corpus(
    inputs: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    fields: FieldSpec = FieldSpec(),
    tokenizer: TokenizerConfig | None = None,
    prune: PruneConfig = PruneConfig(),
    shard_size: int | None = None,
    split_every: int | None = None,
    on_error: OnError = "raise",
    overwrite: bool = False,
    keep_order: bool = False,
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
) -> IngestResult:
    """Build a corpus store at ``out`` from text directories, JSON Lines and parquet files.

    Parameters
    ----------
    inputs : sequence of path
        Directories of text files (one document per file), ``.jsonl`` and ``.parquet`` files.
    out : path or URL
        Store to create; it must not exist unless ``overwrite``. At a URL (``s3://bucket/news.zarr``)
        the workers write the shards into the target prefix themselves (no shared disk is needed) and
        the manifest is written last, only if none exists; ``overwrite`` is not supported there yet
        (docs/storage.md).
    fields : FieldSpec
        Which fields hold id, text (per language), label and timestamp.
    tokenizer : TokenizerConfig, optional
        Default: lowercase, ``\\b\\w+\\b``, min length 2, English stop words. Its per-language stop
        lists (``language_stop_words``) may name only languages of ``fields``.
    prune : PruneConfig
        Vocabulary cut (min df, max df fraction, max vocabulary).
    shard_size : int, optional
        Documents (JSONL lines, parquet rows, files) per partition, hence per shard; default
        ``topicflow.shard-size``.
    split_every : int, optional
        Fan-in of the count tree-reduction; default ``topicflow.split-every``.
    on_error : {"raise", "skip"}
        What to do with a bad record or duplicate id; skipped ones are counted by reason.
    overwrite : bool
        Replace an existing ``out`` once the new store is complete.
    keep_order : bool, default False
        Also keep each document's tokens in reading order, per shard and language (the ordered-token
        layer ``shards/<id>/<lang>/order/``: term ids, and tokens outside the vocabulary as their
        strings; read it with :meth:`topicflow.Corpus.read_ordered`). The store is then written with
        format version 3. Without it the store is exactly what it always was.
    client : distributed.Client, optional
        Default: the current client, else Dask's threaded scheduler.
    progress : ProgressReporter

    Returns
    -------
    IngestResult

    Raises
    ------
    InputError
        A bad record (the message names file and line, or the document) or input.
    EmptyInputError
        No document is left to store.
    StoreExistsError
        ``out`` exists and ``overwrite`` is False.
    InvalidParameterError
        A per-language stop list for a language that ``fields`` does not give.

    Examples
    --------
    >>> result = ingest_corpus(["news.jsonl"], "news.zarr", prune=PruneConfig(min_df=2))  # doctest: +SKIP
    >>> result.n_kept, result.vocab_sizes                                            # doctest: +SKIP
    >>> ordered = ingest_corpus(["news.jsonl"], "news-ordered.zarr", keep_order=True)  # doctest: +SKIP
    """
    started = time.perf_counter()
    tokenizer = tokenizer or TokenizerConfig()
    tokenizer.check_languages(fields.languages)
    size, split = _settings(shard_size, split_every, on_error)
    build: Location
    if is_url(out):  # the workers write into the target prefix itself; the manifest, last, publishes it
        build = _check_new_remote_store(StoragePath(str(out)), overwrite=overwrite)
    else:
        out = Path(out).absolute()
        check_output_path(out, overwrite=overwrite)
        build = temporary_sibling(out)
    sources, partitions = discover_partitions(absolute_inputs(inputs), fields, size)
    layout = _BuildLayout.of(build, partitions)
    unchanged = (f"the store already at {str(out)!r} was left as it was" if overwrite
                 else f"nothing was written at {str(out)!r}")
    with disk_full_guard(out, what="corpus store", unchanged=unchanged + "."):
        try:
            init_store(build, format_version=store_format_version(1, has_order=keep_order))
            layout.claim()
            # One pass over the text: tokenize once, keeping provisional term ids beside the shards.
            summary = _summarize(map_tokenize(partitions, fields, tokenizer, on_error, paths=layout.token_paths),
                                 split, client, progress)
            summary, skip = _resolve_duplicates(summary, partitions, fields, tokenizer, on_error, {}, str(out),
                                                client, progress)
            _check_records(summary, inputs)
            vocabs = {lang: prune_vocabulary(summary.term_counts().get(lang), prune) for lang in fields.languages}
            layout.check_owned()
            for lang, vocab in vocabs.items():
                write_vocabulary(build / "vocab" / lang, vocab)
                write_vocabulary(build / "excluded" / lang, too_common_terms(summary.term_counts().get(lang), prune))
            written = compute_list(
                map_write_tokenized(partitions, fields, store=str(build), paths=layout.token_paths,
                                    shard_dirs=layout.shard_dirs, skip=skip, drop_reason="all_terms_pruned",
                                    keep_order=keep_order),
                client=client, progress=progress, desc="writing shards", unit="shard")
            manifest = Manifest(languages=fields.languages, tokenizer=tokenizer.to_dict(), shard_size=size,
                                has_labels=fields.has_labels, has_timestamps=fields.has_timestamps,
                                has_order=keep_order)
            infos = layout.place(written, manifest)
            if not infos:
                raise EmptyInputError(
                    f"every one of the {summary.n_records} documents is empty after tokenizing and pruning "
                    f"({_reasons(_sum_dicts(w.dropped for w in written))}); lower --min-df / raise "
                    "--max-df-fraction, or check --stop-words and --token-pattern.", path=str(inputs[0]),
                )
            event = _event("ingest", inputs, fields, summary, written, pruning=prune.to_dict())
            manifest = with_shards(manifest, infos, event)
            layout.check_owned()
            manifest = replace(manifest, id_index=extend_index(build, manifest, written_hashes(written, infos)))
            if isinstance(build, StoragePath):
                layout.check_owned()  # not atomic with the put below: narrows the window, see docs/reliability.md
                _publish_remote(build, manifest)
            else:
                layout.remove_unplaced()
                write_manifest(build, manifest)
                commit_directory(build, cast(Path, out), overwrite=overwrite)
        except BaseException:
            layout.remove_failed()
            raise
    layout.remove_unreferenced(manifest)
    return IngestResult(
        store=str(out), n_read=summary.n_records, n_kept=manifest.n_docs,
        n_tokens={lang: manifest.n_tokens(lang) for lang in manifest.languages},
        vocab_sizes={lang: len(v) for lang, v in vocabs.items()}, dropped=event["dropped"],
        skipped=dict(summary.skipped), n_shards=len(infos), n_bytes=sum(s.n_bytes() for s in sources),
        elapsed=time.perf_counter() - started,
    )
