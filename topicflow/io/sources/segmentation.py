"""Character-sequence corpora for unsupervised word segmentation, with their gold segmentation.

This module owns turning ordinary text into the data of the word-segmentation experiment of Zhai
(2014, section 8.4.1): text is lowercased, split into sentences at punctuation (hard boundaries, as
the chapter does for Chinese), reduced to letters, and its spaces removed, while the original word
boundaries are kept as the gold segmentation. It also reads plain files of already unsegmented
sentences (one per line) for ``grammar segment``, and splits a corpus 70/30 into train and test by a
seed. Records come from the existing readers (:func:`topicflow.io.sources.source_for_path`: JSONL,
parquet, directories of text files), or from a plain text file read line by line here. Nothing here
does math or touches Dask.

Glossary:
    phrase: a stretch of text between two hard boundaries (punctuation or a line end)
    sentence: a phrase with its spaces removed, letters only, lowercased (``"inthebeginning"``)
    gold: the words of the phrase (``("in", "the", "beginning")``)
    origin: where a sentence comes from (``"line 3 of 'kjv.jsonl'"`` or a record's id)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

from topicflow.errors import EmptyInputError, InputError, InvalidParameterError
from topicflow.io._atomic import atomic_write_bytes
from topicflow.io.sources import source_for_path
from topicflow.io.sources.base import FieldSpec, RecordError, describe_location
from topicflow.io.storage import as_location, open_input
from topicflow.models.common.rng import STREAM_SPLIT, counter_key, uniform_from_key

#: Characters that end a phrase: sentence and clause punctuation, brackets, quotes and dashes
#: between words. Apostrophes and hyphens inside a word are not boundaries (``lord's`` -> ``lords``).
HARD_BOUNDARY = re.compile(r"""[.,;:!?()\[\]{}"“”‘’«»…—–/\\|]+|(?<!\w)['-]+|['-]+(?!\w)|\n""")

#: Suffixes read as plain text (one document or sentence per line) rather than through the sources.
PLAIN_TEXT_SUFFIXES = (".txt", ".text", ".yld")


@dataclass(frozen=True, slots=True)
class SegmentationCorpus:
    """Unsegmented sentences with their gold words.

    Attributes
    ----------
    sentences : tuple of str
        Letters only, no spaces; ``sentences[d] == "".join(gold[d])``.
    gold : tuple of (tuple of str)
        The original words of each sentence.
    origins : tuple of str
        Where each sentence came from (record id or file line, and its phrase number).
    """

    sentences: tuple[str, ...]
    gold: tuple[tuple[str, ...], ...]
    origins: tuple[str, ...]

    def __len__(self) -> int:
        return len(self.sentences)

    @property
    def alphabet(self) -> tuple[str, ...]:
        """The distinct characters of the corpus, sorted."""
        return tuple(sorted(set("".join(self.sentences))))

    @property
    def n_chars(self) -> int:
        """Total characters over all sentences."""
        return sum(len(s) for s in self.sentences)

    def subset(self, indices: Iterable[int]) -> SegmentationCorpus:
        """The sentences at ``indices``, in that order."""
        chosen = list(indices)
        return SegmentationCorpus(tuple(self.sentences[i] for i in chosen), tuple(self.gold[i] for i in chosen),
                                  tuple(self.origins[i] for i in chosen))

    def split(self, *, test_fraction: float = 0.3, seed: int = 0) -> tuple[SegmentationCorpus, SegmentationCorpus]:
        """Train and test corpora (Zhai 2014: train on 70%, score held-out likelihood on 30%).

        Each sentence gets a counter-based uniform number from ``(seed, its index)`` (``STREAM_SPLIT``,
        epoch 2, apart from the epochs :mod:`topicflow.metrics.heldout` uses); the
        ``round(test_fraction * n)`` sentences with the smallest numbers form the test set. Both parts
        keep corpus order. The split depends only on the seed and the sentence order.

        Parameters
        ----------
        test_fraction : float in (0, 1)
        seed : int

        Returns
        -------
        train, test : SegmentationCorpus

        Raises
        ------
        InvalidParameterError
            ``test_fraction`` is outside (0, 1).
        """
        if not 0.0 < test_fraction < 1.0:
            raise InvalidParameterError(f"test_fraction must lie in (0, 1), got {test_fraction!r}.")
        n = len(self)
        keys = np.array([uniform_from_key(np.uint64(counter_key(seed, STREAM_SPLIT, 2, d)), 0) for d in range(n)])
        is_test = np.zeros(n, dtype=bool)
        is_test[np.argsort(keys, kind="stable")[: int(round(test_fraction * n))]] = True
        return self.subset(np.flatnonzero(~is_test).tolist()), self.subset(np.flatnonzero(is_test).tolist())


