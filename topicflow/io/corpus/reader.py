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

import os
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

import dask
import numpy as np
import zarr

from topicflow.errors import (
    CorpusFormatError,
    InvalidParameterError,
    StoreNotFoundError,
)
from topicflow.io._atomic import read_json
from topicflow.io._zarr import _read_array, read_arrays
from topicflow.io.corpus.layout import (
    MANIFEST,
    Manifest,
    ShardInfo,
    shard_checksum,
    vocabulary_dir,
)
from topicflow.models.common.blocks import DocBlock, MultiBlock, concat_blocks
from topicflow.models.common.vocabulary import Vocabulary

#: (indptr, term_ids, counts) of one language of one shard.


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


def as_corpus(corpus: Any) -> Corpus:
    """Accept a store path or an opened :class:`Corpus`."""
    if isinstance(corpus, Corpus):
        return corpus
    if isinstance(corpus, (str, os.PathLike)):
        return Corpus.open(corpus)
    raise InvalidParameterError(
        f"expected a corpus store path or topicflow.Corpus, got {type(corpus).__name__}; build a store "
        "with `topicflow ingest` or topicflow.pipeline.ingest.ingest.ingest_corpus first."
    )
