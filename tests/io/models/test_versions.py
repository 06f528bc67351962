"""Versioned model directories: save/load, commit/list/rollback/prune, crashes, the lock, legacy models."""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from topicflow.errors import (
    InvalidParameterError,
    LockedError,
    ModelNotFoundError,
    StoreExistsError,
)
from topicflow.io.models import store as model_store
from topicflow.io.models import versions as model_versions
from topicflow.io.models.store import SavedModel, load_model, save_model, write_model_dir
from topicflow.io.models.versions import commit_version, list_versions, model_lock, prune_versions, rollback
from topicflow.models.lda.state import LDAState
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.testing.faults import HANG_GUARD_SECONDS


def make_model(fill: float, *, matrix_prior: bool = False) -> SavedModel:
    """A tiny bilingual model whose lambda is ``fill`` everywhere, so versions are told apart by value."""
    vocab_en = Vocabulary.from_counts({"tax": 2, "fox": 1, "dog": 1}, {"tax": 3, "fox": 2, "dog": 1})
    vocab_de = Vocabulary.from_counts({"steuer": 1, "hund": 1}, {"steuer": 2, "hund": 1})
    prior_en: float | np.ndarray = np.full((2, 3), 0.05) if matrix_prior else 0.01
    state = LDAState(
        topic_word_var={"en": np.full((2, 3), fill), "de": np.full((2, 2), fill + 1)},
        doc_topic_prior=np.array([0.1, 0.2]),
        topic_word_prior={"en": prior_en, "de": 0.02},
        topic_names=("economy", None),
    )
    info = {"kind": "vb_lda", "method": "batch", "converged": True, "trace": [{"elbo": -1.0}] * 4,
            "corpus": {"path": "/data/s.zarr", "n_docs": 120, "n_tokens": 3456}}
    return SavedModel(state=state, vocabularies={"en": vocab_en, "de": vocab_de}, info=info)


def lam(model: SavedModel) -> float:
    return float(model.state.topic_word_var["en"][0, 0])


@pytest.fixture
def saved(tmp_path: Path) -> Path:
    save_model(tmp_path / "model", make_model(1.0))
    return tmp_path / "model"


def commit(path: Path, fill: float, **summary: Any) -> int:
    with model_lock(path, action="update"):
        return commit_version(path, make_model(fill), kind="update", summary=summary)


# ----------------------------------------------------------------------------- save / load


@pytest.mark.parametrize("matrix_prior", [False, True])
def test_save_load_round_trip_in_versioned_layout(tmp_path: Path, matrix_prior: bool) -> None:
    model = make_model(1.5, matrix_prior=matrix_prior)
    save_model(tmp_path / "model", model)
    root = tmp_path / "model"
    assert sorted(p.name for p in root.iterdir()) == ["versions", "versions.json"]
    assert (root / "versions" / "000001" / "model.json").is_file()
    index = json.loads((root / "versions.json").read_text())
    assert index["format"] == "topicflow-model-versions" and index["format_version"] == 1
    assert index["current"] == 1 and [v["kind"] for v in index["versions"]] == ["fit"]
    loaded = load_model(root)
    assert loaded.version == 1
    for lang in ("en", "de"):
        assert_array_equal(loaded.state.topic_word_var[lang], model.state.topic_word_var[lang])
        assert_array_equal(loaded.state.topic_word_prior[lang], model.state.topic_word_prior[lang])
        assert loaded.vocabularies[lang].terms.tolist() == model.vocabularies[lang].terms.tolist()
        assert loaded.vocabularies[lang].corpus_freq.tolist() == model.vocabularies[lang].corpus_freq.tolist()
    assert_array_equal(loaded.state.doc_topic_prior, model.state.doc_topic_prior)
    assert loaded.state.topic_names == ("economy", None) and loaded.info.method == "batch"
    assert np.ndim(loaded.state.topic_word_prior["en"]) == (2 if matrix_prior else 0)
    assert lam(load_model(root, version=1)) == 1.5
    [info] = list_versions(root)
    assert (info.version, info.kind, info.is_current, info.parent) == (1, "fit", True, None)
    assert info.summary == {"method": "batch", "store": "/data/s.zarr", "n_docs": 120, "n_tokens": 3456,
                            "converged": True, "n_iterations": 4}
    assert info.created.endswith("+00:00")


