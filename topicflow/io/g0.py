"""G0 files: reading a word list, training G0 from it, saving and loading G0, and the shipped English G0.

A saved G0 (the base distribution over strings of infinite-vocabulary LDA,
:mod:`topicflow.models.infvoc_lda.g0`) is a directory (docs/infvoc.md, "Base distribution G0")::

    G0/g0.json      header: format name and version, settings, charset, training coverage, zeta,
                    and each array's dtype, shape and SHA-256
    G0/arrays.npz   counts (n_contexts, n_chars + 1) int64, length_counts (max_length + 1,) int64,
                    log_zeta (max_length + 1,) float64 (uncompressed .npy members, fixed timestamps, no pickle)

Both files are written into a temporary sibling directory that is moved into place
(:mod:`topicflow.io._atomic`). Reading checks the format, version, every array's dtype, shape and
checksum, and re-validates the model (:meth:`CharNgramG0.from_counts`); the conditional
probabilities are re-derived from the counts, never stored.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from topicflow.errors import (
    InputError,
    InvalidParameterError,
    StoreNotFoundError,
)
from topicflow.io._bundle import (
    ARRAYS_FILE,
    BundleKind,
    arrays_source,
    parse_header,
    read_arrays,
    read_header,
    write_bundle,
)
from topicflow.io.output_paths import prepare_output
from topicflow.io.storage import StoragePath, as_location, open_input
from topicflow.models.infvoc_lda.g0 import (
    DEFAULT_MAX_LENGTH,
    DEFAULT_MIN_LENGTH,
    DEFAULT_ORDER,
    DEFAULT_SMOOTHING,
    CharNgramG0,
    LengthFit,
    train_g0,
)

#: Name in ``g0.json`` of the format, and its version (readers refuse newer versions).
G0_FORMAT = "topicflow-g0"
G0_FORMAT_VERSION = 1
HEADER_FILE = "g0.json"
ARRAY_NAMES: tuple[str, ...] = ("counts", "length_counts", "log_zeta")
#: The bundle a G0 is saved as (:mod:`topicflow.io._bundle`).
G0_BUNDLE = BundleKind(
    format=G0_FORMAT, version=G0_FORMAT_VERSION, header_file=HEADER_FILE, noun="G0",
    make="train one with `topicflow g0 train WORDS.txt --out G0`",
    remake="Retrain it with `topicflow g0 train WORDS.txt --out G0 --overwrite`.", command="topicflow g0 train",
    array_names=ARRAY_NAMES,
)
#: The shipped English G0: ``topicflow/data/g0_en/`` (trained by ``topicflow g0 train`` on Debian's
#: wamerican word list; see ``topicflow/data/g0_en/SOURCE.md``).
DEFAULT_G0_RESOURCE = ("data", "g0_en")


@dataclass(frozen=True)
class WordListCoverage:
    """What reading and training on a word list kept and dropped.

    Attributes
    ----------
    source : str or None
        The word list file.
    lines : int
        Lines in the file.
    skipped_lines : int
        Blank and ``#`` comment lines.
    words_read : int
        Words handed to training.
    kept : int
        Words within the length bounds.
    too_short, too_long : int
        Words dropped by the bounds.
    """

    source: str | None = None
    lines: int = 0
    skipped_lines: int = 0
    words_read: int = 0
    kept: int = 0
    too_short: int = 0
    too_long: int = 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields."""
        return {"source": self.source, "lines": self.lines, "skipped_lines": self.skipped_lines,
                "words_read": self.words_read, "kept": self.kept, "too_short": self.too_short,
                "too_long": self.too_long}

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> WordListCoverage:
        """Read :meth:`to_dict` output (missing fields default).

        Parameters
        ----------
        payload : mapping
            As written by :meth:`to_dict`.

        Returns
        -------
        WordListCoverage
        """
        source = payload.get("source")
        return cls(source=None if source is None else str(source),
                   **{k: int(payload.get(k, 0)) for k in ("lines", "skipped_lines", "words_read", "kept",
                                                          "too_short", "too_long")})


