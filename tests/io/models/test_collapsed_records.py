"""Model-file support of the collapsed models: their record fields, sampler arrays and checkpoint arrays."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.io.models.test_model_info import small_model
from topicflow.errors import ModelFormatError
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import load_model, save_model
from topicflow.io.models.validation import model_problems


def hdp_info() -> ModelInfo:
    return ModelInfo(family="hdp", kind="hdp", method="pcsvb0", settings={"n_topics": 2},
                     collapsed_state={"alpha": 0.1 + 0.2, "gamma": 1.5, "t_topic_word": 7, "n_docs": 4},
                     topics_in_use=1)


def test_collapsed_record_fields_round_trip_exactly(tmp_path: Path) -> None:
    model = small_model(hdp_info())
    arrays = {"topic_word": np.array([[1.0, 2.0, 3.0], [0.0, 0.5, 1.0 / 3.0]]), "topic_totals": np.array([6.0, 1.5]),
              "tables": np.array([2.0, 0.0])}
    save_model(tmp_path / "m", model.__class__(model.state, model.vocabularies, model.info, sampler_state=arrays))
    loaded = load_model(tmp_path / "m")
    assert loaded.info == hdp_info()
    assert loaded.info.collapsed_state is not None and loaded.info.collapsed_state["alpha"] == 0.1 + 0.2  # exact
    for name, value in arrays.items():
        np.testing.assert_array_equal(loaded.sampler_state[name], value)
        assert loaded.sampler_state[name].dtype == np.float64


def test_wrong_types_of_the_new_fields_are_refused() -> None:
    with pytest.raises(ModelFormatError, match="'topics_in_use' must be an integer or null"):
        ModelInfo.from_json({"family": "hdp", "topics_in_use": "many"})
    with pytest.raises(ModelFormatError, match="'collapsed_state' must be an object or null"):
        ModelInfo.from_json({"family": "hdp", "collapsed_state": [1]})


def test_collapsed_sampler_arrays_are_checked_against_the_model_sizes() -> None:
    base = {"n_topics": 2, "languages": ["en"]}
    lam = {"en": np.ones((2, 3))}
    good = {"topic_word": np.ones((2, 3)), "topic_totals": np.ones(2), "tables": np.zeros(2)}
    assert model_problems(base, lam, np.ones(2), {"en": 0.1}, {}, good) == []
    bad = {**good, "topic_word": np.ones((3, 2)), "tables": np.array([1.0, -1.0])}
    problems = dict(model_problems(base, lam, np.ones(2), {"en": 0.1}, {}, bad))
    assert problems["sampler_state/topic_word"] == "has shape (3, 2), expected (2, 3) (n_terms 3, n_topics 2)"
    assert "values must be >= 0" in problems["sampler_state/tables"]


def test_checkpoints_carry_sampler_arrays(tmp_path: Path) -> None:
    model = small_model(ModelInfo())
    doc_topic = np.array([[1.0, -1.0], [0.25, 3.0]])  # rows of -1: documents not seen yet
    checkpoint = Checkpoint(model.state, {"pass": 0, "unit": 3}, [{"docs_seen": 5}], {"method": "pcsvb0"},
                            {"topic_word": np.ones((2, 3)), "doc_topic": doc_topic})
    write_checkpoint(tmp_path / "ckpt", checkpoint, model.vocabularies)
    found = read_checkpoint(tmp_path / "ckpt", {"method": "pcsvb0"})
    assert found is not None and found.position == {"pass": 0, "unit": 3}
    np.testing.assert_array_equal(found.sampler_state["doc_topic"], doc_topic)
    assert json.loads((tmp_path / "ckpt" / "latest.json").read_text())["position"]["unit"] == 3
