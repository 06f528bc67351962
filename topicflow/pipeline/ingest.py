"""Drivers of ``topicflow ingest`` and ``topicflow append``: build the pass graphs, compute, commit.

This module owns the order of the passes over the input, the decisions taken between them (duplicate
ids, vocabulary pruning, candidate terms), progress reporting and the atomic commit of the store.
Reading, tokenizing and writing shards happen in tasks (:mod:`topicflow.tasks.ingest`); only counts,
id hashes and shard descriptions ever come back to the driver, never documents or tokens.

Atomicity: ingest builds the whole store in a temporary sibling of the target and moves it into
place with :func:`~topicflow.io.atomic.commit_directory`; append writes shards under temporary names
inside ``shards/``, renames them, and commits by rewriting ``manifest.json``. On any error the new
files are removed, so the target is either untouched or complete.

Vocabulary growth: an append with ``promote_min_df`` moves candidate terms (out-of-vocabulary terms
of this and earlier appends) found in at least that many documents to the end of the vocabulary,
forming vocabulary version v+1 under ``vocabs/<v+1>/``; the new shards are encoded with it. Existing
term ids never change, so old shards and fitted models stay valid.
"""
from __future__ import annotations

import logging
import os
import shutil
import time
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence, cast

import numpy as np
import zarr

