"""Reading the sharded corpus store (a versioned zarr v3 layout, spec in docs/corpus-format.md).

This module owns reading the store's arrays and its manifest, validated (writing is in
:mod:`topicflow.io.corpus.writer`, the layout's records in :mod:`topicflow.io.corpus.layout`). It never tokenizes and never
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
      shards/<shard_id>/<lang>/order/  (stores ingested with --keep-order, format 3) indptr (int64),
                                   tokens (int32: term id, or -(k+1) for oov_terms[k]), oov_terms (str)
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

import dask
import numpy as np

from topicflow.errors import (
    CorpusFormatError,
    CorruptShardError,
    InvalidParameterError,
    OrderNotKeptError,
    StoreNotFoundError,
)
from topicflow.io._atomic import read_json
from topicflow.io._zarr import read_arrays
from topicflow.io.corpus.layout import (
    MANIFEST,
    ORDER_ARRAYS,
    Manifest,
    OrderArrays,
    ShardInfo,
    corrupt_shard,
    csr_problems,
    order_problems,
    shard_checksum,
    vocabulary_dir,
)
from topicflow.io.storage import Location, StoragePath, as_location, check_bucket
from topicflow.models.common.vocabulary import Vocabulary

if TYPE_CHECKING:  # imported where blocks are built: ingest reads manifests and vocabularies only, and
    # models.common.blocks loads numba and scipy.sparse (issue 22: start-up of ingest and append)
    from topicflow.models.common.blocks import DocBlock, OrderedBlock

#: (indptr, term_ids, counts) of one language of one shard.


def read_vocabulary(directory: Path | StoragePath) -> Vocabulary:
    """Read a vocabulary group (``terms``, ``doc_freq``, ``corpus_freq``) written by :func:`~topicflow.io.corpus.writer.write_vocabulary`.

    Parameters
    ----------
    directory : Path
        The vocabulary's zarr group, e.g. ``STORE/vocab/<lang>``.

    Returns
    -------
    Vocabulary
        Terms in id order with their document and corpus frequencies (int64).

    Raises
    ------
    CorpusFormatError
        An array is missing or cannot be decoded, or the three arrays differ in length.
    """
    try:
        arrays = read_arrays(directory, ["terms", "doc_freq", "corpus_freq"])
    except (ZeroDivisionError, OverflowError, MemoryError) as exc:
        # Damaged zarr metadata that zarr does not refuse itself: a chunk shape of 0, a fill value out of
        # range, a codec removed so that compressed bytes are read as string lengths (billions of them).
        raise CorpusFormatError(
            f"vocabulary {str(directory)!r} cannot be decoded ({type(exc).__name__}: {exc}): its zarr.json "
            "metadata is damaged; re-create the store with `topicflow ingest`.",
            path=str(directory),
        ) from exc
    lengths = {name: array.shape for name, array in arrays.items()}
    if len(set(lengths.values())) != 1 or arrays["terms"].ndim != 1:
        raise CorpusFormatError(
            f"vocabulary {str(directory)!r} is inconsistent: its arrays have shapes {lengths}, expected one "
            "length for all three.",
            path=str(directory),
        )
    return Vocabulary(
        terms=arrays["terms"],
        doc_freq=arrays["doc_freq"].astype(np.int64),
        corpus_freq=arrays["corpus_freq"].astype(np.int64),
    )


def read_manifest(path: str | os.PathLike[str] | StoragePath) -> Manifest:
    """Read and validate the ``manifest.json`` of the store at ``path``.

    Parameters
    ----------
    path : path or URL
        Store directory, local or on object storage.

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
    path = as_location(path)
    if not (path / MANIFEST).is_file():
        if isinstance(path, StoragePath):
            check_bucket(path)
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


def _order_names(languages: Sequence[str]) -> list[str]:
    """Names of the ordered-token arrays of ``languages`` inside a shard group."""
    return [f"{lang}/order/{part}" for lang in languages for part in ORDER_ARRAYS]


