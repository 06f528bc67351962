"""Corpus store layout: manifest, shard records, format versions, checksums."""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from topicflow.errors import CorpusFormatError, CorruptShardError
from topicflow.io._zarr import check_format
from topicflow.io.storage import StoragePath, as_location

#: One bag of words per language: (indptr, term_ids, counts) of a CSR matrix.
CsrArrays = tuple[np.ndarray, np.ndarray, np.ndarray]
#: One ordered-token layer per language: (indptr, tokens, oov_terms); see :class:`~topicflow.models.common.blocks.OrderedBlock`.
OrderArrays = tuple[np.ndarray, np.ndarray, np.ndarray]
#: Names of the ordered-token arrays under ``shards/<id>/<lang>/order/``, in checksum order.
ORDER_ARRAYS = ("indptr", "tokens", "oov_terms")

FORMAT_NAME = "topicflow-corpus"
#: Format of stores whose vocabulary never grew: still written as 1, so older readers keep reading them.
BASE_FORMAT_VERSION = 1
#: Format of stores whose vocabulary grew (``vocabs/``, vocab_version >= 2), which a reader of format 1
#: would misread (it only knows ``vocab/``).
GROWN_VOCAB_FORMAT_VERSION = 2
#: Format of stores that keep each document's tokens in order (``ingest --keep-order``): a reader of
#: format 2 would read their bags correctly but could not tell that the layer must be kept by appends.
ORDERED_FORMAT_VERSION = 3
#: Newest store format this topicflow reads.
FORMAT_VERSION = ORDERED_FORMAT_VERSION
DEFAULT_LANGUAGE = "default"
MANIFEST = "manifest.json"


@dataclass(frozen=True, slots=True)
class ShardInfo:
    """One shard as the manifest lists it.

    Attributes
    ----------
    shard_id : str
        Directory name under ``shards/``; zero-padded sequence number.
    first_doc : int
        Global position of the shard's first document.
    n_docs : int
    n_tokens : dict of str to int
        Tokens per language.
    checksum : str
        ``sha256:<hex>`` over the shard's arrays (see :func:`shard_checksum`).
    vocab_version : int
        Vocabulary version the shard was encoded with.
    has_order : bool
        Whether the shard holds the ordered-token layer (``<lang>/order/``), which ``checksum`` then
        covers. Listed in the manifest only when true.
    """

    shard_id: str
    first_doc: int
    n_docs: int
    n_tokens: dict[str, int]
    checksum: str
    vocab_version: int = 1
    has_order: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.shard_id,
            "first_doc": self.first_doc,
            "n_docs": self.n_docs,
            "n_tokens": dict(self.n_tokens),
            "checksum": self.checksum,
            "vocab_version": self.vocab_version,
        }
        if self.has_order:
            out["has_order"] = True
        return out

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> ShardInfo:
        """The shard a manifest entry describes; raise :class:`MetadataValueError` naming a bad field."""
        if not isinstance(payload, Mapping):
            raise MetadataValueError(f"a shard entry is {type(payload).__name__}, expected an object")
        shard_id = _field(payload, "id", str)
        where = f"shard {shard_id!r}"
        n_tokens = _field(payload, "n_tokens", dict, where=where)
        for lang, count in n_tokens.items():
            _count(count, f"{where}: n_tokens[{lang!r}]")
        return cls(
            shard_id=shard_id,
            first_doc=_count(_field(payload, "first_doc", int, where=where), f"{where}: first_doc"),
            n_docs=_count(_field(payload, "n_docs", int, where=where), f"{where}: n_docs"),
            n_tokens=dict(n_tokens),
            checksum=_field(payload, "checksum", str, where=where),
            vocab_version=_version(_field(payload, "vocab_version", int, 1, where=where), f"{where}: vocab_version"),
            has_order=_field(payload, "has_order", bool, False, where=where),
        )


#: Largest count a manifest may hold (documents, tokens, shard size): beyond it the file is damaged.
MAX_COUNT = 2**53


class MetadataValueError(ValueError):
    """One field of a metadata file is missing or of the wrong type or range (the caller names the file)."""


_MISSING = object()