from topicflow import config
from topicflow._typing import OnError
from topicflow.errors import EmptyInputError, InputError, InvalidParameterError, VocabularyMismatchError
from topicflow.io.atomic import (
    check_output_path,
    commit_directory,
    exclusive_lock,
    fsync_directory,
    read_json,
    temporary_sibling,
)
from topicflow.io.id_index import extend_index, hash_ids, ids_in_store, remove_unlisted_segments
from topicflow.io.sources import FieldSpec, InputPartition, discover_partitions
from topicflow.io.tokenizer import (
    LanguageCounts,
    PruneConfig,
    TermCounts,
    TokenizerConfig,
    prune_vocabulary,
    too_common_terms,
)
from topicflow.io.zarr_shards import (
    BASE_FORMAT_VERSION,
    MANIFEST,
    Corpus,
    Manifest,
    ShardInfo,
    group_array,
    init_store,
    read_manifest,
    remove_store_debris,
    vocabulary_version_name,
    with_shards,
    write_manifest,
    write_vocabulary,
)
from topicflow.models.vocab_growth import promote_candidates
from topicflow.models.vocabulary import Vocabulary
from topicflow.pipeline.cluster import compute, compute_list, current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.ingest import (
    IdOccurrence,
    PartitionSummary,
    ShardWritten,
    map_count,
    map_locate_ids,
    map_write_shards,
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


@dataclass(frozen=True, slots=True)
class AppendResult(IngestResult):
    """Summary of one append: :class:`IngestResult` plus out-of-vocabulary terms.

    Attributes
    ----------
    oov_tokens : dict of str to int
        Per language: tokens of the new documents not in the store's vocabulary before this append.
    n_candidates : dict of str to int
        Per language: candidate terms recorded so far (this append merged with earlier ones, minus
        the promoted ones).
    candidates : str or None
        Name of the candidate set under ``candidates/`` the manifest now points at.
    promoted : dict of str to int
        Per language: candidate terms this append added to the vocabulary (``promote_min_df``).
    vocab_version : int
        Vocabulary version after this append (the new shards are encoded with it).
    """

    oov_tokens: dict[str, int] = field(default_factory=dict)
    n_candidates: dict[str, int] = field(default_factory=dict)
    candidates: str | None = None
    promoted: dict[str, int] = field(default_factory=dict)
    vocab_version: int = 1

    def summary_lines(self) -> list[str]:
        lines = IngestResult.summary_lines(self)
        lines[3] += f" (version {self.vocab_version})"
        lines.insert(4, f"out of vocab   {_per_language(self.oov_tokens)} tokens; candidate terms "
                        f"{_per_language(self.n_candidates)}")
        if any(self.promoted.values()):
            lines.insert(5, f"promoted       {_per_language(self.promoted)} candidate term(s) to the "
                            f"vocabulary (now version {self.vocab_version})")
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


def _count_pass(
    partitions: Sequence[InputPartition], fields: FieldSpec, tokenizer: TokenizerConfig,
    on_error: OnError, split_every: int, client: Any, progress: ProgressReporter,
) -> PartitionSummary:
    """Pass 1: count every partition, then tree-merge; per-partition progress on a distributed client."""
    parts = map_count(partitions, fields, tokenizer, on_error)
    root = tree_merge(parts, split_every=split_every)
    client = current_client(client)
    if client is None or progress is NO_PROGRESS:
        return compute(root, client=client)[0]
    from distributed import as_completed

    # Holding the partitions' futures lets the tree reuse their results instead of recomputing.
    futures = client.compute(parts)
    for _ in progress.track(as_completed(futures), total=len(futures), desc="counting", unit="partition"):
        pass
    summary = compute(root, client=client)[0]
    del futures
    return summary


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
    return replace(summary, counts=summary.counts.without(removed),
                   n_records=summary.n_records - len(skipped), skipped=dict(reasons))


def _skip_plan(skipped: Iterable[IdOccurrence]) -> dict[int, frozenset[int]]:
    plan: dict[int, set[int]] = defaultdict(set)
    for occurrence in skipped:
        plan[occurrence.partition].add(occurrence.position)
    return {index: frozenset(positions) for index, positions in plan.items()}


def _write_pass(
    partitions: Sequence[InputPartition], fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError,
    *, store: Path, shard_dirs: Mapping[int, str], skip: Mapping[int, frozenset[int]], drop_reason: str,
    client: Any, progress: ProgressReporter,
) -> list[ShardWritten]:
    graphs = map_write_shards(partitions, fields, tokenizer, on_error, store=str(store),
                              shard_dirs=shard_dirs, skip=skip, drop_reason=drop_reason)
    return compute_list(graphs, client=client, progress=progress, desc="writing shards", unit="shard")


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
        infos.append(ShardInfo(shard_id, 0, result.n_docs, result.n_tokens, result.checksum, version))
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
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
) -> IngestResult:
    """Build a corpus store at ``out`` from text directories, JSON Lines and parquet files.

    Parameters
    ----------
    inputs : sequence of path
        Directories of text files (one document per file), ``.jsonl`` and ``.parquet`` files.
    out : path
        Store to create; it must not exist unless ``overwrite``.
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
    """
    started = time.perf_counter()
    tokenizer = tokenizer or TokenizerConfig()
    size, split = _settings(shard_size, split_every, on_error)
    out = Path(out).absolute()
    check_output_path(out, overwrite=overwrite)
    sources, partitions = discover_partitions([Path(p) for p in inputs], fields, size)
    tmp = temporary_sibling(out)
    try:
        init_store(tmp)
        summary = _count_pass(partitions, fields, tokenizer, on_error, split, client, progress)
        summary, skip = _resolve_duplicates(summary, partitions, fields, tokenizer, on_error, {}, str(out),
                                            client, progress)
        _check_records(summary, inputs)
        vocabs = {lang: prune_vocabulary(summary.counts.get(lang), prune) for lang in fields.languages}
        for lang, vocab in vocabs.items():
            write_vocabulary(tmp / "vocab" / lang, vocab)
            write_vocabulary(tmp / "excluded" / lang, too_common_terms(summary.counts.get(lang), prune))
        shard_dirs = {p.index: str(tmp / "shards" / f".part-{p.index:06d}") for p in partitions}
        written = _write_pass(partitions, fields, tokenizer, on_error, store=tmp, shard_dirs=shard_dirs,
                              skip=skip, drop_reason="all_terms_pruned", client=client, progress=progress)
        manifest = Manifest(languages=fields.languages, tokenizer=tokenizer.to_dict(), shard_size=size,
                            has_labels=fields.has_labels, has_timestamps=fields.has_timestamps)
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


# ----------------------------------------------------------------------------- append