def _read_shard(store: str, shard: ShardInfo, languages: Sequence[str], with_meta: bool,
                with_order: bool = False) -> dict[str, np.ndarray]:
    """The decoded arrays of ``languages`` of one shard (and its labels and timestamps with ``with_meta``,
    and its ordered-token arrays with ``with_order``).

    Raises CorpusFormatError naming the array that is missing or cannot be decoded (see :func:`read_arrays`).
    """
    shard_dir = as_location(store) / "shards" / shard.shard_id
    # On a local directory presence of the optional arrays is a stat, not a zarr lookup; on object
    # storage one listing of the shard.
    meta = [name for name in ("labels", "timestamps") if with_meta and _has_array(shard_dir, name)]
    names = ["doc_ids", *meta] + [f"{lang}/{part}" for lang in languages for part in ("indptr", "term_ids", "counts")]
    if with_order:
        names += _order_names(languages)
    return read_arrays(shard_dir, names)


def _has_array(shard_dir: Location, name: str) -> bool:
    if isinstance(shard_dir, StoragePath):  # one listing of the shard (cached by fsspec), not a request per name
        return name in {entry.name for entry in shard_dir.iterdir()}
    return (shard_dir / name).is_dir()


def _order_of(arrays: Mapping[str, np.ndarray], lang: str) -> OrderArrays:
    return (arrays[f"{lang}/order/indptr"], arrays[f"{lang}/order/tokens"], arrays[f"{lang}/order/oov_terms"])


def shard_problems(arrays: Mapping[str, np.ndarray], shard: ShardInfo, vocab_sizes: Mapping[str, int]) -> list[str]:
    """What contradicts the manifest in one shard's decoded arrays: sizes, CSR structure, token counts.

    Cheap (a few vectorized passes, about 0.1 ms for 2,000 documents), so every read runs it.

    Parameters
    ----------
    arrays : mapping of str to ndarray
        ``doc_ids``, optionally ``labels`` and ``timestamps``, and ``<lang>/indptr``, ``<lang>/term_ids``,
        ``<lang>/counts`` for each language of ``vocab_sizes``; where ``<lang>/order/indptr``,
        ``<lang>/order/tokens`` and ``<lang>/order/oov_terms`` are given too, the ordered-token layer is
        checked as well (:func:`~topicflow.io.corpus.layout.order_problems`, which includes the
        invariant that each document's in-vocabulary tokens add up to its bag of words).
    shard : ShardInfo
        The shard as the manifest lists it.
    vocab_sizes : mapping of str to int
        Vocabulary size of each language read.

    Returns
    -------
    list of str
        One phrase per problem; empty when the arrays agree with the manifest.
    """
    problems = [
        f"{name} holds {arrays[name].shape} entries but the manifest says {shard.n_docs} documents"
        for name in ("doc_ids", "labels", "timestamps")
        if name in arrays and arrays[name].shape != (shard.n_docs,)
    ]
    for lang, n_terms in vocab_sizes.items():
        bag = (arrays[f"{lang}/indptr"], arrays[f"{lang}/term_ids"], arrays[f"{lang}/counts"])
        found = csr_problems(bag, shard.n_docs, n_terms)
        if not found and lang in shard.n_tokens and int(bag[2].sum(dtype=np.int64)) != shard.n_tokens[lang]:
            found = [f"its counts add up to {int(bag[2].sum(dtype=np.int64))} tokens but the manifest says "
                     f"{shard.n_tokens[lang]}"]
        if not found and f"{lang}/order/tokens" in arrays:
            found = order_problems(_order_of(arrays, lang), bag, shard.n_docs, n_terms)
        problems.extend(f"language {lang!r}: {problem}" for problem in found)
    return problems


#: Shards whose checksum this process has verified, keyed by what identifies their bytes on disk:
#: the store, the shard, its recorded checksum and the (path, size, mtime) of every file under it.
#: Batch VB reads every shard once per iteration; its files are verified on the first read, and again
#: only if one of them changed since.
_VERIFIED: set[tuple[Any, ...]] = set()
_VERIFIED_LIMIT = 100_000


