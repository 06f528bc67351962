"""Tokenization, per-partition term counts and vocabulary pruning for ingest and append.

This module owns how text becomes terms (:class:`TokenizerConfig`, :func:`tokenize`), the mergeable
term statistics that the ingest graph tree-reduces (:class:`TermCounts`), and how a vocabulary is cut
(:class:`PruneConfig`, :func:`prune_vocabulary`). It does no I/O beyond reading stop-word files and
never touches Dask.

Two tokenizers give the same tokens: :func:`tokenize` (Python ``re`` on one text) and
:func:`tokenize_batch` (many texts at once, dictionary-encoded). For the default token pattern and
its equivalents (:data:`RUN_PATTERNS`) the batch tokenizer runs vectorized over the UTF-8 bytes of
the whole batch (NumPy for the word-character runs, pyarrow for the dictionary encoding and the
stop words) and stays exact by construction: lowercasing is Python's own ``str.lower`` (full case
mapping: ``'İ'`` -> ``'i̇'``, final sigma) and a character is a word character exactly when
Python's ``re`` says ``\\w`` matches it (decided per distinct non-ASCII character by ``re`` itself,
never by another Unicode table). Any other pattern, and text that cannot be encoded as UTF-8 (lone
surrogates), goes through the Python tokenizer.

Glossary: ``doc_freq`` number of documents containing a term; ``corpus_freq`` number of occurrences
of a term; ``n_docs`` documents that have text in the language.
"""
from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field, replace
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from topicflow.errors import InputError, InvalidParameterError
from topicflow.models.common.vocabulary import Vocabulary

#: Default token pattern: maximal runs of word characters (letters, digits, underscore).
DEFAULT_TOKEN_PATTERN = r"(?u)\b\w+\b"

#: Token patterns whose matches are the maximal runs of ``\w`` characters of at least the given
#: length (``re.findall`` semantics); :func:`tokenize_batch` runs these vectorized.
RUN_PATTERNS: dict[str, int] = {
    DEFAULT_TOKEN_PATTERN: 1, r"\b\w+\b": 1, r"\w+": 1, r"(?u)\w+": 1,
    r"(?u)\b\w\w+\b": 2, r"\b\w\w+\b": 2, r"\w\w+": 2, r"(?u)\w\w+": 2,
}


#: Built-in stop-word lists: the name ``--stop-words`` takes, and the file under ``topicflow/data``.
BUILTIN_STOP_WORDS: dict[str, str] = {"english": "stopwords_en.txt", "german": "stopwords_de.txt"}

#: What ``--stop-words`` takes, for messages.
STOP_WORDS_SPEC = "english, german, none, a FILE, '+'-joined lists (english+german) or LANG=LIST,... per language"


def load_builtin_stop_words(name: str) -> tuple[str, ...]:
    """The words of a built-in list (a key of :data:`BUILTIN_STOP_WORDS`), sorted."""
    if name not in BUILTIN_STOP_WORDS:
        raise InvalidParameterError(
            f"unknown built-in stop-word list {name!r}; use one of {', '.join(map(repr, BUILTIN_STOP_WORDS))} "
            "or 'none'.")
    text = resources.files("topicflow").joinpath("data", BUILTIN_STOP_WORDS[name]).read_text(encoding="utf-8")
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
            f"stop-word file {str(path)!r} does not exist; pass an existing file, "
            f"{', '.join(map(repr, BUILTIN_STOP_WORDS))} or 'none'.",
            path=str(path),
        ) from exc
    except IsADirectoryError as exc:
        raise InputError(f"stop-word file {str(path)!r} is a directory; pass a file with one word per line.",
                         path=str(path)) from exc
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
    """Resolve one stop list to ``(name, words)``.

    ``spec`` is ``none``, a built-in list (``english``, ``german``), a file path, or several of the
    latter two joined by ``+`` (``english+german``, ``german+extra.txt``: the union of their words).
    The name records where the words came from: the built-in names as given and ``file`` for a
    file, joined by ``+`` (``english+german``, ``german+file``). A path that exists is a file even if
    it contains ``+``.

    Raises
    ------
    InvalidParameterError
        An empty part, or ``none`` joined with another list.
    InputError
        A file part that is missing or not UTF-8.

    Examples
    --------
    >>> name, words = parse_stop_words("english+german")
    >>> name, {"the", "und"} <= set(words)
    ('english+german', True)
    """
    if spec == "none":
        return "none", ()
    if not spec:
        raise InvalidParameterError(f"stop-word list is empty; use {STOP_WORDS_SPEC}.")
    parts = [spec] if spec in BUILTIN_STOP_WORDS or Path(spec).exists() else spec.split("+")
    names: list[str] = []
    words: set[str] = set()
    for part in parts:
        if part in ("", "none"):
            raise InvalidParameterError(
                f"stop-word list {spec!r} has {'an empty part' if not part else 'none joined with another list'}; "
                f"use {STOP_WORDS_SPEC}.")
        if part in BUILTIN_STOP_WORDS:
            names.append(part)
            words.update(load_builtin_stop_words(part))
        else:
            names.append("file")
            words.update(load_stop_word_file(part))
    return "+".join(names), tuple(sorted(words))


