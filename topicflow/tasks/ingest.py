"""Graph builders of ingest and append: count, tree-merge, locate duplicate ids, encode and write.

Lazy only: builders take partition descriptors (and Delayed values) and return ``Delayed`` objects
with readable, deterministic keys (``ingest-count-<token>-<i>``). They never compute, never import
``distributed`` and never read input on the driver. Task bodies are module-level functions, so they
pickle by reference and name their keys; every one of them reads at most one partition.

Passes over the input (each a map over partitions). Ingest reads and tokenizes the input once:
    1. ``tokenize_partition``: read and tokenize (:func:`~topicflow.io.tokenizer.tokenize_batch`),
       keep the partition's tokens as provisional term ids in a file beside the shards
       (:class:`TokenizedPartition`), and return per-language doc/corpus term frequencies, id
       hashes and skipped records; tree-merged with fixed fan-in ``split_every`` into one
       :class:`PartitionSummary`.
    2. ``locate_ids`` (only when pass 1 found candidate duplicate ids): the records behind them.
    3. ``write_tokenized``: map the provisional ids to the store's vocabulary (integer work, no
       text is read again) and write the partition's shard (one partition -> one shard); with
       ``keep_order`` also each document's tokens in reading order, as :class:`OrderEncoder` does.
Append runs the same passes (its vocabulary, grown by promoted candidate terms, is known before
pass 3 runs). ``count_partition`` and ``write_partition`` are the two-pass bodies (count, then
re-read and re-tokenize while writing) that ingest and append used before: they give the same
counts and shards, and remain as the reference the one-pass route is tested against.
"""
from __future__ import annotations

import io
import os
import pickle
import uuid
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping, Sequence

import dask
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from dask.delayed import Delayed

from topicflow._typing import OnError
from topicflow.io.corpus.id_index import hash_ids
from topicflow.io.corpus.reader import read_vocabulary
from topicflow.io.corpus.writer import write_shard
from topicflow.io.sources import read_columns, read_partition
from topicflow.io.sources.base import (
    FieldSpec,
    InputPartition,
    Record,
    RecordColumns,
    RecordError,
)
from topicflow.io.storage import as_location, is_url, open_input, write_object
from topicflow.io.tokenizer import (
    LanguageCounts,
    TermCounts,
    TermTable,
    TokenBatch,
    TokenizerConfig,
    count_document,
    make_tokenizer,
    tokenize_arrow,
    tokenize_batch,
)
from topicflow.tasks.reduce import tree_reduce

#: Per-language bag of one document; None when the document lacks the language.
Bags = dict[str, "Counter[str] | None"]


@dataclass(frozen=True, slots=True)
class IdHashes:
    """Hashes of document ids seen so far: a monoid under :meth:`merge`.

    Attributes
    ----------
    unique : ndarray of shape (n_distinct,), uint64, sorted
    repeated : ndarray of shape (n_repeated,), uint64, sorted
        Hashes seen more than once: candidate duplicate ids (to be confirmed on the ids themselves).
    """

    unique: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))
    repeated: np.ndarray = field(default_factory=lambda: np.zeros(0, np.uint64))

    @classmethod
    def of(cls, hashes: np.ndarray) -> IdHashes:
        values, counts = np.unique(hashes, return_counts=True)
        return cls(values, values[counts > 1])

    def merge(self, other: IdHashes) -> IdHashes:
        values, counts = np.unique(np.concatenate([self.unique, other.unique]), return_counts=True)
        repeated = np.union1d(np.union1d(self.repeated, other.repeated), values[counts > 1])
        return IdHashes(values, repeated.astype(np.uint64))

    @staticmethod
    def merge_all(parts: Sequence[IdHashes]) -> IdHashes:
        """The merge of all ``parts`` at once: equal to chained :meth:`merge` calls."""
        if len(parts) == 1:
            return parts[0]
        values, counts = np.unique(np.concatenate([p.unique for p in parts]), return_counts=True)
        repeated = np.union1d(np.concatenate([p.repeated for p in parts]), values[counts > 1])
        return IdHashes(values, repeated.astype(np.uint64))


@dataclass(frozen=True, slots=True)
class PartitionSummary:
    """What pass 1 learns from some partitions; merged associatively by :meth:`merge`.

    Attributes
    ----------
    counts : TermCounts or TermTable
        The columnar :class:`~topicflow.io.tokenizer.TermTable` inside the ingest tree (what
        :func:`tokenize_partition` returns and :func:`merge_summaries` keeps), :class:`TermCounts`
        otherwise; :meth:`with_counters` gives the latter.
    ids : IdHashes
    n_records : int
        Valid records read.
    skipped : dict of str to int
        Bad records skipped (``on_error="skip"``), by reason.
    """

    counts: TermCounts | TermTable = field(default_factory=TermCounts)
    ids: IdHashes = field(default_factory=IdHashes)
    n_records: int = 0
    skipped: dict[str, int] = field(default_factory=dict)

    def merge(self, other: PartitionSummary) -> PartitionSummary:
        return merge_summaries(self, other)

    def term_counts(self) -> TermCounts:
        """The term statistics as :class:`TermCounts`."""
        return self.counts.to_counts() if isinstance(self.counts, TermTable) else self.counts

    def with_counters(self) -> PartitionSummary:
        """This summary with its counts as :class:`TermCounts` (what the drivers work with)."""
        return replace(self, counts=self.term_counts())


