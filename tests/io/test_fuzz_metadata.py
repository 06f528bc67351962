"""Damaged metadata, fuzzed (issue 26 item 4): every JSON file topicflow reads, mutated.

Each property test copies a tiny fixture (built once per module), mutates one JSON file in the copy
(a key deleted, a value of another type, a negative, NaN, infinite or huge number, unknown keys, the
text truncated) and loads it the way the commands do. Every case must either load (to the same result
when only unknown keys were added) or raise a :class:`~topicflow.errors.TopicflowError` whose message
names the file or its directory; never a raw exception, and never a write (the copy's files, sizes
and modification times are compared before and after).
"""
from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicflow.errors import (
    CorpusFormatError,
    FormatVersionError,
    ModelFormatError,
    TopicflowError,
)
from topicflow.io.corpus.layout import Manifest
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import (
    SavedModel,
    load_model,
    read_model_info,
    save_model,
)
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.priors import parse_seed_words
from topicflow.models.lda.state import LDAState
from topicflow.testing.corpora import write_test_store

FUZZ = settings(max_examples=40, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])

#: Values put in place of a JSON value: other types, negatives, NaN, infinities, huge numbers.
ODD_VALUES: list[Any] = [None, True, False, "", "x", "-1", [], [1, "a"], {}, {"k": 1}, 0, -1, -(10**9), 10**40,
                         1.5, -0.5, math.nan, math.inf, -math.inf, 1e308]