def check_append_consistency(
    manifest: Manifest, fields: FieldSpec, tokenizer: TokenizerConfig | None, store: str
) -> TokenizerConfig:
    """The store's tokenizer, after checking the input can be encoded like the store's documents.

    Raises
    ------
    VocabularyMismatchError
        Languages, labels, timestamps or tokenizer settings differ from the store's; the message
        says which and what to pass.
    """
    stored = TokenizerConfig.from_dict(manifest.tokenizer)
    if set(fields.languages) != set(manifest.languages):
        hint = (" ".join(f"--lang-field {lang}=FIELD" for lang in manifest.languages)
                if len(manifest.languages) > 1 else "--text-field FIELD and no --lang-field")
        raise VocabularyMismatchError(
            f"store {store!r} has languages {list(manifest.languages)!r} but the input gives "
            f"{list(fields.languages)!r}; pass {hint}.", path=store)
    if fields.has_labels != manifest.has_labels:
        raise VocabularyMismatchError(
            f"store {store!r} {'has' if manifest.has_labels else 'has no'} labels but the input "
            f"{'gives' if fields.has_labels else 'gives no'} label field; "
            + ("pass --label-field (or --label-from-dir)." if manifest.has_labels
               else "drop --label-field/--label-from-dir."), path=store)
    if fields.has_timestamps != manifest.has_timestamps:
        raise VocabularyMismatchError(
            f"store {store!r} {'has' if manifest.has_timestamps else 'has no'} timestamps but the input "
            f"{'gives' if fields.has_timestamps else 'gives no'} timestamp field; "
            + ("pass --timestamp-field." if manifest.has_timestamps else "drop --timestamp-field."),
            path=store)
    if tokenizer is not None and tokenizer != stored:
        raise VocabularyMismatchError(
            f"tokenizer settings differ from those of store {store!r} ("
            + "; ".join(tokenizer.differences(stored)) + " [given != stored]); appended documents must "
            "be tokenized like the store's: leave the tokenizer options out.", path=store)
    return stored


def _next_candidates_name(store: Path) -> str:
    names = [int(p.name) for p in (store / "candidates").iterdir() if p.name.isdigit()]
    return f"{max(names, default=0) + 1:06d}"


def _candidate_vocabulary(counts: LanguageCounts, vocab: Vocabulary, previous: Vocabulary) -> Vocabulary:
    """Out-of-vocabulary terms of ``counts`` merged with the previous candidates, canonical order."""
    index = vocab.index
    doc_freq = Counter({t: n for t, n in counts.doc_freq.items() if t not in index})
    corpus_freq = Counter({t: n for t, n in counts.corpus_freq.items() if t not in index})
    doc_freq.update(dict(zip((str(t) for t in previous.terms), previous.doc_freq.tolist())))
    corpus_freq.update(dict(zip((str(t) for t in previous.terms), previous.corpus_freq.tolist())))
    return Vocabulary.from_counts(doc_freq, corpus_freq)


@dataclass(frozen=True, slots=True)
class _VocabularyPlan:
    """What one append does to the vocabulary and the candidate terms (decided after the count pass).

    Attributes
    ----------
    vocabs : dict of str to Vocabulary
        Per language, the vocabulary the new shards are encoded with: the current one, or the
        current one grown by the promoted candidates.
    version : int
        Vocabulary version of ``vocabs`` (the current version + 1 when any term was promoted).
    candidates : dict of str to Vocabulary
        Per language, the candidate set after this append (merged, minus the promoted terms).
    oov_tokens, promoted : dict of str to int
        Per language: tokens not in the current vocabulary; terms promoted.
    candidates_changed : bool
        Whether a new candidate set must be written (some token was out of vocabulary, or a term
        was promoted).
    """

    vocabs: dict[str, Vocabulary]
    version: int
    candidates: dict[str, Vocabulary]
    oov_tokens: dict[str, int]
    promoted: dict[str, int]
    candidates_changed: bool

    @property
    def grew(self) -> bool:
        return any(self.promoted.values())