@dataclass(frozen=True, slots=True)
class IdOccurrence:
    """One record whose id hash is a candidate duplicate (found by :func:`locate_ids`)."""

    doc_id: str
    location: str
    partition: int
    position: int                     #: index among the partition's valid records
    counts: TermCounts                #: the record's own term counts (to undo if it is skipped)


@dataclass(frozen=True, slots=True)
class ShardWritten:
    """What pass 3 wrote for one partition; ``checksum`` is None when no document was kept.

    ``shard_dir`` is where this attempt of the task wrote the shard: the ``shard_dir`` it was given
    plus a suffix unique to the attempt (:func:`attempt_dir`), so a task run again after its worker
    was lost never writes into the files of the lost attempt, and the driver references only the
    directory of the attempt whose result it received. ``id_hashes`` are the :func:`hash_ids` of
    the shard's document ids, in shard order (None when not computed), so the driver indexes the new
    shards without reading their ids back (:func:`~topicflow.io.corpus.id_index.extend_index`).
    """

    partition: int
    shard_dir: str
    n_docs: int
    n_tokens: dict[str, int]
    checksum: str | None
    dropped: dict[str, int]
    id_hashes: np.ndarray | None = field(default=None, compare=False)  # an array: compared by the caller


# ----------------------------------------------------------------------------- task bodies


def attempt_dir(shard_dir: str) -> str:
    """``shard_dir`` plus a suffix unique to this run of the task (``-<8 hex digits>``).

    Parameters
    ----------
    shard_dir : str
        Directory (local path or URL) the driver planned for a partition's shard.

    Returns
    -------
    str
        A fresh sibling name; two attempts of one task (a worker lost mid-write and the rerun) never
        share files, on local disk or on object storage, where two writers of one key would race.
    """
    return f"{shard_dir}-{uuid.uuid4().hex[:8]}"


def iter_records(
    partition: InputPartition, fields: FieldSpec, on_error: OnError, skipped: Counter[str] | None = None
) -> Iterator[Record]:
    """Read the valid records of a partition; bad ones raise (``on_error="raise"``) or are skipped.

    Parameters
    ----------
    partition : InputPartition
        Part of one input.
    fields : FieldSpec
        Which fields hold the text, id, label and timestamp.
    on_error : {"raise", "skip"}
        Raise the first bad record's error, or skip bad records.
    skipped : Counter of str, optional
        Incremented by reason for every skipped record.

    Yields
    ------
    Record
        Each valid record, in input order.
    """
    for item in read_partition(partition, fields):
        if isinstance(item, RecordError):
            if on_error == "raise":
                raise item.error
            if skipped is not None:
                skipped[item.reason] += 1
            continue
        yield item


def read_partition_columns(
    partition: InputPartition, fields: FieldSpec, on_error: OnError, skipped: Counter[str] | None = None
) -> RecordColumns:
    """The valid records of a partition as columns: the format's columnar reader, else :func:`iter_records`.

    Parameters
    ----------
    partition : InputPartition
        Part of one input.
    fields : FieldSpec
        Which fields hold the text, id, label and timestamp.
    on_error : {"raise", "skip"}
        As for :func:`iter_records` (used when the columnar reader declines).
    skipped : Counter of str, optional
        As for :func:`iter_records`.

    Returns
    -------
    RecordColumns
        The records :func:`iter_records` yields, whichever way they were read.
    """
    columns = read_columns(partition, fields)
    if columns is not None:
        return columns
    return RecordColumns.of(list(iter_records(partition, fields, on_error, skipped)), fields.languages)


def record_bags(record: Record, tokenizer: TokenizerConfig) -> Bags:
    """Per-language term counts of one record (None for a language the record lacks)."""
    return {lang: None if text is None else Counter(make_tokenizer(tokenizer.for_language(lang))(text))
            for lang, text in record.texts.items()}