def parse_language_stop_words(spec: str) -> tuple[tuple[str, str, tuple[str, ...]], ...] | None:
    """Per-language stop lists of a ``LANG=LIST,LANG=LIST`` spec, sorted by language; None for one list.

    Each ``LIST`` is what :func:`parse_stop_words` takes (``en=english,de=german+extra.txt``). A
    spec that names an existing file, or has no ``=``, is one list for every language (None).

    Raises
    ------
    InvalidParameterError
        A part without ``LANG=``, an empty language or a language named twice; the message names it.
    """
    if "=" not in spec or Path(spec).exists():
        return None
    lists: dict[str, tuple[str, tuple[str, ...]]] = {}
    for part in spec.split(","):
        language, sep, stop_list = part.partition("=")
        language = language.strip()
        if not sep or not language or not stop_list:
            raise InvalidParameterError(
                f"stop words {spec!r}: part {part!r} is not LANG=LIST; give every language as LANG=LIST "
                "(en=english,de=german), or one list for all languages.")
        if language in lists:
            raise InvalidParameterError(f"stop words {spec!r} name language {language!r} twice; name it once.")
        lists[language] = parse_stop_words(stop_list)
    return tuple((lang, *lists[lang]) for lang in sorted(lists))


def _check_stop_words_name(name: str, where: str) -> None:
    if name != "none" and not all(p in BUILTIN_STOP_WORDS or p == "file" for p in name.split("+")):
        raise InvalidParameterError(
            f"{where} must be 'none' or '+'-joined names of {', '.join(map(repr, [*BUILTIN_STOP_WORDS, 'file']))}, "
            f"got {name!r}.")


