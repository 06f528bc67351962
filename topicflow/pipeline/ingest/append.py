"""Appending documents to a corpus store, with vocabulary growth."""
from __future__ import annotations

import json
import logging
import os
import shutil
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence, cast

import numpy as np

from topicflow._typing import OnError
from topicflow.errors import (
    InvalidParameterError,
    StoreExistsError,
    StoreNotFoundError,
    VocabularyMismatchError,
)
from topicflow.io._atomic import (
    disk_full_guard,
    exclusive_lock,
    fsync_directory,
    temporary_sibling,
)
from topicflow.io.corpus.id_index import (
    extend_index,
    ids_in_store,
    remove_unlisted_segments,
)
from topicflow.io.corpus.layout import MANIFEST, Manifest, vocabulary_version_name
from topicflow.io.corpus.reader import Corpus, read_manifest
from topicflow.io.corpus.writer import (
    manifest_bytes,
    remove_store_debris,
    with_shards,
    write_manifest,
    write_vocabulary,
)
from topicflow.io.sources import discover_partitions
from topicflow.io.sources.base import FieldSpec, InputPartition
from topicflow.io.storage import (
    Location,
    StoragePath,
    is_url,
    read_tagged,
    remove_prefix,
    replace_object,
)
from topicflow.io.tokenizer import (
    LanguageCounts,
    TermCounts,
    TokenizerConfig,
)
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.vocab_growth import promote_candidates
from topicflow.pipeline.cluster import compute_list
from topicflow.pipeline.ingest.ingest import (
    IngestResult,
    _BuildLayout,
    _check_records,
    _event,
    _forget_listings,
    _per_language,
    _resolve_duplicates,
    _settings,
    _sum_dicts,
    _summarize,
    absolute_inputs,
    written_hashes,
)
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.ingest import map_tokenize, map_write_tokenized

log = logging.getLogger(__name__)
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


def _next_candidates_name(store: Location, tag: str) -> str:
    """The next candidate set's name: ``<NNNNNN>``, and on object storage ``<NNNNNN>-<tag>``.

    On object storage there is no lock and no rename, so two appends could pick the same number; the
    run's tag keeps their sets apart (the manifest names the set, so any name reads the same).
    """
    if isinstance(store, StoragePath):
        _forget_listings(store)
    numbers = [p.name.split("-", 1)[0] for p in (store / "candidates").iterdir()]
    number = max((int(n) for n in numbers if n.isdigit()), default=0) + 1
    return f"{number:06d}-{tag}" if isinstance(store, StoragePath) else f"{number:06d}"


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


def _write_candidates(store: Location, manifest: Manifest, plan: _VocabularyPlan, tag: str) -> str | None:
    """Write the plan's candidate set as a new ``candidates/<name>`` (never touching the old one).

    Returns the name the manifest should point at: the old one when the set did not change. On object
    storage the set is written under its final name (no rename; no manifest lists it yet).
    """
    if not plan.candidates_changed:
        return manifest.candidates
    name = _next_candidates_name(store, tag)
    if isinstance(store, StoragePath):
        for lang, candidates in plan.candidates.items():
            write_vocabulary(store / "candidates" / name / lang, candidates)
        return name
    tmp = temporary_sibling(store / "candidates" / name)
    for lang, candidates in plan.candidates.items():
        write_vocabulary(tmp / lang, candidates)
    os.replace(tmp, store / "candidates" / name)
    return name


