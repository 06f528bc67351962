"""Models, checkpoints and stream states are validated on every read; damage names the place, field and remedy."""
from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import zarr
from numpy.testing import assert_array_equal

from topicflow.errors import CorpusFormatError, InvalidParameterError, ModelFormatError
from topicflow.io.corpus.writer import write_vocabulary
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.io.models.stream_state import read_stream_state, write_stream_state
from topicflow.io.models.validation import model_problems, values_problem
from topicflow.io.models.versions import commit_version, model_lock
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState

N_TOPICS, N_TERMS = 5, 6
ROLLBACK = r"refit the model, or make an earlier version current with `topicflow rollback .*model VERSION`"


def make_model(*, sampler: bool = False, matrix_prior: bool = False) -> SavedModel:
    rng = np.random.default_rng(0)
    counts = rng.integers(0, 5, size=(N_TERMS, N_TOPICS)).astype(np.float64)
    prior: float | np.ndarray = np.full((N_TOPICS, N_TERMS), 0.05) if matrix_prior else 0.01
    state = LDAState(topic_word_var={"default": counts.T + 0.01}, doc_topic_prior=np.linspace(0.1, 0.5, N_TOPICS),
                     topic_word_prior={"default": prior}, topic_names=("sports",) + (None,) * (N_TOPICS - 1))
    vocab = Vocabulary(np.array([f"w{i}" for i in range(N_TERMS)], dtype=object), np.ones(N_TERMS, np.int64),
                       np.full(N_TERMS, 2, np.int64))
    sampler_state = {"term_topic_counts": counts, "topic_counts": counts.sum(axis=0)} if sampler else {}
    return SavedModel(state, {"default": vocab}, {"kind": "test"}, sampler_state=sampler_state)


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    save_model(tmp_path / "model", make_model())
    return tmp_path / "model"


def version_dir(model: Path, version: int = 1) -> Path:
    return model / "versions" / f"{version:06d}"


def edit_json(model: Path, change: Callable[[dict[str, Any]], None]) -> None:
    path = version_dir(model) / "model.json"
    payload = json.loads(path.read_text())
    change(payload)
    path.write_text(json.dumps(payload))


def replace_array(model: Path, name: str, values: np.ndarray) -> None:
    group = zarr.open_group(str(version_dir(model) / "arrays"), mode="a")
    del group[name]
    group.create_array(name, data=values)


def damage(model: Path, field: str, match: str) -> ModelFormatError:
    with pytest.raises(ModelFormatError, match=match) as info:
        load_model(model)
    error = info.value
    assert error.field == field and error.version == 1 and error.path == str(model)
    assert f"model {str(model)!r} version 1 is damaged" in str(error)
    assert isinstance(error, CorpusFormatError) and isinstance(error, ValueError)
    return error


# ----------------------------------------------------------------------------- model.json against the arrays


def test_n_topics_inconsistent_with_the_arrays(model: Path) -> None:
    edit_json(model, lambda m: m.update(n_topics=7))
    error = damage(model, "n_topics", r"n_topics is 7 in model.json but doc_topic_prior has shape \(5,\); " + ROLLBACK)
    assert error.problem is not None and error.problem.startswith("n_topics is 7")


def test_topic_word_var_with_other_row_count_than_alpha(model: Path) -> None:
    replace_array(model, "topic_word_var/default", np.ones((4, N_TERMS)))
    damage(model, "topic_word_var/default", r"topic_word_var/default has shape \(4, 6\), expected \(5, n_terms\)")


def test_negative_alpha(model: Path) -> None:
    replace_array(model, "doc_topic_prior", -np.linspace(0.1, 0.5, N_TOPICS))
    damage(model, "doc_topic_prior", r"doc_topic_prior holds 5 values <= 0 \(smallest -0.5\): values must be > 0")


def test_nan_alpha(model: Path) -> None:
    alpha = np.linspace(0.1, 0.5, N_TOPICS)
    alpha[2] = np.nan
    replace_array(model, "doc_topic_prior", alpha)
    damage(model, "doc_topic_prior", r"doc_topic_prior holds 1 non-finite value \(NaN or infinity\)")


