"""Collapsed models as saved models: exact round trip, the record, and the LDA view every reader uses."""
from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.collapsed.helpers import (
    PARAMS,
    assert_same_state,
    config,
    planted_store,
)
from topicflow.cli.model import format_topics
from topicflow.errors import ModelFormatError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model, version_path
from topicflow.metrics.heldout import (
    HeldoutStats,
    completion_doc_log_likelihood,
    split_doc_tokens,
)
from topicflow.models.lda.scvb0 import SCVB0State
from topicflow.models.lda.vb.params import VBParams
from topicflow.pipeline.collapsed import (
    CollapsedResult,
    config_from_dict,
    fit_collapsed,
    is_collapsed_model,
    saved_config,
    saved_state,
)
from topicflow.pipeline.evaluation import heldout_likelihood
from topicflow.pipeline.vb import model_blocks


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_store(tmp_path_factory.mktemp("collapsed-saved") / "c.zarr")


@pytest.fixture(scope="module")
def fitted(store: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[CollapsedResult, Path]:
    result = fit_collapsed(store, config(batch_size=16, eval_every=48), test=store)
    path = tmp_path_factory.mktemp("models") / "hdp-model"
    save_model(path, result.saved_model)
    return result, path


def test_state_and_settings_load_back_bit_for_bit(fitted: tuple[CollapsedResult, Path]) -> None:
    result, path = fitted
    model = load_model(path)
    assert is_collapsed_model(model)
    assert_same_state(saved_state(model), result.state)
    assert saved_config(model) == config(batch_size=16, eval_every=48)
    assert config_from_dict(model.info.settings) == saved_config(model)
    info = model.info
    assert (info.family, info.kind, info.method) == ("hdp", "hdp", "pcsvb0")
    assert info.topics_in_use == result.topics_in_use == result.state.topics_in_use(1e-3)
    assert info.trace == list(result.trace)
    assert info.corpus["n_docs"] == 96 and len(info.corpus["shards"]) == 3
    assert info.collapsed_state is not None and info.collapsed_state["t_topic_word"] == result.state.t_topic_word


def test_the_lda_view_is_n_kw_plus_beta_with_the_prior_alpha_pi(fitted: tuple[CollapsedResult, Path]) -> None:
    result, path = fitted
    model = load_model(path)
    view = result.state.to_lda_state()
    np.testing.assert_array_equal(model.state.topic_word_var["default"], view.topic_word_var["default"])
    np.testing.assert_array_equal(model.state.doc_topic_prior, result.state.alpha * result.state.stick_weights())
    assert model.state.n_topics == PARAMS.truncation  # every stick is a topic of the view; in use is reported apart
    assert math.isclose(float(model.state.doc_topic_prior.sum()), result.state.alpha, rel_tol=1e-12)


def test_topics_and_evaluate_read_the_model(fitted: tuple[CollapsedResult, Path], store: Path) -> None:
    result, path = fitted
    listing = format_topics(str(path), 5)
    assert len(listing["topics"]) == PARAMS.truncation
    first = listing["topics"][0]
    assert first["alpha"] == pytest.approx(float(np.max(load_model(path).state.doc_topic_prior)))
    scored = heldout_likelihood(load_model(path), store, "completion-random", fraction=0.7, seed=0)
    # The trace's last held-out perplexity is the common evaluator's on the saved model.
    assert scored.perplexity == pytest.approx(result.trace[-1]["heldout_perplexity"], rel=1e-12)


def test_heldout_perplexity_equals_the_metrics_computed_directly(fitted: tuple[CollapsedResult, Path],
                                                                 store: Path) -> None:
    """Independent of the evaluation driver: split every document 70/30, fold in, score, sum."""
    result, path = fitted
    model = load_model(path)
    corpus = Corpus.open(store)
    beta = model.state.topic_word()
    total = HeldoutStats.zeros()
    for shard in range(corpus.n_shards):
        observed, heldout = split_doc_tokens(corpus.read_block(shard), seed=0, fraction=0.7)
        total = total.merge(HeldoutStats.from_documents(*completion_doc_log_likelihood(
            observed, heldout, beta, model.state.doc_topic_prior, VBParams(n_topics=PARAMS.truncation))))
    assert total.perplexity == pytest.approx(result.trace[-1]["heldout_perplexity"], rel=1e-12)
    assert len(model_blocks(model, corpus, token="x")[0]) == corpus.n_shards


def test_scvb0_models_are_lda_models_with_their_counts(store: Path, tmp_path: Path) -> None:
    cfg = config("scvb0", batch_size=32, passes=1, params=replace(PARAMS, alpha_init=0.1))
    result = fit_collapsed(store, cfg)
    save_model(tmp_path / "m", result.saved_model)
    model = load_model(tmp_path / "m")
    assert (model.info.family, model.info.kind, model.info.method) == ("lda", "scvb0", "scvb0")
    np.testing.assert_array_equal(model.state.doc_topic_prior, np.full(6, 0.1))
    state = saved_state(model)
    assert isinstance(state, SCVB0State)
    assert_same_state(state, result.state)


def test_a_damaged_sampler_array_is_reported_by_name(fitted: tuple[CollapsedResult, Path], tmp_path: Path) -> None:
    result, _ = fitted
    model = result.saved_model
    broken = replace(model, sampler_state={**model.sampler_state, "tables": np.ones(3)})
    save_model(tmp_path / "broken", broken)
    with pytest.raises(ModelFormatError, match=r"sampler_state/tables has shape \(3,\), expected \(6,\)"):
        load_model(tmp_path / "broken")
    assert (version_path(tmp_path / "broken", 1) / "arrays" / "sampler_state" / "topic_word").is_dir()
    negative = replace(model, sampler_state={**model.sampler_state, "topic_word": -model.sampler_state["topic_word"]})
    save_model(tmp_path / "negative", negative)
    with pytest.raises(ModelFormatError, match="sampler_state/topic_word holds"):
        load_model(tmp_path / "negative")
