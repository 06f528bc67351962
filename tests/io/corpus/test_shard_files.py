"""``write_shard`` writes, byte for byte, the files zarr's own API writes for the same arrays.

The shard writer encodes each array's ``zarr.json`` and chunk itself and stores them concurrently
(:func:`topicflow.io.corpus.writer._write_group`); the reference is the array-by-array zarr API
(:func:`topicflow.io._zarr._write_array`, what ``write_shard`` called before), on arrays of every
kind a shard holds, empty ones, and ones zarr does not write a chunk for (all fill value).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicflow.io._zarr import _write_array, read_arrays
from topicflow.io.corpus.layout import ORDER_ARRAYS
from topicflow.io.corpus.writer import _array_format, write_shard


def files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def reference_shard(shard_dir: Path, bags, doc_ids, labels=None, timestamps=None, orders=None) -> None:
    """The shard as ``write_shard`` wrote it through zarr's API, array by array."""
    group = zarr.open_group(str(shard_dir), mode="w-")
    _write_array(group, "doc_ids", np.asarray(doc_ids, dtype=object))
    if labels is not None:
        _write_array(group, "labels", np.asarray(labels, dtype=object))
    if timestamps is not None:
        _write_array(group, "timestamps", np.asarray(timestamps, dtype=np.int64))
    for lang, (indptr, term_ids, counts) in sorted(bags.items()):
        sub = group.create_group(lang)
        _write_array(sub, "indptr", np.asarray(indptr, dtype=np.int64))
        _write_array(sub, "term_ids", np.asarray(term_ids, dtype=np.int32))
        _write_array(sub, "counts", np.asarray(counts, dtype=np.int32))
        if orders is not None:
            order = sub.create_group("order")
            for name, data, dtype in zip(ORDER_ARRAYS, orders[lang], (np.int64, np.int32, object)):
                _write_array(order, name, np.asarray(data, dtype=dtype))


def test_every_array_kind_is_written_here_not_through_zarr() -> None:
    assert all(_array_format(kind) is not None for kind in ("int64", "int32", "string"))


small_ints = st.lists(st.integers(-3, 3), max_size=5)
strings = st.lists(st.sampled_from(["", "a", "é€", "東京", "d-1"]), max_size=5)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc_ids=strings, term_ids=small_ints, counts=small_ints, big=st.booleans(), with_extras=st.booleans(),
       oov=strings, labels=strings)
def test_shard_files_equal_zarr_api_files(tmp_path_factory: pytest.TempPathFactory, doc_ids: list[str],
                                          term_ids: list[int], counts: list[int], big: bool, with_extras: bool,
                                          oov: list[str], labels: list[str]) -> None:
    tmp = tmp_path_factory.mktemp("shard")
    n = len(doc_ids)
    scale = 2**40 if big else 1               # int64 values beyond 32 bits
    bags = {"en": (np.arange(n + 1) * scale, np.array(term_ids, np.int32), np.array(counts, np.int32)),
            "de": (np.zeros(n + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))}
    extras = dict(labels=np.array((labels * (n + 1))[:n], dtype=object), timestamps=np.arange(n) * scale,
                  orders={lang: (np.zeros(n + 1, np.int64), np.array(term_ids, np.int32), np.array(oov, dtype=object))
                          for lang in bags}) if with_extras else {}
    ids = np.array(doc_ids, dtype=object)
    checksum, n_tokens = write_shard(tmp / "new", bags, ids, **extras)
    reference_shard(tmp / "old", bags, ids, **extras)
    assert files(tmp / "new") == files(tmp / "old") and files(tmp / "new")
    assert n_tokens == {"en": int(np.sum(counts)), "de": 0} and checksum.startswith("sha256:")


def test_written_shards_read_back(tmp_path: Path) -> None:
    bags = {"en": (np.array([0, 2, 3]), np.array([4, 9, 1], np.int32), np.array([1, 2, 5], np.int32))}
    write_shard(tmp_path / "s", bags, np.array(["x", "ü"], dtype=object), labels=np.array(["", ""], dtype=object))
    arrays = read_arrays(tmp_path / "s", ["doc_ids", "labels", "en/indptr", "en/term_ids", "en/counts"])
    assert arrays["doc_ids"].tolist() == ["x", "ü"] and arrays["labels"].tolist() == ["", ""]
    assert arrays["en/term_ids"].tolist() == [4, 9, 1] and arrays["en/indptr"].tolist() == [0, 2, 3]
    with pytest.raises(FileExistsError):
        write_shard(tmp_path / "s", bags, np.array(["x", "ü"], dtype=object))