def _plan_vocabulary(corpus: Corpus, counts: TermCounts, promote_min_df: int | None) -> _VocabularyPlan:
    """Merge this append's out-of-vocabulary terms into the candidates and promote the frequent ones."""
    vocabs, candidates, oov, promoted = {}, {}, {}, {}
    for lang in corpus.languages:
        vocab, lang_counts = corpus.vocabulary(lang), counts.get(lang)
        oov[lang] = sum(n for t, n in lang_counts.corpus_freq.items() if t not in vocab.index)
        merged = _candidate_vocabulary(lang_counts, vocab, corpus.candidates(lang))
        grown = vocab
        if promote_min_df is not None:
            grown, merged = _promote_unless_excluded(vocab, merged, promote_min_df, corpus.excluded_terms(lang))
        vocabs[lang], candidates[lang], promoted[lang] = grown, merged, len(grown) - len(vocab)
    grew = any(promoted.values())
    return _VocabularyPlan(vocabs=vocabs, version=corpus.vocab_version + int(grew), candidates=candidates,
                           oov_tokens=oov, promoted=promoted, candidates_changed=grew or any(oov.values()))


def _promote_unless_excluded(
    vocab: Vocabulary, candidates: Vocabulary, min_df: int, excluded: frozenset[str]
) -> tuple[Vocabulary, Vocabulary]:
    """:func:`promote_candidates`, except for terms the ingest dropped as too common (they stay candidates)."""
    if not excluded or not len(candidates):
        return promote_candidates(vocab, candidates, min_df)
    held = np.array([str(t) in excluded for t in candidates.terms], dtype=bool)
    grown, rest = promote_candidates(vocab, _subset(candidates, ~held), min_df)
    remaining = _subset(candidates, held)
    merged = Vocabulary.from_counts(
        {**dict(zip(rest.terms, rest.doc_freq.tolist())), **dict(zip(remaining.terms, remaining.doc_freq.tolist()))},
        {**dict(zip(rest.terms, rest.corpus_freq.tolist())), **dict(zip(remaining.terms, remaining.corpus_freq.tolist()))},
    )
    return grown, merged


def _subset(vocab: Vocabulary, mask: np.ndarray) -> Vocabulary:
    return Vocabulary(np.asarray(vocab.terms, dtype=object)[mask], np.asarray(vocab.doc_freq)[mask],
                      np.asarray(vocab.corpus_freq)[mask])


def _write_candidates(store: Path, manifest: Manifest, plan: _VocabularyPlan) -> str | None:
    """Write the plan's candidate set as a new ``candidates/<name>`` (never touching the old one).

    Returns the name the manifest should point at: the old one when the set did not change.
    """
    if not plan.candidates_changed:
        return manifest.candidates
    name = _next_candidates_name(store)
    tmp = temporary_sibling(store / "candidates" / name)
    for lang, candidates in plan.candidates.items():
        write_vocabulary(tmp / lang, candidates)
    os.replace(tmp, store / "candidates" / name)
    return name


def _stage_encoding_vocabulary(store: Path, plan: _VocabularyPlan, tag: str) -> Path:
    """A directory whose ``vocab/<lang>`` holds the vocabulary the new shards are encoded with.

    The write tasks (:func:`topicflow.tasks.ingest.map_write_shards`) read ``<root>/vocab/<lang>``.
    While the vocabulary is version 1 that is the store itself. Otherwise the vocabulary is written
    to the hidden ``vocabs/.append-<tag>/vocab/``: a grown one is later renamed to its final
    ``vocabs/<version>/``, a current one of version >= 2 is a throw-away copy. Either way, nothing
    the manifest references is written to.
    """
    if plan.version == 1:
        return store
    root = store / "vocabs" / f".append-{tag}"
    for lang, vocab in plan.vocabs.items():
        write_vocabulary(root / "vocab" / lang, vocab)
    return root


