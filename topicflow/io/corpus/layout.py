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
        return cls(
            shard_id=str(payload["id"]),
            first_doc=int(payload["first_doc"]),
            n_docs=int(payload["n_docs"]),
            n_tokens={str(k): int(v) for k, v in payload["n_tokens"].items()},
            checksum=str(payload["checksum"]),
            vocab_version=int(payload.get("vocab_version", 1)),
            has_order=bool(payload.get("has_order", False)),
        )


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
        check_format(payload, path=path, name=FORMAT_NAME, version=FORMAT_VERSION)
        try:
            manifest = cls(
                languages=tuple(payload["languages"]),
                tokenizer=dict(payload["tokenizer"]),
                shards=tuple(ShardInfo.from_dict(s) for s in payload["shards"]),
                shard_size=int(payload["shard_size"]),
                vocab_version=int(payload["vocab_version"]),
                has_labels=bool(payload["has_labels"]),
                has_timestamps=bool(payload["has_timestamps"]),
                candidates=payload.get("candidates"),
                created=str(payload.get("created", "")),
                history=tuple(payload.get("history", ())),
                id_index=tuple(dict(s) for s in payload.get("id_index", ())),
                has_order=bool(payload.get("has_order", False)),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorpusFormatError(
                f"manifest {path!r} is damaged ({exc!r}); re-create the store with `topicflow ingest`.",
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
