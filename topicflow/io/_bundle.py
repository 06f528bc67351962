"""Checksummed array bundles: a directory with a JSON header and an uncompressed ``arrays.npz``.

Prior trees (:mod:`topicflow.io.trees`) and base distributions G0 (:mod:`topicflow.io.g0`) are saved
this way. The header names the format and its version and describes every array (dtype, shape,
SHA-256 of its bytes); the archive's members have fixed timestamps, so the same content always gives
the same bytes, and it is read with ``allow_pickle=False``. Both files are written into a temporary
sibling directory that is then moved into place, so a crash never leaves half a bundle. Every
failure to read names the bundle and says how to make it again (:class:`BundleKind`).
"""
from __future__ import annotations

import hashlib
import io
import json
import shutil
import zipfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.errors import CorpusFormatError, FormatVersionError, StoreNotFoundError
from topicflow.io import storage
from topicflow.io._atomic import (
    atomic_write_bytes,
    atomic_write_json,
    commit_directory,
    temporary_sibling,
)
from topicflow.io.storage import StoragePath

#: The archive of a bundle's arrays.
ARRAYS_FILE = "arrays.npz"


@dataclass(frozen=True, slots=True)
class BundleKind:
    """What one kind of bundle is called, where its header lives and how a user makes one.

    Attributes
    ----------
    format : str
        The header's ``format`` value, e.g. ``"topicflow-prior-tree"``.
    version : int
        The newest ``format_version`` this topicflow writes and reads.
    header_file : str
        File name of the JSON header inside the directory.
    noun : str
        What the bundle is called in messages ("prior tree", "G0").
    make : str
        How to make one, for "not found" messages ("build one with `topicflow tree build`").
    remake : str
        How to make it again, for "damaged" messages ("Rebuild it with `...`").
    command : str
        The command that writes it, for "not a ..." messages.
    array_names : tuple of str
        The arrays, in the archive's order.
    """

    format: str
    version: int
    header_file: str
    noun: str
    make: str
    remake: str
    command: str
    array_names: tuple[str, ...]

    def damaged(self, where: str | Path, what: str) -> CorpusFormatError:
        """The error for a bundle at ``where`` that cannot be used because of ``what``.

        Parameters
        ----------
        where : str or Path
        what : str

        Returns
        -------
        CorpusFormatError
        """
        return CorpusFormatError(f"{self.noun} {str(where)!r} is damaged: {what}. {self.remake}", path=str(where))


def array_digest(array: np.ndarray) -> str:
    """``sha256:`` of an array's bytes in C order.

    Parameters
    ----------
    array : ndarray

    Returns
    -------
    str
    """
    return "sha256:" + hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def npz_bytes(arrays: Mapping[str, np.ndarray], names: tuple[str, ...]) -> bytes:
    """An uncompressed ``.npz`` of ``arrays[name]`` for ``names``, with fixed member timestamps.

    Parameters
    ----------
    arrays : mapping of str to ndarray
    names : tuple of str
        The members, in order.

    Returns
    -------
    bytes
    """
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in names:
            info = zipfile.ZipInfo(f"{name}.npy", date_time=(1980, 1, 1, 0, 0, 0))
            with archive.open(info, "w") as member:
                np.lib.format.write_array(member, np.ascontiguousarray(arrays[name]), allow_pickle=False)
    return buffer.getvalue()


