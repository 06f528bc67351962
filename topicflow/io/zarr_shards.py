"""The sharded corpus store: a versioned zarr v3 layout (spec in docs/corpus-format.md).

This module owns reading and writing the store's arrays and its manifest. It never tokenizes and never
holds more than one shard in memory. ``manifest.json`` is the commit point: a shard or candidate set
that it does not list does not exist, which is what makes ingest and append atomic. Vocabulary
version N extends version N-1 at its end (every term keeps its id), so shards encoded with any earlier
version read correctly with the current one.

Layout::

    STORE/
      zarr.json                    root group; attributes.topicflow = {kind, format_version at creation}
      manifest.json                languages, tokenizer, vocabulary version, shard list (authoritative)
      vocab/<lang>/                vocabulary version 1: terms (str), doc_freq (int64), corpus_freq (int64)
      vocabs/<NNNNNN>/<lang>/      vocabulary version N >= 2 (grown by appends; same arrays)
      candidates/<version>/<lang>/ out-of-vocabulary terms seen by appends (same arrays)
      shards/<shard_id>/           doc_ids (str), labels (str)?, timestamps (int64)?
      shards/<shard_id>/<lang>/    indptr (int64), term_ids (int32), counts (int32)
"""
from __future__ import annotations

import asyncio
import hashlib
import os
import shutil
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence, cast

import dask
import numpy as np
import zarr
import zarr.api.asynchronous as zarr_async
from zarr.core.sync import sync as zarr_sync

from topicflow.errors import CorpusFormatError, FormatVersionError, InvalidParameterError, StoreNotFoundError
from topicflow.io.atomic import atomic_write_json, read_json
from topicflow.models.blocks import DocBlock, MultiBlock, concat_blocks
from topicflow.models.vocabulary import Vocabulary

FORMAT_NAME = "topicflow-corpus"
#: Format of stores whose vocabulary never grew: still written as 1, so older readers keep reading them.
BASE_FORMAT_VERSION = 1
#: Format of stores whose vocabulary grew (``vocabs/``, vocab_version >= 2), which a reader of format 1
#: would misread (it only knows ``vocab/``).
GROWN_VOCAB_FORMAT_VERSION = 2
#: Newest store format this topicflow reads.
FORMAT_VERSION = GROWN_VOCAB_FORMAT_VERSION
DEFAULT_LANGUAGE = "default"
MANIFEST = "manifest.json"