def _stage_encoding_vocabulary(store: Location, plan: _VocabularyPlan, tag: str) -> Location:
    """A directory whose ``vocab/<lang>`` holds the vocabulary the new shards are encoded with.

    The write tasks (:func:`topicflow.tasks.ingest.map_write_tokenized`) read ``<root>/vocab/<lang>``.
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

    A store that keeps token order (``ingest --keep-order``) keeps it for the new shards too: their
    term ids are those of the vocabulary version they are encoded with, and their tokens outside it
    (candidate terms included) are out-of-vocabulary entries. An append never adds the layer to a
    store without it.

    Parameters
    ----------
    store : path or URL
        An existing corpus store; locked for the duration of the append. A store on object storage
        (``s3://...``) is changed in a local copy (downloaded whole: see docs/storage.md), and only
        what changed is uploaded, the manifest last and only if no other writer changed it meanwhile.
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
    if promote_min_df is not None and (isinstance(promote_min_df, bool) or not isinstance(promote_min_df, int)
                                       or promote_min_df < 1):
        raise InvalidParameterError(f"promote_min_df must be a positive integer, got {promote_min_df!r}.")
    if is_url(store):  # the workers write into the store itself; the manifest is replaced last, conditionally
        result = _append_remote(StoragePath(str(store)), inputs, fields, tokenizer, split_every, on_error,
                                promote_min_df, client, progress)
        return replace(result, elapsed=time.perf_counter() - started)
    store = Path(store).absolute()
    manifest = read_manifest(store)
    _, split = _settings(manifest.shard_size, split_every, on_error)
    stored_tokenizer = check_append_consistency(manifest, fields, tokenizer, str(store))
    with exclusive_lock(store / ".lock", what=f"store {str(store)!r}"):
        manifest = read_manifest(store)
        removed = remove_store_debris(store, manifest) + remove_unlisted_segments(store, manifest)
        if removed:
            log.info("removed %d directories left by an interrupted append: %s", len(removed), removed)
        sources, partitions = discover_partitions(absolute_inputs(inputs), fields, manifest.shard_size)
        with disk_full_guard(store, what="corpus store",
                             unchanged="nothing was changed: the store is as it was before this append."):
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


def _append_remote(
    store: StoragePath, inputs: Sequence[str | os.PathLike[str]], fields: FieldSpec, tokenizer: TokenizerConfig | None,
    split_every: int | None, on_error: OnError, promote_min_df: int | None, client: Any, progress: ProgressReporter,
) -> AppendResult:
    """:func:`append_corpus` on object storage: no lock file and no rename.

    The manifest is read with its ETag; everything the append writes goes under names the manifest does
    not reference (this run's shards and tokens, a new candidate set, a new vocabulary version, new
    index segments); the commit replaces the manifest only if it is still the one read (``If-Match``),
    so of two concurrent appends one commits and the other fails without changing the store.
    """
    tagged = read_tagged(str(store / MANIFEST))
    if tagged is None:
        raise StoreNotFoundError(
            f"no corpus store at {store.url!r} (no {MANIFEST}); create one with `topicflow ingest INPUT "
            f"--out {store.url}`.", path=store.url)
    manifest = Manifest.from_dict(json.loads(tagged[0]), path=str(store / MANIFEST))
    _, split = _settings(manifest.shard_size, split_every, on_error)
    stored_tokenizer = check_append_consistency(manifest, fields, tokenizer, store.url)
    sources, partitions = discover_partitions(absolute_inputs(inputs), fields, manifest.shard_size)
    return _append_locked(store, manifest, sources, partitions, inputs, fields, stored_tokenizer, split, on_error,
                          promote_min_df, client, progress, previous=tagged)


def _append_locked(
    store: Location, manifest: Manifest, sources: Sequence[Any], partitions: Sequence[InputPartition],
    inputs: Sequence[str | os.PathLike[str]], fields: FieldSpec, tokenizer: TokenizerConfig, split: int,
    on_error: OnError, promote_min_df: int | None, client: Any, progress: ProgressReporter,
    previous: tuple[bytes, str | None] | None = None,
) -> AppendResult:
    """The body of :func:`append_corpus`, run under the store's lock (local disk) or against ``previous``.

    Everything is written under names the manifest does not reference (hidden shards, a hidden
    vocabulary, a new candidate set) and renamed on local disk; on object storage the shards keep
    their names (this run's and the task attempt's, as for ingest) and the new vocabulary version is
    written under its final name. Rewriting the manifest is the commit; on object storage it is
    replaced only if it is still ``previous`` (the bytes and ETag read at the start).
    """
    remote = isinstance(store, StoragePath)
    layout = _BuildLayout.of(store, partitions, append=True)
    tag = layout.run
    written_dirs: list[Location] = []
    try:
        summary = _summarize(map_tokenize(partitions, fields, tokenizer, on_error, paths=layout.token_paths),
                             split, client, progress)
        in_store = ids_in_store(store, manifest, summary.ids.unique)
        summary, skip = _resolve_duplicates(summary, partitions, fields, tokenizer, on_error, in_store,
                                            str(store), client, progress)
        _check_records(summary, inputs)
        plan = _plan_vocabulary(Corpus(store, manifest), summary.term_counts(), promote_min_df)
        encode_root = _stage_encoding_vocabulary(store, plan, tag)
        try:
            written = compute_list(
                map_write_tokenized(partitions, fields, store=str(encode_root), paths=layout.token_paths,
                                    shard_dirs=layout.shard_dirs, skip=skip,
                                    drop_reason="all_terms_out_of_vocabulary", keep_order=manifest.has_order),
                client=client, progress=progress, desc="writing shards", unit="shard")
            infos = layout.place(written, manifest, plan.version)
            if plan.grew:
                final = store / "vocabs" / vocabulary_version_name(plan.version)
                if isinstance(store, StoragePath):  # no rename: written again under its final name
                    _check_unchanged(store, previous)  # never over a version another append committed
                    written_dirs.append(final)
                    for lang, vocab in plan.vocabs.items():
                        write_vocabulary(final / lang, vocab)
                else:
                    os.replace(cast(Path, encode_root) / "vocab", cast(Path, final))
                    fsync_directory(store / "vocabs")
        finally:
            if encode_root != store:
                _remove_tree(encode_root)
        name = _write_candidates(store, manifest, plan, tag)
        if name != manifest.candidates:
            written_dirs.append(store / "candidates" / str(name))
        event = _event("append", inputs, fields, summary, written, candidates=name, oov_tokens=plan.oov_tokens,
                       promote_min_df=promote_min_df, promoted=plan.promoted, vocab_version=plan.version)
        updated = replace(with_shards(manifest, infos, event), candidates=name, vocab_version=plan.version)
        updated = replace(updated, id_index=extend_index(store, updated, written_hashes(written, infos)))
        if isinstance(store, StoragePath):
            _commit_remote(store, updated, previous)
        else:
            write_manifest(store, updated)
    except BaseException:
        if isinstance(store, StoragePath):  # the local route's caller removes its debris under the lock
            layout.remove_failed()
            _remove_unreferenced_dirs(store, written_dirs)
        raise
    finally:
        if not remote:
            for path in layout.token_paths.values():
                Path(path).unlink(missing_ok=True)
    layout.remove_unreferenced(updated)
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


def _check_unchanged(store: StoragePath, previous: tuple[bytes, str | None] | None) -> None:
    """Raise if the manifest is no longer ``previous``: another writer committed during this append."""
    current = read_tagged(str(store / MANIFEST))
    if previous is None or current is None or current[0] != previous[0]:
        raise StoreExistsError(
            f"store {store.url!r} was changed by another writer during this append; nothing of this append "
            "was committed: run it again.", path=store.url)


def _commit_remote(store: StoragePath, updated: Manifest, previous: tuple[bytes, str | None] | None) -> None:
    """Replace the manifest of a store on object storage only if it is still ``previous``."""
    try:
        replace_object(str(store / MANIFEST), manifest_bytes(updated), previous=previous)
    except FileExistsError as exc:
        raise StoreExistsError(
            f"store {store.url!r} was changed by another writer during this append; nothing of this append "
            "was committed: run it again.", path=store.url) from exc


def _remove_unreferenced_dirs(store: StoragePath, directories: Sequence[Location]) -> None:
    """After a failed append on object storage: remove its candidate set and vocabulary version, unless the
    store's manifest now references them (another append committed the same vocabulary version meanwhile)."""
    try:
        current = read_tagged(str(store / MANIFEST))
        manifest = Manifest.from_dict(json.loads(current[0])) if current is not None else None
    except Exception as exc:  # the append's own error is the one to report
        log.warning("could not read the manifest of %s to clean up (%s); leaving %s", store, exc, directories)
        return
    for directory in directories:
        kind, name = str(directory).rsplit("/", 2)[-2:]
        referenced = manifest is not None and (
            manifest.candidates == name if kind == "candidates" else manifest.vocab_version >= int(name))
        if not referenced:
            _remove_tree(directory)


def _remove_tree(location: Location) -> None:
    """Delete a directory or prefix this append wrote and nothing references (no error if gone)."""
    if isinstance(location, StoragePath):
        try:
            _forget_listings(location)  # written through zarr's own filesystem object: this one's listing is stale
            remove_prefix(location.url)
        except Exception as exc:  # garbage no manifest references; the error being handled matters more
            log.warning("could not remove %s (%s); no manifest references it", location, exc)
        return
    shutil.rmtree(location, ignore_errors=True)