def phrase_words(phrase: str) -> tuple[str, ...]:
    """The words of one phrase: lowercased, whitespace-separated, letters only (empty words dropped).

    Examples
    --------
    >>> phrase_words("And God saw the LORD's light ")
    ('and', 'god', 'saw', 'the', 'lords', 'light')
    """
    words = ("".join(ch for ch in token if ch.isalpha()) for token in phrase.lower().split())
    return tuple(word for word in words if word)


def text_phrases(text: str) -> list[tuple[str, ...]]:
    """Split ``text`` at hard boundaries into phrases, each as its gold words (empty phrases dropped).

    Examples
    --------
    >>> text_phrases("Let there be light: and there was light.")
    [('let', 'there', 'be', 'light'), ('and', 'there', 'was', 'light')]
    """
    return [words for words in (phrase_words(p) for p in HARD_BOUNDARY.split(text)) if words]


def _plain_lines(path: str) -> Iterator[tuple[int, str]]:
    """``(line number, text)`` of every line of a UTF-8 text file; errors name the line."""
    with open_input(path) as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                yield number, raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise InputError(
                    f"{describe_location(path, number, 'line')}: invalid UTF-8 ({exc.reason} at byte {exc.start}); "
                    "re-encode the file as UTF-8.", path=path, line=number) from exc


def _record_texts(path: str, text_field: str) -> Iterator[tuple[str, str]]:
    """``(origin, text)`` of every record of a JSONL/parquet file or text directory, via the sources."""
    fields = FieldSpec(id_field=None, text_field=text_field)
    source = source_for_path(path, fields)
    for partition in source.partitions(1 << 16, 0):
        for item in source.read(partition, fields):
            if isinstance(item, RecordError):
                raise item.error
            yield item.location, item.texts[fields.languages[0]] or ""


def _is_plain(path: str) -> bool:
    location = as_location(path)
    return not location.is_dir() and location.name.lower().endswith(PLAIN_TEXT_SUFFIXES)


def _check_exists(path: str) -> None:
    if not as_location(path).exists():
        raise InputError(f"input {path!r} does not exist; give a text, JSONL or parquet file.", path=path)


