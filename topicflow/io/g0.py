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
import hashlib
import io
import json
import os
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.errors import (
    CorpusFormatError,
    FormatVersionError,
    InputError,
    InvalidParameterError,
    StoreNotFoundError,
)
from topicflow.io._atomic import (
    atomic_write_bytes,
    atomic_write_json,
    check_output_path,
    commit_directory,
    temporary_sibling,
)
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
ARRAYS_FILE = "arrays.npz"
ARRAY_NAMES: tuple[str, ...] = ("counts", "length_counts", "log_zeta")
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


def read_word_list(path: str | os.PathLike[str]) -> tuple[list[str], WordListCoverage]:
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
    path = Path(path)
    if not path.is_file():
        raise InputError(f"word list {str(path)!r} does not exist; pass a text file with one word per line.",
                         path=str(path))
    words: list[str] = []
    lines = skipped = 0
    with open(path, "rb") as handle:
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


def _npz_bytes(arrays: Mapping[str, np.ndarray]) -> bytes:
    """An uncompressed .npz with fixed member timestamps, so the same G0 gives the same bytes."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in ARRAY_NAMES:
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w") as member:
                np.lib.format.write_array(member, np.ascontiguousarray(arrays[name]), allow_pickle=False)
    return buffer.getvalue()


def _array_digest(array: np.ndarray) -> str:
    return "sha256:" + hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def write_g0(path: str | os.PathLike[str], g0: CharNgramG0, *, coverage: WordListCoverage | None = None,
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
    path = Path(path)
    check_output_path(path, overwrite=overwrite, what="G0")
    coverage = coverage or WordListCoverage(kept=g0.n_words, too_short=g0.n_too_short, too_long=g0.n_too_long)
    arrays = {"counts": g0.counts, "length_counts": g0.length_counts, "log_zeta": g0.log_zeta}
    info = G0Info(path=str(path), settings=_settings(g0), charset=g0.charset, coverage=coverage,
                  zeta=[float(z) for z in g0.zeta])
    header = {
        "format": G0_FORMAT, "format_version": G0_FORMAT_VERSION, "settings": info.settings, "charset": g0.charset,
        "coverage": coverage.to_dict(), "zeta": info.zeta,
        "arrays": {name: {"dtype": str(a.dtype), "shape": list(a.shape), "sha256": _array_digest(a)}
                   for name, a in arrays.items()},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    tmp.mkdir()
    try:
        atomic_write_bytes(tmp / ARRAYS_FILE, _npz_bytes(arrays))
        atomic_write_json(tmp / HEADER_FILE, header)
        commit_directory(tmp, path, overwrite=overwrite)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return info


def _damaged(where: str, what: str) -> CorpusFormatError:
    return CorpusFormatError(f"G0 {where!r} is damaged: {what}. Retrain it with "
                             "`topicflow g0 train WORDS.txt --out G0 --overwrite`.", path=where)


def _parse_header(where: str, data: bytes) -> dict[str, Any]:
    try:
        header = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _damaged(where, f"{HEADER_FILE} is not valid JSON ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != G0_FORMAT:
        found = header.get("format") if isinstance(header, dict) else None
        raise CorpusFormatError(f"{where!r} is not a G0 (format {found!r} in {HEADER_FILE}, expected {G0_FORMAT!r}); "
                                "pass a directory written by `topicflow g0 train`.", path=where)
    version = header.get("format_version")
    if not isinstance(version, int) or version > G0_FORMAT_VERSION:
        raise FormatVersionError(f"G0 {where!r} has format version {version!r}; this topicflow reads up to "
                                 f"{G0_FORMAT_VERSION}. Upgrade topicflow or retrain the G0.", path=where)
    return header


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
        raise _damaged(where, f"{HEADER_FILE} lacks or garbles a field ({exc!r})") from exc


def _g0_of(where: str, header: Mapping[str, Any], npz: bytes) -> tuple[CharNgramG0, G0Info]:
    info = _info_of(where, header)
    described = header.get("arrays")
    if not isinstance(described, dict) or set(described) != set(ARRAY_NAMES):
        raise _damaged(where, f"{HEADER_FILE} does not describe the arrays {list(ARRAY_NAMES)}")
    try:
        with np.load(io.BytesIO(npz), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in ARRAY_NAMES}
    except (KeyError, ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise _damaged(where, f"{ARRAYS_FILE} cannot be read ({exc})") from exc
    for name in ARRAY_NAMES:
        want, got = described[name], arrays[name]
        if not isinstance(want, dict) or str(got.dtype) != want.get("dtype") or list(got.shape) != want.get("shape"):
            raise _damaged(where, f"array {name} in {ARRAYS_FILE} is {got.dtype}{list(got.shape)}, the header says "
                                  f"{want.get('dtype') if isinstance(want, dict) else want}"
                                  f"{want.get('shape') if isinstance(want, dict) else ''}")
        if _array_digest(got) != want.get("sha256"):
            raise _damaged(where, f"array {name} in {ARRAYS_FILE} does not match its checksum")
    s, cov = info.settings, info.coverage
    try:
        g0 = CharNgramG0.from_counts(charset=info.charset, order=s["order"], smoothing=s["smoothing"],
                                     min_length=s["min_length"], max_length=s["max_length"],
                                     lowercase=bool(s["lowercase"]), length_fit=s["length_fit"], **arrays,
                                     n_too_short=cov.too_short, n_too_long=cov.too_long)
    except InvalidParameterError as exc:
        raise _damaged(where, str(exc)) from exc
    return g0, info


def _read_parts(path: Path) -> tuple[dict[str, Any], bytes]:
    if not path.exists():
        raise StoreNotFoundError(f"no G0 at {str(path)!r}; train one with `topicflow g0 train WORDS.txt --out G0`.",
                                 path=str(path))
    header_path = path / HEADER_FILE
    if not header_path.is_file():
        raise CorpusFormatError(f"{str(path)!r} is not a G0 (no {HEADER_FILE}); pass a directory written by "
                                "`topicflow g0 train`.", path=str(path))
    header = _parse_header(str(path), header_path.read_bytes())
    try:
        npz = (path / ARRAYS_FILE).read_bytes()
    except FileNotFoundError as exc:
        raise _damaged(str(path), f"{ARRAYS_FILE} is missing") from exc
    return header, npz


def read_g0_info(path: str | os.PathLike[str]) -> G0Info:
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
    path = Path(path)
    if not path.exists():
        raise StoreNotFoundError(f"no G0 at {str(path)!r}; train one with `topicflow g0 train WORDS.txt --out G0`.",
                                 path=str(path))
    header_path = path / HEADER_FILE
    if not header_path.is_file():
        raise CorpusFormatError(f"{str(path)!r} is not a G0 (no {HEADER_FILE}); pass a directory written by "
                                "`topicflow g0 train`.", path=str(path))
    return _info_of(str(path), _parse_header(str(path), header_path.read_bytes()))


def read_g0(path: str | os.PathLike[str]) -> tuple[CharNgramG0, G0Info]:
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
    path = Path(path)
    header, npz = _read_parts(path)
    return _g0_of(str(path), header, npz)


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
    return _g0_of(where, _parse_header(where, header_bytes), npz)


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
