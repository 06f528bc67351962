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

Where: inside the checkpoint directory with ``--checkpoint-every``/``--resume`` (so that a resumed
fit finds the z of the committed sweep there), else in a scratch directory beside the store (or under
the ``scratch-dir`` setting), removed when the fit ends.
"""
from __future__ import annotations

import json
import os
import shutil
import uuid
from pathlib import Path

import numpy as np

from topicflow.errors import ModelFormatError

__all__ = ["block_path", "drop_sweeps", "layer_path", "read_block", "remove_layer", "sweeps_on_disk", "write_block"]


def layer_path(directory: str | Path) -> Path:
    """The z layer of a run directory.

    Parameters
    ----------
    directory : str or Path

    Returns
    -------
    Path
    """
    return Path(directory) / "z.zarr"


def block_path(directory: str | Path, sweep: int, block: int) -> Path:
    """Where the z of block ``block`` after ``sweep`` lives (sweep 0: the start).

    Parameters
    ----------
    directory : str or Path
    sweep : int
    block : int
        Index of the block in the store.

    Returns
    -------
    Path
    """
    return layer_path(directory) / f"sweep-{int(sweep)}" / f"block-{int(block)}"


def _dtype(n_topics: int) -> str:
    return "uint16" if n_topics <= 65536 else "int32"


def _metadata(n: int, dtype: str) -> dict[str, object]:
    """The ``zarr.json`` of a one-chunk, uncompressed, little-endian zarr v3 array of ``n`` values."""
    return {"shape": [n], "data_type": dtype,
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [max(1, n)]}},
            "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
            "fill_value": 0, "codecs": [{"name": "bytes", "configuration": {"endian": "little"}}],
            "attributes": {}, "zarr_format": 3, "node_type": "array", "storage_transformers": []}


def write_block(directory: str | Path, sweep: int, block: int, topics: np.ndarray, n_topics: int) -> None:
    """Write one block's z of ``sweep`` atomically (temporary directory, then rename).

    The array is an ordinary zarr v3 array (``zarr.open_array`` reads it), written directly as its
    metadata and its one raw chunk: creating it through zarr costs about ten times more per block
    and sweep, for an array that is always written and read whole.

    Parameters
    ----------
    directory : str or Path
    sweep : int
    block : int
    topics : ndarray of shape (n_tokens,), int
    n_topics : int
        K (chooses the stored dtype).
    """
    final = block_path(directory, sweep, block)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.with_name(f".{final.name}.tmp-{uuid.uuid4().hex[:12]}")
    (tmp / "c").mkdir(parents=True)
    n, dtype = int(topics.shape[0]), _dtype(n_topics)
    (tmp / "zarr.json").write_text(json.dumps(_metadata(n, dtype), indent=2))
    if n:
        np.ascontiguousarray(topics, dtype=np.dtype(dtype).newbyteorder("<")).tofile(tmp / "c" / "0")
    if final.exists():  # a rerun task: same content
        shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)


def read_block(directory: str | Path, sweep: int, block: int, n_tokens: int) -> np.ndarray:
    """One block's z after ``sweep``, as int32.

    Parameters
    ----------
    directory : str or Path
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
        meta = json.loads((path / "zarr.json").read_text())
        dtype = np.dtype(meta["data_type"]).newbyteorder("<")
        values = np.fromfile(path / "c" / "0", dtype=dtype) if n_tokens else np.zeros(0, dtype=dtype)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ModelFormatError(f"the Gibbs assignments {str(path)!r} are missing or damaged ({exc}); delete "
                               f"{str(Path(directory))!r} and fit again (without --resume).", path=str(path)) from exc
    if values.shape != (n_tokens,) or meta.get("shape") != [n_tokens]:
        raise ModelFormatError(f"the Gibbs assignments {str(path)!r} hold {values.shape[0]} tokens, expected "
                               f"{n_tokens}; delete {str(Path(directory))!r} and fit again (without --resume).",
                               path=str(path))
    return values.astype(np.int32)


def sweeps_on_disk(directory: str | Path) -> list[int]:
    """The sweeps with a directory in the layer (complete or not), ascending.

    Parameters
    ----------
    directory : str or Path

    Returns
    -------
    list of int
    """
    root = layer_path(directory)
    if not root.is_dir():
        return []
    return sorted(int(child.name.split("-", 1)[1]) for child in root.glob("sweep-*"))


def drop_sweeps(directory: str | Path, keep: set[int]) -> None:
    """Delete every sweep's z except those in ``keep``.

    Parameters
    ----------
    directory : str or Path
    keep : set of int
    """
    for sweep in sweeps_on_disk(directory):
        if sweep not in keep:
            shutil.rmtree(layer_path(directory) / f"sweep-{sweep}", ignore_errors=True)


def remove_layer(directory: str | Path) -> None:
    """Delete the whole z layer of a run directory; missing files are ignored.

    Parameters
    ----------
    directory : str or Path
    """
    shutil.rmtree(layer_path(directory), ignore_errors=True)
