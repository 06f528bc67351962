"""The Gibbs assignment layer (topicflow.io.outputs.assignment_layer): z and the blocks' tokens on disk."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import zarr
from numpy.testing import assert_array_equal

from topicflow.errors import ModelFormatError
from topicflow.io.outputs import assignment_layer as layer


def test_tokens_round_trip_and_open_as_zarr(tmp_path: Path) -> None:
    indptr = np.array([0, 3, 3, 7], dtype=np.int64)
    for n_terms, dtype in ((70_000, np.int32), (500, np.uint16)):
        terms = np.array([1, 4, 4, 0, 2, 499, 3], dtype=np.int32)
        layer.write_tokens(tmp_path, 5, indptr, terms, n_terms)
        got_indptr, got_terms = layer.read_tokens(tmp_path, 5, 3)  # type: ignore[misc]
        assert_array_equal(got_indptr, indptr)
        assert_array_equal(got_terms, terms)
        assert got_terms.dtype == np.int32
        stored = zarr.open_group(str(layer.tokens_path(tmp_path, 5)), mode="r")
        assert stored["terms"].dtype == dtype  # an ordinary zarr group of two arrays
        assert_array_equal(stored["offsets"][:], indptr)
    assert layer.read_tokens(tmp_path, 6, 3) is None  # never written (a layer of an earlier version)
    with pytest.raises(ModelFormatError, match="another corpus"):
        layer.read_tokens(tmp_path, 5, 4)
    layer.drop_sweeps(tmp_path, set())  # the tokens are not a sweep: kept
    assert layer.read_tokens(tmp_path, 5, 3) is not None


def test_z_is_a_zarr_array_and_earlier_layers_are_read(tmp_path: Path) -> None:
    z = np.array([3, 0, 2, 2], dtype=np.int32)
    layer.write_block(tmp_path, 4, 1, z, 5)
    assert_array_equal(zarr.open_array(str(layer.block_path(tmp_path, 4, 1)), mode="r")[:], z)
    layer.write_block(tmp_path, 4, 1, z, 5)  # a rerun task writes the same block again
    assert_array_equal(layer.read_block(tmp_path, 4, 1, 4), z)
    old = layer.block_path(tmp_path, 2, 0)  # the layout before: the chunk in c/0
    (old / "c").mkdir(parents=True)
    meta = json.loads((layer.block_path(tmp_path, 4, 1) / "zarr.json").read_text())
    meta["chunk_key_encoding"] = {"name": "default", "configuration": {"separator": "/"}}
    (old / "zarr.json").write_text(json.dumps(meta))
    z.astype("<u2").tofile(old / "c" / "0")
    assert_array_equal(layer.read_block(tmp_path, 2, 0, 4), z)
    with pytest.raises(ModelFormatError, match="delete"):
        layer.read_block(tmp_path, 4, 1, 5)
    assert layer.sweeps_on_disk(tmp_path) == [2, 4]