def _files_signature(store: str, shard: ShardInfo) -> tuple[Any, ...]:
    """(store, shard id, checksum, then (relative path, size, mtime_ns) of every file of the shard)."""
    location = as_location(store) / "shards" / shard.shard_id
    if isinstance(location, StoragePath):
        # topicflow never rewrites a shard's objects in place on object storage (a new store is written
        # under a fresh prefix, appends add shards under new ids), so the shard verifies once per process
        # without listing its objects on every read.
        return (location.url, shard.shard_id, shard.checksum)
    root = location
    entries = []
    for directory, _, names in os.walk(root):
        for name in names:
            stat = os.stat(os.path.join(directory, name))
            entries.append((os.path.relpath(os.path.join(directory, name), root), stat.st_size, stat.st_mtime_ns))
    return (str(Path(store).resolve()), shard.shard_id, shard.checksum, tuple(sorted(entries)))


def _checksum_problem(arrays: Mapping[str, np.ndarray], shard: ShardInfo) -> str | None:
    """The mismatch between the arrays of every language of a shard and its recorded checksum, if any.

    For a shard with the ordered-token layer, ``arrays`` must hold its order arrays too.
    """
    bags = {lang: (arrays[f"{lang}/indptr"], arrays[f"{lang}/term_ids"], arrays[f"{lang}/counts"])
            for lang in shard.n_tokens}
    orders = {lang: _order_of(arrays, lang) for lang in shard.n_tokens} if shard.has_order else None
    found = shard_checksum(bags, arrays["doc_ids"], arrays.get("labels"), arrays.get("timestamps"), orders)
    if found == shard.checksum:
        return None
    return f"its arrays do not match the manifest's checksum (expected {shard.checksum}, found {found})"