#: (indptr, term_ids, counts) of one language of one shard.
CsrArrays = tuple[np.ndarray, np.ndarray, np.ndarray]


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
    """

    shard_id: str
    first_doc: int
    n_docs: int
    n_tokens: dict[str, int]
    checksum: str
    vocab_version: int = 1

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.shard_id,
            "first_doc": self.first_doc,
            "n_docs": self.n_docs,
            "n_tokens": dict(self.n_tokens),
            "checksum": self.checksum,
            "vocab_version": self.vocab_version,
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> ShardInfo:
        return cls(
            shard_id=str(payload["id"]),
            first_doc=int(payload["first_doc"]),
            n_docs=int(payload["n_docs"]),
            n_tokens={str(k): int(v) for k, v in payload["n_tokens"].items()},
            checksum=str(payload["checksum"]),
            vocab_version=int(payload.get("vocab_version", 1)),
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
    #: Segments of the document-id hash index (see :mod:`topicflow.io.id_index`).
    id_index: tuple[dict[str, Any], ...] = ()

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
        """The store format this manifest needs: 2 once the vocabulary grew, else 1."""
        return store_format_version(self.vocab_version)

    def to_dict(self) -> dict[str, Any]:
        return {
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

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any], *, path: str = "") -> Manifest:
        check_format(payload, path=path, name=FORMAT_NAME, version=FORMAT_VERSION)
        try:
            return cls(
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
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise CorpusFormatError(
                f"manifest {path!r} is damaged ({exc!r}); re-create the store with `topicflow ingest`.",
                path=path,
            ) from exc


def store_format_version(vocab_version: int) -> int:
    """Format version a store with vocabulary version ``vocab_version`` is written with."""
    return GROWN_VOCAB_FORMAT_VERSION if vocab_version >= 2 else BASE_FORMAT_VERSION


def vocabulary_dir(path: Path, version: int, language: str) -> Path:
    """Directory of one language of vocabulary ``version``: ``vocab/<lang>`` or ``vocabs/<NNNNNN>/<lang>``."""
    if version == 1:
        return Path(path) / "vocab" / language
    return Path(path) / "vocabs" / vocabulary_version_name(version) / language


def vocabulary_version_name(version: int) -> str:
    """Directory name under ``vocabs/`` of vocabulary ``version`` (>= 2): six digits, zero-padded."""
    return f"{version:06d}"


def check_format(payload: Mapping[str, Any], *, path: str, name: str, version: int) -> None:
    """Refuse files of another kind or of a newer format version, with a message saying what to do."""
    if payload.get("format") != name:
        raise CorpusFormatError(
            f"{path!r} is not a {name} file (format={payload.get('format')!r}).", path=path
        )
    found = int(payload.get("format_version", 0))
    if found > version:
        raise FormatVersionError(
            f"{path!r} was written with {name} format version {found}, newer than version {version} "
            "that this topicflow reads; upgrade topicflow (pip install -U topicflow).",
            path=path,
        )


# ----------------------------------------------------------------------------- arrays on disk


def _write_array(group: zarr.Group, name: str, data: np.ndarray) -> None:
    if data.dtype == object or data.dtype.kind in "UT":
        array = group.create_array(name, shape=data.shape, dtype=str, chunks=(max(1, len(data)),))
        if len(data):
            array[:] = np.asarray(data, dtype=object)
        return
    group.create_array(name, data=data, chunks=(max(1, len(data)),))


def _as_read(array_dtype: Any, data: Any) -> np.ndarray:
    if array_dtype.kind in "UT" or str(array_dtype).startswith("StringDType"):
        return np.asarray(data, dtype=object)
    return np.asarray(data)


def group_array(group: zarr.Group, *names: str) -> zarr.Array:
    """Return the member ``group[names[0]][names[1]]...``, which the layout makes an array.

    zarr types a group's member as ``Array | Group``; the store layouts fix which members are
    arrays, so this only narrows the static type (it checks and reads nothing).

    Parameters
    ----------
    group : zarr.Group
        An open group.
    *names : str
        Member names, outermost first; all but the last name subgroups.

    Returns
    -------
    zarr.Array
    """
    node: Any = group
    for name in names:
        node = node[name]
    return cast(zarr.Array, node)


def write_arrays(directory: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """A new zarr group at ``directory`` holding ``arrays``, one chunk each."""
    group = zarr.open_group(str(directory), mode="w")
    for name, data in arrays.items():
        _write_array(group, name, data)


def _read_array(group: zarr.Group, name: str) -> np.ndarray:
    array = group_array(group, name)
    return _as_read(array.dtype, array[:])


def _string_digest(values: np.ndarray) -> bytes:
    return "\x00".join(str(v) for v in values).encode("utf-8")


def shard_checksum(
    bags: Mapping[str, CsrArrays],
    doc_ids: np.ndarray,
    labels: np.ndarray | None,
    timestamps: np.ndarray | None,
) -> str:
    """``sha256:<hex>`` over a shard's arrays in a fixed order (languages sorted)."""
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
    return "sha256:" + digest.hexdigest()