def test_non_positive_or_infinite_lambda(model: Path) -> None:
    lam = np.ones((N_TOPICS, N_TERMS))
    lam[1, 2] = 0.0
    replace_array(model, "topic_word_var/default", lam)
    damage(model, "topic_word_var/default", r"topic_word_var/default holds 1 value <= 0 \(smallest 0.0\)")
    lam[1, 2] = np.inf
    replace_array(model, "topic_word_var/default", lam)
    damage(model, "topic_word_var/default", r"topic_word_var/default holds 1 non-finite value")


def test_vocabulary_length_mismatch(model: Path) -> None:
    shorter = Vocabulary(np.array(["a", "b"], dtype=object), np.ones(2, np.int64), np.ones(2, np.int64))
    write_vocabulary(version_dir(model) / "vocab" / "default", shorter)
    damage(model, "vocab/default", r"vocab/default has 2 terms but topic_word_var/default has 6 columns")


def test_vocab_sizes_inconsistent_with_the_arrays(model: Path) -> None:
    edit_json(model, lambda m: m.update(vocab_sizes={"default": 9}))
    damage(model, "vocab_sizes/default", r"vocab_sizes/default is 9 in model.json but topic_word_var/default has "
                                         r"shape \(5, 6\)")


def test_vocabulary_arrays_of_different_lengths(model: Path) -> None:
    group = zarr.open_group(str(version_dir(model) / "vocab" / "default"), mode="a")
    del group["doc_freq"]
    group.create_array("doc_freq", data=np.ones(3, np.int64))
    damage(model, "vocab/default", r"vocabulary .* is inconsistent: its arrays have shapes")


def test_topic_names_of_another_length(model: Path) -> None:
    edit_json(model, lambda m: m.update(topic_names=["a", "b"]))
    damage(model, "topic_names", r"topic_names lists 2 names for 5 topics")


def test_topic_word_prior_not_a_positive_number(model: Path) -> None:
    edit_json(model, lambda m: m.update(topic_word_prior={"default": -0.1}))
    damage(model, "topic_word_prior/default", r"topic_word_prior/default holds 1 value <= 0")
    edit_json(model, lambda m: m.update(topic_word_prior={"default": "lots"}))
    damage(model, "topic_word_prior/default", r"topic_word_prior/default is 'lots' in model.json, expected a number")


def test_matrix_prior_of_another_shape(tmp_path: Path) -> None:
    save_model(tmp_path / "model", make_model(matrix_prior=True))
    replace_array(tmp_path / "model", "topic_word_prior/default", np.full((N_TOPICS, 2), 0.05))
    damage(tmp_path / "model", "topic_word_prior/default", r"has shape \(5, 2\), expected \(5, 6\)")


def test_sampler_state_inconsistent_with_the_model(tmp_path: Path) -> None:
    model = tmp_path / "model"
    save_model(model, make_model(sampler=True))
    replace_array(model, "sampler_state/term_topic_counts", np.ones((N_TERMS + 1, N_TOPICS)))
    damage(model, "sampler_state/term_topic_counts", r"has shape \(7, 5\), expected \(6, 5\)")
    replace_array(model, "sampler_state/term_topic_counts", -np.ones((N_TERMS, N_TOPICS)))
    damage(model, "sampler_state/term_topic_counts", r"holds 30 values < 0 .*values must be >= 0")
    replace_array(model, "sampler_state/term_topic_counts", np.ones((N_TERMS, N_TOPICS)))
    edit_json(model, lambda m: m.update(sampler_state=["term_topic_counts", "topic_counts", "gone"]))
    damage(model, "sampler_state/gone", r"sampler_state/gone' is missing")