def count_partition(
    partition: InputPartition, fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError
) -> PartitionSummary:
    """Pass 1 on one partition: term frequencies per language, id hashes and skipped records."""
    runs = {lang: make_tokenizer(tokenizer.for_language(lang)) for lang in fields.languages}
    doc_freq = {lang: Counter[str]() for lang in fields.languages}
    corpus_freq = {lang: Counter[str]() for lang in fields.languages}
    n_docs = dict.fromkeys(fields.languages, 0)
    skipped: Counter[str] = Counter()
    doc_ids = []
    for record in iter_records(partition, fields, on_error, skipped):
        doc_ids.append(record.doc_id)
        for lang, text in record.texts.items():
            if text is None:
                continue
            tokens = runs[lang](text)
            corpus_freq[lang].update(tokens)
            doc_freq[lang].update(set(tokens))
            n_docs[lang] += 1
    counts = TermCounts({lang: LanguageCounts(doc_freq[lang], corpus_freq[lang], n_docs[lang])
                         for lang in fields.languages})
    return PartitionSummary(counts, IdHashes.of(hash_ids(doc_ids)), len(doc_ids), dict(skipped))


def merge_summaries(*parts: PartitionSummary) -> PartitionSummary:
    """Body of one tree node: the merge of its children (chained :meth:`PartitionSummary.merge`, vectorized)."""
    if len(parts) == 1:
        return parts[0]
    skipped: Counter[str] = Counter()
    for part in parts:
        skipped.update(part.skipped)
    tables = [p.counts for p in parts if isinstance(p.counts, TermTable)]
    counts: TermCounts | TermTable
    if len(tables) == len(parts):
        counts = TermTable.merge_all(tables)
    else:
        counts = TermCounts.merge_all([p.term_counts() for p in parts])
    return PartitionSummary(counts, IdHashes.merge_all([p.ids for p in parts]),
                            sum(p.n_records for p in parts), dict(skipped))


def locate_ids(
    partition: InputPartition, fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError,
    hashes: np.ndarray,
) -> list[IdOccurrence]:
    """Pass 2 on one partition: the records whose id hash is in ``hashes`` (sorted uint64)."""
    found = []
    for position, record in enumerate(iter_records(partition, fields, on_error)):
        hashed = hash_ids([record.doc_id])
        if np.isin(hashed, hashes, assume_unique=True)[0]:
            counts = count_document(record_bags(record, tokenizer))
            found.append(IdOccurrence(record.doc_id, record.location, partition.index, position, counts))
    return found


class VocabIndex(dict[str, int]):
    """Term -> id of a vocabulary (a dict), with its terms in id order as an Arrow array.

    Parameters
    ----------
    terms : sequence of str
        The vocabulary's terms in id order (distinct).
    """

    def __init__(self, terms: Sequence[str] | np.ndarray) -> None:
        super().__init__((str(t), i) for i, t in enumerate(terms))
        try:
            self.terms: pa.Array | None = pa.array(list(self), pa.string())
        except (pa.ArrowException, UnicodeError):
            self.terms = None

    def ids_of(self, terms: np.ndarray) -> np.ndarray:
        """The id of each of ``terms`` (distinct, object array of str), -1 for a term outside the vocabulary.

        Notes
        -----
        NumPy equivalent: ``np.array([self.get(t, -1) for t in terms])``. Here one Arrow hash look-up of
        the vocabulary's terms among ``terms`` (which does not hold the GIL, unlike the dict look-ups).
        """
        if self.terms is not None and len(terms):
            try:
                wanted = pa.array(terms, pa.string())
            except (pa.ArrowException, UnicodeError):
                pass
            else:
                position = pc.index_in(self.terms, value_set=wanted)
                found = np.flatnonzero(position.is_valid().to_numpy(zero_copy_only=False))
                ids = np.full(len(terms), -1, np.int64)
                ids[position.drop_null().to_numpy(zero_copy_only=False)] = found
                return ids
        get = self.get
        return np.fromiter((get(t, -1) for t in terms.tolist()), np.int64, len(terms))


def load_vocab_index(store: str, languages: tuple[str, ...]) -> dict[str, VocabIndex]:
    """Term -> id mapping of each language of the store's vocabulary (one task, shared by writers)."""
    return {lang: VocabIndex(read_vocabulary(as_location(store) / "vocab" / lang).terms) for lang in languages}


def encode_bag(bag: Counter[str] | None, index: Mapping[str, int]) -> tuple[list[int], list[int]]:
    """Sorted term ids and their counts of the in-vocabulary terms of one bag."""
    if not bag:
        return [], []
    found = {index[term]: count for term, count in bag.items() if term in index}
    ids = sorted(found)
    return ids, [found[i] for i in ids]


