"""The topic assignments z of the distributed collapsed Gibbs sampler, on disk beside the run.

Each sampling block's z is one zarr array ``<directory>/z.zarr/sweep-<s>/block-<j>`` of shape
(tokens of the block,), one chunk, uncompressed, uint16 when K <= 65536 (else int32): z is read and
rewritten every sweep, whole, and close to random in its bits, so a codec would cost time and save
little. The arrays are written as their zarr metadata and raw chunk directly (any zarr v3 reader opens
them; going through zarr's API cost about 80 ms per block and sweep on a loaded machine, against 6 ms).
Sweep s reads ``sweep-<s-1>`` and writes ``sweep-<s>``, so a task that the scheduler reruns after a
lost worker reads the same input and writes the same output. An array is written under a temporary
name and renamed into place when complete, so a crash never leaves a half-written block under its
final name; a sweep is *committed* only when the driver records it (in the run's checkpoint), after
every block of it is written. Sweeps older than the last committed one (and than the one being read)
are deleted.

The layer also holds each block's tokens, written once by the start (sweep 0):
``<directory>/z.zarr/tokens/block-<j>/terms`` (the term of every token, uint16 when V <= 65536, else
int32) and ``.../offsets`` (int64, n_docs + 1: document d owns tokens ``offsets[d]:offsets[d + 1]``).
Later sweeps read a block's tokens from there with its z, so they never reread (and recheck) the
store's shards, and no process needs to keep shards in memory between sweeps.

Where: inside the checkpoint directory with ``--checkpoint-every``/``--resume`` (so that a resumed
fit finds the z of the committed sweep there), else in a scratch directory beside the store (or under
the ``scratch-dir`` setting), removed when the fit ends (:func:`scratch_location`).

On object storage (the run directory a URL: a checkpoint on a URL, or a store on a URL without a
checkpoint) the layout is the same, written by the tasks straight to the object store, so that workers
on other hosts need no shared disk: an array's chunk ``0`` is put first and its ``zarr.json`` last (an
object PUT is atomic; an array without its metadata is missing to a reader), a block's tokens get the
group's ``zarr.json`` after both arrays, and a task that runs again rewrites the same bytes.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from topicflow.errors import ModelFormatError
from topicflow.io.outputs.gamma_scratch import scratch_directory
from topicflow.io.storage import (
    Location,
    StoragePath,
    filesystem,
    is_url,
    remove_prefix,
    url_of,
    write_object,
)

__all__ = ["block_path", "drop_sweeps", "layer_path", "read_block", "read_tokens", "remove_layer", "remove_run",
           "scratch_location", "sweeps_on_disk", "tokens_path", "write_block", "write_tokens"]


def scratch_location(store: Path | StoragePath, token: str, base: str | None = None) -> Location:
    """A fresh run directory for one fit's assignments: local, or a prefix on object storage.

    Under ``base`` when given (a local directory or a URL); else beside the store, which for a store on
    object storage is a prefix beside it in the same bucket, so that workers on other hosts reach it
    without a shared disk.

    Parameters
    ----------
    store : Path or StoragePath
        The corpus store of the fit.
    token : str
        The fit's token (names the directory, with a random suffix).
    base : str, optional
        The ``scratch_dir`` argument or the ``scratch-dir`` setting.

    Returns
    -------
    Path or StoragePath
        A new local directory (created), or a URL prefix (objects appear as tasks write them).
    """
    parent = base if base else (str(store).rstrip("/").rpartition("/")[0] if is_url(store) else None)
    if parent and is_url(parent):
        return StoragePath(f"{parent.rstrip('/')}/.topicflow-scratch-{token[:12]}-{uuid.uuid4().hex[:8]}")
    return scratch_directory(store, token, base)


def remove_run(directory: str | Path | StoragePath) -> None:
    """Delete a run directory made by :func:`scratch_location` (a local directory or a URL prefix).

    Parameters
    ----------
    directory : str, Path or StoragePath
    """
    if isinstance(directory, StoragePath) or url_of(directory) is not None:
        remove_prefix(str(url_of(directory)))
    else:
        shutil.rmtree(directory, ignore_errors=True)


def layer_path(directory: str | Path | StoragePath) -> Location:
    """The z layer of a run directory.

    Parameters
    ----------
    directory : str, Path or StoragePath

    Returns
    -------
    Path or StoragePath
        A :class:`~topicflow.io.storage.StoragePath` for a run directory on object storage.
    """
    if isinstance(directory, StoragePath) or url_of(directory) is not None:
        return StoragePath(str(url_of(directory))) / "z.zarr"
    return Path(directory) / "z.zarr"


def block_path(directory: str | Path | StoragePath, sweep: int, block: int) -> Location:
    """Where the z of block ``block`` after ``sweep`` lives (sweep 0: the start).

    Parameters
    ----------
    directory : str, Path or StoragePath
    sweep : int
    block : int
        Index of the block in the store.

    Returns
    -------
    Path or StoragePath
    """
    return layer_path(directory) / f"sweep-{int(sweep)}" / f"block-{int(block)}"


def tokens_path(directory: str | Path | StoragePath, block: int) -> Location:
    """Where the tokens of block ``block`` live (a group of two arrays, ``terms`` and ``offsets``).

    Parameters
    ----------
    directory : str, Path or StoragePath
    block : int

    Returns
    -------
    Path or StoragePath
    """
    return layer_path(directory) / "tokens" / f"block-{int(block)}"


def _dtype(n_topics: int) -> str:
    return "uint16" if n_topics <= 65536 else "int32"


def _metadata(n: int, dtype: str) -> dict[str, object]:
    """The ``zarr.json`` of a one-chunk, uncompressed, little-endian zarr v3 array of ``n`` values.

    The chunk key encoding is zarr's ``v2`` with separator ".": the one chunk is the file ``0`` beside
    ``zarr.json`` (no ``c/`` directory to create and delete every sweep).
    """
    return {"shape": [n], "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [max(1, n)]}},
            "chunk_key_encoding": {"name": "v2", "configuration": {"separator": "."}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "attributes": {}, "zarr_format": 3, "node_type": "array", "storage_transformers": []}


_GROUP = {"zarr_format": 3, "node_type": "group", "attributes": {}}


def _write_array(path: Path, values: np.ndarray, dtype: str) -> None:
    """Write ``values`` as a one-chunk zarr v3 array at ``path`` (a directory that does not exist yet)."""
    os.mkdir(path)
    n = int(values.shape[0])
    with open(os.path.join(path, "zarr.json"), "w") as out:
        out.write(json.dumps(_metadata(n, dtype)))
    if n:
        np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tofile(os.path.join(path, "0"))


def _publish(tmp: Path, final: Path) -> None:
    try:
        os.replace(tmp, final)
    except OSError:  # a rerun task: the block is there already, with the same content
        shutil.rmtree(final, ignore_errors=True)
        os.replace(tmp, final)


def _temporary(final: Path) -> Path:
    final.parent.mkdir(parents=True, exist_ok=True)
    return final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:12]}")


def _read_file(path: Location, name: str) -> bytes:
    """The bytes of the file (or object) ``name`` of the array or group at ``path``."""
    if isinstance(path, StoragePath):
        fs, inner = filesystem(path.url)
        return bytes(fs.cat_file(f"{inner}/{name}"))
    with open(os.path.join(path, name), "rb") as handle:
        return handle.read()


def _read_array(path: Location, n: int | None) -> np.ndarray:
    """The values of an array written by :func:`_write_array` or :func:`_put_array`; ``n``: the length expected."""
    meta = json.loads(_read_file(path, "zarr.json"))
    dtype = np.dtype(meta["data_type"]).newbyteorder("<")
    size = int(meta["shape"][0])
    encoding = meta.get("chunk_key_encoding")
    chunk = "0" if isinstance(encoding, dict) and encoding.get("name") == "v2" else "c/0"
    if not size:
        values = np.zeros(0, dtype=dtype)
    elif isinstance(path, StoragePath):
        values = np.frombuffer(_read_file(path, chunk), dtype=dtype)
    else:
        values = np.fromfile(os.path.join(path, chunk), dtype=dtype)
    if values.shape != (size,) or (n is not None and size != n):
        raise ValueError(f"{values.shape[0]} values, expected {size if n is None else n}")
    return values


def _put_array(path: StoragePath, values: np.ndarray, dtype: str) -> None:
    """Write ``values`` as :func:`_write_array` does, as objects: the chunk first, ``zarr.json`` last."""
    n = int(values.shape[0])
    if n:
        write_object(f"{path.url}/0", np.ascontiguousarray(values, dtype=np.dtype(dtype).newbyteorder("<")).tobytes())
    write_object(f"{path.url}/zarr.json", json.dumps(_metadata(n, dtype)).encode())


def _store_array(final: Location, values: np.ndarray, dtype: str) -> None:
    """Write a one-chunk array at ``final`` atomically: objects with the metadata last, or a temporary
    directory renamed into place."""
    if isinstance(final, StoragePath):  # one PUT per object: the metadata last marks it complete
        _put_array(final, values, dtype)
        return
    tmp = _temporary(final)
    _write_array(tmp, values, dtype)
    _publish(tmp, final)


def _remove(path: Location) -> None:
    """Delete a directory or an object prefix; missing files are ignored."""
    if isinstance(path, StoragePath):
        remove_prefix(path.url)
    else:
        shutil.rmtree(path, ignore_errors=True)


def write_block(directory: str | Path | StoragePath, sweep: int, block: int, topics: np.ndarray, n_topics: int) -> None:
    """Write one block's z of ``sweep`` atomically (temporary directory, then rename).

    The array is an ordinary zarr v3 array (``zarr.open_array`` reads it), written directly as its
    metadata and its one raw chunk: creating it through zarr costs about ten times more per block
    and sweep, for an array that is always written and read whole.

    Parameters
    ----------
    directory : str, Path or StoragePath
    sweep : int
    block : int
    topics : ndarray of shape (n_tokens,), int
    n_topics : int
        K (chooses the stored dtype).
    """
    _store_array(block_path(directory, sweep, block), topics, _dtype(n_topics))


def read_block(directory: str | Path | StoragePath, sweep: int, block: int, n_tokens: int) -> np.ndarray:
    """One block's z after ``sweep``, as int32.

    Parameters
    ----------
    directory : str, Path or StoragePath
    sweep : int
    block : int
    n_tokens : int
        The length the caller expects.

    Returns
    -------
    ndarray of shape (n_tokens,), int32

    Raises
    ------
    ModelFormatError
        The array is missing or has another length (a run directory damaged, or written for another
        corpus or block size); the message says to delete it.
    """
    path = block_path(directory, sweep, block)
    try:
        values = _read_array(path, n_tokens)
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ModelFormatError(f"the Gibbs assignments {str(path)!r} are missing, damaged or of another length "
                               f"({exc}); delete {str(directory)!r} and fit again (without --resume).",
                               path=str(path)) from exc
    return values.astype(np.int32)


def write_tokens(directory: str | Path | StoragePath, block: int, token_indptr: np.ndarray, token_terms: np.ndarray,
                 n_terms: int) -> None:
    """Write one block's tokens atomically (the start does it once per run).

    Parameters
    ----------
    directory : str, Path or StoragePath
    block : int
    token_indptr : ndarray of shape (n_docs + 1,), int
        Document d owns tokens ``token_indptr[d]:token_indptr[d + 1]``.
    token_terms : ndarray of shape (n_tokens,), int
        The term of every token.
    n_terms : int
        V (chooses the stored dtype of the terms).
    """
    final = tokens_path(directory, block)
    if isinstance(final, StoragePath):  # both arrays, then the group's metadata
        _put_array(final / "offsets", token_indptr, "int64")
        _put_array(final / "terms", token_terms, _dtype(n_terms))
        write_object(f"{final.url}/zarr.json", json.dumps(_GROUP).encode())
        return
    tmp = _temporary(final)
    tmp.mkdir()
    (tmp / "zarr.json").write_text(json.dumps(_GROUP))
    _write_array(tmp / "offsets", token_indptr, "int64")
    _write_array(tmp / "terms", token_terms, _dtype(n_terms))
    _publish(tmp, final)


def read_tokens(directory: str | Path | StoragePath, block: int, n_docs: int) -> tuple[np.ndarray, np.ndarray] | None:
    """One block's tokens as :func:`write_tokens` wrote them, or None where they are missing.

    Parameters
    ----------
    directory : str, Path or StoragePath
    block : int
    n_docs : int
        The documents the caller expects.

    Returns
    -------
    (token_indptr, token_terms) or None
        The int64 and int32 arrays; None when the block's tokens were never written (a run directory of
        an earlier version), so that the caller reads them from the store.

    Raises
    ------
    ModelFormatError
        The arrays exist but are damaged or do not hold ``n_docs`` documents.
    """
    path = tokens_path(directory, block)
    try:
        _read_file(path, "zarr.json")  # a GET, not exists(): s3fs may answer that from a stale listing
    except FileNotFoundError:
        return None
    try:
        indptr = _read_array(path / "offsets", n_docs + 1).astype(np.int64)
        terms = _read_array(path / "terms", int(indptr[-1]))
        if indptr[0] != 0 or np.any(np.diff(indptr) < 0):
            raise ValueError("document offsets are not increasing from 0")
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ModelFormatError(f"the Gibbs tokens {str(path)!r} are damaged or of another corpus ({exc}); delete "
                               f"{str(directory)!r} and fit again (without --resume).", path=str(path)) from exc
    return indptr, terms.astype(np.int32)


def doc_topic_path(directory: str | Path | StoragePath, block: int) -> Location:
    """Where the SCVB0 start keeps block ``block``'s N^theta rows between its pass and its draw.

    Parameters
    ----------
    directory : str, Path or StoragePath
    block : int

    Returns
    -------
    Path or StoragePath
    """
    return layer_path(directory) / "scvb0-start" / f"block-{int(block)}"


def write_doc_topic(directory: str | Path | StoragePath, block: int, rows: np.ndarray) -> None:
    """Write one block's N^theta rows (float64, flattened row by row) atomically, as :func:`write_block` does.

    Parameters
    ----------
    directory : str, Path or StoragePath
    block : int
    rows : ndarray of shape (n_docs, K), float
    """
    _store_array(doc_topic_path(directory, block), np.ascontiguousarray(rows, dtype=np.float64).reshape(-1), "float64")


def read_doc_topic(directory: str | Path | StoragePath, block: int, n_docs: int, n_topics: int) -> np.ndarray:
    """One block's N^theta rows as :func:`write_doc_topic` wrote them.

    Parameters
    ----------
    directory : str, Path or StoragePath
    block : int
    n_docs, n_topics : int
        The shape the caller expects.

    Returns
    -------
    ndarray of shape (n_docs, n_topics), float64

    Raises
    ------
    ModelFormatError
        The array is missing or has another length.
    """
    path = doc_topic_path(directory, block)
    try:
        values = _read_array(path, int(n_docs) * int(n_topics))
    except (OSError, ValueError, KeyError, TypeError, IndexError) as exc:
        raise ModelFormatError(f"the SCVB0 start's document rows {str(path)!r} are missing, damaged or of another "
                               f"shape ({exc}); delete {str(directory)!r} and fit again (without --resume).",
                               path=str(path)) from exc
    return values.reshape(int(n_docs), int(n_topics))


def drop_doc_topics(directory: str | Path | StoragePath) -> None:
    """Delete the SCVB0 start's document rows of a run directory (once its draw is done).

    Parameters
    ----------
    directory : str, Path or StoragePath
    """
    _remove(layer_path(directory) / "scvb0-start")


def sweeps_on_disk(directory: str | Path | StoragePath) -> list[int]:
    """The sweeps with a directory in the layer (complete or not), ascending.

    Parameters
    ----------
    directory : str, Path or StoragePath

    Returns
    -------
    list of int
    """
    root = layer_path(directory)
    if isinstance(root, StoragePath):
        fs, inner = filesystem(root.url)
        try:
            names = [str(entry).rstrip("/").rsplit("/", 1)[-1] for entry in fs.ls(inner, detail=False, refresh=True)]
        except FileNotFoundError:
            return []
        return sorted(int(name.split("-", 1)[1]) for name in names if name.startswith("sweep-"))
    if not root.is_dir():
        return []
    return sorted(int(child.name.split("-", 1)[1]) for child in root.glob("sweep-*"))


def drop_sweeps(directory: str | Path | StoragePath, keep: set[int]) -> None:
    """Delete every sweep's z except those in ``keep``.

    Parameters
    ----------
    directory : str, Path or StoragePath
    keep : set of int
    """
    for sweep in sweeps_on_disk(directory):
        if sweep not in keep:
            _remove(layer_path(directory) / f"sweep-{sweep}")


def remove_layer(directory: str | Path | StoragePath) -> None:
    """Delete the whole z layer of a run directory; missing files are ignored.

    Parameters
    ----------
    directory : str, Path or StoragePath
    """
    _remove(layer_path(directory))