def test_every_problem_is_listed_and_the_first_is_the_field(model: Path) -> None:
    replace_array(model, "doc_topic_prior", np.full(N_TOPICS, np.nan))
    edit_json(model, lambda m: m.update(topic_names=["a"]))
    error = damage(model, "topic_names", r"topic_names lists 1 names .*; doc_topic_prior holds 5 non-finite")
    assert error.problem is not None and error.problem.count(";") == 1


# ----------------------------------------------------------------------------- files that do not decode


def lambda_chunk(model: Path) -> Path:
    chunks = [p for p in (version_dir(model) / "arrays/topic_word_var/default/c").rglob("*") if p.is_file()]
    assert len(chunks) == 1
    return chunks[0]


def test_flipped_bytes_in_a_lambda_chunk(model: Path) -> None:
    # zstd's frame checksum (written with every model array) turns any flip into a decode failure.
    chunk = lambda_chunk(model)
    data = bytearray(chunk.read_bytes())
    for i in range(12, min(40, len(data))):
        data[i] ^= 0xFF
    chunk.write_bytes(bytes(data))
    damage(model, "topic_word_var/default", r"topic_word_var/default' cannot be decoded \(RuntimeError: Zstd")


def test_truncated_lambda_chunk(model: Path) -> None:
    chunk = lambda_chunk(model)
    chunk.write_bytes(chunk.read_bytes()[:20])
    damage(model, "topic_word_var/default", r"topic_word_var/default' cannot be decoded")


def test_model_arrays_carry_the_zstd_checksum(model: Path) -> None:
    meta = json.loads((version_dir(model) / "arrays/doc_topic_prior/zarr.json").read_text())
    assert {"name": "zstd", "configuration": {"level": 0, "checksum": True}} in meta["codecs"]


def test_model_json_that_is_not_json_or_lacks_languages(model: Path) -> None:
    (version_dir(model) / "model.json").write_text('{"format": ')
    damage(model, "model.json", r"model.json is not valid JSON")
    (version_dir(model) / "model.json").write_text(json.dumps({"format": "topicflow-model", "format_version": 1,
                                                               "topic_word_prior": {"default": 0.1}}))
    damage(model, "languages", r"languages is None in model.json, expected a non-empty list")


def test_the_version_read_is_named(model: Path) -> None:
    with model_lock(model, action="update"):
        commit_version(model, make_model(), kind="update", summary={})
    replace_array(model, "doc_topic_prior", -np.ones(N_TOPICS))  # version 1, no longer current
    assert load_model(model).version == 2
    with pytest.raises(ModelFormatError, match=r"version 1 is damaged: doc_topic_prior") as info:
        load_model(model, version=1)
    assert info.value.version == 1


# ----------------------------------------------------------------------------- sound models


def test_sound_models_load_bit_identical(tmp_path: Path) -> None:
    for name, saved in (("plain", make_model()), ("full", make_model(sampler=True, matrix_prior=True))):
        save_model(tmp_path / name, saved)
        loaded = load_model(tmp_path / name)
        assert_array_equal(loaded.state.topic_word_var["default"], saved.state.topic_word_var["default"])
        assert_array_equal(loaded.state.doc_topic_prior, saved.state.doc_topic_prior)
        assert_array_equal(np.asarray(loaded.state.topic_word_prior["default"]),
                           np.asarray(saved.state.topic_word_prior["default"]))
        for key, value in saved.sampler_state.items():
            assert_array_equal(loaded.sampler_state[key], value)
        assert loaded.state.topic_names == saved.state.topic_names


def test_values_problem_and_model_problems() -> None:
    assert values_problem(np.array([1.0, 2.0]), lower=0.0, strict=True) is None
    assert values_problem(np.array([0.0, 2.0]), lower=0.0, strict=False) is None
    assert values_problem(np.array(["a"]), lower=0.0, strict=True) == "has dtype <U1, expected numbers"
    assert values_problem(np.array([np.nan, -np.inf, 1.0]), lower=0.0, strict=True) == (
        "holds 2 non-finite values (NaN or infinity)")
    saved = make_model(sampler=True)
    state = saved.state
    arguments = (state.topic_word_var, state.doc_topic_prior, state.topic_word_prior, saved.vocabularies,
                 saved.sampler_state)
    assert model_problems({"n_topics": N_TOPICS, "languages": ["default"]}, *arguments) == []
    assert model_problems({"n_topics": True}, *arguments) == [
        ("n_topics", "is True in model.json but doc_topic_prior has shape (5,)")]