def write_bundle(path: Path | StoragePath, kind: BundleKind, header: Mapping[str, Any],
                 arrays: Mapping[str, np.ndarray], *, overwrite: bool) -> None:
    """Write ``header`` (plus format, version and the arrays' descriptions) and ``arrays`` atomically.

    On object storage the header, which every reader opens first, is the commit object: the archive is
    uploaded first (one PUT) and the header last (one PUT). Replacing a bundle there deletes the old
    header first, so a reader never pairs the old header with the new archive (it would fail their
    checksums anyway); until the new header is put there is no bundle at the URL.

    Parameters
    ----------
    path : Path or StoragePath
        The bundle's directory (the caller has checked that it may be written).
    kind : BundleKind
    header : mapping
        The kind's own header fields.
    arrays : mapping of str to ndarray
        Exactly ``kind.array_names``.
    overwrite : bool
        Replace an existing directory.
    """
    full = {"format": kind.format, "format_version": kind.version, **header,
            "arrays": {name: {"dtype": str(np.asarray(arrays[name]).dtype), "shape": list(np.shape(arrays[name])),
                              "sha256": array_digest(np.asarray(arrays[name]))} for name in kind.array_names}}
    if isinstance(path, StoragePath):
        if overwrite:
            storage.remove_prefix(path.url)
        storage.write_object(f"{path.url}/{ARRAYS_FILE}", npz_bytes(arrays, kind.array_names))
        text = json.dumps(full, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
        storage.write_object(f"{path.url}/{kind.header_file}", text.encode("utf-8"))
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    tmp.mkdir()
    try:
        atomic_write_bytes(tmp / ARRAYS_FILE, npz_bytes(arrays, kind.array_names))
        atomic_write_json(tmp / kind.header_file, full)
        commit_directory(tmp, path, overwrite=overwrite)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def parse_header(where: str | Path, kind: BundleKind, data: bytes) -> dict[str, Any]:
    """Parse and check a header's bytes: valid JSON, the kind's format, a version this topicflow reads.

    Parameters
    ----------
    where : str or Path
        The bundle, for messages.
    kind : BundleKind
    data : bytes

    Returns
    -------
    dict

    Raises
    ------
    CorpusFormatError
        Not JSON, or another format.
    FormatVersionError
        Written by a newer topicflow.
    """
    try:
        header = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise kind.damaged(where, f"{kind.header_file} is not valid JSON ({exc})") from exc
    if not isinstance(header, dict) or header.get("format") != kind.format:
        found = header.get("format") if isinstance(header, dict) else None
        raise CorpusFormatError(f"{str(where)!r} is not a {kind.noun} (format {found!r} in {kind.header_file}, "
                                f"expected {kind.format!r}); pass a directory written by `{kind.command}`.",
                                path=str(where))
    version = header.get("format_version")
    if not isinstance(version, int) or version > kind.version:
        raise FormatVersionError(f"{kind.noun} {str(where)!r} has format version {version!r}; this topicflow reads "
                                 f"up to {kind.version}. Upgrade topicflow or make it again.", path=str(where))
    return header


def read_header(path: Path | StoragePath, kind: BundleKind) -> dict[str, Any]:
    """Read and check the header of the bundle at ``path``.

    Parameters
    ----------
    path : Path or StoragePath
    kind : BundleKind

    Returns
    -------
    dict

    Raises
    ------
    StoreNotFoundError
        Nothing at ``path``.
    CorpusFormatError
        No header, not JSON, or another format.
    FormatVersionError
        Written by a newer topicflow.
    """
    if not path.exists():
        raise StoreNotFoundError(f"no {kind.noun} at {str(path)!r}; {kind.make}.", path=str(path))
    header_path = path / kind.header_file
    if not header_path.is_file():
        raise CorpusFormatError(f"{str(path)!r} is not a {kind.noun} (no {kind.header_file}); pass a directory "
                                f"written by `{kind.command}`.", path=str(path))
    return parse_header(str(path), kind, header_path.read_bytes())


def arrays_source(path: Path | StoragePath, kind: BundleKind) -> Path | bytes:
    """What :func:`read_arrays` reads for the bundle at ``path``: the archive's path, or its bytes from a URL.

    Parameters
    ----------
    path : Path or StoragePath
    kind : BundleKind

    Returns
    -------
    Path or bytes

    Raises
    ------
    CorpusFormatError
        The archive is missing on object storage.
    """
    if not isinstance(path, StoragePath):
        return path / ARRAYS_FILE
    try:
        return (path / ARRAYS_FILE).read_bytes()
    except FileNotFoundError as exc:
        raise kind.damaged(path.url, f"{ARRAYS_FILE} is missing") from exc


def read_arrays(where: str | Path, kind: BundleKind, header: Mapping[str, Any],
                source: Path | bytes) -> dict[str, np.ndarray]:
    """Read the arrays and check each against the header's dtype, shape and checksum.

    Parameters
    ----------
    where : str or Path
        The bundle, for messages.
    kind : BundleKind
    header : mapping
        As :func:`read_header` returned it.
    source : Path or bytes
        The archive's path, or its bytes (a bundle shipped as package data).

    Returns
    -------
    dict of str to ndarray

    Raises
    ------
    CorpusFormatError
        The archive is missing, unreadable, or an array differs from its description.
    """
    described = header.get("arrays")
    if not isinstance(described, dict) or set(described) != set(kind.array_names):
        raise kind.damaged(where, f"{kind.header_file} does not describe the arrays {list(kind.array_names)}")
    try:
        with np.load(io.BytesIO(source) if isinstance(source, bytes) else source, allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in kind.array_names}
    except FileNotFoundError as exc:
        raise kind.damaged(where, f"{ARRAYS_FILE} is missing") from exc
    except (KeyError, ValueError, OSError, zipfile.BadZipFile, EOFError) as exc:
        raise kind.damaged(where, f"{ARRAYS_FILE} cannot be read ({exc})") from exc
    for name in kind.array_names:
        want, got = described[name], arrays[name]
        if not isinstance(want, dict) or str(got.dtype) != want.get("dtype") or list(got.shape) != want.get("shape"):
            said = f"{want.get('dtype')}{want.get('shape')}" if isinstance(want, dict) else repr(want)
            raise kind.damaged(where, f"array {name} in {ARRAYS_FILE} is {got.dtype}{list(got.shape)}, the header "
                                      f"says {said}")
        if array_digest(got) != want.get("sha256"):
            raise kind.damaged(where, f"array {name} in {ARRAYS_FILE} does not match its checksum")
    return arrays