def load_multiblock(
    store: str, shard: ShardInfo, vocab_sizes: Mapping[str, int], with_meta: bool = True
) -> dict[str, DocBlock]:
    """Read languages of one shard, validated, keyed by language (module-level so it pickles).

    Every read checks the arrays against the manifest (:func:`shard_problems`); a read of every
    language of the shard with its metadata (the usual case, and every read of a monolingual store)
    also recomputes the shard's checksum, which costs about 1 ms per 2,000 documents, unless this
    process verified the same files (same paths, sizes and modification times) before: batch VB
    rereads every shard each iteration and pays for the checksum once (see docs/corpus-format.md,
    "Validation on read").

    Parameters
    ----------
    store : str
        The store directory.
    shard : ShardInfo
        The shard as the manifest lists it.
    vocab_sizes : mapping of str to int
        The languages to read, with their current vocabulary sizes.
    with_meta : bool, default True
        Also read labels and timestamps where the store has them.

    Returns
    -------
    dict of str to DocBlock
        One block per language of ``vocab_sizes``.

    Raises
    ------
    CorruptShardError
        The shard's files are missing or cannot be decoded, or they decode to arrays that contradict
        the manifest (document or token counts, CSR structure, term ids, checksum).
    """
    from topicflow.models.common.blocks import DocBlock

    arrays = _read_validated(store, shard, vocab_sizes, with_meta, with_order=False)
    return {
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


def _read_validated(
    store: str, shard: ShardInfo, vocab_sizes: Mapping[str, int], with_meta: bool, with_order: bool
) -> dict[str, np.ndarray]:
    """Read and validate languages of one shard (see :func:`load_multiblock`); raise CorruptShardError.

    With ``with_order`` the ordered-token arrays of ``vocab_sizes`` are read and checked too. The
    checksum of a shard with the layer covers it, so a checksum check of such a shard reads the order
    arrays of every language even when only the bags were asked for (once per process and files).
    """
    try:
        arrays = _read_shard(store, shard, list(vocab_sizes), with_meta, with_order)
    except CorpusFormatError as exc:
        raise corrupt_shard(store, shard.shard_id, str(exc)) from exc
    problems = shard_problems(arrays, shard, vocab_sizes)
    if not problems and with_meta and set(vocab_sizes) >= set(shard.n_tokens):
        signature = _files_signature(store, shard)
        if signature not in _VERIFIED:
            checked = dict(arrays)
            if shard.has_order and not with_order:
                try:
                    checked.update(read_arrays(as_location(store) / "shards" / shard.shard_id, _order_names(list(shard.n_tokens))))
                except CorpusFormatError as exc:
                    raise corrupt_shard(store, shard.shard_id, str(exc)) from exc
            problems = [problem for problem in (_checksum_problem(checked, shard),) if problem]
            if not problems:
                if len(_VERIFIED) >= _VERIFIED_LIMIT:
                    _VERIFIED.clear()
                _VERIFIED.add(signature)
    if problems:
        raise corrupt_shard(store, shard.shard_id, "; ".join(problems))
    return arrays


def load_ordered_multiblock(store: str, shard: ShardInfo, vocab_sizes: Mapping[str, int]) -> dict[str, OrderedBlock]:
    """Read the ordered-token layer of languages of one shard, validated (module-level so it pickles).

    Reads the bags too: every read checks the layer's structure and that each document's
    in-vocabulary tokens add up to its bag of words; a read of every language of the shard also
    recomputes the shard's checksum (once per process and files, as :func:`load_multiblock`).

    Parameters
    ----------
    store : str
        The store directory (one that keeps token order).
    shard : ShardInfo
        The shard as the manifest lists it.
    vocab_sizes : mapping of str to int
        The languages to read, with their current vocabulary sizes.

    Returns
    -------
    dict of str to OrderedBlock
        One block per language of ``vocab_sizes``.

    Raises
    ------
    CorruptShardError
        The shard's files are missing or cannot be decoded, or contradict the manifest, the bag of
        words or the checksum.
    """
    from topicflow.models.common.blocks import OrderedBlock

    arrays = _read_validated(store, shard, vocab_sizes, with_meta=True, with_order=True)
    return {
        lang: OrderedBlock(
            indptr=arrays[f"{lang}/order/indptr"].astype(np.int64, copy=False),
            tokens=arrays[f"{lang}/order/tokens"].astype(np.int32, copy=False),
            oov_terms=np.asarray(arrays[f"{lang}/order/oov_terms"], dtype=object),
            doc_ids=arrays["doc_ids"],
            first_doc=shard.first_doc,
            n_terms=n_terms,
            language=lang,
        )
        for lang, n_terms in vocab_sizes.items()
    }


def load_ordered_block(store: str, shard: ShardInfo, language: str, n_terms: int) -> OrderedBlock:
    """Read one language's ordered-token layer of one shard as a validated :class:`OrderedBlock`.

    Parameters
    ----------
    store : str
        The store directory (one that keeps token order).
    shard : ShardInfo
        The shard as the manifest lists it.
    language : str
        The language to read.
    n_terms : int
        The language's current vocabulary size.

    Returns
    -------
    OrderedBlock

    Raises
    ------
    CorruptShardError
        As :func:`load_ordered_multiblock`.
    """
    return load_ordered_multiblock(store, shard, {language: n_terms})[language]


def load_block(
    store: str, shard: ShardInfo, language: str, n_terms: int, with_meta: bool = True
) -> DocBlock:
    """Read one language of one shard as a validated :class:`DocBlock` (module-level so it pickles).

    Parameters
    ----------
    store : str
        The store directory.
    shard : ShardInfo
        The shard as the manifest lists it.
    language : str
        The language to read.
    n_terms : int
        The language's current vocabulary size.
    with_meta : bool, default True
        Also read labels and timestamps where the store has them.

    Returns
    -------
    DocBlock

    Raises
    ------
    CorruptShardError
        As :func:`load_multiblock`.
    """
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

    def __init__(self, path: str | os.PathLike[str] | StoragePath, manifest: Manifest) -> None:
        location = as_location(path)
        # Absolute, because tasks open the shards by this path on workers whose working directory differs.
        self.path: Location = location.absolute() if isinstance(location, Path) else location
        self.manifest = manifest
        self._vocab: dict[tuple[str, int], Vocabulary] = {}
        self._excluded: dict[str, frozenset[str]] = {}

    @classmethod
    def open(cls, path: str | os.PathLike[str] | StoragePath) -> Corpus:
        """Open the store at ``path``, reading only its manifest.

        Parameters
        ----------
        path : str, os.PathLike or StoragePath
            Store directory, or its URL on object storage (``s3://bucket/news.zarr``; see
            docs/storage.md).

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
        location = as_location(path)
        return cls(location, read_manifest(location))

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

    @property
    def has_order(self) -> bool:
        """Whether the store keeps each document's tokens in order (``topicflow ingest --keep-order``).

        Stores of format 1 and 2, and stores ingested without ``--keep-order``, do not.
        """
        return self.manifest.has_order

    def _require_order(self, what: str) -> None:
        if not self.manifest.has_order:
            raise OrderNotKeptError(
                f"store {str(self.path)!r} does not keep token order (it was ingested without --keep-order), "
                f"so {what} cannot read its documents' tokens in order; re-ingest it with "
                "`topicflow ingest --keep-order` (Python: ingest_corpus(..., keep_order=True)).",
                path=str(self.path),
            )

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

    def read_ordered(self, index: int, language: str | None = None) -> OrderedBlock:
        """Read one language of one shard as its documents' tokens in reading order.

        Parameters
        ----------
        index : int
            Position of the shard in :attr:`shards`.
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.

        Returns
        -------
        OrderedBlock
            Term ids of the shard's vocabulary version (a prefix of the current one) and
            out-of-vocabulary tokens as ``-(k + 1)`` for ``oov_terms[k]``; the same documents, in
            the same order, as :meth:`read_block`. ``block.texts(corpus.vocabulary(language))``
            gives the tokens as strings.

        Raises
        ------
        OrderNotKeptError
            The store was ingested without ``--keep-order``.
        CorruptShardError
            The shard is damaged (including a layer that contradicts the bag of words).

        Examples
        --------
        >>> corpus = Corpus.open("news.zarr")                              # doctest: +SKIP
        >>> corpus.read_ordered(0).texts(corpus.vocabulary())[0][:5]         # doctest: +SKIP
        ['economy', 'grows', 'tax', 'rates', 'fall']
        """
        self._require_order("read_ordered")
        lang = self.resolve_language(language)
        return load_ordered_block(str(self.path), self.shards[index], lang, len(self.vocabulary(lang)))

    def iter_ordered(self, language: str | None = None, *, start: int = 0) -> Iterator[OrderedBlock]:
        """Read the ordered-token layer shard by shard, in store order (one shard in memory at a time).

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.
        start : int, default 0
            Position of the first shard to read.

        Returns
        -------
        iterator of OrderedBlock
            One block per shard of ``language`` (see :meth:`read_ordered`), read when reached.

        Raises
        ------
        OrderNotKeptError
            The store was ingested without ``--keep-order`` (raised by this call, not by the iteration).
        """
        self._require_order("iter_ordered")
        lang = self.resolve_language(language)
        return (self.read_ordered(index, lang) for index in range(start, self.n_shards))

    def to_delayed_ordered(self, language: str | None = None, *, shards: Sequence[int] | None = None) -> list[Any]:
        """Return one ``Delayed[OrderedBlock]`` per shard, keyed ``load-ordered-<token>-<i>``.

        The ordered counterpart of :meth:`to_delayed`: the same shards, documents and ``first_doc``.

        Parameters
        ----------
        language : str or None, optional
            A language of the store; None for the only language of a monolingual store.
        shards : sequence of int, optional
            Positions of the shards to load; all shards by default.

        Returns
        -------
        list of Delayed
            One ``Delayed[OrderedBlock]`` per shard, in store order (or in the order of ``shards``).

        Raises
        ------
        OrderNotKeptError
            The store was ingested without ``--keep-order`` (raised here, before any graph is built).
        """
        self._require_order("to_delayed_ordered")
        lang = self.resolve_language(language)
        n_terms = len(self.vocabulary(lang))
        token = dask.base.tokenize(self.token(), lang, "ordered")
        indices = range(self.n_shards) if shards is None else shards
        load = dask.delayed(load_ordered_block, pure=True)
        return [
            load(str(self.path), self.shards[i], lang, n_terms, dask_key_name=f"load-ordered-{token}-{i}")
            for i in indices
        ]

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
        from topicflow.models.common.blocks import concat_blocks

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

        Raises
        ------
        CorruptShardError
            A shard's ``doc_ids`` cannot be decoded or do not match the manifest's document count.
        """
        for shard in self.shards:
            try:
                doc_ids = _read_shard(str(self.path), shard, (), with_meta=False)["doc_ids"]
            except CorpusFormatError as exc:
                raise corrupt_shard(str(self.path), shard.shard_id, str(exc)) from exc
            if doc_ids.shape != (shard.n_docs,):
                raise corrupt_shard(str(self.path), shard.shard_id, f"doc_ids holds {doc_ids.shape} entries but "
                                    f"the manifest says {shard.n_docs} documents")
            yield from (str(d) for d in doc_ids)

    def verify(self, *, raise_errors: bool = True) -> list[str]:
        """Read every shard, check it against the manifest and recompute its checksum.

        A store that keeps token order has its ordered-token layer checked too (structure, and that
        each document's in-vocabulary tokens add up to its bag of words).

        Parameters
        ----------
        raise_errors : bool, default True
            Raise one error naming every damaged shard; with False, return their ids instead.

        Returns
        -------
        list of str
            Ids of damaged shards (missing or undecodable files, arrays that contradict the manifest,
            checksum mismatches), in store order; empty if every shard is sound.

        Raises
        ------
        CorruptShardError
            With ``raise_errors``, if any shard is damaged; the message names each one and what is wrong.
        """
        sizes = self.vocab_sizes()
        damaged: list[tuple[str, str]] = []
        for shard in self.shards:
            try:
                arrays = _read_shard(str(self.path), shard, list(shard.n_tokens), with_meta=True,
                                     with_order=shard.has_order)
            except CorpusFormatError as exc:
                damaged.append((shard.shard_id, str(exc)))
                continue
            problems = shard_problems(arrays, shard, {lang: sizes.get(lang, 0) for lang in shard.n_tokens})
            mismatch = None if problems else _checksum_problem(arrays, shard)
            if mismatch:
                problems.append(mismatch)
            if problems:
                damaged.append((shard.shard_id, "; ".join(problems)))
        if damaged and raise_errors:
            if len(damaged) == 1:
                raise corrupt_shard(str(self.path), *damaged[0])
            listing = "; ".join(f"shard {shard_id}: {what}" for shard_id, what in damaged)
            raise CorruptShardError(
                f"{len(damaged)} shards of {str(self.path)!r} are corrupt ({listing}); re-ingest the store or "
                "restore these shards from a backup.",
                path=str(self.path),
                shard=damaged[0][0],
            )
        return [shard_id for shard_id, _ in damaged]


def as_corpus(corpus: Any) -> Corpus:
    """Accept a store path or an opened :class:`Corpus`."""
    if isinstance(corpus, Corpus):
        return corpus
    if isinstance(corpus, (str, os.PathLike, StoragePath)):
        return Corpus.open(corpus)
    raise InvalidParameterError(
        f"expected a corpus store path or topicflow.Corpus, got {type(corpus).__name__}; build a store "
        "with `topicflow ingest` or topicflow.pipeline.ingest.ingest.ingest_corpus first."
    )