def validate_csr(bag: CsrArrays, n_docs: int, n_terms: int, *, where: str) -> None:
    """Check one language's CSR arrays before they are written; raise CorpusFormatError if wrong."""
    indptr, term_ids, counts = bag
    problems = []
    if indptr.shape != (n_docs + 1,) or (n_docs >= 0 and len(indptr) and indptr[0] != 0):
        problems.append(f"indptr has shape {indptr.shape}, expected ({n_docs + 1},) starting at 0")
    elif np.any(np.diff(indptr) < 0) or indptr[-1] != len(term_ids):
        problems.append("indptr is not nondecreasing up to the number of entries")
    if len(term_ids) != len(counts):
        problems.append("term_ids and counts differ in length")
    if len(term_ids) and (term_ids.min() < 0 or term_ids.max() >= n_terms):
        problems.append(f"term ids outside [0, {n_terms})")
    if len(counts) and counts.min() <= 0:
        problems.append("counts must be positive")
    if problems:
        raise CorpusFormatError(f"{where}: " + "; ".join(problems), shard=where)


def write_shard(
    shard_dir: Path,
    bags: Mapping[str, CsrArrays],
    doc_ids: np.ndarray,
    *,
    labels: np.ndarray | None = None,
    timestamps: np.ndarray | None = None,
) -> tuple[str, dict[str, int]]:
    """Write one shard's arrays under ``shard_dir`` (which must not exist).

    Returns
    -------
    checksum : str
    n_tokens : dict of str to int
        Tokens per language.
    """
    group = zarr.open_group(str(shard_dir), mode="w-")
    _write_array(group, "doc_ids", np.asarray(doc_ids, dtype=object))
    if labels is not None:
        _write_array(group, "labels", np.asarray(labels, dtype=object))
    if timestamps is not None:
        _write_array(group, "timestamps", np.asarray(timestamps, dtype=np.int64))
    n_tokens = {}
    for lang, (indptr, term_ids, counts) in sorted(bags.items()):
        sub = group.create_group(lang)
        _write_array(sub, "indptr", np.asarray(indptr, dtype=np.int64))
        _write_array(sub, "term_ids", np.asarray(term_ids, dtype=np.int32))
        _write_array(sub, "counts", np.asarray(counts, dtype=np.int32))
        n_tokens[lang] = int(np.asarray(counts, dtype=np.int64).sum())
    return shard_checksum(bags, doc_ids, labels, timestamps), n_tokens


def write_vocabulary(directory: Path, vocab: Vocabulary) -> None:
    """Write a vocabulary's three arrays as a zarr group at ``directory``."""
    group = zarr.open_group(str(directory), mode="w")
    _write_array(group, "terms", np.asarray(vocab.terms, dtype=object))
    _write_array(group, "doc_freq", np.asarray(vocab.doc_freq, dtype=np.int64))
    _write_array(group, "corpus_freq", np.asarray(vocab.corpus_freq, dtype=np.int64))


def read_vocabulary(directory: Path) -> Vocabulary:
    """Read a vocabulary group (``terms``, ``doc_freq``, ``corpus_freq``) written by :func:`write_vocabulary`.

    Parameters
    ----------
    directory : Path
        The vocabulary's zarr group, e.g. ``STORE/vocab/<lang>``.

    Returns
    -------
    Vocabulary
        Terms in id order with their document and corpus frequencies (int64).
    """
    group = zarr.open_group(str(directory), mode="r")
    return Vocabulary(
        terms=_read_array(group, "terms"),
        doc_freq=_read_array(group, "doc_freq").astype(np.int64),
        corpus_freq=_read_array(group, "corpus_freq").astype(np.int64),
    )