class OrderEncoder:
    """Builds one language's ordered-token layer of a shard, document by document.

    A token in the vocabulary becomes its term id; any other token the tokenizer produced (a term
    pruned by document frequency, or a candidate term of an append) becomes ``-(k + 1)``, where
    ``k`` is the position of its string among the shard's distinct out-of-vocabulary strings, in
    order of first appearance in the shard. The result is the ``(indptr, tokens, oov_terms)`` of
    :class:`topicflow.models.common.blocks.OrderedBlock`.

    Parameters
    ----------
    index : mapping of str to int
        Term to id of the vocabulary the shard is encoded with.

    Examples
    --------
    >>> encoder = OrderEncoder({"fox": 0, "dog": 1})
    >>> encoder.add(["dog", "cat", "fox", "cat"]); encoder.add(None); encoder.add(["emu"])
    >>> [a.tolist() for a in encoder.arrays()]
    [[0, 4, 4, 5], [1, -1, 0, -1, -2], ['cat', 'emu']]
    """

    def __init__(self, index: Mapping[str, int]) -> None:
        self._index = index
        self._oov: dict[str, int] = {}
        self._indptr = [0]
        self._tokens: list[int] = []

    def add(self, tokens: Sequence[str] | None) -> None:
        """Append one document's tokens (None or empty: a document without text in this language)."""
        if tokens:
            get, oov = self._index.get, self._oov
            self._tokens.extend([
                code if (code := get(t)) is not None else -(oov.setdefault(t, len(oov)) + 1) for t in tokens
            ])
        self._indptr.append(len(self._tokens))

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(indptr int64, tokens int32, oov_terms object)`` of the documents added so far."""
        return (np.asarray(self._indptr, np.int64), np.asarray(self._tokens, np.int32),
                np.array(list(self._oov), dtype=object))


def write_partition(
    partition: InputPartition, fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError,
    vocab_index: Mapping[str, Mapping[str, int]], shard_dir: str, skip_positions: frozenset[int],
    drop_reason: str, keep_order: bool = False,
) -> ShardWritten:
    """Pass 3 on one partition: encode its kept documents and write them as one shard at ``shard_dir``.

    A document is dropped (and counted) when it has no token (``no_tokens``) or when none of its
    tokens is in the vocabulary (``drop_reason``). Records at ``skip_positions`` are left out. With
    ``keep_order`` the shard also holds every kept document's tokens in reading order, per language
    (:class:`OrderEncoder`); the bags are the same either way.
    """
    languages = fields.languages
    runs = {lang: make_tokenizer(tokenizer.for_language(lang)) for lang in languages}
    csr: dict[str, tuple[list[int], list[int], list[int]]] = {lang: ([0], [], []) for lang in languages}
    encoders = {lang: OrderEncoder(vocab_index[lang]) for lang in languages} if keep_order else {}
    doc_ids, labels, timestamps = [], [], []
    dropped: Counter[str] = Counter()
    for position, record in enumerate(iter_records(partition, fields, on_error)):
        if position in skip_positions:
            continue
        tokens = {lang: None if text is None else runs[lang](text) for lang, text in record.texts.items()}
        bags: Bags = {lang: None if toks is None else Counter(toks) for lang, toks in tokens.items()}
        encoded = {lang: encode_bag(bags[lang], vocab_index[lang]) for lang in languages}
        if not any(ids for ids, _ in encoded.values()):
            dropped["no_tokens" if not any(bags.values()) else drop_reason] += 1
            continue
        for lang, (ids, counts) in encoded.items():
            indptr, term_ids, values = csr[lang]
            term_ids.extend(ids)
            values.extend(counts)
            indptr.append(len(term_ids))
        for lang, encoder in encoders.items():
            encoder.add(tokens.get(lang))
        doc_ids.append(record.doc_id)
        labels.append(record.label)
        timestamps.append(record.timestamp)
    if not doc_ids:
        return ShardWritten(partition.index, shard_dir, 0, {}, None, dict(dropped))
    shard_dir = attempt_dir(shard_dir)
    bags_arrays = {
        lang: (np.asarray(p, np.int64), np.asarray(t, np.int32), np.asarray(c, np.int32))
        for lang, (p, t, c) in csr.items()
    }
    checksum, n_tokens = write_shard(
        as_location(shard_dir), bags_arrays, np.asarray(doc_ids, dtype=object),
        labels=np.asarray(labels, dtype=object) if fields.has_labels else None,
        timestamps=np.asarray(timestamps, dtype=np.int64) if fields.has_timestamps else None,
        orders={lang: encoder.arrays() for lang, encoder in encoders.items()} if keep_order else None,
    )
    return ShardWritten(partition.index, shard_dir, len(doc_ids), n_tokens, checksum, dict(dropped),
                        hash_ids(doc_ids))


@dataclass(frozen=True, slots=True)
class LanguageTokens:
    """The tokens of one language of a partition's valid records (part of :class:`TokenizedPartition`).

    Attributes
    ----------
    has_text : ndarray of shape (n_records,), bool
        Whether the record has text in the language (None text: it lacks the language).
    tokens : TokenBatch
        The tokens of every record (an empty text for a record lacking the language).
    bags : tuple of ndarray
        ``tokens.bags()``: per record, provisional term ids (positions in ``tokens.terms``) and counts.
    """

    has_text: np.ndarray
    tokens: TokenBatch
    bags: tuple[np.ndarray, np.ndarray, np.ndarray]

    @classmethod
    def of(cls, texts: Sequence[str | None] | pa.Array, tokenizer: TokenizerConfig) -> LanguageTokens:
        """Tokenize the texts of one language (None, or an Arrow null: the record lacks it)."""
        if isinstance(texts, pa.Array):
            tokens = tokenize_arrow(texts, tokenizer)
            return cls(texts.is_valid().to_numpy(zero_copy_only=False), tokens, tokens.bags())
        tokens = tokenize_batch(["" if t is None else t for t in texts], tokenizer)
        return cls(np.array([t is not None for t in texts], np.bool_), tokens, tokens.bags())

    def frequencies(self) -> tuple[np.ndarray, np.ndarray]:
        """Document and corpus frequency of each term of ``tokens.terms`` (int64)."""
        _, term_ids, counts = self.bags
        n_terms = len(self.tokens.terms)
        doc_freq = np.bincount(term_ids, minlength=n_terms).astype(np.int64)
        corpus_freq = np.bincount(term_ids, weights=counts, minlength=n_terms).astype(np.int64)
        return doc_freq, corpus_freq

    def counts(self) -> LanguageCounts:
        """Document and corpus frequencies of the terms, as :func:`count_partition` counts them."""
        doc_freq, corpus_freq = self.frequencies()
        terms = self.tokens.terms.tolist()
        return LanguageCounts(Counter(dict(zip(terms, doc_freq.tolist()))),
                              Counter(dict(zip(terms, corpus_freq.tolist()))), int(self.has_text.sum()))

    def table(self, language: str) -> TermTable | None:
        """:meth:`counts` as a :class:`~topicflow.io.tokenizer.TermTable` (None: see ``TermTable.of``)."""
        return TermTable.of(self.tokens.terms, *self.frequencies(), int(self.has_text.sum()), language)


@dataclass(frozen=True, slots=True)
class TokenizedPartition:
    """One partition read and tokenized once: what pass 1 leaves on disk for pass 3.

    Attributes
    ----------
    doc_ids : list of str
        Ids of the valid records, in input order.
    labels : list of str or None
    timestamps : list of int or None
    languages : dict of str to LanguageTokens
    """

    doc_ids: list[str]
    labels: list[str | None]
    timestamps: list[int | None]
    languages: dict[str, LanguageTokens]

    def save(self, path: str) -> None:
        """Write to ``path``: a provisional file this ingest keeps until its shards are written.

        On local disk a pickle (replaced atomically; the file stays inside the store being built, which
        only this process tree writes). At a URL (a store on object storage, where every worker can
        reach it) an ``.npz`` of plain arrays, never a pickle: a worker loading it runs no code from it.
        """
        if is_url(path):
            write_object(path, self.to_npz())
            return
        partial = f"{path}.partial-{uuid.uuid4().hex[:8]}"  # two attempts of one task never share it
        with open(partial, "wb") as handle:
            pickle.dump(self, handle, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, path)

    @staticmethod
    def load(path: str) -> TokenizedPartition:
        """Read what :meth:`save` wrote (a file this ingest wrote itself, never user input)."""
        if is_url(path):
            with open_input(path) as binary:
                return TokenizedPartition.from_npz(binary.read())
        with open(path, "rb") as handle:
            loaded = pickle.load(handle)
        if not isinstance(loaded, TokenizedPartition):
            raise TypeError(f"{path!r} does not hold a tokenized partition.")
        return loaded

    def to_npz(self) -> bytes:
        """The partition as ``.npz`` bytes of numeric arrays (strings as UTF-8 bytes and offsets).

        Returns
        -------
        bytes
            What :meth:`from_npz` reads back into an equal partition.
        """
        arrays: dict[str, np.ndarray] = {}
        _pack_strings(arrays, "doc_ids", self.doc_ids)
        _pack_strings(arrays, "languages", list(self.languages))
        _pack_optional(arrays, "labels", self.labels, str)
        _pack_optional(arrays, "timestamps", self.timestamps, int)
        for i, tokens in enumerate(self.languages.values()):
            arrays[f"has_text_{i}"] = np.asarray(tokens.has_text, np.bool_)
            _pack_strings(arrays, f"terms_{i}", tokens.tokens.terms.tolist())
            arrays[f"token_ids_{i}"] = tokens.tokens.token_ids
            arrays[f"indptr_{i}"] = tokens.tokens.indptr
            for j, array in enumerate(tokens.bags):
                arrays[f"bags_{i}_{j}"] = array
        buffer = io.BytesIO()
        np.savez(buffer, allow_pickle=False, **arrays)
        return buffer.getvalue()

    @staticmethod
    def from_npz(data: bytes) -> TokenizedPartition:
        """The partition :meth:`to_npz` encoded (read without pickle).

        Parameters
        ----------
        data : bytes

        Returns
        -------
        TokenizedPartition
        """
        with np.load(io.BytesIO(data), allow_pickle=False) as arrays:
            found = {name: arrays[name] for name in arrays.files}
        languages = {}
        for i, lang in enumerate(_unpack_strings(found, "languages").tolist()):
            batch = TokenBatch(_unpack_strings(found, f"terms_{i}"), found[f"token_ids_{i}"], found[f"indptr_{i}"])
            bags = (found[f"bags_{i}_0"], found[f"bags_{i}_1"], found[f"bags_{i}_2"])
            languages[str(lang)] = LanguageTokens(found[f"has_text_{i}"], batch, bags)
        return TokenizedPartition([str(d) for d in _unpack_strings(found, "doc_ids").tolist()],
                                  _unpack_optional(found, "labels", str), _unpack_optional(found, "timestamps", int),
                                  languages)


def _pack_strings(arrays: dict[str, np.ndarray], name: str, values: Sequence[str]) -> None:
    encoded = [str(v).encode("utf-8", "surrogatepass") for v in values]
    offsets = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=offsets[1:])
    arrays[f"{name}_offsets"] = offsets
    arrays[f"{name}_bytes"] = np.frombuffer(b"".join(encoded), np.uint8)


def _unpack_strings(arrays: Mapping[str, np.ndarray], name: str) -> np.ndarray:
    offsets, raw = arrays[f"{name}_offsets"].tolist(), arrays[f"{name}_bytes"].tobytes()
    out = np.empty(len(offsets) - 1, dtype=object)
    out[:] = [raw[a:b].decode("utf-8", "surrogatepass") for a, b in zip(offsets[:-1], offsets[1:])]
    return out


def _pack_optional(arrays: dict[str, np.ndarray], name: str, values: Sequence[object], kind: type) -> None:
    arrays[f"{name}_given"] = np.array([v is not None for v in values], np.bool_)
    if kind is str:
        _pack_strings(arrays, name, ["" if v is None else str(v) for v in values])
    else:
        arrays[name] = np.array([0 if v is None else v for v in values], np.int64)


def _unpack_optional(arrays: Mapping[str, np.ndarray], name: str, kind: type) -> list[Any]:
    given = arrays[f"{name}_given"].tolist()
    values = _unpack_strings(arrays, name).tolist() if kind is str else arrays[name].tolist()
    return [v if g else None for v, g in zip(values, given)]


def tokenize_partition(
    partition: InputPartition, fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError, path: str,
) -> PartitionSummary:
    """Pass 1 of ingest on one partition: tokenize once, save the tokens at ``path``, return the counts.

    The counts, id hashes and skipped records are those of :func:`count_partition`.
    """
    skipped: Counter[str] = Counter()
    columns = read_partition_columns(partition, fields, on_error, skipped)
    languages = {lang: LanguageTokens.of(columns.texts[lang], tokenizer.for_language(lang))
                 for lang in fields.languages}
    doc_ids = columns.doc_ids
    TokenizedPartition(doc_ids, columns.labels, columns.timestamps, languages).save(path)
    tables = [tokens.table(lang) for lang, tokens in languages.items()]
    counts: TermCounts | TermTable
    if all(table is not None for table in tables):
        counts = TermTable.merge_all([t for t in tables if t is not None]) if tables else TermCounts()
    else:
        counts = TermCounts({lang: tokens.counts() for lang, tokens in languages.items()})
    return PartitionSummary(counts, IdHashes.of(hash_ids(doc_ids)), len(doc_ids), dict(skipped))


def _provisional_to_vocab(terms: np.ndarray, index: Mapping[str, int]) -> np.ndarray:
    """Vocabulary id of each provisional term, -1 outside the vocabulary."""
    if isinstance(index, VocabIndex):
        return index.ids_of(terms)
    get = index.get
    return np.fromiter((get(t, -1) for t in terms.tolist()), np.int64, len(terms))


def _encode_bags(
    tokens: LanguageTokens, vocab_ids: np.ndarray, kept: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """CSR ``(indptr, term_ids, counts)`` of the ``kept`` records in vocabulary ids, sorted per document.

    Notes
    -----
    Equivalent to :func:`encode_bag` on each kept record's bag.
    """
    indptr, local, counts = tokens.bags
    doc = np.repeat(np.arange(len(indptr) - 1, dtype=np.int64), np.diff(indptr))
    ids = vocab_ids[local]
    select = (ids >= 0) & kept[doc]
    n_terms = int(vocab_ids.max(initial=-1)) + 1
    keys = doc[select] * max(n_terms, 1) + ids[select]
    order = np.argsort(keys, kind="stable")
    row = np.cumsum(kept) - 1                       # position of each kept record among the kept
    per_doc = np.bincount(row[doc[select]], minlength=int(kept.sum()))
    out_indptr = np.zeros(len(per_doc) + 1, np.int64)
    np.cumsum(per_doc, out=out_indptr[1:])
    return out_indptr, ids[select][order].astype(np.int32), counts[select][order].astype(np.int32)


def _encode_order(
    tokens: LanguageTokens, vocab_ids: np.ndarray, kept: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The ordered-token layer ``(indptr, tokens, oov_terms)`` of the kept records (as :class:`OrderEncoder`)."""
    batch = tokens.tokens
    lengths = np.diff(batch.indptr)
    doc = np.repeat(np.arange(batch.n_texts, dtype=np.int64), lengths)
    local = batch.token_ids[kept[doc]]
    codes = vocab_ids[local]
    oov = codes < 0
    distinct, first = np.unique(local[oov], return_index=True)
    by_first = distinct[np.argsort(first, kind="stable")]
    rank = np.zeros(len(batch.terms), np.int64)
    rank[by_first] = np.arange(len(by_first))
    codes[oov] = -(rank[local[oov]] + 1)
    indptr = np.zeros(int(kept.sum()) + 1, np.int64)
    np.cumsum(lengths[kept], out=indptr[1:])
    return indptr, codes.astype(np.int32), np.array(batch.terms[by_first].tolist(), dtype=object)


