"""Tokenization, per-partition term counts and vocabulary pruning for ingest and append.

This module owns how text becomes terms (:class:`TokenizerConfig`, :func:`tokenize`), the mergeable
term statistics that the ingest graph tree-reduces (:class:`TermCounts`), and how a vocabulary is cut
(:class:`PruneConfig`, :func:`prune_vocabulary`). It does no I/O beyond reading stop-word files and
never touches Dask.

Glossary: ``doc_freq`` number of documents containing a term; ``corpus_freq`` number of occurrences
of a term; ``n_docs`` documents that have text in the language.
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping

from topicflow.errors import InputError, InvalidParameterError
from topicflow.models.common.vocabulary import Vocabulary

#: Default token pattern: maximal runs of word characters (letters, digits, underscore).
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w+\b"


def load_builtin_stop_words(name: str) -> tuple[str, ...]:
    """The words of a built-in list (``"english"``), sorted."""
    if name != "english":
        raise InvalidParameterError(f"unknown built-in stop-word list {name!r}; use 'english' or 'none'.")
    text = resources.files("topicflow").joinpath("data", "stopwords_en.txt").read_text(encoding="utf-8")
    return _parse_word_list(text)


def load_stop_word_file(path: str | Path) -> tuple[str, ...]:
    """Read the words of a UTF-8 file with one word per line (blank lines and ``#`` comments ignored).

    Raises
    ------
    InputError
        The file is missing or not UTF-8; the message names the file.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise InputError(
            f"stop-word file {str(path)!r} does not exist; pass an existing file, 'english' or 'none'.",
            path=str(path),
        ) from exc
    except UnicodeDecodeError as exc:
        raise InputError(
            f"stop-word file {str(path)!r} is not valid UTF-8 ({exc.reason} at byte {exc.start}); "
            "re-encode it as UTF-8.",
            path=str(path),
        ) from exc
    return _parse_word_list(text)


def _parse_word_list(text: str) -> tuple[str, ...]:
    words = (line.split("#", 1)[0].strip() for line in text.splitlines())
    return tuple(sorted({w for w in words if w}))


def parse_stop_words(spec: str) -> tuple[str, tuple[str, ...]]:
    """Resolve a ``--stop-words`` value (``english``, ``none`` or a file path) to ``(name, words)``."""
    if spec == "none":
        return "none", ()
    if spec == "english":
        return "english", load_builtin_stop_words("english")
    return "file", load_stop_word_file(spec)


@dataclass(frozen=True, slots=True)
class TokenizerConfig:
    """How text becomes terms; stored in the store's manifest so appends tokenize the same way.

    Attributes
    ----------
    lowercase : bool
        Lowercase the text before matching tokens.
    token_pattern : str
        Regular expression whose matches are the tokens (``re.findall``).
    min_length : int
        Tokens shorter than this many characters are dropped.
    stop_words_name : str
        Where ``stop_words`` came from: ``"english"``, ``"none"`` or ``"file"``.
    stop_words : tuple of str
        Sorted words to drop; compared after lowercasing when ``lowercase`` is set, exactly otherwise.

    Examples
    --------
    >>> config = TokenizerConfig(stop_words_name="none", stop_words=())
    >>> tokenize("The cat, the HAT.", config)
    ['the', 'cat', 'the', 'hat']
    """

    lowercase: bool = True
    token_pattern: str = DEFAULT_TOKEN_PATTERN
    min_length: int = 2
    stop_words_name: str = "english"
    stop_words: tuple[str, ...] = field(default_factory=lambda: load_builtin_stop_words("english"))

    def __post_init__(self) -> None:
        try:
            re.compile(self.token_pattern)
        except re.error as exc:
            raise InvalidParameterError(
                f"token pattern {self.token_pattern!r} is not a valid regular expression ({exc}).",
            ) from exc
        if self.min_length < 1:
            raise InvalidParameterError(f"min_length must be at least 1, got {self.min_length!r}.")
        if self.stop_words_name not in ("english", "none", "file"):
            raise InvalidParameterError(
                f"stop_words_name must be 'english', 'none' or 'file', got {self.stop_words_name!r}."
            )
        object.__setattr__(self, "stop_words", tuple(sorted(set(self.stop_words))))

    @classmethod
    def from_options(
        cls, *, lowercase: bool = True, token_pattern: str = DEFAULT_TOKEN_PATTERN,
        min_length: int = 2, stop_words: str = "english",
    ) -> TokenizerConfig:
        """Build from CLI-style options; ``stop_words`` is ``english``, ``none`` or a file path."""
        name, words = parse_stop_words(stop_words)
        return cls(lowercase=lowercase, token_pattern=token_pattern, min_length=min_length,
                   stop_words_name=name, stop_words=words)

    def to_dict(self) -> dict[str, Any]:
        return {
            "lowercase": self.lowercase,
            "token_pattern": self.token_pattern,
            "min_length": self.min_length,
            "stop_words_name": self.stop_words_name,
            "stop_words": list(self.stop_words),
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> TokenizerConfig:
        return cls(
            lowercase=bool(payload["lowercase"]),
            token_pattern=str(payload["token_pattern"]),
            min_length=int(payload["min_length"]),
            stop_words_name=str(payload["stop_words_name"]),
            stop_words=tuple(str(w) for w in payload["stop_words"]),
        )

    def differences(self, other: TokenizerConfig) -> list[str]:
        """Human-readable ``name: mine != theirs`` lines for every setting that differs."""
        out = []
        for name in ("lowercase", "token_pattern", "min_length", "stop_words_name", "stop_words"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if mine != theirs:
                if name == "stop_words":
                    out.append(f"stop_words: {len(mine)} words != {len(theirs)} words")
                else:
                    out.append(f"{name}: {mine!r} != {theirs!r}")
        return out


@functools.lru_cache(maxsize=32)
def make_tokenizer(config: TokenizerConfig) -> Callable[[str], list[str]]:
    """A fast ``text -> tokens`` function for ``config`` (cached per config)."""
    findall = re.compile(config.token_pattern).findall
    stop = frozenset(config.stop_words)
    min_length = config.min_length

    if config.lowercase:
        def run(text: str) -> list[str]:
            return [t for t in findall(text.lower()) if len(t) >= min_length and t not in stop]
    else:
        def run(text: str) -> list[str]:
            return [t for t in findall(text) if len(t) >= min_length and t not in stop]

    return run


def tokenize(text: str, config: TokenizerConfig) -> list[str]:
    """Split ``text`` into terms: optional lowercasing, regex matches, minimum length, stop words.

    Parameters
    ----------
    text : str
    config : TokenizerConfig

    Returns
    -------
    list of str
        Tokens in text order, repeated as often as they occur.

    Examples
    --------
    >>> tokenize("A dog and a Dog", TokenizerConfig())
    ['dog', 'dog']
    """
    return make_tokenizer(config)(text)


@dataclass(frozen=True, slots=True)
class LanguageCounts:
    """Term statistics of one language; merged by addition.

    Attributes
    ----------
    doc_freq, corpus_freq : Counter of str to int
    n_docs : int
        Documents that have text in this language (denominator of ``max_df_fraction``).
    """

    doc_freq: Counter[str] = field(default_factory=Counter)
    corpus_freq: Counter[str] = field(default_factory=Counter)
    n_docs: int = 0

    def merge(self, other: LanguageCounts) -> LanguageCounts:
        doc_freq, corpus_freq = Counter(self.doc_freq), Counter(self.corpus_freq)
        doc_freq.update(other.doc_freq)
        corpus_freq.update(other.corpus_freq)
        return LanguageCounts(doc_freq, corpus_freq, self.n_docs + other.n_docs)

    def without(self, other: LanguageCounts) -> LanguageCounts:
        """These counts minus ``other`` (documents removed after counting, e.g. duplicates)."""
        doc_freq, corpus_freq = Counter(self.doc_freq), Counter(self.corpus_freq)
        doc_freq.subtract(other.doc_freq)
        corpus_freq.subtract(other.corpus_freq)
        return LanguageCounts(+doc_freq, +corpus_freq, self.n_docs - other.n_docs)


@dataclass(frozen=True, slots=True)
class TermCounts:
    """Per-language term statistics of some documents: a monoid under :meth:`merge`.

    ``merge`` is associative and commutative and ``TermCounts()`` is its identity, so any tree of
    partial counts gives the counts of the whole corpus.
    """

    languages: dict[str, LanguageCounts] = field(default_factory=dict)

    def merge(self, other: TermCounts) -> TermCounts:
        merged = dict(self.languages)
        for lang, counts in other.languages.items():
            merged[lang] = merged[lang].merge(counts) if lang in merged else counts
        return TermCounts(merged)

    def without(self, other: TermCounts) -> TermCounts:
        return TermCounts({
            lang: counts.without(other.languages[lang]) if lang in other.languages else counts
            for lang, counts in self.languages.items()
        })

    def get(self, language: str) -> LanguageCounts:
        return self.languages.get(language, LanguageCounts())


def count_document(bags: Mapping[str, Counter[str] | None]) -> TermCounts:
    """Count one document given its per-language bags (None: the document lacks the language)."""
    return TermCounts({
        lang: LanguageCounts(Counter(dict.fromkeys(bag, 1)), Counter(bag), 1)
        for lang, bag in bags.items() if bag is not None
    })


@dataclass(frozen=True, slots=True)
class PruneConfig:
    """How the vocabulary is cut after counting (not stored: appends never re-prune).

    Attributes
    ----------
    min_df : int
        Keep terms found in at least this many documents.
    max_df_fraction : float
        Keep terms found in at most this fraction of the language's documents (1.0 keeps all).
    max_vocab : int or None
        Keep at most this many terms per language, the first ones in canonical order.
    """

    min_df: int = 1
    max_df_fraction: float = 1.0
    max_vocab: int | None = None

    def __post_init__(self) -> None:
        if self.min_df < 1:
            raise InvalidParameterError(f"min_df must be a positive integer, got {self.min_df!r}.")
        if not 0.0 < self.max_df_fraction <= 1.0:
            raise InvalidParameterError(
                f"max_df_fraction must be in (0, 1], got {self.max_df_fraction!r}."
            )
        if self.max_vocab is not None and self.max_vocab < 1:
            raise InvalidParameterError(f"max_vocab must be positive or None, got {self.max_vocab!r}.")

    def to_dict(self) -> dict[str, Any]:
        return {"min_df": self.min_df, "max_df_fraction": self.max_df_fraction, "max_vocab": self.max_vocab}


def too_common_terms(counts: LanguageCounts, prune: PruneConfig) -> Vocabulary:
    """The terms :func:`prune_vocabulary` drops for a document frequency above ``max_df_fraction``.

    A store keeps them so that appends never bring them back as "new" terms: they were left out on
    purpose, as corpus-specific stop words.
    """
    max_df = prune.max_df_fraction * counts.n_docs
    common = [t for t, df in counts.doc_freq.items() if df > max_df]
    return Vocabulary.from_counts({t: counts.doc_freq[t] for t in common}, {t: counts.corpus_freq[t] for t in common})


def prune_vocabulary(counts: LanguageCounts, prune: PruneConfig) -> Vocabulary:
    """The vocabulary of one language after pruning, in the canonical order of ``Vocabulary.from_counts``.

    Terms outside ``[min_df, max_df_fraction * n_docs]`` document frequency are dropped first; then
    the canonical order (corpus frequency desc, doc frequency desc, term) is cut to ``max_vocab``.
    """
    max_df = prune.max_df_fraction * counts.n_docs
    kept = [t for t, df in counts.doc_freq.items() if prune.min_df <= df <= max_df]
    vocab = Vocabulary.from_counts(
        {t: counts.doc_freq[t] for t in kept}, {t: counts.corpus_freq[t] for t in kept}
    )
    if prune.max_vocab is not None and len(vocab) > prune.max_vocab:
        cut = prune.max_vocab
        vocab = Vocabulary(vocab.terms[:cut], vocab.doc_freq[:cut], vocab.corpus_freq[:cut])
    return vocab