def append_corpus(
    store: str | os.PathLike[str],
    inputs: Sequence[str | os.PathLike[str]],
    *,
    fields: FieldSpec = FieldSpec(),
    tokenizer: TokenizerConfig | None = None,
    split_every: int | None = None,
    on_error: OnError = "raise",
    promote_min_df: int | None = None,
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
) -> AppendResult:
    """Add documents to an existing store, encoded with its vocabulary and tokenizer.

    Out-of-vocabulary terms are recorded as candidate terms with their frequencies, merged with
    earlier appends' candidates into a new ``candidates/<name>`` set. With ``promote_min_df``, the
    candidates found in at least that many documents are appended at the end of the vocabulary (in
    canonical order, with their candidate frequencies) as vocabulary version v+1, and the new
    documents are encoded with it. Existing term ids never change, so shards and models made with
    an earlier version stay valid.

    Parameters
    ----------
    store : path
        An existing corpus store; locked for the duration of the append.
    inputs : sequence of path
        As for :func:`ingest_corpus`; partitions have the store's shard size.
    fields : FieldSpec
        Must give the store's languages, and labels/timestamps exactly when the store has them.
    tokenizer : TokenizerConfig, optional
        Only to check: it must equal the store's (None uses the store's).
    split_every : int, optional
        As for :func:`ingest_corpus`.
    on_error : {"raise", "skip"}
        As for :func:`ingest_corpus`. Ids colliding with ids in the store are errors (or skipped).
    promote_min_df : int, optional
        Promote candidate terms whose document frequency (over every append so far) is at least
        this; None (default) never changes the vocabulary.
    client : distributed.Client, optional
        As for :func:`ingest_corpus`.
    progress : ProgressReporter
        As for :func:`ingest_corpus`.

    Returns
    -------
    AppendResult

    Raises
    ------
    InvalidParameterError
        ``promote_min_df`` is not a positive integer.
    VocabularyMismatchError
        The input cannot be encoded consistently with the store.
    InputError, EmptyInputError
        As for :func:`ingest_corpus`.
    LockedError
        Another process is changing the store.
    """
    started = time.perf_counter()
    store = Path(store).absolute()
    if promote_min_df is not None and (isinstance(promote_min_df, bool) or not isinstance(promote_min_df, int)
                                       or promote_min_df < 1):
        raise InvalidParameterError(f"promote_min_df must be a positive integer, got {promote_min_df!r}.")
    manifest = read_manifest(store)
    _, split = _settings(manifest.shard_size, split_every, on_error)
    stored_tokenizer = check_append_consistency(manifest, fields, tokenizer, str(store))
    with exclusive_lock(store / ".lock", what=f"store {str(store)!r}"):
        manifest = read_manifest(store)
        removed = remove_store_debris(store, manifest) + remove_unlisted_segments(store, manifest)
        if removed:
            log.info("removed %d directories left by an interrupted append: %s", len(removed), removed)
        sources, partitions = discover_partitions([Path(p) for p in inputs], fields, manifest.shard_size)
        try:
            result = _append_locked(store, manifest, sources, partitions, inputs, fields,
                                    stored_tokenizer, split, on_error, promote_min_df, client, progress)
        except BaseException:
            if read_manifest(store) == manifest:  # not committed: remove what this append wrote
                _remove_debris_quietly(store, manifest)
            raise
    return replace(result, elapsed=time.perf_counter() - started)


def _remove_debris_quietly(store: Path, manifest: Manifest) -> None:
    """Clean up after a failed append without hiding its error (the next append retries)."""
    try:
        remove_store_debris(store, manifest)
        remove_unlisted_segments(store, manifest)
    except OSError as exc:
        log.warning("could not remove what the failed append wrote (%s); the next append will", exc)


