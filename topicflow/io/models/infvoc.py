"""The arrays of an infvoc model inside the model store, and the online pass's document-topic output.

An infinite-vocabulary model (family ``"infvoc"``) is an ordinary saved model
(:mod:`topicflow.io.models.store`) whose exact state travels in its ``sampler_state`` arrays, all
named ``infvoc_*`` (never pickled):

* ``infvoc_tos_indptr``, ``infvoc_tos_words``, ``infvoc_nu1``, ``infvoc_nu2``, ``infvoc_rank_indptr``,
  ``infvoc_rank_words``, ``infvoc_rank_log``: :meth:`~topicflow.models.infvoc_lda.InfVocState.to_arrays`;
* ``infvoc_word_bytes``, ``infvoc_word_offsets``: the word index (UTF-8 bytes and offsets);
* ``infvoc_g0_counts``, ``infvoc_g0_length_counts``, ``infvoc_g0_log_zeta``: the G0 the model ranks with
  (absent when it ranks without G0), its settings in ``model.json``.

The store refuses non-finite sampler arrays, but ``rank_log`` and ``log_zeta`` hold ``-inf`` (G0 = 0 for
words outside the G0's length bounds): such an array is stored with ``-inf`` written as 0 and a uint8
mask ``<name>_neginf`` beside it, so the round trip is exact.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import zarr

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io.storage import StoragePath, as_location, zarr_store

#: Prefix of every infvoc array in a model's sampler state.
PREFIX = "infvoc_"
#: Suffix of the mask of an array's -inf entries.
NEGINF = "_neginf"


def pack_arrays(arrays: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Prefix names with ``infvoc_`` and store float ``-inf`` entries as 0 plus a mask (module docstring).

    Parameters
    ----------
    arrays : mapping of str to ndarray

    Returns
    -------
    dict of str to ndarray
        Finite arrays, ready for :attr:`~topicflow.io.models.store.SavedModel.sampler_state`.

    Raises
    ------
    InvalidParameterError
        An array holds NaN or +inf (no infvoc array should).
    """
    out: dict[str, np.ndarray] = {}
    for name, value in arrays.items():
        array = np.asarray(value)
        if array.dtype.kind == "f":
            if np.any(np.isnan(array)) or np.any(np.isposinf(array)):
                raise InvalidParameterError(f"infvoc array {name!r} holds NaN or +inf; it cannot be saved")
            neginf = np.isneginf(array)
            if np.any(neginf):
                out[PREFIX + name + NEGINF] = neginf.astype(np.uint8)
                array = np.where(neginf, 0.0, array)
        out[PREFIX + name] = array
    return out


def unpack_arrays(sampler_state: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The inverse of :func:`pack_arrays`: the ``infvoc_*`` arrays, unprefixed, with ``-inf`` restored.

    Parameters
    ----------
    sampler_state : mapping of str to ndarray
        A saved model's sampler state (other arrays are ignored).

    Returns
    -------
    dict of str to ndarray

    Raises
    ------
    ModelFormatError
        A mask whose shape is not its array's.
    """
    out: dict[str, np.ndarray] = {}
    for key, value in sampler_state.items():
        if not key.startswith(PREFIX) or key.endswith(NEGINF):
            continue
        name = key[len(PREFIX):]
        array = np.asarray(value)
        mask = sampler_state.get(key + NEGINF)
        if mask is not None:
            mask = np.asarray(mask).astype(bool)
            if mask.shape != array.shape:
                raise ModelFormatError(f"sampler_state/{key + NEGINF} has shape {mask.shape}, expected {array.shape}",
                                       field=f"sampler_state/{key + NEGINF}")
            array = np.where(mask, -np.inf, array)
        out[name] = array
    return out


class DocTopicWriter:
    """Writes the online pass's document topic vectors to a zarr group, one minibatch at a time.

    Layout: ``PATH/doc_topic`` (n_rows, n_topics) float64 (alpha^theta + n_dk of the last sweep, spec
    P9), ``PATH/doc`` (n_rows,) int64 (the document's position in the store), ``PATH/minibatch``
    (n_rows,) int64 (i); row r is the r-th document the stream processed (over all passes). Opening an
    existing group of the same shape keeps its rows (a resumed fit rewrites the rest).

    Parameters
    ----------
    path : path or URL
        The zarr group to create (or reopen); a URL on object storage is written through zarr's
        FsspecStore.
    n_rows : int
        Documents the whole stream will process.
    n_topics : int
        K.
    """

    def __init__(self, path: str | Path | StoragePath, n_rows: int, n_topics: int) -> None:
        self.path = as_location(path)
        shape = (int(n_rows), int(n_topics))
        group = None
        if (self.path / "zarr.json").exists():
            group = zarr.open_group(zarr_store(self.path), mode="r+")
            if "doc_topic" not in group or tuple(group["doc_topic"].shape) != shape:  # type: ignore[union-attr]
                group = None
        if group is None:
            group = zarr.open_group(zarr_store(self.path), mode="w")
            chunk = max(1, min(shape[0], 4096))
            group.create_array("doc_topic", shape=shape, dtype=np.float64, chunks=(chunk, max(1, shape[1])),
                               fill_value=np.nan)
            group.create_array("doc", shape=(shape[0],), dtype=np.int64, chunks=(chunk,), fill_value=-1)
            group.create_array("minibatch", shape=(shape[0],), dtype=np.int64, chunks=(chunk,), fill_value=0)
        self._group = group

    def write(self, row: int, doc_topic: FloatArray, docs: np.ndarray, minibatch: int) -> None:
        """Write rows ``row:row + len(docs)``.

        Parameters
        ----------
        row : int
            First row (documents processed before this minibatch, over the whole stream).
        doc_topic : ndarray of shape (n, n_topics)
        docs : ndarray of shape (n,)
            Store positions of the documents.
        minibatch : int
            i.
        """
        n = int(np.shape(docs)[0])
        if n == 0:
            return
        self._group["doc_topic"][row:row + n] = np.asarray(doc_topic, dtype=np.float64)  # type: ignore[index]
        self._group["doc"][row:row + n] = np.asarray(docs, dtype=np.int64)  # type: ignore[index]
        self._group["minibatch"][row:row + n] = np.full(n, int(minibatch), np.int64)  # type: ignore[index]


def read_doc_topics(path: str | Path | StoragePath) -> dict[str, Any]:
    """Read what :class:`DocTopicWriter` wrote.

    Parameters
    ----------
    path : path

    Returns
    -------
    dict
        ``doc_topic``, ``doc``, ``minibatch`` arrays.
    """
    group = zarr.open_group(zarr_store(path, read_only=True), mode="r")
    return {name: np.asarray(group[name][...]) for name in ("doc_topic", "doc", "minibatch")}  # type: ignore[index]
