"""Saved state of streaming runs: round trip, no pickle, atomic replacement, damage explained."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from topicflow.errors import CorpusFormatError, ModelNotFoundError
from topicflow.io.models.stream_state import read_stream_state, write_stream_state


def runs() -> list[tuple[dict[str, np.ndarray], dict[str, object]]]:
    return [({"cloud/weights": np.full(4, 0.25), "book_labels": np.arange(3, dtype=np.int32)}, {"position": 10}),
            ({"cloud/weights": np.ones(4) / 4, "book_labels": np.zeros(0, dtype=np.int32)}, {"position": 10})]


def test_round_trip_keeps_arrays_dtypes_and_metadata(tmp_path: Path) -> None:
    write_stream_state(tmp_path / "state", {"config": {"n_topics": 3}, "records": [{"point": 10}]}, runs())
    info, loaded = read_stream_state(tmp_path / "state")
    assert info["config"] == {"n_topics": 3} and info["n_runs"] == 2 and info["records"] == [{"point": 10}]
    for (arrays, meta), (expected, expected_meta) in zip(loaded, runs()):
        assert meta == expected_meta
        for name, value in expected.items():
            np.testing.assert_array_equal(arrays[name], value)
            assert arrays[name].dtype == value.dtype


def test_rewrite_replaces_the_whole_state(tmp_path: Path) -> None:
    write_stream_state(tmp_path / "state", {"records": []}, runs())
    write_stream_state(tmp_path / "state", {"records": []}, runs()[:1])
    info, loaded = read_stream_state(tmp_path / "state")
    assert info["n_runs"] == 1 and len(loaded) == 1
    assert not (tmp_path / "state" / "runs" / "001").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["state"]  # no temporary leftovers


def test_object_arrays_are_refused_rather_than_pickled(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_stream_state(tmp_path / "state", {}, [({"labels": np.array(["a"], dtype=object)}, {})])
    assert not (tmp_path / "state").exists() and list(tmp_path.iterdir()) == []


def test_missing_and_damaged_states_are_explained(tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match="without --resume"):
        read_stream_state(tmp_path / "nothing")
    write_stream_state(tmp_path / "state", {}, runs())
    (tmp_path / "state" / "runs" / "001" / "arrays.npz").write_bytes(b"not an npz")
    with pytest.raises(CorpusFormatError, match="run 1 cannot be read"):
        read_stream_state(tmp_path / "state")