@dataclass(frozen=True)
class G0Info:
    """What ``g0.json`` says about a saved G0.

    Attributes
    ----------
    path : str
        The G0 directory (or the packaged resource's name).
    settings : dict
        order, smoothing, min_length, max_length, lowercase, length_fit.
    charset : str
    coverage : WordListCoverage
    zeta : list of float
        The length multinomial, index = length.
    format_version : int
    """

    path: str
    settings: dict[str, Any]
    charset: str
    coverage: WordListCoverage = field(default_factory=WordListCoverage)
    zeta: list[float] = field(default_factory=list)
    format_version: int = G0_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``topicflow g0 info --format json`` prints)."""
        return {"path": self.path, "format_version": self.format_version, "settings": dict(self.settings),
                "charset": self.charset, "n_chars": len(self.charset), "coverage": self.coverage.to_dict(),
                "zeta": list(self.zeta)}


def read_word_list(path: str | os.PathLike[str] | StoragePath) -> tuple[list[str], WordListCoverage]:
    """Read a word list: one word per line; blank lines and lines starting with ``#`` are skipped.

    Surrounding whitespace is stripped; a line holding whitespace inside a word is refused (one word
    per line).

    Parameters
    ----------
    path : path

    Returns
    -------
    words : list of str
    coverage : WordListCoverage
        ``lines``, ``skipped_lines`` and ``words_read`` filled in.

    Raises
    ------
    InputError
        Missing file, bad UTF-8, a line with more than one word; the message names the file and line.
    """
    path = as_location(path)
    if not path.is_file():
        raise InputError(f"word list {str(path)!r} does not exist; pass a text file with one word per line.",
                         path=str(path))
    words: list[str] = []
    lines = skipped = 0
    with open_input(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            lines = number
            try:
                line = raw.decode("utf-8").strip()
            except UnicodeDecodeError as exc:
                raise InputError(f"word list {str(path)!r}, line {number}: not valid UTF-8 ({exc.reason}); "
                                 "re-encode the file as UTF-8.", path=str(path), line=number) from exc
            if not line or line.startswith("#"):
                skipped += 1
                continue
            if len(line.split()) > 1:
                raise InputError(f"word list {str(path)!r}, line {number}: {line!r} holds more than one word; put one "
                                 "word per line (or comment the line out with '#').", path=str(path), line=number)
            words.append(line)
    return words, WordListCoverage(source=str(path), lines=lines, skipped_lines=skipped, words_read=len(words))


def train_g0_from_file(path: str | os.PathLike[str], *, order: int = DEFAULT_ORDER,
                       smoothing: float = DEFAULT_SMOOTHING, min_length: int = DEFAULT_MIN_LENGTH,
                       max_length: int = DEFAULT_MAX_LENGTH, lowercase: bool = True,
                       length_fit: LengthFit = "empirical") -> tuple[CharNgramG0, WordListCoverage]:
    """:func:`read_word_list`, then :func:`~topicflow.models.infvoc_lda.g0.train_g0`.

    Parameters
    ----------
    path : path
        Word list.
    order : int, default 3
    smoothing : float, default 0.1
    min_length : int, default 3
    max_length : int, default 20
    lowercase : bool, default True
    length_fit : {"empirical", "least_squares"}, default "empirical"

    Returns
    -------
    g0 : CharNgramG0
    coverage : WordListCoverage

    Raises
    ------
    InputError
        A bad word list, or no word within the length bounds (the file is named).
    InvalidParameterError
        Bad settings.
    """
    words, coverage = read_word_list(path)
    if not words:
        raise InputError(f"word list {str(path)!r} holds no word (only blank or '#' lines).", path=str(path))
    try:
        g0 = train_g0(words, order=order, smoothing=smoothing, min_length=min_length, max_length=max_length,
                      lowercase=lowercase, length_fit=length_fit)
    except InvalidParameterError as exc:
        if "none of the" in str(exc):
            raise InputError(f"word list {str(path)!r}: {exc}", path=str(path)) from exc
        raise
    coverage = WordListCoverage(source=coverage.source, lines=coverage.lines, skipped_lines=coverage.skipped_lines,
                                words_read=coverage.words_read, kept=g0.n_words, too_short=g0.n_too_short,
                                too_long=g0.n_too_long)
    return g0, coverage


def _settings(g0: CharNgramG0) -> dict[str, Any]:
    return {"order": g0.order, "smoothing": g0.smoothing, "min_length": g0.min_length, "max_length": g0.max_length,
            "lowercase": g0.lowercase, "length_fit": g0.length_fit}


def write_g0(path: str | os.PathLike[str] | StoragePath, g0: CharNgramG0, *, coverage: WordListCoverage | None = None,
             overwrite: bool = False) -> G0Info:
    """Save ``g0`` as a G0 directory, atomically.

    Parameters
    ----------
    path : path
        Directory to create; an existing one is replaced only with ``overwrite``.
    g0 : CharNgramG0
    coverage : WordListCoverage, optional
        Where it was trained from (recorded in the header).
    overwrite : bool, default False

    Returns
    -------
    G0Info

    Raises
    ------
    StoreExistsError
        ``path`` exists and not ``overwrite``.
    """
    path = prepare_output(path, what="G0", option="g0 train --out", overwrite=overwrite, markers=(HEADER_FILE,))
    coverage = coverage or WordListCoverage(kept=g0.n_words, too_short=g0.n_too_short, too_long=g0.n_too_long)
    arrays = {"counts": g0.counts, "length_counts": g0.length_counts, "log_zeta": g0.log_zeta}
    info = G0Info(path=str(path), settings=_settings(g0), charset=g0.charset, coverage=coverage,
                  zeta=[float(z) for z in g0.zeta])
    header = {"settings": info.settings, "charset": g0.charset, "coverage": coverage.to_dict(), "zeta": info.zeta}
    write_bundle(path, G0_BUNDLE, header, arrays, overwrite=overwrite)
    return info


def _info_of(where: str, header: Mapping[str, Any]) -> G0Info:
    try:
        settings = dict(header["settings"])
        missing = [key for key in ("order", "smoothing", "min_length", "max_length", "lowercase", "length_fit")
                   if key not in settings]
        if missing:
            raise KeyError(missing[0])
        return G0Info(path=where, settings=settings, charset=str(header["charset"]),
                      coverage=WordListCoverage.from_dict(header.get("coverage") or {}),
                      zeta=[float(z) for z in header.get("zeta") or []],
                      format_version=int(header["format_version"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise G0_BUNDLE.damaged(where, f"{HEADER_FILE} lacks or garbles a field ({exc!r})") from exc


def _g0_of(where: str, header: Mapping[str, Any], npz: Path | bytes) -> tuple[CharNgramG0, G0Info]:
    info = _info_of(where, header)
    arrays = read_arrays(where, G0_BUNDLE, header, npz)
    s, cov = info.settings, info.coverage
    try:
        g0 = CharNgramG0.from_counts(charset=info.charset, order=s["order"], smoothing=s["smoothing"],
                                     min_length=s["min_length"], max_length=s["max_length"],
                                     lowercase=bool(s["lowercase"]), length_fit=s["length_fit"], **arrays,
                                     n_too_short=cov.too_short, n_too_long=cov.too_long)
    except InvalidParameterError as exc:
        raise G0_BUNDLE.damaged(where, str(exc)) from exc
    return g0, info


def read_g0_info(path: str | os.PathLike[str] | StoragePath) -> G0Info:
    """Read only a G0's header.

    Parameters
    ----------
    path : path
        A G0 directory.

    Returns
    -------
    G0Info

    Raises
    ------
    StoreNotFoundError
        Nothing at ``path``.
    CorpusFormatError
        Not a G0, or a damaged header.
    FormatVersionError
        Written by a newer topicflow.
    """
    path = as_location(path)
    return _info_of(str(path), read_header(path, G0_BUNDLE))


def read_g0(path: str | os.PathLike[str] | StoragePath) -> tuple[CharNgramG0, G0Info]:
    """Read and validate a saved G0.

    Parameters
    ----------
    path : path
        A G0 directory.

    Returns
    -------
    g0 : CharNgramG0
    info : G0Info

    Raises
    ------
    StoreNotFoundError
        Nothing at ``path``.
    CorpusFormatError
        Not a G0; a damaged header or arrays (checksum, dtype, shape, or invalid counts or zeta).
    FormatVersionError
        Written by a newer topicflow.
    """
    path = as_location(path)
    return _g0_of(str(path), read_header(path, G0_BUNDLE), arrays_source(path, G0_BUNDLE))


@functools.lru_cache(maxsize=1)
def _default_g0() -> tuple[CharNgramG0, G0Info]:
    folder = resources.files("topicflow").joinpath(*DEFAULT_G0_RESOURCE)
    where = "topicflow/" + "/".join(DEFAULT_G0_RESOURCE)
    try:
        header_bytes = folder.joinpath(HEADER_FILE).read_bytes()
        npz = folder.joinpath(ARRAYS_FILE).read_bytes()
    except (FileNotFoundError, OSError) as exc:
        raise StoreNotFoundError(f"the packaged G0 {where!r} is missing from this installation ({exc}); reinstall "
                                 "topicflow, or train one with `topicflow g0 train WORDS.txt --out G0`.",
                                 path=where) from exc
    return _g0_of(where, parse_header(where, G0_BUNDLE, header_bytes), npz)


def default_g0() -> CharNgramG0:
    """The English G0 shipped with topicflow (``topicflow/data/g0_en``), loaded once per process.

    Trained with the defaults of :func:`~topicflow.models.infvoc_lda.g0.train_g0` on the 73,445-word
    English list of Debian's wamerican package (``topicflow/data/g0_en/SOURCE.md``).

    Returns
    -------
    CharNgramG0

    Raises
    ------
    StoreNotFoundError
        The package data is missing (a broken installation).
    """
    return _default_g0()[0]


def default_g0_info() -> G0Info:
    """The header of the shipped English G0 (see :func:`default_g0`).

    Returns
    -------
    G0Info
    """
    return _default_g0()[1]