def json_paths(value: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every path (keys and list indices) to a value inside ``value``, the root included."""
    yield prefix
    if isinstance(value, dict):
        for key, child in value.items():
            yield from json_paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from json_paths(child, (*prefix, index))


def _parent(payload: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        payload = payload[step]
    return payload


@st.composite
def mutations(draw: st.DrawFn, n_paths: int) -> tuple[str, int, Any]:
    """(operation, index of the path it applies to, argument)."""
    op = draw(st.sampled_from(["delete", "replace", "replace", "unknown", "unknown_deep", "truncate", "garbage"]))
    index = draw(st.integers(0, n_paths - 1))
    if op == "replace":
        return op, index, draw(st.sampled_from(ODD_VALUES))
    if op == "truncate":
        return op, index, draw(st.floats(0.0, 1.0))
    if op == "garbage":
        return op, index, draw(st.binary(max_size=40))
    return op, index, None


def mutate_text(text: str, mutation: tuple[str, int, Any]) -> str | bytes:
    """``text`` (a JSON document) with ``mutation`` applied: new text, or bytes for garbage."""
    op, index, arg = mutation
    payload = json.loads(text)
    paths = list(json_paths(payload))
    path = paths[index % len(paths)]
    if op == "truncate":
        return text[: int(len(text) * arg)]
    if op == "garbage":
        return arg
    if op == "unknown":  # at the top level: must not change what is loaded
        payload["zz_unknown_key_from_the_future"] = {"x": [1, 2]}
        return json.dumps(payload)
    if op == "unknown_deep":  # into the innermost object on the path (maybe a map of names: may be refused)
        target = payload
        for step in path:
            if isinstance(target[step], (dict, list)):
                target = target[step]
        if isinstance(target, dict):
            target["zz_unknown_key_from_the_future"] = {"x": [1, 2]}
        return json.dumps(payload)
    if not path:  # the root itself
        return json.dumps(None if op == "delete" else arg)
    parent = _parent(payload, path)
    if op == "delete":
        del parent[path[-1]]
    else:
        parent[path[-1]] = arg
    return json.dumps(payload)


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """(size, mtime_ns) of every file and directory under ``root``."""
    out = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            stat = os.stat(os.path.join(directory, name))
            out[os.path.relpath(os.path.join(directory, name), root)] = (stat.st_size, stat.st_mtime_ns)
    return out


def check_damaged(work: Path, relative: str, mutation: tuple[str, int, Any],
                  load: Callable[[Path], Any], named: Callable[[Path], list[str]]) -> Any:
    """Mutate ``work/relative`` with ``mutation``, load ``work``, check the contract, restore the file.

    Returns what ``load`` returned, or None when it raised a topicflow error naming one of ``named``.
    (Copying the fixture per example costs ~60 ms of file-system calls; restoring one file costs ~0.)
    """
    target = work / relative
    original = target.read_bytes()
    damaged = mutate_text(original.decode("utf-8"), mutation)
    target.write_bytes(damaged if isinstance(damaged, bytes) else damaged.encode("utf-8"))
    try:
        before = snapshot(work)
        try:
            result = load(work)
        except TopicflowError as exc:
            message = str(exc)
            assert any(place in message for place in named(work)), (mutation, message)
            result = None
        assert snapshot(work) == before, ("the loader wrote", mutation)
    finally:
        target.write_bytes(original)
    return result


# ----------------------------------------------------------------------------- corpus store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    counts = sp.csr_matrix(np.array([[1, 0, 2, 0, 1], [0, 1, 0, 3, 0], [2, 2, 0, 0, 1],
                                     [0, 0, 1, 1, 1], [1, 0, 0, 0, 4], [0, 3, 1, 0, 0]]))
    return write_test_store(tmp_path_factory.mktemp("fuzz") / "store", {"default": counts}, shard_size=3)


@pytest.fixture(scope="module")
def store_baseline(store: Path) -> tuple[Any, ...]:
    return read_store(store)


def read_store(path: Path) -> tuple[Any, ...]:
    """Open a store and read everything a fit reads: manifest, vocabulary, every shard."""
    corpus = Corpus.open(path)
    vocab = corpus.vocabulary()
    blocks = [corpus.read_block(i) for i in range(corpus.n_shards)]
    return (corpus.languages, corpus.n_tokens, tuple(vocab.terms), vocab.corpus_freq.tolist(),
            [(b.doc_ids.tolist(), b.counts.tolist()) for b in blocks])


def _paths_of(fixture: Path, relative: str) -> int:
    return len(list(json_paths(json.loads((fixture / relative).read_text()))))


def _store_names(work: Path) -> list[str]:
    return [str(work)]


@FUZZ
@given(data=st.data())
def test_damaged_manifest(store: Path, store_baseline: tuple[Any, ...], data: st.DataObject) -> None:
    mutation = data.draw(mutations(_paths_of(store, "manifest.json")))
    result = check_damaged(store, "manifest.json", mutation, read_store, _store_names)
    if mutation[0] == "unknown":
        assert result == store_baseline


@FUZZ
@given(data=st.data(), array=st.sampled_from(["terms", "doc_freq", "corpus_freq"]))
def test_damaged_vocabulary_metadata(store: Path, data: st.DataObject, array: str) -> None:
    relative = f"vocab/default/{array}/zarr.json"
    mutation = data.draw(mutations(_paths_of(store, relative)))
    check_damaged(store, relative, mutation, read_store, _store_names)


# ----------------------------------------------------------------------------- models


def tiny_model(fill: float) -> SavedModel:
    state = LDAState(topic_word_var={"default": np.full((2, 3), fill)}, doc_topic_prior=np.array([0.2, 0.3]),
                     topic_word_prior={"default": 0.01})
    vocab = Vocabulary(terms=np.array(["a", "b", "c"], dtype=object), doc_freq=np.ones(3, dtype=np.int64),
                       corpus_freq=np.ones(3, dtype=np.int64))
    info = {"kind": "vb_lda", "method": "batch", "converged": True, "trace": [{"elbo": -1.0}],
            "corpus": {"path": "/data/s.zarr", "n_docs": 4, "n_tokens": 10}}
    return SavedModel(state, {"default": vocab}, info)


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from topicflow.io.models.versions import commit_version, model_lock

    path = tmp_path_factory.mktemp("fuzz") / "model"
    save_model(path, tiny_model(1.5))
    with model_lock(path):
        commit_version(path, tiny_model(2.5), kind="update", summary={"docs": 4})
    return path


def read_whole_model(path: Path) -> tuple[Any, ...]:
    """Load the current and the first version and their records, as `show`, `infer` and `update` do."""
    current, first = load_model(path), load_model(path, version=1)
    return (current.state.topic_word_var["default"].tolist(), first.state.topic_word_var["default"].tolist(),
            current.info.kind, read_model_info(path).method)


def _model_names(work: Path) -> list[str]:
    return [str(work)]


@pytest.fixture(scope="module")
def model_baseline(model: Path) -> tuple[Any, ...]:
    return read_whole_model(model)


@FUZZ
@given(data=st.data(), version=st.sampled_from([1, 2]))
def test_damaged_model_json(model: Path, model_baseline: tuple[Any, ...], data: st.DataObject, version: int) -> None:
    relative = f"versions/{version:06d}/model.json"
    mutation = data.draw(mutations(_paths_of(model, relative)))
    result = check_damaged(model, relative, mutation, read_whole_model, _model_names)
    if mutation[0] == "unknown":
        assert result == model_baseline


# ----------------------------------------------------------------------------- seed words


SEED_TEXT = "# seeds\nsports: ball goal:2.5\nmoney: bank  # finance\n"


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(text=st.one_of(
    st.text(max_size=80),
    st.lists(st.sampled_from(["sports:", " ball", " goal:2.5", ":", "#", "\n", "\r\n", "\ufeff", "\x00", " x:nan",
                              " y:inf", " z:-1", " w:1e400", " v:0", "money: bank", "\t", " a:b:3"]),
             max_size=12).map("".join),
    st.integers(0, len(SEED_TEXT)).map(lambda cut: SEED_TEXT[:cut]),
))
def test_damaged_seed_words(text: str) -> None:
    try:
        topics = parse_seed_words(text, source="seeds.txt")
    except TopicflowError as exc:
        assert "seeds.txt" in str(exc) and exc.path == "seeds.txt"
        return
    for topic in topics:
        assert topic.words and all(math.isfinite(w) and w > 0 for w in topic.weights)


# ----------------------------------------------------------------------------- named cases


@pytest.mark.parametrize(("change", "error", "words"), [
    ({"format_version": 99}, FormatVersionError, "upgrade topicflow"),
    ({"format_version": "3"}, CorpusFormatError, "format_version is '3'"),
    ({"shard_size": 0}, CorpusFormatError, "'shard_size' is 0"),
    ({"has_labels": "false"}, CorpusFormatError, "'has_labels' is 'false', expected true or false"),
    ({"languages": []}, CorpusFormatError, "'languages' is []"),
    ({"shards": [{"id": "000000", "first_doc": 0, "n_docs": -3, "n_tokens": {"default": 13},
                  "checksum": "x"}]}, CorpusFormatError, "shard '000000': n_docs is -3"),
])
def test_named_manifest_damage_is_reported_by_field(store: Path, change: dict[str, Any], error: type,
                                                   words: str) -> None:
    payload = json.loads((store / "manifest.json").read_text())
    with pytest.raises(error, match=re.escape(words)) as caught:
        Manifest.from_dict({**payload, **change}, path=str(store))
    assert str(store) in str(caught.value) and isinstance(caught.value, TopicflowError)


def test_an_unknown_model_family_names_the_file() -> None:
    with pytest.raises(ModelFormatError, match=r"m/model.json: model family 'x' is unknown"):
        ModelInfo.from_json({"family": "x"}, where="m/model.json")


@FUZZ
@given(data=st.data())
def test_damaged_versions_json(model: Path, model_baseline: tuple[Any, ...], data: st.DataObject) -> None:
    mutation = data.draw(mutations(_paths_of(model, "versions.json")))
    result = check_damaged(model, "versions.json", mutation, read_whole_model, _model_names)
    if mutation[0] == "unknown":
        assert result == model_baseline


def test_every_value_of_the_version_index_replaced_by_an_odd_value_of_each_kind(model: Path) -> None:
    """Exhaustively, for the file every model command reads first: each value replaced by a missing one,
    a list and an infinite number (the kinds that got past the version index's checks before)."""
    for index in range(_paths_of(model, "versions.json")):
        for value in (None, [], math.inf):
            check_damaged(model, "versions.json", ("replace", index, value), read_whole_model, _model_names)


# ----------------------------------------------------------------------------- stream state and lease


@pytest.fixture(scope="module")
def stream_state(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from topicflow.io.models.stream_state import write_stream_state

    path = tmp_path_factory.mktemp("fuzz") / "state"
    runs = [({"cloud/weights": np.full(4, 0.25), "counts": np.arange(6, dtype=np.int32).reshape(2, 3)},
             {"position": 10}) for _ in range(2)]
    write_stream_state(path, {"records": [{"docs": 4}], "settings": {"n_topics": 2}}, runs)
    return path


def read_state(path: Path) -> Any:
    from topicflow.io.models.stream_state import read_stream_state

    info, runs = read_stream_state(path)
    return info, [(sorted(arrays), meta) for arrays, meta in runs]


@FUZZ
@given(data=st.data())
def test_damaged_stream_state(stream_state: Path, data: st.DataObject) -> None:
    mutation = data.draw(mutations(_paths_of(stream_state, "stream.json")))
    check_damaged(stream_state, "stream.json", mutation, read_state, _store_names)


@FUZZ
@given(data=st.data())
def test_a_damaged_lease_is_never_read_as_a_free_one(data: st.DataObject) -> None:
    """A lease object that is not exactly a topicflow lease reads as None (the commands then refuse with a
    message saying to delete it), never raises, and never reads as released or expired by damage."""
    from topicflow.io.models.lease import LeaseRecord

    held = LeaseRecord(token="t", host="h", pid=123, machine="m", action="update", acquired=1.0e9,
                       expires=2.0e9, renewals=0, released=False)
    mutation = data.draw(mutations(len(list(json_paths(json.loads(held.to_bytes()))))))
    damaged = mutate_text(held.to_bytes().decode("utf-8"), mutation)
    record = LeaseRecord.from_bytes(damaged if isinstance(damaged, bytes) else damaged.encode("utf-8"))
    if record is not None and mutation[0] == "replace":
        _, index, value = mutation
        path = list(json_paths(json.loads(held.to_bytes())))[index]
        # These two decide whether another process may take over: only a real boolean and a real time count.
        if path == ("released",):
            assert isinstance(value, bool) and record.released is value, (mutation, record)
        if path == ("expires",):
            assert isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value), mutation