def write_tokenized(
    path: str, fields: FieldSpec, vocab_index: Mapping[str, Mapping[str, int]], shard_dir: str,
    partition: int, skip_positions: frozenset[int], drop_reason: str, keep_order: bool = False,
) -> ShardWritten:
    """Pass 3 of ingest on one partition: encode the tokens saved at ``path`` and write one shard.

    The shard, its checksum and the dropped counts are exactly those of :func:`write_partition` on the
    same partition. The provisional file is left in place (a task run again after a lost worker
    finds it); the driver removes them all once every shard is written.
    """
    saved = TokenizedPartition.load(path)
    n_records = len(saved.doc_ids)
    vocab_ids = {lang: _provisional_to_vocab(t.tokens.terms, vocab_index[lang]) for lang, t in saved.languages.items()}
    in_vocab = np.zeros(n_records, np.bool_)
    any_token = np.zeros(n_records, np.bool_)
    for lang, tokens in saved.languages.items():
        indptr, local, _ = tokens.bags
        doc = np.repeat(np.arange(n_records), np.diff(indptr))
        in_vocab[doc[vocab_ids[lang][local] >= 0]] = True
        any_token |= np.diff(indptr) > 0
    listed = np.ones(n_records, np.bool_)
    listed[[p for p in skip_positions if p < n_records]] = False
    kept = listed & in_vocab
    n_no_tokens = int((listed & ~any_token).sum())
    dropped = Counter({"no_tokens": n_no_tokens, drop_reason: int((listed & any_token & ~in_vocab).sum())})
    if not kept.any():
        return ShardWritten(partition, shard_dir, 0, {}, None, dict(+dropped))
    rows = np.flatnonzero(kept).tolist()
    shard_dir = attempt_dir(shard_dir)
    bags = {lang: _encode_bags(t, vocab_ids[lang], kept) for lang, t in saved.languages.items()}
    orders = ({lang: _encode_order(t, vocab_ids[lang], kept) for lang, t in saved.languages.items()}
              if keep_order else None)
    doc_ids = [saved.doc_ids[i] for i in rows]
    checksum, n_tokens = write_shard(
        as_location(shard_dir), bags, np.asarray(doc_ids, dtype=object),
        labels=np.asarray([saved.labels[i] for i in rows], dtype=object) if fields.has_labels else None,
        timestamps=np.asarray([saved.timestamps[i] for i in rows], dtype=np.int64) if fields.has_timestamps else None,
        orders=orders,
    )
    return ShardWritten(partition, shard_dir, len(rows), n_tokens, checksum, dict(+dropped), hash_ids(doc_ids))