def _field(payload: Mapping[str, Any], key: str, kind: type, default: Any = _MISSING, *, where: str = "") -> Any:
    """``payload[key]`` checked to be a JSON value of ``kind`` (bool is not an int; an int is not a bool)."""
    prefix = f"{where}: " if where else ""
    if key not in payload:
        if default is _MISSING:
            raise MetadataValueError(f"{prefix}{key!r} is missing")
        return default
    value = payload[key]
    if kind is int and isinstance(value, bool) or not isinstance(value, kind):
        raise MetadataValueError(f"{prefix}{key!r} is {value!r}, expected {_KIND_NAMES[kind]}")
    return value


_KIND_NAMES = {int: "an integer", str: "a string", bool: "true or false", dict: "an object", list: "a list"}


def _count(value: Any, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise MetadataValueError(f"{what} is {value!r}, expected a count from 0 to {MAX_COUNT}")
    return value


def _version(value: int, what: str) -> int:
    if not 1 <= value <= MAX_COUNT:
        raise MetadataValueError(f"{what} is {value!r}, expected a version number from 1")
    return value


def check_format_fields(payload: Any, *, path: str, name: str) -> None:
    """Refuse a metadata payload that is not an object or has a ``format_version`` not an integer.

    Run before :func:`~topicflow.io._zarr.check_format`, which compares them (and calls ``int()``).

    Parameters
    ----------
    payload : Any
        The decoded JSON.
    path : str
        The file, for the message.
    name : str
        The expected ``format``.

    Raises
    ------
    CorpusFormatError
        Naming ``path`` and what is wrong.
    """
    if not isinstance(payload, dict):
        raise CorpusFormatError(
            f"{path!r} is damaged: it holds {type(payload).__name__}, not a {name} JSON object; re-create it.",
            path=path)
    version = payload.get("format_version", 0)
    if isinstance(version, bool) or not isinstance(version, int) or version < 0:
        raise CorpusFormatError(
            f"{path!r} is damaged: format_version is {version!r}, expected a non-negative integer; re-create it.",
            path=path)


@dataclass(frozen=True, slots=True)
class Manifest:
    """The store's authoritative description; written atomically as ``manifest.json``."""

    languages: tuple[str, ...]
    tokenizer: dict[str, Any]
    shards: tuple[ShardInfo, ...] = ()
    shard_size: int = 1000
    vocab_version: int = 1
    has_labels: bool = False
    has_timestamps: bool = False
    #: Directory name under ``candidates/`` of the current candidate-term set, or None.
    candidates: str | None = None
    created: str = field(default_factory=lambda: datetime.now(timezone.utc).isoformat())
    #: One entry per ingest or append: what was read, kept and dropped.
    history: tuple[dict[str, Any], ...] = ()
    #: Segments of the document-id hash index (see :mod:`topicflow.io.corpus.id_index`).
    id_index: tuple[dict[str, Any], ...] = ()
    #: Whether every shard keeps its documents' tokens in order (``<lang>/order/``; ``ingest --keep-order``).
    has_order: bool = False

    @property
    def n_docs(self) -> int:
        return sum(s.n_docs for s in self.shards)

    def n_tokens(self, language: str | None = None) -> int:
        langs = self.languages if language is None else (language,)
        return sum(s.n_tokens.get(lang, 0) for s in self.shards for lang in langs)

    def next_shard_id(self, offset: int = 0) -> str:
        return f"{len(self.shards) + offset:06d}"

    @property
    def format_version(self) -> int:
        """The store format this manifest needs: 3 with the ordered-token layer, else 2 once the
        vocabulary grew, else 1."""
        return store_format_version(self.vocab_version, has_order=self.has_order)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "format": FORMAT_NAME,
            "format_version": self.format_version,
            "languages": list(self.languages),
            "tokenizer": self.tokenizer,
            "shard_size": self.shard_size,
            "vocab_version": self.vocab_version,
            "has_labels": self.has_labels,
            "has_timestamps": self.has_timestamps,
            "candidates": self.candidates,
            "created": self.created,
            "n_docs": self.n_docs,
            "n_tokens": {lang: self.n_tokens(lang) for lang in self.languages},
            "shards": [s.to_dict() for s in self.shards],
            "history": list(self.history),
            "id_index": list(self.id_index),
        }
        if self.has_order:  # stores without the layer keep exactly the manifest they always had
            out["has_order"] = True
        return out

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any], *, path: str = "") -> Manifest:
        """The manifest ``payload`` describes, every field checked for its type and range.

        Unknown keys are ignored (a newer topicflow's additions that do not change the format version).

        Raises
        ------
        CorpusFormatError
            ``payload`` is not a manifest, or a field is missing, of the wrong type or out of range;
            the message names ``path`` and the field.
        FormatVersionError
            The store was written by a newer topicflow.
        """
        check_format_fields(payload, path=path, name=FORMAT_NAME)
        check_format(payload, path=path, name=FORMAT_NAME, version=FORMAT_VERSION)
        try:
            manifest = cls._parse(payload)
        except MetadataValueError as exc:
            raise CorpusFormatError(
                f"manifest {path!r} is damaged ({exc}); re-create the store with `topicflow ingest`.",
                path=path,
            ) from exc
        unordered = [s.shard_id for s in manifest.shards if s.has_order != manifest.has_order]
        if unordered:
            raise CorpusFormatError(
                f"manifest {path!r} is damaged: the store {'keeps' if manifest.has_order else 'does not keep'} "
                f"token order but shard(s) {unordered[:5]!r} say otherwise; re-create the store with "
                "`topicflow ingest`.", path=path,
            )
        return manifest

    @classmethod
    def _parse(cls, payload: Mapping[str, Any]) -> Manifest:
        languages = _field(payload, "languages", list)
        if not languages or not all(isinstance(lang, str) and lang for lang in languages) \
                or len(set(languages)) != len(languages):
            raise MetadataValueError(f"'languages' is {languages!r}, expected distinct non-empty names")
        candidates = payload.get("candidates")
        if candidates is not None and not isinstance(candidates, str):
            raise MetadataValueError(f"'candidates' is {candidates!r}, expected a name or null")
        history = _field(payload, "history", list, [])
        id_index = _field(payload, "id_index", list, [])
        for key, entries in (("history", history), ("id_index", id_index)):
            if not all(isinstance(entry, dict) for entry in entries):
                raise MetadataValueError(f"{key!r} holds entries that are not objects")
        shards = tuple(ShardInfo.from_dict(s) for s in _field(payload, "shards", list))
        if len({s.shard_id for s in shards}) != len(shards):
            raise MetadataValueError("'shards' lists a shard id twice")
        shard_size = _count(_field(payload, "shard_size", int), "'shard_size'")
        if shard_size < 1:
            raise MetadataValueError(f"'shard_size' is {shard_size}, expected at least 1")
        return cls(
            languages=tuple(languages),
            tokenizer=dict(_field(payload, "tokenizer", dict)),
            shards=shards,
            shard_size=shard_size,
            vocab_version=_version(_field(payload, "vocab_version", int), "'vocab_version'"),
            has_labels=_field(payload, "has_labels", bool),
            has_timestamps=_field(payload, "has_timestamps", bool),
            candidates=candidates,
            created=_field(payload, "created", str, ""),
            history=tuple(history),
            id_index=tuple(dict(s) for s in id_index),
            has_order=_field(payload, "has_order", bool, False),
        )


