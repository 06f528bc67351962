"""The infvoc model file (save/load round trip, LDA view) and checkpoint resume."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.infvoc_lda.reference import same_state
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.infvoc import pack_arrays, unpack_arrays
from topicflow.io.models.store import load_model, save_model
from topicflow.models.infvoc_lda import InfVocParams, InfVocState
from topicflow.models.infvoc_lda.g0 import log_g0
from topicflow.pipeline.infvoc_lda import (
    InfVocPlan,
    WordIndex,
    fit_infvoc,
    infvoc_result_model,
    lda_view,
    saved_g0,
    saved_infvoc,
)
from topicflow.pipeline.policies import CheckpointPolicy

PARAMS = InfVocParams(n_topics=3, truncation=12, reorder_every=2, burn_in=2, samples=2, seed=5)
PLAN = InfVocPlan(batch_size=16, pieces=3, min_piece_docs=4)


def test_model_round_trip_is_exact(ordered_store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(ordered_store)
    result = fit_infvoc(corpus, PARAMS, PLAN, track_words=["kakaka"])
    assert np.any(np.isneginf(result.state.rank_log))  # "qq" has G0 = 0: -inf survives the store
    save_model(tmp_path / "m", infvoc_result_model(corpus, result, PARAMS, PLAN))
    model = load_model(tmp_path / "m")
    params, state, index, position = saved_infvoc(model)
    assert params == PARAMS and same_state(state, result.state) and index == result.word_index
    assert (position.i, position.docs_seen, position.plan) == (6, 96, PLAN)
    g0, source = saved_g0(model)
    assert source == "default" and g0 is not None
    np.testing.assert_array_equal(log_g0(g0, list(index.words)), result.log_g0)
    assert model.info.family == "infvoc" and model.info.kind == "infvoc" and len(model.info.trace) == 6
    assert model.info.trace[-1]["word_ranks"]["kakaka"] == result.trace[-1].word_ranks["kakaka"]
    assert [s["id"] for s in model.info.corpus["shards"]] == [s.shard_id for s in corpus.shards]


def test_model_without_g0_round_trips(ordered_store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(ordered_store)
    result = fit_infvoc(corpus, PARAMS, PLAN, shards=[1], g0=None)
    save_model(tmp_path / "m", infvoc_result_model(corpus, result, PARAMS, PLAN, shards=[1]))
    model = load_model(tmp_path / "m")
    assert saved_g0(model) == (None, None)
    assert same_state(saved_infvoc(model)[1], result.state)


def test_lda_view_by_hand() -> None:
    # One topic, TOS [word 1, word 0], nu1 = [2, 1], nu2 = [1, 1]: E[beta] = [2/3, 1/2 * 1/3], remaining 1/6;
    # topic 2's TOS holds word 2 too, so the view has 3 words and topic 1 spreads its 1/6 over word 2.
    state = InfVocState(np.array([0, 2, 5]), np.array([1, 0, 2, 0, 1]), np.array([2.0, 1.0, 1.0, 1.0, 1.0]),
                        np.array([1.0, 1.0, 1.0, 1.0, 1.0]), np.zeros(3, np.int64), np.zeros(0, np.int64),
                        np.zeros(0))
    view, vocab = lda_view(state, WordIndex(["a", "b", "c"]), InfVocParams(n_topics=2))
    lam = view.topic_word_var["default"]
    eta = 1 / 3
    np.testing.assert_allclose(lam[0], eta + 1.0 * np.array([1 / 6, 2 / 3, 1 / 6]))  # N_0 = (2-1) + (1-1) = 1
    # topic 1: sticks 1/2, 1/4, 1/8 (remaining 1/8 dropped: no view word outside), renormalized by 7/8
    np.testing.assert_allclose(lam[1], eta + 1.0 * np.array([2 / 7, 1 / 7, 4 / 7]))
    assert list(vocab.terms) == ["a", "b", "c"] and view.topic_word_prior["default"] == eta


def test_pack_arrays_round_trip_and_refusal() -> None:
    arrays = {"x": np.array([0.5, -np.inf, 2.0]), "n": np.arange(3)}
    packed = pack_arrays(arrays)
    assert sorted(packed) == ["infvoc_n", "infvoc_x", "infvoc_x_neginf"] and np.all(np.isfinite(packed["infvoc_x"]))
    back = unpack_arrays({**packed, "other": np.ones(1)})
    assert sorted(back) == ["n", "x"] and np.array_equal(back["x"], arrays["x"])
    with pytest.raises(InvalidParameterError, match="NaN"):
        pack_arrays({"y": np.array([np.nan])})


class Crash(RuntimeError):
    """Raised by the fault-injection hook."""


@pytest.mark.parametrize("every, crash_at", [(1, 3), (2, 4), (2, 5)])
def test_checkpoint_resume_equals_uninterrupted_run(ordered_store: Path, tmp_path: Path, every: int,
                                                    crash_at: int) -> None:
    corpus = Corpus.open(ordered_store)
    plan = InfVocPlan(batch_size=12, passes=2, shuffle_window=48, pieces=2, min_piece_docs=3)
    whole = fit_infvoc(corpus, PARAMS, plan, track_words=["kakaka"], doc_topics=tmp_path / "whole.zarr")
    policy = CheckpointPolicy(tmp_path / "ckpt", every=every, resume=True)

    def crash(record: object, state: object) -> None:
        if getattr(record, "i") == crash_at:
            raise Crash(f"injected at minibatch {crash_at}")

    with pytest.raises(Crash):
        fit_infvoc(corpus, PARAMS, plan, checkpoint=policy, on_minibatch=crash, track_words=["kakaka"],
                   doc_topics=tmp_path / "dt.zarr")
    resumed = fit_infvoc(corpus, PARAMS, plan, checkpoint=policy, track_words=["kakaka"],
                         doc_topics=tmp_path / "dt.zarr")
    assert same_state(resumed.state, whole.state) and resumed.word_index == whole.word_index
    assert [r.i for r in resumed.trace] == list(range(1, 17))
    np.testing.assert_array_equal(resumed.word_ranks()["kakaka"], whole.word_ranks()["kakaka"])
    from topicflow.io.models.infvoc import read_doc_topics

    np.testing.assert_array_equal(read_doc_topics(tmp_path / "dt.zarr")["doc_topic"],
                                  read_doc_topics(tmp_path / "whole.zarr")["doc_topic"])


def test_checkpoint_of_other_settings_is_refused(ordered_store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(ordered_store)
    policy = CheckpointPolicy(tmp_path / "ckpt", every=1, resume=True)
    fit_infvoc(corpus, PARAMS, PLAN, checkpoint=policy, shards=[0], g0=None)
    with pytest.raises(InvalidParameterError, match="other settings"):
        fit_infvoc(corpus, InfVocParams(n_topics=3, seed=6), PLAN, checkpoint=policy, shards=[0], g0=None)