# ----------------------------------------------------------------------------- graph builders


def pass_token(partitions: Sequence[InputPartition], fields: FieldSpec, tokenizer: TokenizerConfig,
               on_error: OnError) -> str:
    """Deterministic token of an input and its reading settings (the ``<token>`` of every key)."""
    return str(dask.base.tokenize(list(partitions), fields, tokenizer, on_error))


def map_count(
    partitions: Sequence[InputPartition], fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError
) -> list[Delayed]:
    """One pass-1 task per partition, keyed ``ingest-count-<token>-<i>``."""
    token = pass_token(partitions, fields, tokenizer, on_error)
    task = dask.delayed(count_partition, pure=True)
    return [task(p, fields, tokenizer, on_error, dask_key_name=f"ingest-count-{token}-{p.index}")
            for p in partitions]


def map_tokenize(
    partitions: Sequence[InputPartition], fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError,
    *, paths: Mapping[int, str],
) -> list[Delayed]:
    """One one-pass ingest task per partition, keyed ``ingest-tokenize-<token>-<i>``.

    Each saves its partition's tokens at ``paths[index]`` and returns its :class:`PartitionSummary`.
    """
    token = dask.base.tokenize(pass_token(partitions, fields, tokenizer, on_error), dict(paths))
    task = dask.delayed(tokenize_partition, pure=True)
    # The settings as one shared node each: dask then does not walk them (300 stop words) for every task.
    shared_fields = dask.delayed(fields, name=f"ingest-fields-{token}")
    shared_tokenizer = dask.delayed(tokenizer, name=f"ingest-tokenizer-{token}")
    return [task(p, shared_fields, shared_tokenizer, on_error, paths[p.index],
                 dask_key_name=f"ingest-tokenize-{token}-{p.index}")
            for p in partitions]