def store_format_version(vocab_version: int, *, has_order: bool = False) -> int:
    """Format version a store is written with: the oldest format whose readers read it correctly.

    Parameters
    ----------
    vocab_version : int
        The store's current vocabulary version.
    has_order : bool, default False
        Whether the store keeps the ordered-token layer.

    Returns
    -------
    int
        :data:`ORDERED_FORMAT_VERSION` (3) with the layer, else :data:`GROWN_VOCAB_FORMAT_VERSION` (2)
        once the vocabulary grew, else :data:`BASE_FORMAT_VERSION` (1).
    """
    if has_order:
        return ORDERED_FORMAT_VERSION
    return GROWN_VOCAB_FORMAT_VERSION if vocab_version >= 2 else BASE_FORMAT_VERSION


def vocabulary_dir(path: Path | StoragePath, version: int, language: str) -> Path | StoragePath:
    """Directory of one language of vocabulary ``version``: ``vocab/<lang>`` or ``vocabs/<NNNNNN>/<lang>``."""
    if version == 1:
        return as_location(path) / "vocab" / language
    return as_location(path) / "vocabs" / vocabulary_version_name(version) / language


def vocabulary_version_name(version: int) -> str:
    """Directory name under ``vocabs/`` of vocabulary ``version`` (>= 2): six digits, zero-padded."""
    return f"{version:06d}"


def _string_digest(values: np.ndarray) -> bytes:
    return "\x00".join(str(v) for v in values).encode("utf-8")