def test_model_error_survives_pickling() -> None:
    error = ModelFormatError("m", path="p", version=3, field="doc_topic_prior", problem="x")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is ModelFormatError and str(copy) == "m"
    assert (copy.path, copy.version, copy.field, copy.problem) == ("p", 3, "doc_topic_prior", "x")


# ----------------------------------------------------------------------------- checkpoints


FINGERPRINT = {"method": "batch", "settings": {"n_topics": N_TOPICS, "seed": 1}, "corpus": "abc"}


@pytest.fixture()
def checkpoint(tmp_path: Path) -> Path:
    saved = make_model()
    write_checkpoint(tmp_path / "ckpt", Checkpoint(saved.state, {"iteration": 3}, [{"elbo": -1.0}] * 4, FINGERPRINT),
                     saved.vocabularies)
    return tmp_path / "ckpt"


def checkpoint_damage(path: Path, field: str, match: str) -> None:
    with pytest.raises(ModelFormatError, match=rf"checkpoint '.*ckpt' is damaged: {match}.*; delete it, or run the "
                                               r"fit without --resume") as info:
        read_checkpoint(path, FINGERPRINT)
    assert info.value.field == field and info.value.path == str(path)


def test_sound_checkpoint_reads(checkpoint: Path) -> None:
    found = read_checkpoint(checkpoint, FINGERPRINT)
    assert found is not None and found.position == {"iteration": 3} and found.state.n_topics == N_TOPICS


def test_checkpoint_with_nan_lambda(checkpoint: Path) -> None:
    lam = np.ones((N_TOPICS, N_TERMS))
    lam[0, 0] = np.nan
    group = zarr.open_group(str(checkpoint / "a" / "versions" / "000001" / "arrays"), mode="a")
    del group["topic_word_var/default"]
    group.create_array("topic_word_var/default", data=lam)
    checkpoint_damage(checkpoint, "topic_word_var/default", r"topic_word_var/default holds 1 non-finite value")


def test_checkpoint_latest_naming_a_missing_or_no_slot(checkpoint: Path) -> None:
    (checkpoint / "latest.json").write_text(json.dumps({"slot": "b", "position": {"iteration": 3}}))
    checkpoint_damage(checkpoint, "b", r"latest.json names slot 'b', which holds no model")
    (checkpoint / "latest.json").write_text("{")
    checkpoint_damage(checkpoint, "latest.json", r"latest.json is not valid JSON naming slot 'a' or 'b'")


def test_checkpoint_position_inconsistent_with_latest(checkpoint: Path) -> None:
    (checkpoint / "latest.json").write_text(json.dumps({"slot": "a", "position": {"iteration": 8}}))
    checkpoint_damage(checkpoint, "latest.json", r"latest.json gives position \{'iteration': 8\} but slot 'a' holds "
                                                 r"position \{'iteration': 3\}")


def test_checkpoint_state_with_other_topic_count_than_its_settings(tmp_path: Path) -> None:
    saved = make_model()
    fingerprint = {**FINGERPRINT, "settings": {"n_topics": 8, "seed": 1}}
    write_checkpoint(tmp_path / "ckpt", Checkpoint(saved.state, {"iteration": 0}, [], fingerprint), saved.vocabularies)
    with pytest.raises(ModelFormatError, match=r"n_topics is 8 in the settings but the saved state has 5 topics"):
        read_checkpoint(tmp_path / "ckpt", fingerprint)