#: One language's own stop list in :attr:`TokenizerConfig.language_stop_words`: ``(language, name, words)``.
LanguageStopWords = tuple[str, str, tuple[str, ...]]


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
        Where ``stop_words`` came from: ``"none"``, or built-in names (``"english"``, ``"german"``)
        and ``"file"`` joined by ``+`` (``"english+german"``).
    stop_words : tuple of str
        Sorted words to drop; compared after lowercasing when ``lowercase`` is set, exactly otherwise.
        They apply to every language that ``language_stop_words`` does not name.
    language_stop_words : tuple of (str, str, tuple of str)
        Per-language lists, ``(language, name, words)`` sorted by language (a mapping
        ``{language: (name, words)}`` is accepted too): text of that language drops these words
        instead of ``stop_words``. Empty (the default): one list for every language.

    Examples
    --------
    >>> config = TokenizerConfig(stop_words_name="none", stop_words=())
    >>> tokenize("The cat, the HAT.", config)
    ['the', 'cat', 'the', 'hat']
    >>> per_language = TokenizerConfig.from_options(stop_words="en=english,de=german")
    >>> tokenize("the cat und der Hund", per_language.for_language("de"))
    ['the', 'cat', 'hund']
    """

    lowercase: bool = True
    token_pattern: str = DEFAULT_TOKEN_PATTERN
    min_length: int = 2
    stop_words_name: str = "english"
    stop_words: tuple[str, ...] = field(default_factory=lambda: load_builtin_stop_words("english"))
    language_stop_words: tuple[LanguageStopWords, ...] = ()

    def __post_init__(self) -> None:
        try:
            re.compile(self.token_pattern)
        except re.error as exc:
            raise InvalidParameterError(
                f"token pattern {self.token_pattern!r} is not a valid regular expression ({exc}).",
            ) from exc
        if self.min_length < 1:
            raise InvalidParameterError(f"min_length must be at least 1, got {self.min_length!r}.")
        _check_stop_words_name(self.stop_words_name, "stop_words_name")
        object.__setattr__(self, "stop_words", tuple(sorted(set(self.stop_words))))
        per_language = self.language_stop_words
        items = per_language.items() if isinstance(per_language, Mapping) else (
            (lang, (name, words)) for lang, name, words in per_language)
        clean: dict[str, LanguageStopWords] = {}
        for lang, (name, words) in items:
            _check_stop_words_name(name, f"the stop-word list name of language {lang!r}")
            if lang in clean:
                raise InvalidParameterError(f"language_stop_words names language {lang!r} twice; name it once.")
            clean[lang] = (str(lang), str(name), tuple(sorted(set(words))))
        object.__setattr__(self, "language_stop_words", tuple(clean[lang] for lang in sorted(clean)))

    @classmethod
    def from_options(
        cls, *, lowercase: bool = True, token_pattern: str = DEFAULT_TOKEN_PATTERN,
        min_length: int = 2, stop_words: str = "english",
    ) -> TokenizerConfig:
        """Build from CLI-style options; ``stop_words`` as :meth:`stop_word_fields` takes it."""
        return cls(lowercase=lowercase, token_pattern=token_pattern, min_length=min_length,
                   **cls.stop_word_fields(stop_words))

    @staticmethod
    def stop_word_fields(spec: str) -> dict[str, Any]:
        """The stop-word fields (``stop_words_name``, ``stop_words``, ``language_stop_words``) of a spec.

        ``spec`` is one list for every language (:func:`parse_stop_words`: ``english``, ``german``,
        ``none``, a file, ``english+german``) or per-language lists ``LANG=LIST,...``
        (:func:`parse_language_stop_words`), where the languages not named get none.
        """
        per_language = parse_language_stop_words(spec)
        if per_language is None:
            name, words = parse_stop_words(spec)
            return {"stop_words_name": name, "stop_words": words, "language_stop_words": ()}
        return {"stop_words_name": "none", "stop_words": (), "language_stop_words": per_language}

    def for_language(self, language: str) -> TokenizerConfig:
        """The settings that tokenize text of ``language``: its own stop list if it has one.

        Without per-language lists this is ``self``, so tokenization is the same as before they existed.
        """
        if not self.language_stop_words:
            return self
        return _language_config(self, language)

    def check_languages(self, languages: Sequence[str]) -> None:
        """Raise unless every language with its own stop list is one of ``languages`` (the store's).

        Raises
        ------
        InvalidParameterError
            Naming the first unknown language and the store's languages.
        """
        unknown = [lang for lang, _, _ in self.language_stop_words if lang not in languages]
        if unknown:
            raise InvalidParameterError(
                f"--stop-words gives a list for language {unknown[0]!r}, which is not a language of the store "
                f"(its languages: {', '.join(languages)}; set by --lang-field, or 'default' for --text-field); "
                "name only the store's languages in LANG=LIST.")

    def to_dict(self) -> dict[str, Any]:
        payload: dict[str, Any] = {
            "lowercase": self.lowercase,
            "token_pattern": self.token_pattern,
            "min_length": self.min_length,
            "stop_words_name": self.stop_words_name,
            "stop_words": list(self.stop_words),
        }
        # Written only when set, so a store without per-language lists has the manifest it always had.
        if self.language_stop_words:
            payload["language_stop_words"] = {
                lang: {"name": name, "stop_words": list(words)} for lang, name, words in self.language_stop_words}
        return payload

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> TokenizerConfig:
        per_language = payload.get("language_stop_words") or {}
        return cls(
            lowercase=bool(payload["lowercase"]),
            token_pattern=str(payload["token_pattern"]),
            min_length=int(payload["min_length"]),
            stop_words_name=str(payload["stop_words_name"]),
            stop_words=tuple(str(w) for w in payload["stop_words"]),
            language_stop_words=tuple(
                (str(lang), str(entry["name"]), tuple(str(w) for w in entry["stop_words"]))
                for lang, entry in per_language.items()),
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
        if self.language_stop_words != other.language_stop_words:
            out.append(f"language_stop_words: {_describe_lists(self)} != {_describe_lists(other)}")
        return out


def _describe_lists(config: TokenizerConfig) -> str:
    """``en=english (302 words), de=german (231 words)``, or ``none`` without per-language lists."""
    return ", ".join(f"{lang}={name} ({len(words)} words)" for lang, name, words in config.language_stop_words) or "none"


@functools.lru_cache(maxsize=64)
def _language_config(config: TokenizerConfig, language: str) -> TokenizerConfig:
    """:meth:`TokenizerConfig.for_language` (cached: the kernels ask once per partition and language)."""
    for lang, name, words in config.language_stop_words:
        if lang == language:
            return replace(config, stop_words_name=name, stop_words=words, language_stop_words=())
    return replace(config, language_stop_words=())


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
class TokenBatch:
    """The tokens of a batch of texts, dictionary-encoded (what :func:`tokenize_batch` returns).

    Attributes
    ----------
    terms : ndarray of shape (n_distinct,), object (str)
        Distinct tokens of the batch, in order of first appearance.
    token_ids : ndarray of shape (n_tokens,), int32
        Every token of every text in text order, as its position in ``terms``.
    indptr : ndarray of shape (n_texts + 1,), int64
        Text ``i`` has the tokens ``token_ids[indptr[i]:indptr[i + 1]]``.

    Examples
    --------
    >>> batch = tokenize_batch(["a dog, a Dog", "cat dog"], TokenizerConfig())
    >>> batch.terms.tolist(), batch.token_ids.tolist(), batch.indptr.tolist()
    (['dog', 'cat'], [0, 0, 1, 0], [0, 2, 4])
    >>> batch.tokens(1)
    ['cat', 'dog']
    """

    terms: np.ndarray
    token_ids: np.ndarray
    indptr: np.ndarray

    @property
    def n_texts(self) -> int:
        return len(self.indptr) - 1

    def tokens(self, i: int) -> list[str]:
        """The tokens of text ``i``, as :func:`tokenize` gives them."""
        return self.terms[self.token_ids[self.indptr[i]:self.indptr[i + 1]]].tolist()

    def bags(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-text term counts: ``(indptr int64, term positions int32, counts int32)``, sorted per text.

        Notes
        -----
        NumPy equivalent: for each text, ``np.unique(token_ids[indptr[i]:indptr[i + 1]], return_counts=True)``.
        """
        n_terms = max(len(self.terms), 1)
        # int32 keys sort faster; a partition's (text, term) pairs nearly always fit.
        key_type = np.dtype(np.int32 if (self.n_texts + 1) * n_terms < 2**31 else np.int64)
        doc: np.ndarray = np.repeat(np.arange(self.n_texts, dtype=key_type), np.diff(self.indptr))
        keys, counts = np.unique(doc * n_terms + self.token_ids.astype(key_type), return_counts=True)
        indptr = np.searchsorted(keys, np.arange(self.n_texts + 1, dtype=np.int64) * n_terms).astype(np.int64)
        return indptr, (keys % n_terms).astype(np.int32), counts.astype(np.int32)


def tokenize_batch(texts: Sequence[str], config: TokenizerConfig) -> TokenBatch:
    """Tokenize many texts at once; text ``i`` gets exactly the tokens ``tokenize(texts[i], config)``.

    Vectorized for the patterns of :data:`RUN_PATTERNS`; the Python tokenizer otherwise, or when a
    text cannot be encoded as UTF-8 (a lone surrogate).

    Parameters
    ----------
    texts : sequence of str
    config : TokenizerConfig

    Returns
    -------
    TokenBatch
        Terms in order of first appearance over the batch; the same whichever path ran.
    """
    min_run = RUN_PATTERNS.get(config.token_pattern)
    if min_run is not None:
        lowered = [t.lower() for t in texts] if config.lowercase else list(texts)
        try:
            encoded = [t.encode("utf-8") for t in lowered]
        except UnicodeEncodeError:
            pass
        else:
            return _tokenize_utf8(encoded, max(min_run, config.min_length), _stop_word_array(config.stop_words))
    return _tokenize_python(texts, config)


def tokenize_arrow(texts: pa.Array, config: TokenizerConfig) -> TokenBatch:
    """:func:`tokenize_batch` for an Arrow string array (a null is an empty text), without Python strings.

    Text ``i`` gets exactly the tokens ``tokenize(texts[i].as_py() or "", config)``. For the patterns
    of :data:`RUN_PATTERNS` the texts' UTF-8 bytes are tokenized where they are: lowercasing is
    Arrow's ``ascii_lower`` for the texts that are pure ASCII (where it is ``str.lower``) and
    Python's ``str.lower`` for the others; any other pattern goes through :func:`tokenize_batch`.

    Parameters
    ----------
    texts : pyarrow.Array of str
    config : TokenizerConfig

    Returns
    -------
    TokenBatch
        The same as ``tokenize_batch`` on the texts as Python strings.
    """
    min_run = RUN_PATTERNS.get(config.token_pattern)
    if min_run is None or not pa.types.is_string(texts.type):
        return tokenize_batch(["" if t is None else t for t in texts.to_pylist()], config)
    texts = texts.fill_null("") if texts.null_count else texts
    if config.lowercase and len(texts):
        is_ascii = pc.string_is_ascii(texts)
        lowered = pc.ascii_lower(texts)
        if not pc.all(is_ascii).as_py():
            others = pc.invert(is_ascii)
            python_lowered = [t.lower() for t in texts.filter(others).to_pylist()]
            lowered = pc.replace_with_mask(lowered, others, pa.array(python_lowered, pa.string()))
        texts = lowered
    offsets = np.frombuffer(texts.buffers()[1], np.int32, len(texts) + 1, texts.offset * 4).astype(np.int64)
    data = texts.buffers()[2]
    joined = pa.py_buffer(b"") if data is None else data.slice(int(offsets[0]), int(offsets[-1] - offsets[0]))
    return _tokenize_joined(joined, offsets - offsets[0], max(min_run, config.min_length),
                            _stop_word_array(config.stop_words))


def _tokenize_python(texts: Sequence[str], config: TokenizerConfig) -> TokenBatch:
    run = make_tokenizer(config)
    index: dict[str, int] = {}
    ids: list[int] = []
    indptr = [0]
    for text in texts:
        ids.extend([index.setdefault(t, len(index)) for t in run(text)])
        indptr.append(len(ids))
    return TokenBatch(np.array(list(index) or [], dtype=object), np.asarray(ids, np.int32),
                      np.asarray(indptr, np.int64))


@functools.lru_cache(maxsize=8)
def _stop_word_array(words: tuple[str, ...]) -> pa.Array | None:
    return pa.array(words, pa.string()) if words else None


#: Word characters among the ASCII bytes (Python's ``\w`` on ASCII: letters, digits, underscore).
_ASCII_WORD = np.zeros(256, np.bool_)
_ASCII_WORD[[ord(c) for c in map(chr, range(128)) if re.fullmatch(r"\w", c)]] = True
_WORD_CHAR = re.compile(r"\w")
#: Non-ASCII code points seen so far and whether Python's ``re`` takes them for ``\w``.
_NON_ASCII_WORD: dict[int, bool] = {}


def _is_word(code_points: np.ndarray) -> np.ndarray:
    """Whether each code point is a ``\\w`` character for Python's ``re`` (asked once per code point)."""
    distinct, inverse = np.unique(code_points, return_inverse=True)
    known = _NON_ASCII_WORD
    for cp in distinct.tolist():
        if cp not in known:
            known[cp] = _WORD_CHAR.fullmatch(chr(cp)) is not None
    return np.array([known[cp] for cp in distinct.tolist()], np.bool_)[inverse]


def _word_bytes(data: np.ndarray) -> np.ndarray:
    """Per byte of valid UTF-8: whether it belongs to a word character (all bytes of a character agree)."""
    word = _ASCII_WORD[data]
    lead = np.flatnonzero(data >= 0xC0)
    if not len(lead):
        return word
    last = len(data) - 1
    b0 = data[lead].astype(np.int64)
    b1, b2, b3 = (data[np.minimum(lead + k, last)].astype(np.int64) & 0x3F for k in (1, 2, 3))
    width = 2 + (b0 >= 0xE0) + (b0 >= 0xF0)
    code_points = np.where(width == 2, ((b0 & 0x1F) << 6) | b1,
                           np.where(width == 3, ((b0 & 0x0F) << 12) | (b1 << 6) | b2,
                                    ((b0 & 0x07) << 18) | (b1 << 12) | (b2 << 6) | b3))
    is_word = _is_word(code_points)
    for k in range(4):
        at = width > k
        word[lead[at] + k] = is_word[at]
    return word


def _tokenize_utf8(encoded: list[bytes], min_chars: int, stop_words: pa.Array | None) -> TokenBatch:
    """Maximal runs of word characters of at least ``min_chars`` characters, minus stop words.

    Notes
    -----
    Equivalent to ``[t for t in re.findall(r"\\w+", text) if len(t) >= min_chars and t not in stop]``
    per text. The texts are joined and cut into segments, the maximal runs of bytes of equal
    word-ness that do not cross a text boundary; the segments are one Arrow string array over the
    joined bytes (no copy), dictionary-encoded at once, and whether a segment is a token (a word run,
    long enough, not a stop word) is decided once per distinct segment.
    """
    text_starts = np.zeros(len(encoded) + 1, np.int64)
    np.cumsum([len(e) for e in encoded], out=text_starts[1:])
    return _tokenize_joined(pa.py_buffer(b"".join(encoded)), text_starts, min_chars, stop_words)


def _tokenize_joined(joined: pa.Buffer, text_starts: np.ndarray, min_chars: int,
                     stop_words: pa.Array | None) -> TokenBatch:
    """:func:`_tokenize_utf8` on the texts' bytes joined, text ``i`` at ``[text_starts[i], text_starts[i + 1])``."""
    data = np.frombuffer(joined, np.uint8)
    word = _word_bytes(data)
    change = np.empty(len(data) + 1, np.bool_)
    change[0] = change[-1] = True
    np.not_equal(word[1:], word[:-1], out=change[1:-1])
    change[text_starts[:-1]] = True
    large = len(data) >= 2**31 - 1
    bounds = np.flatnonzero(change).astype(np.int64 if large else np.int32)
    segments = pa.Array.from_buffers(pa.large_string() if large else pa.string(), len(bounds) - 1,
                                     [None, pa.py_buffer(bounds), joined])
    encoded_segments = pc.dictionary_encode(segments)
    distinct = encoded_segments.dictionary
    is_token = _is_word_run(distinct) & (pc.utf8_length(distinct).to_numpy(zero_copy_only=False) >= min_chars)
    if stop_words is not None:
        is_token &= ~pc.is_in(distinct, value_set=stop_words).to_numpy(zero_copy_only=False)
    segment_ids = encoded_segments.indices.to_numpy(zero_copy_only=False)
    token_segments = np.flatnonzero(is_token[segment_ids])
    renumber = (np.cumsum(is_token, dtype=np.int64) - 1).astype(np.int32)
    token_ids = renumber[segment_ids[token_segments]]
    # Segment index of each text start (every text start is a segment bound), then tokens before it.
    indptr = np.searchsorted(token_segments, np.searchsorted(bounds, text_starts)).astype(np.int64)
    terms = distinct.filter(pa.array(is_token))
    return TokenBatch(np.asarray(terms.to_numpy(zero_copy_only=False), dtype=object), token_ids, indptr)


def _is_word_run(distinct: pa.Array) -> np.ndarray:
    """Whether each (non-empty) segment is a run of word characters, judged by its first character."""
    offsets = np.frombuffer(distinct.buffers()[1], np.int64 if pa.types.is_large_string(distinct.type) else np.int32,
                            len(distinct) + 1, distinct.offset * (8 if pa.types.is_large_string(distinct.type) else 4))
    data = distinct.buffers()[2]
    chars = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    if not len(distinct):
        return np.zeros(0, np.bool_)
    return _word_bytes(chars)[offsets[:-1]]


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

    @staticmethod
    def merge_all(parts: Sequence[LanguageCounts]) -> LanguageCounts:
        """The merge of all ``parts`` at once: equal to ``parts[0].merge(parts[1]).merge(...)``.

        Vectorized (one Arrow hash group-by over the concatenated terms, integer sums), where chained
        :meth:`merge` calls add term by term in Python; the Counters' insertion order may differ.
        """
        if len(parts) == 1:
            return parts[0]
        return LanguageCounts(_sum_counters([p.doc_freq for p in parts]), _sum_counters([p.corpus_freq for p in parts]),
                              sum(p.n_docs for p in parts))

    def without(self, other: LanguageCounts) -> LanguageCounts:
        """These counts minus ``other`` (documents removed after counting, e.g. duplicates)."""
        doc_freq, corpus_freq = Counter(self.doc_freq), Counter(self.corpus_freq)
        doc_freq.subtract(other.doc_freq)
        corpus_freq.subtract(other.corpus_freq)
        return LanguageCounts(+doc_freq, +corpus_freq, self.n_docs - other.n_docs)


def _sum_counters(counters: Sequence[Counter[str]]) -> Counter[str]:
    """Per-key sums of ``counters`` (every key of any of them kept, as ``Counter.update`` keeps it)."""
    sizes = [len(c) for c in counters]
    if sum(size > 0 for size in sizes) <= 1:
        return Counter(next((c for c in counters if c), Counter()))
    try:
        keys = pa.array([key for c in counters for key in c], pa.string())
    except (pa.ArrowException, UnicodeError):  # a term with a lone surrogate (the Python tokenizer's)
        total: Counter[str] = Counter()
        for counter in counters:
            total.update(counter)
        return total
    values = np.fromiter((v for c in counters for v in c.values()), np.int64, sum(sizes))
    summed = pa.table({"key": keys, "value": values}).group_by("key", use_threads=False).aggregate([("value", "sum")])
    return Counter(dict(zip(summed.column("key").to_pylist(), summed.column("value_sum").to_pylist())))


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

    @staticmethod
    def merge_all(parts: Sequence[TermCounts]) -> TermCounts:
        """The merge of all ``parts`` at once (see :meth:`LanguageCounts.merge_all`)."""
        languages = dict.fromkeys(lang for part in parts for lang in part.languages)
        return TermCounts({lang: LanguageCounts.merge_all([p.languages[lang] for p in parts if lang in p.languages])
                           for lang in languages})

    def without(self, other: TermCounts) -> TermCounts:
        return TermCounts({
            lang: counts.without(other.languages[lang]) if lang in other.languages else counts
            for lang, counts in self.languages.items()
        })

    def get(self, language: str) -> LanguageCounts:
        return self.languages.get(language, LanguageCounts())


@dataclass(frozen=True, slots=True)
class TermTable:
    """Per-language term statistics as Arrow columns: the columnar form of :class:`TermCounts`.

    What the ingest graph tree-merges: :meth:`merge_all` sums by term with one hash group-by in
    Arrow (no Python object per term, and no GIL held); :meth:`to_counts` gives the
    :class:`TermCounts` once, at the root.

    Attributes
    ----------
    languages : dict of str to pyarrow.Table
        Per language, the columns ``term`` (string, distinct), ``doc_freq`` and ``corpus_freq`` (int64).
    n_docs : dict of str to int
        Per language, documents that have text in it.
    """

    languages: dict[str, pa.Table]
    n_docs: dict[str, int]

    @classmethod
    def of(cls, terms: np.ndarray, doc_freq: np.ndarray, corpus_freq: np.ndarray, n_docs: int,
           language: str) -> TermTable | None:
        """One language's distinct ``terms`` (object array of str) and their frequencies; None if a term
        is not valid Unicode text (a lone surrogate, from the Python tokenizer)."""
        try:
            column = pa.array(terms, pa.string())
        except (pa.ArrowException, UnicodeError):
            return None
        table = pa.table({"term": column, "doc_freq": np.asarray(doc_freq, np.int64),
                          "corpus_freq": np.asarray(corpus_freq, np.int64)})
        return cls({language: table}, {language: int(n_docs)})

    @staticmethod
    def merge_all(parts: Sequence[TermTable]) -> TermTable:
        """Term-wise sums of ``parts`` (their :meth:`to_counts` merged, as :meth:`TermCounts.merge`)."""
        if len(parts) == 1:
            return parts[0]
        languages = dict.fromkeys(lang for part in parts for lang in part.languages)
        tables, n_docs = {}, {}
        for lang in languages:
            found = [p.languages[lang] for p in parts if lang in p.languages]
            n_docs[lang] = sum(p.n_docs[lang] for p in parts if lang in p.n_docs)
            if len(found) == 1:
                tables[lang] = found[0]
                continue
            summed = pa.concat_tables(found).group_by("term", use_threads=False).aggregate(
                [("doc_freq", "sum"), ("corpus_freq", "sum")])
            tables[lang] = pa.table({"term": summed.column("term"), "doc_freq": summed.column("doc_freq_sum"),
                                     "corpus_freq": summed.column("corpus_freq_sum")})
        return TermTable(tables, n_docs)

    def to_counts(self) -> TermCounts:
        """The same statistics as :class:`TermCounts` (Counters of Python ints)."""
        out = {}
        for lang, table in self.languages.items():
            terms = table.column("term").to_pylist()
            out[lang] = LanguageCounts(Counter(dict(zip(terms, table.column("doc_freq").to_pylist()))),
                                       Counter(dict(zip(terms, table.column("corpus_freq").to_pylist()))),
                                       self.n_docs[lang])
        return TermCounts(out)


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