def _append_locked(
    store: Path, manifest: Manifest, sources: Sequence[Any], partitions: Sequence[InputPartition],
    inputs: Sequence[str | os.PathLike[str]], fields: FieldSpec, tokenizer: TokenizerConfig, split: int,
    on_error: OnError, promote_min_df: int | None, client: Any, progress: ProgressReporter,
) -> AppendResult:
    """The body of :func:`append_corpus`, run under the store's lock.

    Everything is written under names the manifest does not reference (hidden shards, a hidden
    vocabulary, a new candidate set) and renamed; rewriting the manifest is the commit.
    """
    summary = _count_pass(partitions, fields, tokenizer, on_error, split, client, progress)
    in_store = ids_in_store(store, manifest, summary.ids.unique)
    summary, skip = _resolve_duplicates(summary, partitions, fields, tokenizer, on_error, in_store,
                                        str(store), client, progress)
    _check_records(summary, inputs)
    plan = _plan_vocabulary(Corpus(store, manifest), summary.counts, promote_min_df)
    tag = uuid.uuid4().hex[:12]
    encode_root = _stage_encoding_vocabulary(store, plan, tag)
    try:
        shard_dirs = {p.index: str(store / "shards" / f".append-{tag}-{p.index:06d}") for p in partitions}
        written = _write_pass(partitions, fields, tokenizer, on_error, store=encode_root, shard_dirs=shard_dirs,
                              skip=skip, drop_reason="all_terms_out_of_vocabulary", client=client,
                              progress=progress)
        infos = _place_shards(written, store / "shards", manifest, plan.version)
        if plan.grew:
            os.replace(encode_root / "vocab", store / "vocabs" / vocabulary_version_name(plan.version))
            fsync_directory(store / "vocabs")
    finally:
        if encode_root != store:
            shutil.rmtree(encode_root, ignore_errors=True)
    name = _write_candidates(store, manifest, plan)
    event = _event("append", inputs, fields, summary, written, candidates=name, oov_tokens=plan.oov_tokens,
                   promote_min_df=promote_min_df, promoted=plan.promoted, vocab_version=plan.version)
    updated = replace(with_shards(manifest, infos, event), candidates=name, vocab_version=plan.version)
    updated = replace(updated, id_index=extend_index(store, updated))
    write_manifest(store, updated)
    try:
        remove_unlisted_segments(store, updated)
    except OSError as exc:  # committed already: the merged-away segments are only garbage
        log.warning("could not delete id-index segments merged away (%s); the next append will", exc)
    return AppendResult(
        store=str(store), n_read=summary.n_records, n_kept=sum(i.n_docs for i in infos),
        n_tokens=_sum_dicts(i.n_tokens for i in infos), vocab_sizes={k: len(v) for k, v in plan.vocabs.items()},
        dropped=event["dropped"], skipped=dict(summary.skipped), n_shards=len(infos),
        n_bytes=sum(s.n_bytes() for s in sources), elapsed=0.0, oov_tokens=plan.oov_tokens,
        n_candidates={lang: len(c) for lang, c in plan.candidates.items()}, candidates=name,
        promoted=plan.promoted, vocab_version=plan.version,
    )


# ----------------------------------------------------------------------------- info


def describe_store(path: str | os.PathLike[str]) -> dict[str, Any]:
    """A JSON-able summary of a store (what ``topicflow info`` shows); streams labels shard by shard."""
    corpus = Corpus.open(path)
    manifest = corpus.manifest
    labels: Counter[str] = Counter()
    if manifest.has_labels:
        for shard in corpus.shards:
            group = zarr.open_group(str(corpus.path / "shards" / shard.shard_id), mode="r")
            labels.update(str(v) for v in cast(np.ndarray, group_array(group, "labels")[:]))
    tokenizer = dict(manifest.tokenizer)
    tokenizer["stop_words"] = len(tokenizer.get("stop_words", ()))
    return {
        "path": str(corpus.path),
        "format_version": int(read_json(corpus.path / MANIFEST).get("format_version", BASE_FORMAT_VERSION)),
        "created": manifest.created,
        "n_docs": len(corpus),
        "n_tokens": corpus.tokens_by_language(),
        "languages": list(corpus.languages),
        "vocab_sizes": corpus.vocab_sizes(),
        "vocab_version": corpus.vocab_version,
        "n_shards": corpus.n_shards,
        "shard_size": manifest.shard_size,
        "has_labels": manifest.has_labels,
        "labels": dict(sorted(labels.items())),
        "has_timestamps": manifest.has_timestamps,
        "candidates": manifest.candidates,
        "n_candidates": {lang: len(corpus.candidates(lang)) for lang in corpus.languages},
        "tokenizer": tokenizer,
        "n_appends": sum(1 for e in manifest.history if e.get("action") == "append"),
    }