def shard_checksum(
    bags: Mapping[str, CsrArrays],
    doc_ids: np.ndarray,
    labels: np.ndarray | None,
    timestamps: np.ndarray | None,
    orders: Mapping[str, OrderArrays] | None = None,
) -> str:
    """``sha256:<hex>`` over a shard's arrays in a fixed order (languages sorted).

    Parameters
    ----------
    bags : mapping of str to tuple of ndarray
        ``(indptr, term_ids, counts)`` per language.
    doc_ids : ndarray of shape (n_docs,), object (str)
    labels : ndarray of shape (n_docs,), object (str) or None
    timestamps : ndarray of shape (n_docs,), int64 or None
    orders : mapping of str to tuple of ndarray, optional
        ``(indptr, tokens, oov_terms)`` per language, for a store that keeps token order; they are
        hashed after every bag. None (a store without the layer) gives the checksum such stores
        always had.

    Returns
    -------
    str
        ``sha256:<hex>``.
    """
    digest = hashlib.sha256()
    digest.update(_string_digest(doc_ids))
    if labels is not None:
        digest.update(b"labels")
        digest.update(_string_digest(labels))
    if timestamps is not None:
        digest.update(b"timestamps")
        digest.update(np.ascontiguousarray(timestamps, dtype=np.int64).tobytes())
    for lang in sorted(bags):
        digest.update(lang.encode("utf-8"))
        for array, dtype in zip(bags[lang], (np.int64, np.int32, np.int32)):
            digest.update(np.ascontiguousarray(array, dtype=dtype).tobytes())
    for lang in sorted(orders or {}):
        indptr, tokens, oov_terms = orders[lang]  # type: ignore[index]
        digest.update(b"order\x00" + lang.encode("utf-8"))
        digest.update(np.ascontiguousarray(indptr, dtype=np.int64).tobytes())
        digest.update(np.ascontiguousarray(tokens, dtype=np.int32).tobytes())
        digest.update(len(oov_terms).to_bytes(8, "little"))
        digest.update(_string_digest(oov_terms))
    return "sha256:" + digest.hexdigest()


def csr_problems(bag: CsrArrays, n_docs: int, n_terms: int) -> list[str]:
    """What is wrong with one language's CSR arrays for ``n_docs`` documents over ``n_terms`` terms.

    A few vectorized passes over the arrays (about 0.1 ms for a shard of 2,000 documents).

    Parameters
    ----------
    bag : tuple of ndarray
        ``(indptr, term_ids, counts)``.
    n_docs : int
        Documents the arrays must hold.
    n_terms : int
        Vocabulary size; every term id must be below it.

    Returns
    -------
    list of str
        One phrase per problem; empty when the arrays are a valid CSR matrix of positive counts.
    """
    indptr, term_ids, counts = bag
    for name, array in zip(("indptr", "term_ids", "counts"), bag):
        if array.ndim != 1 or array.dtype.kind not in "iu":
            return [f"{name} has shape {array.shape} and dtype {array.dtype}, expected a 1-d integer array"]
    problems = []
    if indptr.shape != (n_docs + 1,) or indptr[0] != 0:
        problems.append(f"indptr has shape {indptr.shape}, expected ({n_docs + 1},) starting at 0")
    elif np.any(indptr[1:] < indptr[:-1]) or indptr[-1] != len(term_ids):
        problems.append(f"indptr is not nondecreasing up to the number of entries ({len(term_ids)})")
    if len(term_ids) != len(counts):
        problems.append(f"term_ids and counts differ in length ({len(term_ids)} and {len(counts)})")
    if len(term_ids) and (term_ids.min() < 0 or term_ids.max() >= n_terms):
        problems.append(f"term ids outside [0, {n_terms}) (from {term_ids.min()} to {term_ids.max()})")
    if len(counts) and counts.min() <= 0:
        problems.append(f"counts must be positive (found {counts.min()})")
    return problems


