"""The typed model record: model.json round trip, the family, unknown keys kept, wrong types refused."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from topicflow.errors import ModelFormatError
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState


def small_model(info: ModelInfo | dict) -> SavedModel:
    state = LDAState(topic_word_var={"default": np.full((2, 3), 1.5)}, doc_topic_prior=np.array([0.2, 0.3]),
                     topic_word_prior={"default": 0.01})
    vocab = Vocabulary(terms=np.array(["a", "b", "c"], dtype=object), doc_freq=np.ones(3, dtype=np.int64),
                       corpus_freq=np.ones(3, dtype=np.int64))
    return SavedModel(state, {"default": vocab}, info)


def test_record_round_trips_through_a_saved_model(tmp_path: Path) -> None:
    info = ModelInfo(kind="vb_lda", method="online", settings={"n_topics": 2}, trace=[{"t": 1}], converged=False,
                     corpus={"n_docs": 4, "shards": []}, online={"t": 3, "docs_seen": 4, "config": {}},
                     extra={"from_a_newer_version": [1, 2]})
    save_model(tmp_path / "m", small_model(info))
    payload = json.loads(next((tmp_path / "m").rglob("model.json")).read_text())
    assert payload["family"] == "lda" and payload["from_a_newer_version"] == [1, 2]
    assert "algorithm" not in payload  # None fields are left out
    loaded = load_model(tmp_path / "m").info
    assert loaded == info


def test_models_saved_before_the_record_are_lda_models() -> None:
    info = ModelInfo.from_json({"kind": "vb_lda", "method": "batch", "format": "topicflow-model", "n_topics": 2})
    assert info.family == "lda" and info.method == "batch" and info.extra == {}


def test_a_mapping_given_to_saved_model_becomes_the_record() -> None:
    model = small_model({"kind": "stream", "algorithm": "sgs", "summary": [{"point": 1}]})
    assert isinstance(model.info, ModelInfo) and model.info.algorithm == "sgs" and model.info.summary == [{"point": 1}]


@pytest.mark.parametrize(("payload", "field"), [
    ({"settings": [1]}, "settings"), ({"converged": "yes"}, "converged"), ({"trace": {}}, "trace"),
    ({"method": 3}, "method"), ({"corpus": None}, "corpus"),
])
def test_wrong_types_are_refused_naming_the_field(payload: dict, field: str) -> None:
    with pytest.raises(ModelFormatError, match=f"'{field}' must be"):
        ModelInfo.from_json(payload, where="m/model.json")


def test_an_unknown_family_asks_for_a_newer_topicflow() -> None:
    with pytest.raises(ModelFormatError, match="upgrade topicflow"):
        ModelInfo.from_json({"family": "hdp-from-the-future"})