def test_checkpoint_of_other_settings_is_still_refused_as_before(checkpoint: Path) -> None:
    with pytest.raises(InvalidParameterError, match="other settings"):
        read_checkpoint(checkpoint, {**FINGERPRINT, "settings": {"n_topics": N_TOPICS, "seed": 2}})


def test_checkpoint_write_replaces_a_damaged_latest(checkpoint: Path) -> None:
    (checkpoint / "latest.json").write_text("{")
    saved = make_model()
    write_checkpoint(checkpoint, Checkpoint(saved.state, {"iteration": 4}, [], FINGERPRINT), saved.vocabularies)
    found = read_checkpoint(checkpoint, FINGERPRINT)
    assert found is not None and found.position == {"iteration": 4}


# ----------------------------------------------------------------------------- stream states


def runs() -> list[tuple[dict[str, np.ndarray], dict[str, object]]]:
    return [({"cloud/weights": np.full(4, 0.25), "counts": np.arange(6, dtype=np.int32).reshape(2, 3)},
             {"position": 10}) for _ in range(2)]


def test_stream_state_records_and_checks_shapes(tmp_path: Path) -> None:
    write_stream_state(tmp_path / "state", {"records": []}, runs())
    info, loaded = read_stream_state(tmp_path / "state")
    assert "run_arrays" not in info and info["n_runs"] == 2 and loaded[1][0]["counts"].shape == (2, 3)
    recorded = json.loads((tmp_path / "state" / "stream.json").read_text())["run_arrays"]
    assert recorded[0] == {"cloud/weights": {"dtype": "float64", "shape": [4]},
                           "counts": {"dtype": "int32", "shape": [2, 3]}}
    other = {"cloud/weights": np.full(3, 1 / 3), "counts": np.arange(6, dtype=np.int32).reshape(2, 3)}
    np.savez(tmp_path / "state" / "runs" / "001" / "arrays.npz", **other)  # type: ignore[arg-type]
    with pytest.raises(ModelFormatError, match=r"saved stream state .*: run 1/cloud/weights is \{'dtype': 'float64', "
                                               r"'shape': \[3\]\} but stream.json records .*shape': \[4\]\}.*"
                                               r"without --resume") as info_error:
        read_stream_state(tmp_path / "state")
    assert info_error.value.field == "run 1/cloud/weights"


def test_stream_state_with_truncated_npz(tmp_path: Path) -> None:
    write_stream_state(tmp_path / "state", {"records": []}, runs())
    npz = tmp_path / "state" / "runs" / "000" / "arrays.npz"
    npz.write_bytes(npz.read_bytes()[:100])
    with pytest.raises(ModelFormatError, match=r"run 0 cannot be read \(BadZipFile"):
        read_stream_state(tmp_path / "state")


def test_stream_state_with_inconsistent_run_count(tmp_path: Path) -> None:
    write_stream_state(tmp_path / "state", {"records": []}, runs())
    info_path = tmp_path / "state" / "stream.json"
    payload = json.loads(info_path.read_text())
    info_path.write_text(json.dumps({**payload, "n_runs": 3}))
    with pytest.raises(ModelFormatError, match=r"stream.json records the arrays of 2 runs for 3 runs"):
        read_stream_state(tmp_path / "state")
    info_path.write_text(json.dumps({**payload, "n_runs": "two"}))
    with pytest.raises(ModelFormatError, match=r"stream.json gives n_runs 'two'"):
        read_stream_state(tmp_path / "state")
    info_path.write_text("[")
    with pytest.raises(ModelFormatError, match=r"stream.json is not valid JSON"):
        read_stream_state(tmp_path / "state")


def test_stream_state_written_before_shapes_were_recorded_still_reads(tmp_path: Path) -> None:
    write_stream_state(tmp_path / "state", {"records": []}, runs())
    info_path = tmp_path / "state" / "stream.json"
    payload = json.loads(info_path.read_text())
    del payload["run_arrays"]
    info_path.write_text(json.dumps(payload))
    info, loaded = read_stream_state(tmp_path / "state")
    assert info["n_runs"] == 2 and len(loaded) == 2