def test_missing_model_and_unknown_version_errors(saved: Path, tmp_path: Path) -> None:
    with pytest.raises(ModelNotFoundError, match=r"no topicflow model at '.*nowhere'; fit one with "
                                                 r"`topicflow fit STORE --model .*nowhere`") as info:
        load_model(tmp_path / "nowhere")
    assert isinstance(info.value, FileNotFoundError) and info.value.path == str(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelNotFoundError, match="neither versions.json nor model.json"):
        load_model(tmp_path / "empty")
    with pytest.raises(ModelNotFoundError, match=r"has no version 5; it has versions \[1\] \(current 1\)"):
        load_model(saved, version=5)
    with pytest.raises(ModelNotFoundError):
        list_versions(tmp_path / "nowhere")
    with pytest.raises(ModelNotFoundError):
        with model_lock(tmp_path / "nowhere"):
            pass
    with pytest.raises(StoreExistsError, match="model path .* exists already"):
        save_model(saved, make_model(2.0))


# ----------------------------------------------------------------------------- life cycle


def test_commit_list_rollback_prune(saved: Path) -> None:
    assert commit(saved, 2.0, n_docs=1200) == 2
    assert commit(saved, 3.0, n_docs=950) == 3
    assert lam(load_model(saved)) == 3.0 and load_model(saved).version == 3
    assert [lam(load_model(saved, version=v)) for v in (1, 2, 3)] == [1.0, 2.0, 3.0]
    infos = list_versions(saved)
    assert [(i.version, i.kind, i.is_current, i.parent) for i in infos] == [
        (1, "fit", False, None), (2, "update", False, 1), (3, "update", True, 2)]
    assert infos[1].summary == {"n_docs": 1200}

    rollback(saved, 1)
    assert load_model(saved).version == 1 and lam(load_model(saved)) == 1.0
    assert [i.is_current for i in list_versions(saved)] == [True, False, False]
    rollback(saved, 1)  # already current: nothing to do
    with pytest.raises(ModelNotFoundError, match=r"no version 9; it has versions \[1, 2, 3\] \(current 1\)"):
        rollback(saved, 9)

    # An update after a rollback starts from the rolled-back version and gets a new number.
    assert commit(saved, 4.0) == 4
    assert list_versions(saved)[-1].parent == 1
    rollback(saved, 1)
    # Keep the newest one (4) and never the current one (1): 2 and 3 go.
    assert prune_versions(saved, keep=1) == [2, 3]
    assert [i.version for i in list_versions(saved)] == [1, 4]
    assert sorted(p.name for p in (saved / "versions").iterdir()) == ["000001", "000004"]
    assert prune_versions(saved, keep=5) == []
    assert commit(saved, 5.0) == 5  # numbers are never reused
    history = json.loads((saved / "versions.json").read_text())["history"]
    assert [e["action"] for e in history] == ["commit", "commit", "commit", "rollback", "commit", "rollback",
                                              "prune", "commit"]
    assert history[3] == {"action": "rollback", "time": history[3]["time"], "from": 3, "to": 1}
    assert history[6]["removed"] == [2, 3]
    with pytest.raises(InvalidParameterError, match="keep must be a positive integer, got 0"):
        prune_versions(saved, keep=0)