def init_store(path: Path) -> None:
    """Create the root zarr group and its fixed subgroups at ``path`` (a fresh directory)."""
    root = zarr.open_group(str(path), mode="w-")
    root.attrs["topicflow"] = {"kind": FORMAT_NAME, "format_version": BASE_FORMAT_VERSION}
    for name in ("vocab", "shards", "candidates"):
        root.create_group(name)


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Commit point of every store change: atomically replace ``manifest.json``."""
    atomic_write_json(Path(path) / MANIFEST, manifest.to_dict())


def read_manifest(path: Path) -> Manifest:
    """Read and validate the ``manifest.json`` of the store at ``path``.

    Parameters
    ----------
    path : Path
        Store directory.

    Returns
    -------
    Manifest
        The store's languages, tokenizer, vocabulary version and shard list.

    Raises
    ------
    StoreNotFoundError
        If ``path`` does not exist.
    CorpusFormatError
        If ``path`` has no manifest, or the manifest is not valid JSON or not a valid manifest.
    FormatVersionError
        If the store was written by a newer topicflow.
    """
    path = Path(path)
    if not (path / MANIFEST).is_file():
        if not path.exists():
            raise StoreNotFoundError(
                f"no corpus store at {str(path)!r}; create one with `topicflow ingest INPUT --out "
                f"{path}` or `topicflow synth --out {path}`.",
                path=str(path),
            )
        raise CorpusFormatError(
            f"{str(path)!r} is not a topicflow corpus store (no {MANIFEST}); it may be an "
            "interrupted ingest: run the ingest again.",
            path=str(path),
        )
    try:
        payload = read_json(path / MANIFEST)
    except ValueError as exc:
        raise CorpusFormatError(
            f"manifest of {str(path)!r} is not valid JSON ({exc}); re-create the store.", path=str(path)
        ) from exc
    return Manifest.from_dict(payload, path=str(path))


async def _read_arrays_async(directory: str, names: Sequence[str]) -> list[np.ndarray]:
    group = await zarr_async.open_group(directory, mode="r")

    async def read_one(name: str) -> np.ndarray:
        array = cast("zarr.AsyncArray[Any]", await group.getitem(name))  # a member the layout makes an array
        return _as_read(array.dtype, await array.getitem(slice(None)))

    return list(await asyncio.gather(*(read_one(name) for name in names)))


def read_arrays(directory: Path, names: Sequence[str]) -> dict[str, np.ndarray]:
    """Whole arrays ``directory/<name>``, read concurrently.

    zarr v3 spends about 1.5 ms of fixed cost per synchronous read (metadata, event-loop round trip),
    which for the small arrays of a shard is most of the read; one gather over zarr's own loop pays it
    about once per shard instead of once per array.
    """
    return dict(zip(names, zarr_sync(_read_arrays_async(str(directory), list(names)))))


def load_multiblock(
    store: str, shard: ShardInfo, vocab_sizes: Mapping[str, int], with_meta: bool = True
) -> dict[str, DocBlock]:
    """Every language of one shard, keyed by language (module-level so it pickles)."""
    shard_dir = Path(store) / "shards" / shard.shard_id
    where = f"{store}/shards/{shard.shard_id}"
    # The store is a local directory, so presence of the optional arrays is a stat, not a zarr lookup.
    meta = [name for name in ("labels", "timestamps") if with_meta and (shard_dir / name).is_dir()]
    names = ["doc_ids", *meta] + [f"{lang}/{part}" for lang in vocab_sizes for part in ("indptr", "term_ids", "counts")]
    try:
        arrays = read_arrays(shard_dir, names)
    except (KeyError, FileNotFoundError) as exc:
        raise CorpusFormatError(
            f"shard {where!r} is missing or incomplete ({exc!r}); the store is damaged: re-ingest "
            "or restore it from a copy.",
            path=store,
            shard=shard.shard_id,
        ) from exc
    blocks = {
        lang: DocBlock(
            indptr=arrays[f"{lang}/indptr"].astype(np.int64, copy=False),
            term_ids=arrays[f"{lang}/term_ids"].astype(np.int32, copy=False),
            counts=arrays[f"{lang}/counts"].astype(np.int32, copy=False),
            doc_ids=arrays["doc_ids"],
            first_doc=shard.first_doc,
            n_terms=n_terms,
            language=lang,
            labels=arrays.get("labels"),
            timestamps=arrays.get("timestamps"),
        )
        for lang, n_terms in vocab_sizes.items()
    }
    for block in blocks.values():
        if block.n_docs != shard.n_docs:
            raise CorpusFormatError(
                f"shard {where!r} holds {block.n_docs} documents but the manifest says {shard.n_docs}; "
                "the store is damaged.",
                path=store,
                shard=shard.shard_id,
            )
    return blocks


def load_block(
    store: str, shard: ShardInfo, language: str, n_terms: int, with_meta: bool = True
) -> DocBlock:
    """Read one language of one shard as a :class:`DocBlock` (module-level so it pickles)."""
    return load_multiblock(store, shard, {language: n_terms}, with_meta)[language]


# ----------------------------------------------------------------------------- reading API


class Corpus:
    """A sharded corpus store opened for reading; nothing is loaded until asked for.

    Use :meth:`open` rather than the constructor.

    Parameters
    ----------
    path : Path
        Store directory.
    manifest : Manifest
        The store's manifest, as :func:`read_manifest` returns it.

    Examples
    --------
    >>> corpus = Corpus.open("news.zarr")                      # doctest: +SKIP
    >>> len(corpus), corpus.n_tokens                             # doctest: +SKIP
    >>> blocks = corpus.to_delayed()          # one Delayed[DocBlock] per shard, in order
    >>> for batch in corpus.iter_minibatches(256): ...           # streaming algorithms
    """

    def __init__(self, path: Path, manifest: Manifest) -> None:
        self.path = Path(path)
        self.manifest = manifest
        self._vocab: dict[tuple[str, int], Vocabulary] = {}
        self._excluded: dict[str, frozenset[str]] = {}

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> Corpus:
        """Open the store at ``path``, reading only its manifest.

        Parameters
        ----------
        path : str or os.PathLike
            Store directory.

        Returns
        -------
        Corpus
            The opened store.

        Raises
        ------
        StoreNotFoundError
            If ``path`` does not exist.
        CorpusFormatError
            If ``path`` is not a valid corpus store.
        FormatVersionError
            If the store was written by a newer topicflow.
        """
        path = Path(path)
        return cls(path, read_manifest(path))

    def __repr__(self) -> str:
        return (
            f"Corpus({str(self.path)!r}, n_docs={len(self)}, n_tokens={self.n_tokens}, "
            f"languages={list(self.languages)}, n_shards={self.n_shards})"
        )

    def __len__(self) -> int:
        return self.manifest.n_docs

    @property
    def languages(self) -> tuple[str, ...]:
        """Languages of the store, in manifest order (one for a monolingual store)."""
        return self.manifest.languages

    @property
    def is_multilingual(self) -> bool:
        """Whether the store has more than one language."""
        return len(self.languages) > 1

    @property
    def shards(self) -> tuple[ShardInfo, ...]:
        """Shards as the manifest lists them, in store order."""
        return self.manifest.shards

    @property
    def n_shards(self) -> int:
        """Number of shards."""
        return len(self.manifest.shards)

    @property
    def n_tokens(self) -> int:
        """Number of tokens over every shard and language."""
        return self.manifest.n_tokens()

    def tokens_by_language(self) -> dict[str, int]:
        """Return the number of tokens of each language.

        Returns
        -------
        dict of str to int
            Token count keyed by language, in :attr:`languages` order.
        """
        return {lang: self.manifest.n_tokens(lang) for lang in self.languages}

    @property
    def has_labels(self) -> bool:
        """Whether the documents carry labels."""
        return self.manifest.has_labels

    def resolve_language(self, language: str | None) -> str:
        """Return the language to read: the given one, or the only one of a monolingual store.

        Parameters
        ----------
        language : str or None
            A language of the store, or None for the only language of a monolingual store.

        Returns
        -------
        str
            A language of the store.

        Raises
        ------
        ValueError
            If ``language`` is None and the store is multilingual, or the store lacks ``language``.
        """
        if language is None:
            if self.is_multilingual:
                raise ValueError(
                    f"store {str(self.path)!r} has languages {list(self.languages)}; name one."
                )
            return self.languages[0]
        if language not in self.languages:
            raise ValueError(
                f"store {str(self.path)!r} has no language {language!r}; it has {list(self.languages)}."
            )
        return language

    @property
    def vocab_version(self) -> int:
        """Current vocabulary version (1 until an append promoted candidate terms)."""
        return self.manifest.vocab_version

    def vocabulary(self, language: str | None = None) -> Vocabulary:
        """Return the current vocabulary of ``language``.

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.

        Returns
        -------
        Vocabulary
            Terms at the store's current :attr:`vocab_version`.
        """
        return self.vocabulary_version(language, self.vocab_version)

    def vocabulary_version(self, language: str | None, version: int) -> Vocabulary:
        """Vocabulary ``version`` of ``language``; every version is a prefix of the later ones.

        Parameters
        ----------
        language : str or None
            None for the only language of a monolingual store.
        version : int
            From 1 to :attr:`vocab_version`.

        Returns
        -------
        Vocabulary

        Raises
        ------
        InvalidParameterError
            ``version`` is not one of the store's vocabulary versions.
        CorpusFormatError
            The version is listed but its arrays are missing (a damaged store).

        Examples
        --------
        >>> corpus = Corpus.open("news.zarr")                       # doctest: +SKIP
        >>> old = corpus.vocabulary_version(None, 1)                  # doctest: +SKIP
        >>> corpus.vocabulary().terms[: len(old)].tolist() == old.terms.tolist()  # doctest: +SKIP
        True
        """
        lang = self.resolve_language(language)
        if isinstance(version, bool) or not isinstance(version, (int, np.integer)) or not (
            1 <= version <= self.vocab_version
        ):
            raise InvalidParameterError(
                f"store {str(self.path)!r} has vocabulary versions 1 to {self.vocab_version}; "
                f"there is no version {version!r}."
            )
        key = (lang, int(version))
        if key not in self._vocab:
            directory = vocabulary_dir(self.path, int(version), lang)
            try:
                self._vocab[key] = read_vocabulary(directory)
            except (KeyError, FileNotFoundError) as exc:
                raise CorpusFormatError(
                    f"vocabulary version {version} of language {lang!r} ({str(directory)!r}) is missing "
                    f"or incomplete ({exc!r}); the store is damaged: restore it from a copy or re-ingest.",
                    path=str(self.path),
                ) from exc
        return self._vocab[key]

    def vocab_sizes(self) -> dict[str, int]:
        """Return the current vocabulary size of each language.

        Returns
        -------
        dict of str to int
            Number of terms keyed by language.
        """
        return {lang: len(self.vocabulary(lang)) for lang in self.languages}

    def candidates(self, language: str | None = None) -> Vocabulary:
        """Return the out-of-vocabulary terms recorded by appends, with their frequencies.

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.

        Returns
        -------
        Vocabulary
            The current candidate terms of ``language``; empty if appends recorded none.
        """
        lang = self.resolve_language(language)
        if self.manifest.candidates is None:
            return Vocabulary.empty()
        directory = self.path / "candidates" / self.manifest.candidates / lang
        return read_vocabulary(directory) if directory.exists() else Vocabulary.empty()

    def excluded_terms(self, language: str | None = None) -> frozenset[str]:
        """Return the terms the ingest left out as too common (``max_df_fraction``).

        Appends never promote these terms.

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.

        Returns
        -------
        frozenset of str
            The excluded terms; empty if none were excluded.
        """
        lang = self.resolve_language(language)
        if lang not in self._excluded:
            directory = self.path / "excluded" / lang
            terms = read_vocabulary(directory).terms if directory.exists() else ()
            self._excluded[lang] = frozenset(str(t) for t in terms)
        return self._excluded[lang]

    def read_block(self, index: int, language: str | None = None) -> DocBlock:
        """Read one language of one shard.

        Parameters
        ----------
        index : int
            Position of the shard in :attr:`shards`.
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.

        Returns
        -------
        DocBlock
            The shard's documents as CSR counts over the current vocabulary of ``language``.
        """
        lang = self.resolve_language(language)
        return load_block(str(self.path), self.shards[index], lang, len(self.vocabulary(lang)))

    def read_multiblock(self, index: int) -> dict[str, DocBlock]:
        """Read every language of one shard.

        Parameters
        ----------
        index : int
            Position of the shard in :attr:`shards`.

        Returns
        -------
        dict of str to DocBlock
            The shard's documents in each language, keyed by language.
        """
        return load_multiblock(str(self.path), self.shards[index], self.vocab_sizes())

    def iter_blocks(self, language: str | None = None, *, start: int = 0) -> Iterator[DocBlock]:
        """Read the shards in store order, one at a time.

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.
        start : int, default 0
            Position of the first shard to read.

        Yields
        ------
        DocBlock
            One shard of ``language``.
        """
        for index in range(start, self.n_shards):
            yield self.read_block(index, language)

    def iter_minibatches(
        self, batch_size: int, language: str | None = None, *, start: int = 0
    ) -> Iterator[DocBlock]:
        """Read consecutive blocks of ``batch_size`` documents, in store order.

        At most one shard plus one minibatch is held in memory.

        Parameters
        ----------
        batch_size : int
            Documents per minibatch; positive.
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.
        start : int, default 0
            Position of the first shard to read.

        Yields
        ------
        DocBlock
            ``batch_size`` documents; the last minibatch may be shorter.

        Raises
        ------
        ValueError
            If ``batch_size`` is less than 1.
        """
        if batch_size < 1:
            raise ValueError(f"batch_size must be a positive integer, got {batch_size!r}")
        pending: list[DocBlock] = []
        n_pending = 0
        for block in self.iter_blocks(language, start=start):
            offset = 0
            while offset < block.n_docs:
                take = min(batch_size - n_pending, block.n_docs - offset)
                pending.append(block.slice(offset, offset + take))
                n_pending += take
                offset += take
                if n_pending == batch_size:
                    yield concat_blocks(pending)
                    pending, n_pending = [], 0
        if n_pending:
            yield concat_blocks(pending)

    def token(self) -> str:
        """A deterministic identifier of the store's content (for Dask keys and caches).

        It covers the vocabulary version once the vocabulary grew (block sizes depend on it); stores
        of version 1 keep the token they always had.

        Returns
        -------
        str
            A Dask token of the store's path, shard checksums and (if grown) vocabulary version.
        """
        parts: list[Any] = [str(self.path.resolve()), [s.checksum for s in self.shards]]
        if self.vocab_version > 1:
            parts.append(("vocab_version", self.vocab_version))
        return dask.base.tokenize(*parts)

    def to_delayed(self, language: str | None = None, *, shards: Sequence[int] | None = None) -> list[Any]:
        """Return one ``Delayed[DocBlock]`` per shard, keyed ``load-block-<token>-<i>``.

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.
        shards : sequence of int, optional
            Positions of the shards to load; all shards by default.

        Returns
        -------
        list of Delayed
            One ``Delayed[DocBlock]`` per shard, in store order (or in the order of ``shards``).
        """
        lang = self.resolve_language(language)
        n_terms = len(self.vocabulary(lang))
        token = dask.base.tokenize(self.token(), lang)
        indices = range(self.n_shards) if shards is None else shards
        load = dask.delayed(load_block, pure=True)
        return [
            load(str(self.path), self.shards[i], lang, n_terms, dask_key_name=f"load-block-{token}-{i}")
            for i in indices
        ]

    def to_delayed_multi(self, *, shards: Sequence[int] | None = None) -> list[Any]:
        """Return one ``Delayed[dict[str, DocBlock]]`` per shard, with all languages of the store.

        Parameters
        ----------
        shards : sequence of int, optional
            Positions of the shards to load; all shards by default.

        Returns
        -------
        list of Delayed
            One ``Delayed[dict[str, DocBlock]]`` per shard, keyed ``load-multiblock-<token>-<i>``.
        """
        sizes = self.vocab_sizes()
        token = dask.base.tokenize(self.token(), "multi")
        indices = range(self.n_shards) if shards is None else shards
        load = dask.delayed(load_multiblock, pure=True)
        return [
            load(str(self.path), self.shards[i], sizes, dask_key_name=f"load-multiblock-{token}-{i}")
            for i in indices
        ]

    def to_dask_array(self, language: str | None = None) -> Any:
        """Return the corpus as a lazy document-term matrix.

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.

        Returns
        -------
        dask.array.Array of shape (n_docs, n_terms), int32
            One chunk per shard, each a scipy CSR matrix.
        """
        import dask.array as da
        import scipy.sparse as sp

        lang = self.resolve_language(language)
        n_terms = len(self.vocabulary(lang))
        parts = [
            da.from_delayed(
                dask.delayed(DocBlock.to_csr)(block),
                shape=(shard.n_docs, n_terms),
                dtype=np.int32,
                meta=sp.csr_matrix((0, n_terms), dtype=np.int32),
            )
            for block, shard in zip(self.to_delayed(lang), self.shards)
        ]
        return da.concatenate(parts, axis=0)

    def doc_ids(self) -> Iterator[str]:
        """Read every document id in store order (one shard in memory at a time).

        Yields
        ------
        str
            A document id.
        """
        for shard in self.shards:
            group = zarr.open_group(str(self.path / "shards" / shard.shard_id), mode="r")
            yield from (str(d) for d in _read_array(group, "doc_ids"))

    def verify(self) -> list[str]:
        """Recompute every shard's checksum and return the ids of shards that do not match.

        Returns
        -------
        list of str
            Ids of damaged shards, in store order; empty if every shard matches.
        """
        bad = []
        for index, shard in enumerate(self.shards):
            blocks: MultiBlock = self.read_multiblock(index)
            any_block = next(iter(blocks.values()))
            bags = {lang: (b.indptr, b.term_ids, b.counts) for lang, b in blocks.items()}
            if shard_checksum(bags, any_block.doc_ids, any_block.labels, any_block.timestamps) != shard.checksum:
                bad.append(shard.shard_id)
        return bad


def remove_unlisted_shards(path: Path, manifest: Manifest) -> list[str]:
    """Delete shard directories that the manifest does not list (left by an interrupted append)."""
    listed = {s.shard_id for s in manifest.shards}
    removed = []
    for child in sorted((Path(path) / "shards").iterdir()):
        if child.is_dir() and child.name not in listed:
            shutil.rmtree(child)
            removed.append(child.name)
    return removed


def remove_store_debris(path: Path, manifest: Manifest) -> list[str]:
    """Delete what an interrupted append may have left and ``manifest`` does not reference.

    That is: shard directories it does not list, and under ``candidates/`` and ``vocabs/`` hidden
    temporary directories and numbered ones newer than the current candidate set / vocabulary
    version (older candidate sets are kept: they are the store's history). Returns the removed
    paths, relative to the store.
    """
    path = Path(path)
    removed = [f"shards/{name}" for name in remove_unlisted_shards(path, manifest)]
    current_candidates = int(manifest.candidates) if manifest.candidates and manifest.candidates.isdigit() else 0
    for folder, current in (("candidates", current_candidates), ("vocabs", manifest.vocab_version)):
        directory = path / folder
        if not directory.is_dir():
            continue
        for child in sorted(directory.iterdir()):
            stale = child.name.startswith(".") or (child.name.isdigit() and int(child.name) > current)
            if child.is_dir() and stale and child.name != manifest.candidates:
                shutil.rmtree(child)
                removed.append(f"{folder}/{child.name}")
    return removed


def with_shards(manifest: Manifest, new: Sequence[ShardInfo], event: dict[str, Any]) -> Manifest:
    """The manifest after appending ``new`` shards (their ``first_doc`` is assigned here)."""
    first = manifest.n_docs
    placed = []
    for info in new:
        placed.append(replace(info, first_doc=first))
        first += info.n_docs
    return replace(manifest, shards=manifest.shards + tuple(placed), history=manifest.history + (event,))