def order_problems(order: OrderArrays, bag: CsrArrays, n_docs: int, n_terms: int) -> list[str]:
    """What is wrong with one language's ordered-token arrays, alone and against its bag of words.

    The invariant: for every document, the counts of its in-vocabulary tokens (codes >= 0) equal its
    bag of words (term ids and counts). One sort of the tokens (about 5 ms for 200,000 tokens).

    Parameters
    ----------
    order : tuple of ndarray
        ``(indptr, tokens, oov_terms)``; ``tokens`` holds term ids ``>= 0`` and out-of-vocabulary
        tokens ``-(k + 1)`` for ``oov_terms[k]``.
    bag : tuple of ndarray
        ``(indptr, term_ids, counts)`` of the same language, already checked by :func:`csr_problems`.
    n_docs : int
        Documents the arrays must hold.
    n_terms : int
        Vocabulary size; every term id must be below it.

    Returns
    -------
    list of str
        One phrase per problem; empty when the layer is sound and agrees with the bag.
    """
    indptr, tokens, oov_terms = order
    for name, array in (("order/indptr", indptr), ("order/tokens", tokens)):
        if array.ndim != 1 or array.dtype.kind not in "iu":
            return [f"{name} has shape {array.shape} and dtype {array.dtype}, expected a 1-d integer array"]
    if oov_terms.ndim != 1:
        return [f"order/oov_terms has shape {oov_terms.shape}, expected a 1-d array of strings"]
    if indptr.shape != (n_docs + 1,) or indptr[0] != 0:
        return [f"order/indptr has shape {indptr.shape}, expected ({n_docs + 1},) starting at 0"]
    if np.any(indptr[1:] < indptr[:-1]) or indptr[-1] != len(tokens):
        return [f"order/indptr is not nondecreasing up to the number of tokens ({len(tokens)})"]
    problems = []
    n_oov = len(oov_terms)
    if len(tokens) and (tokens.min() < -n_oov or tokens.max() >= n_terms):
        problems.append(f"order/tokens outside [-{n_oov}, {n_terms}) (from {tokens.min()} to {tokens.max()})")
    if len({str(t) for t in oov_terms}) != n_oov:
        problems.append("order/oov_terms holds a string twice")
    if problems:
        return problems
    mismatch = _first_bag_mismatch(indptr, tokens.astype(np.int64), bag, n_terms)
    if mismatch is not None:
        problems.append(f"the in-vocabulary tokens of document {mismatch} (row of the shard) in order/ do not "
                        "add up to its bag of words")
    return problems


def _first_bag_mismatch(order_indptr: np.ndarray, tokens: np.ndarray, bag: CsrArrays, n_terms: int) -> int | None:
    """Row of the first document whose in-vocabulary token counts differ from its bag, or None."""
    bag_indptr, term_ids, counts = bag
    n_terms = max(n_terms, 1)
    n_docs = len(order_indptr) - 1
    docs = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(order_indptr))
    keep = tokens >= 0
    keys, found = np.unique(docs[keep] * n_terms + tokens[keep], return_counts=True)
    bag_docs = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(bag_indptr))
    bag_keys = bag_docs * n_terms + term_ids.astype(np.int64)
    order = np.argsort(bag_keys, kind="stable")  # already sorted in a valid bag; cheap then
    bag_keys, bag_counts = bag_keys[order], counts.astype(np.int64)[order]
    if len(keys) == len(bag_keys) and np.array_equal(keys, bag_keys) and np.array_equal(found, bag_counts):
        return None
    # The first document whose (term, count) pairs differ between the two.
    n = min(len(keys), len(bag_keys))
    differs = np.flatnonzero((keys[:n] != bag_keys[:n]) | (found[:n] != bag_counts[:n]))
    if len(differs):
        return int(min(keys[differs[0]], bag_keys[differs[0]]) // n_terms)
    longer = keys if len(keys) > n else bag_keys
    return int(longer[n] // n_terms)


def validate_csr(bag: CsrArrays, n_docs: int, n_terms: int, *, where: str) -> None:
    """Check one language's CSR arrays before they are written; raise CorpusFormatError if wrong."""
    problems = csr_problems(bag, n_docs, n_terms)
    if problems:
        raise CorpusFormatError(f"{where}: " + "; ".join(problems), shard=where)


def corrupt_shard(store: str, shard_id: str, what: str) -> CorruptShardError:
    """The error of a damaged shard: which one, what is wrong, and what to do.

    Parameters
    ----------
    store : str
        The store directory.
    shard_id : str
        The shard's id (its directory name under ``shards/``).
    what : str
        What is wrong, e.g. ``"its arrays do not match the manifest's checksum"``.

    Returns
    -------
    CorruptShardError
        With ``path=store`` and ``shard=shard_id``.
    """
    return CorruptShardError(
        f"shard {shard_id} of {store!r} is corrupt: {what}; re-ingest the store or restore the shard "
        "from a backup.",
        path=store,
        shard=shard_id,
    )