def map_write_tokenized(
    partitions: Sequence[InputPartition], fields: FieldSpec, *, store: str, paths: Mapping[int, str],
    shard_dirs: Mapping[int, str], skip: Mapping[int, frozenset[int]], drop_reason: str, keep_order: bool = False,
) -> list[Delayed]:
    """One shard-writing task per partition from its saved tokens, keyed ``ingest-encode-<token>-<i>``.

    Parameters
    ----------
    store : str
        Store whose ``vocab/<lang>`` the documents are encoded with.
    paths : mapping of partition index to str
        Where :func:`map_tokenize` saved each partition's tokens.
    shard_dirs : mapping of partition index to str
        Directory each partition's shard is written to (must not exist).
    skip : mapping of partition index to frozenset of int
        Positions (among valid records) of records to leave out, e.g. duplicate ids.
    drop_reason : str
        Reason counted for documents whose every token is outside the vocabulary.
    keep_order : bool, default False
        Also write each document's tokens in reading order (the ordered-token layer).
    """
    token = dask.base.tokenize(list(partitions), fields, store, dict(paths), dict(shard_dirs),
                               {k: sorted(v) for k, v in skip.items()}, drop_reason, keep_order)
    vocab = dask.delayed(load_vocab_index, pure=True)(store, fields.languages,
                                                      dask_key_name=f"ingest-vocab-{token}")
    task = dask.delayed(write_tokenized, pure=True)
    shared_fields = dask.delayed(fields, name=f"ingest-fields-{token}")
    return [
        task(paths[p.index], shared_fields, vocab, shard_dirs[p.index], p.index, skip.get(p.index, frozenset()),
             drop_reason, keep_order, dask_key_name=f"ingest-encode-{token}-{p.index}")
        for p in partitions
    ]


