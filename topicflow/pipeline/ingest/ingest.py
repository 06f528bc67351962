"""Drivers of ``topicflow ingest`` and ``topicflow append``: build the pass graphs, compute, commit.

This module owns the order of the passes over the input, the decisions taken between them (duplicate
ids, vocabulary pruning, candidate terms), progress reporting and the atomic commit of the store.
Reading, tokenizing and writing shards happen in tasks (:mod:`topicflow.tasks.ingest`); only counts,
id hashes and shard descriptions ever come back to the driver, never documents or tokens.

Atomicity: ingest builds the whole store in a temporary sibling of the target and moves it into
place with :func:`~topicflow.io._atomic.commit_directory`; append writes shards under temporary names
inside ``shards/``, renames them, and commits by rewriting ``manifest.json``. On any error the new
files are removed, so the target is either untouched or complete.

Vocabulary growth: an append with ``promote_min_df`` moves candidate terms (out-of-vocabulary terms
of this and earlier appends) found in at least that many documents to the end of the vocabulary,
forming vocabulary version v+1 under ``vocabs/<v+1>/``; the new shards are encoded with it. Existing
term ids never change, so old shards and fitted models stay valid.
"""
from __future__ import annotations

import os
import shutil
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from topicflow import config
from topicflow._typing import OnError
from topicflow.errors import EmptyInputError, InputError, InvalidParameterError
from topicflow.io._atomic import (
    check_output_path,
    commit_directory,
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
    with_shards,
    write_manifest,
    write_vocabulary,
)
from topicflow.io.sources import discover_partitions
from topicflow.io.sources.base import FieldSpec, InputPartition
from topicflow.io.storage import is_url, staged_new_store
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
        Store to create; it must not exist unless ``overwrite``. A URL (``s3://bucket/news.zarr``) is
        built in a local staging directory (``topicflow.scratch-dir``, else the system's temporary
        directory) and uploaded with its manifest last; ``overwrite`` is not supported there yet
        (docs/storage.md).
    fields : FieldSpec
        Which fields hold id, text (per language), label and timestamp.
    tokenizer : TokenizerConfig, optional
        Default: lowercase, ``\\b\\w+\\b``, min length 2, English stop words.
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

    Examples
    --------
    >>> result = ingest_corpus(["news.jsonl"], "news.zarr", prune=PruneConfig(min_df=2))  # doctest: +SKIP
    >>> result.n_kept, result.vocab_sizes                                            # doctest: +SKIP
    >>> ordered = ingest_corpus(["news.jsonl"], "news-ordered.zarr", keep_order=True)  # doctest: +SKIP
    """
    started = time.perf_counter()
    if is_url(out):  # built in a local staging directory, then uploaded with the manifest last
        with staged_new_store(str(out), overwrite=overwrite, commit_file=MANIFEST) as local:
            result = ingest_corpus(inputs, local, fields=fields, tokenizer=tokenizer, prune=prune,
                                   shard_size=shard_size, split_every=split_every, on_error=on_error,
                                   keep_order=keep_order, client=client, progress=progress)
        return replace(result, store=str(out), elapsed=time.perf_counter() - started)
    tokenizer = tokenizer or TokenizerConfig()
    size, split = _settings(shard_size, split_every, on_error)
    out = Path(out).absolute()
    check_output_path(out, overwrite=overwrite)
    sources, partitions = discover_partitions(list(inputs), fields, size)
    tmp = temporary_sibling(out)
    try:
        init_store(tmp, format_version=store_format_version(1, has_order=keep_order))
        # One pass over the text: tokenize once, keeping provisional term ids beside the shards.
        token_paths = {p.index: str(tmp / "shards" / f".tokens-{p.index:06d}") for p in partitions}
        summary = _summarize(map_tokenize(partitions, fields, tokenizer, on_error, paths=token_paths),
                             split, client, progress)
        summary, skip = _resolve_duplicates(summary, partitions, fields, tokenizer, on_error, {}, str(out),
                                            client, progress)
        _check_records(summary, inputs)
        vocabs = {lang: prune_vocabulary(summary.term_counts().get(lang), prune) for lang in fields.languages}
        for lang, vocab in vocabs.items():
            write_vocabulary(tmp / "vocab" / lang, vocab)
            write_vocabulary(tmp / "excluded" / lang, too_common_terms(summary.term_counts().get(lang), prune))
        shard_dirs = {p.index: str(tmp / "shards" / f".part-{p.index:06d}") for p in partitions}
        written = compute_list(
            map_write_tokenized(partitions, fields, store=str(tmp), paths=token_paths, shard_dirs=shard_dirs,
                                skip=skip, drop_reason="all_terms_pruned", keep_order=keep_order),
            client=client, progress=progress, desc="writing shards", unit="shard")
        for path in token_paths.values():
            Path(path).unlink(missing_ok=True)
        manifest = Manifest(languages=fields.languages, tokenizer=tokenizer.to_dict(), shard_size=size,
                            has_labels=fields.has_labels, has_timestamps=fields.has_timestamps,
                            has_order=keep_order)
        infos = _place_shards(written, tmp / "shards", manifest)
        if not infos:
            raise EmptyInputError(
                f"every one of the {summary.n_records} documents is empty after tokenizing and pruning "
                f"({_reasons(_sum_dicts(w.dropped for w in written))}); lower --min-df / raise "
                "--max-df-fraction, or check --stop-words and --token-pattern.", path=str(inputs[0]),
            )
        event = _event("ingest", inputs, fields, summary, written, pruning=prune.to_dict())
        manifest = with_shards(manifest, infos, event)
        manifest = replace(manifest, id_index=extend_index(tmp, manifest))
        write_manifest(tmp, manifest)
        commit_directory(tmp, out, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return IngestResult(
        store=str(out), n_read=summary.n_records, n_kept=manifest.n_docs,
        n_tokens={lang: manifest.n_tokens(lang) for lang in manifest.languages},
        vocab_sizes={lang: len(v) for lang, v in vocabs.items()}, dropped=event["dropped"],
        skipped=dict(summary.skipped), n_shards=len(infos), n_bytes=sum(s.n_bytes() for s in sources),
        elapsed=time.perf_counter() - started,
    )