def read_segmentation_corpus(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]], *,
                             text_field: str = "text", max_chars: int | None = None,
                             min_chars: int = 1) -> SegmentationCorpus:
    """Build a segmentation corpus from segmented text: phrases become unsegmented sentences.

    Parameters
    ----------
    paths : path or iterable of paths
        Plain text files (``.txt``, ``.text``, ``.yld``: every line is text, blank lines skipped),
        JSONL or parquet files (the ``text_field`` of every record) or directories of text files.
        Each line break and each punctuation mark is a hard boundary.
    text_field : str
        Field holding the text of JSONL and parquet records.
    max_chars : int, optional
        Drop sentences longer than this (the inside algorithm is cubic in the length).
    min_chars : int
        Drop sentences shorter than this.

    Returns
    -------
    SegmentationCorpus
        In input order; ``origins`` name the record and the phrase (``"line 3 of 'a.jsonl' #2"``).

    Raises
    ------
    InputError
        A path does not exist, a line is not UTF-8 or a record is malformed (the message names the
        file and line).
    EmptyInputError
        No sentence is left.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if min_chars < 1 or (max_chars is not None and max_chars < min_chars):
        raise InvalidParameterError(f"need 1 <= min_chars <= max_chars, got {min_chars!r} and {max_chars!r}.")
    sentences: list[str] = []
    gold: list[tuple[str, ...]] = []
    origins: list[str] = []
    names = [os.fspath(p) for p in paths]
    for path in names:
        _check_exists(path)
        texts: Iterable[tuple[str, str]] = (
            ((describe_location(path, n, "line"), line) for n, line in _plain_lines(path)) if _is_plain(path)
            else _record_texts(path, text_field))
        for origin, text in texts:
            for number, words in enumerate(text_phrases(text), start=1):
                sentence = "".join(words)
                if len(sentence) < min_chars or (max_chars is not None and len(sentence) > max_chars):
                    continue
                sentences.append(sentence)
                gold.append(words)
                origins.append(f"{origin} #{number}")
    if not sentences:
        raise EmptyInputError(f"no sentence with letters in {names!r} (after the length limits); check the input.",
                              path=names[0] if names else None)
    return SegmentationCorpus(tuple(sentences), tuple(gold), tuple(origins))


def read_segmented_lines(path: str | os.PathLike[str], *, max_chars: int | None = None) -> SegmentationCorpus:
    """Read a gold-segmented corpus as published: one utterance per line, its words separated by spaces.

    Every character is a terminal as written (no lowercasing, no punctuation splitting), so phonemic
    transcriptions such as the Brent corpus of [Z] section 8.4.1 (``yu want tu si D6 bUk``, the
    ``truth.dat`` of PyAdaGram's ``brent-phone``; Johnson and Goldwater's ``br-phono``) keep their
    symbols. Blank lines are skipped.

    Parameters
    ----------
    path : str or path-like
        A UTF-8 text file.
    max_chars : int, optional
        Drop utterances longer than this.

    Returns
    -------
    SegmentationCorpus
        ``origins`` name the line (``"line 3 of 'truth.dat'"``).

    Raises
    ------
    InputError
        The file is missing or a line is not UTF-8 (naming the line).
    EmptyInputError
        No utterance is left.
    """
    name = os.fspath(path)
    _check_exists(name)
    sentences: list[str] = []
    gold: list[tuple[str, ...]] = []
    origins: list[str] = []
    for number, line in _plain_lines(name):
        words = tuple(line.split())
        sentence = "".join(words)
        if not sentence or (max_chars is not None and len(sentence) > max_chars):
            continue
        sentences.append(sentence)
        gold.append(words)
        origins.append(describe_location(name, number, "line"))
    if not sentences:
        raise EmptyInputError(f"{name!r} holds no utterance; give one segmented utterance per line.", path=name)
    return SegmentationCorpus(tuple(sentences), tuple(gold), tuple(origins))


def read_unsegmented_lines(path: str | os.PathLike[str], *, lowercase: bool = True) -> list[str]:
    """Read unsegmented sentences, one per line (blank lines skipped), for ``grammar segment``.

    Parameters
    ----------
    path : str or path-like
        A UTF-8 text file.
    lowercase : bool
        Lowercase every line.

    Returns
    -------
    list of str
        The lines without their line ends or surrounding whitespace.

    Raises
    ------
    InputError
        The file is missing, a line is not UTF-8, or a line has whitespace inside (the message names
        the line; an unsegmented sentence has no spaces).
    EmptyInputError
        The file holds no sentence.
    """
    name = os.fspath(path)
    _check_exists(name)
    sentences = []
    for number, line in _plain_lines(name):
        text = line.strip()
        if not text:
            continue
        if any(ch.isspace() for ch in text):
            raise InputError(
                f"{describe_location(name, number, 'line')}: {text[:60]!r} has whitespace inside; give one "
                "unsegmented sentence per line (spaces removed), or build a corpus from segmented text with "
                "read_segmentation_corpus.", path=name, line=number)
        sentences.append(text.lower() if lowercase else text)
    if not sentences:
        raise EmptyInputError(f"{name!r} holds no sentence; give one unsegmented sentence per line.", path=name)
    return sentences


def write_unsegmented_lines(path: str | os.PathLike[str], sentences: Iterable[str]) -> None:
    """Write sentences one per line (what :func:`read_unsegmented_lines` reads), atomically.

    Parameters
    ----------
    path : str or path-like
    sentences : iterable of str
    """
    atomic_write_bytes(Path(os.fspath(path)), "".join(f"{s}\n" for s in sentences).encode("utf-8"))