def test_commit_checks_lock_kind_and_summary(saved: Path) -> None:
    with pytest.raises(RuntimeError, match=r"must run inside `with model_lock\("):
        commit_version(saved, make_model(2.0), kind="update", summary={})
    with model_lock(saved):
        with pytest.raises(InvalidParameterError, match=r"kind must be one of \['fit', 'update'\], got 'nightly'"):
            commit_version(saved, make_model(2.0), kind="nightly", summary={})
        with pytest.raises(InvalidParameterError, match="JSON-able"):
            commit_version(saved, make_model(2.0), kind="update", summary={"n_docs": np.int64(3)})
        # The lock is re-entrant within a thread: prune and rollback work inside the block.
        assert commit_version(saved, make_model(2.0), kind="fit", summary={"refit": True}) == 2
        assert prune_versions(saved, keep=1) == [1]
    assert [i.version for i in list_versions(saved)] == [2]


# ----------------------------------------------------------------------------- crashes


def test_crash_before_index_rewrite_keeps_previous_version(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    index_before = (saved / "versions.json").read_bytes()

    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt  # as if killed just before the commit point

    monkeypatch.setattr(model_versions, "write_version_index", crash)
    with pytest.raises(KeyboardInterrupt):
        commit(saved, 2.0)
    assert (saved / "versions.json").read_bytes() == index_before
    assert load_model(saved).version == 1 and lam(load_model(saved)) == 1.0
    assert (saved / "versions" / "000002").is_dir()  # renamed but never listed: debris
    assert [i.version for i in list_versions(saved)] == [1]
    with pytest.raises(ModelNotFoundError):
        load_model(saved, version=2)
    monkeypatch.undo()
    assert commit(saved, 2.5) == 2  # the rerun removes the debris and redoes the work
    assert lam(load_model(saved)) == 2.5 and lam(load_model(saved, version=1)) == 1.0


def test_crash_while_writing_a_version_leaves_nothing_listed(saved: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash_midway(directory: Path, model: SavedModel) -> None:
        directory.mkdir()
        (directory / "model.json").write_text("{half")
        raise OSError("disk full")

    monkeypatch.setattr(model_versions, "write_model_dir", crash_midway)
    with pytest.raises(OSError, match="disk full"):
        commit(saved, 2.0)
    assert sorted(p.name for p in (saved / "versions").iterdir()) == ["000001"]
    monkeypatch.undo()
    # A hard kill leaves the temporary directory (and maybe an unlisted numbered one) behind.
    (saved / "versions" / ".000002.tmp-0123456789ab").mkdir()
    (saved / "versions" / "000003").mkdir()
    assert load_model(saved).version == 1
    assert commit(saved, 2.0) == 2
    assert sorted(p.name for p in (saved / "versions").iterdir()) == ["000001", "000002"]


# ----------------------------------------------------------------------------- lock


@pytest.fixture
def held_by_other_process(saved: Path) -> Iterator[Path]:
    """The model's lock file held with flock by a child process (as a running update would)."""
    code = ("import fcntl, sys; f = open(sys.argv[1], 'a+'); fcntl.flock(f.fileno(), fcntl.LOCK_EX); "
            "print('locked', flush=True); sys.stdin.read()")
    child = subprocess.Popen([sys.executable, "-c", code, str(saved / ".lock")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "locked"
        yield saved
    finally:
        child.communicate(timeout=HANG_GUARD_SECONDS)  # closing its stdin ends it; the timeout is a hang guard


def test_lock_held_by_another_process_refuses_changes(held_by_other_process: Path) -> None:
    saved = held_by_other_process
    with pytest.raises(LockedError) as info:
        with model_lock(saved, action="update"):
            pass
    message = str(info.value)
    assert f"model {str(saved)!r} is locked by another topicflow process, which is changing it" in message
    assert "so this update did not start" in message and "Wait for that process to finish" in message
    assert "nothing needs deleting" in message and info.value.path == str(saved)
    with pytest.raises(LockedError, match="this rollback did not start"):
        rollback(saved, 1)
    with pytest.raises(LockedError, match="this prune did not start"):
        prune_versions(saved, keep=1)
    with pytest.raises(LockedError, match="this overwrite did not start"):
        save_model(saved, make_model(9.0), overwrite=True)
    assert load_model(saved).version == 1  # readers take no lock


def test_lock_held_by_another_thread_and_released_after(saved: Path) -> None:
    # The holder keeps the lock until this test releases it (no timeout decides when); the waits on
    # the holder are hang guards only.
    entered, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with model_lock(saved, action="update"):
                entered.set()
                release.wait()
        finally:
            entered.set()  # also if taking the lock failed: the test then fails at once, not at the guard

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert entered.wait(HANG_GUARD_SECONDS)
        with pytest.raises(LockedError, match="is locked by another topicflow process"):
            with model_lock(saved):
                pass
    finally:
        release.set()
        thread.join(HANG_GUARD_SECONDS)
    assert not thread.is_alive()
    assert commit(saved, 2.0) == 2  # released when the holder's block exits


def test_save_overwrite_replaces_every_version(saved: Path) -> None:
    commit(saved, 2.0)
    save_model(saved, make_model(7.0), overwrite=True)
    assert [(i.version, i.kind) for i in list_versions(saved)] == [(1, "fit")]
    assert lam(load_model(saved)) == 7.0
    assert not [p for p in saved.parent.iterdir() if p.name.startswith(".")]


# ----------------------------------------------------------------------------- legacy models


@pytest.fixture
def legacy(tmp_path: Path) -> Path:
    """A model directory as save_model wrote it before versions existed."""
    write_model_dir(tmp_path / "old", make_model(1.0))
    return tmp_path / "old"


def test_legacy_model_loads_and_lists_as_version_1(legacy: Path) -> None:
    model = load_model(legacy)
    assert model.version == 1 and lam(model) == 1.0
    assert load_model(legacy, version=1).version == 1
    with pytest.raises(ModelNotFoundError, match="unversioned \\(legacy\\) model, which only has version 1"):
        load_model(legacy, version=2)
    [info] = list_versions(legacy)
    assert (info.version, info.kind, info.is_current) == (1, "fit", True) and info.summary["n_docs"] == 120
    rollback(legacy, 1)
    assert prune_versions(legacy, keep=1) == []
    assert not (legacy / "versions.json").exists()  # reading and no-ops never convert


def test_commit_converts_legacy_model(legacy: Path) -> None:
    legacy_json = (legacy / "model.json").read_bytes()
    assert commit(legacy, 2.0, n_docs=10) == 2
    assert sorted(p.name for p in legacy.iterdir()) == [".lock", "versions", "versions.json"]
    assert (legacy / "versions" / "000001" / "model.json").read_bytes() == legacy_json
    assert lam(load_model(legacy)) == 2.0 and lam(load_model(legacy, version=1)) == 1.0
    assert [(i.version, i.kind, i.parent) for i in list_versions(legacy)] == [(1, "fit", None), (2, "update", 1)]
    history = json.loads((legacy / "versions.json").read_text())["history"]
    assert [e["action"] for e in history] == ["convert", "commit"]


def test_crash_during_legacy_conversion_keeps_legacy_model(legacy: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def crash(*args: Any, **kwargs: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(model_versions, "write_version_index", crash)
    with pytest.raises(KeyboardInterrupt):
        commit(legacy, 2.0)
    assert model_store.is_legacy_model(legacy) and lam(load_model(legacy)) == 1.0
    monkeypatch.undo()
    assert commit(legacy, 2.0) == 2  # the rerun removes the half-made versions/000001 and converts
    assert not (legacy / "model.json").exists() and not (legacy / "arrays").exists()
    assert [i.version for i in list_versions(legacy)] == [1, 2] and lam(load_model(legacy, version=1)) == 1.0
    (legacy / "arrays").mkdir()  # as if killed while deleting the legacy copies
    assert prune_versions(legacy, keep=1) == [1]
    assert not (legacy / "arrays").exists() and lam(load_model(legacy)) == 2.0
