"""Tests of topicflow.models.infvoc_lda.params: defaults from the chapter, validation, JSON round trip."""
from __future__ import annotations

import json

import pytest

from topicflow.errors import InvalidParameterError
from topicflow.models.infvoc_lda.params import PAPER_STEP, InfVocParams
from topicflow.models.lda.vb.online import StepSchedule


def test_defaults_follow_the_chapter() -> None:
    params = InfVocParams(n_topics=4)
    assert params.alpha == 0.25  # alpha^theta = 1/K (Zhai 2014, sec. 7.5)
    assert (params.burn_in, params.samples) == (5, 5)  # spec P7
    assert params.step == PAPER_STEP == StepSchedule(tau0=64.0, kappa=0.8)
    assert params.new_nu2 == 1.0 and InfVocParams(n_topics=2, new_word_nu2="prior").new_nu2 == 1000.0


def test_json_round_trip() -> None:
    params = InfVocParams(n_topics=3, doc_topic_prior=0.2, stick_concentration=3000.0, truncation=40000,
                          reorder_every=20, step=StepSchedule(tau0=64.0, kappa=0.6), burn_in=2, samples=7,
                          new_word_nu2="prior", unseen_weight="g0", seed=9, restate_tail=True)
    assert InfVocParams.from_dict(json.loads(json.dumps(params.to_dict()))) == params
    old = {k: v for k, v in params.to_dict().items() if k != "restate_tail"}  # saved before the option existed
    assert InfVocParams.from_dict(old).restate_tail is False


@pytest.mark.parametrize("kwargs, match", [
    ({"n_topics": 0}, "n_topics"), ({"n_topics": 2, "stick_concentration": -1.0}, "stick_concentration"),
    ({"n_topics": 2, "truncation": 0}, "truncation"), ({"n_topics": 2, "samples": 0}, "samples"),
    ({"n_topics": 2, "new_word_nu2": "two"}, "new_word_nu2"), ({"n_topics": 2, "unseen_weight": "x"}, "unseen_weight"),
    ({"n_topics": 2, "doc_topic_prior": 0.0}, "doc_topic_prior"), ({"n_topics": 2, "step": 0.5}, "StepSchedule"),
    ({"n_topics": 2, "restate_tail": 1}, "restate_tail"),
])
def test_invalid_settings_name_the_field(kwargs: dict, match: str) -> None:
    with pytest.raises(InvalidParameterError, match=match):
        InfVocParams(**kwargs)