def tree_merge(parts: Sequence[Delayed], *, split_every: int, name: str = "ingest-merge") -> Delayed:
    """Merge partition summaries with :func:`topicflow.tasks.reduce.tree_reduce`."""
    token = str(dask.base.tokenize([p.key for p in parts], split_every))
    return tree_reduce(parts, merge_summaries, split_every=split_every, name=f"{name}-{token}")


def map_locate_ids(
    partitions: Sequence[InputPartition], fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError,
    hashes: np.ndarray,
) -> list[Delayed]:
    """One pass-2 task per partition, keyed ``ingest-locate-<token>-<i>``."""
    token = dask.base.tokenize(pass_token(partitions, fields, tokenizer, on_error), hashes)
    task = dask.delayed(locate_ids, pure=True)
    return [task(p, fields, tokenizer, on_error, hashes, dask_key_name=f"ingest-locate-{token}-{p.index}")
            for p in partitions]


def map_write_shards(
    partitions: Sequence[InputPartition], fields: FieldSpec, tokenizer: TokenizerConfig, on_error: OnError,
    *, store: str, shard_dirs: Mapping[int, str], skip: Mapping[int, frozenset[int]], drop_reason: str,
    keep_order: bool = False,
) -> list[Delayed]:
    """One pass-3 task per partition, keyed ``ingest-write-<token>-<i>``, sharing one vocabulary task.

    Parameters
    ----------
    store : str
        Store whose ``vocab/<lang>`` the documents are encoded with.
    shard_dirs : mapping of partition index to str
        Directory each partition's shard is written to (must not exist).
    skip : mapping of partition index to frozenset of int
        Positions (among valid records) of records to leave out, e.g. duplicate ids.
    keep_order : bool, default False
        Also write each document's tokens in reading order (the ordered-token layer).
    """
    token = dask.base.tokenize(pass_token(partitions, fields, tokenizer, on_error), store,
                               dict(shard_dirs), {k: sorted(v) for k, v in skip.items()}, drop_reason,
                               *(("keep-order",) if keep_order else ()))
    vocab = dask.delayed(load_vocab_index, pure=True)(store, fields.languages,
                                                      dask_key_name=f"ingest-vocab-{token}")
    task = dask.delayed(write_partition, pure=True)
    return [
        task(p, fields, tokenizer, on_error, vocab, shard_dirs[p.index], skip.get(p.index, frozenset()),
             drop_reason, keep_order, dask_key_name=f"ingest-write-{token}-{p.index}")
        for p in partitions
    ]

