"""``topicflow update`` of collapsed models: the stream continued from its counters, grown totals, pcvb0 refused."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.pipeline.collapsed.helpers import (
    N_TERMS,
    assert_same_state,
    config,
    folded,
    initial,
    reference_minibatch,
    reference_word_by_word,
)
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import load_model, save_model
from topicflow.pipeline.collapsed import collapsed_model, fit_collapsed, saved_state
from topicflow.pipeline.collapsed.nightly import grown_state
from topicflow.pipeline.update import update_model
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

NEW_TERMS = 2


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """96 documents in 3 shards (``big``); their first 64 with the same vocabulary (``same``) and with
    the first 28 terms only (``prefix``: the last two terms occur only in the third shard, as after
    ``topicflow append --promote-min-df``)."""
    root = tmp_path_factory.mktemp("collapsed-update")
    counts = draw_planted_corpus(n_docs=96, n_topics=4, n_terms=N_TERMS, doc_length=20, alpha=0.3,
                                 seed=9).counts["default"].tolil()
    counts[:64, N_TERMS - NEW_TERMS:] = 0
    full = sp.csr_matrix(counts)
    terms = [f"t{i:03d}" for i in range(N_TERMS)]
    return {
        "big": write_test_store(root / "big.zarr", {"default": full}, shard_size=32, terms={"default": terms}),
        "same": write_test_store(root / "same.zarr", {"default": full[:64]}, shard_size=32, terms={"default": terms}),
        "prefix": write_test_store(root / "prefix.zarr", {"default": full[:64, :N_TERMS - NEW_TERMS]}, shard_size=32,
                                   terms={"default": terms[:N_TERMS - NEW_TERMS]}),
    }


@pytest.mark.parametrize("batch_size", [None, 16])
def test_update_with_fixed_totals_equals_one_longer_stream(stores: dict[str, Path], tmp_path: Path,
                                                           batch_size: int | None) -> None:
    """Fitted on the first 64 documents, then updated with the last 32: one pass over all 96.

    The contract when n and D are fixed at fit time (a stream of known size) and the vocabulary does
    not grow. The saved model folds the lazy scale of n_kw into the counts (a rounding the one-run
    stream does not make), hence agreement to 1e-12 rather than bit for bit.
    """
    big = Corpus.open(stores["big"])
    cfg = config(batch_size=batch_size, passes=1)
    totals = {"n_docs": len(big), "n_tokens": big.n_tokens}
    save_model(tmp_path / "model", fit_collapsed(stores["same"], cfg, **totals).saved_model)
    done = update_model(tmp_path / "model", big)
    assert done.version == 2 and done.new_docs == 32 and done.new_terms == {"default": 0}
    updated, one_run = saved_state(load_model(tmp_path / "model")), fit_collapsed(big, cfg, **totals).state
    got, got_scalars = folded(updated)
    want, want_scalars = folded(one_run)
    for name in want:
        np.testing.assert_allclose(got[name], want[name], rtol=1e-12, atol=1e-12, err_msg=name)
    assert {k: v for k, v in got_scalars.items() if k not in ("alpha", "gamma")} == \
        {k: v for k, v in want_scalars.items() if k not in ("alpha", "gamma")}
    assert got_scalars["alpha"] == pytest.approx(want_scalars["alpha"], rel=1e-12)
    trace = load_model(tmp_path / "model").info.trace
    assert [r["docs_seen"] for r in trace] == [64, 96]  # the update extends the fit's trace


@pytest.mark.parametrize("batch_size", [None, 16])
def test_update_grows_vocabulary_and_totals_and_continues_the_counters(stores: dict[str, Path], tmp_path: Path,
                                                                       batch_size: int | None) -> None:
    big = Corpus.open(stores["big"])
    cfg = config(batch_size=batch_size, passes=2)
    save_model(tmp_path / "model", fit_collapsed(stores["prefix"], cfg).saved_model)
    before = load_model(tmp_path / "model")
    done = update_model(tmp_path / "model", big)
    assert done.new_terms == {"default": NEW_TERMS} and done.new_docs == 32
    after = load_model(tmp_path / "model")
    state = saved_state(after)
    assert after.state.topic_word_var["default"].shape == (6, N_TERMS)
    assert (state.n_docs, state.n_tokens) == (96, big.n_tokens)  # D and n grow to the store's totals
    assert [s["id"] for s in after.info.corpus["shards"]] == [s.shard_id for s in big.shards]
    # Exactly: the saved state, its new terms' columns at zero and the store's totals, then one pass over
    # the new shard by the serial reference.
    start = grown_state(before, big)
    assert np.array_equal(start.topic_word[:, -NEW_TERMS:], np.zeros((6, NEW_TERMS)))
    one_pass = config(batch_size=batch_size, passes=1)
    reference = (reference_word_by_word(big, one_pass, state=start, shards=[2]) if batch_size is None
                 else reference_minibatch(big, one_pass, state=start, shards=[2]))
    assert_same_state(state, reference)
    assert state.t_topic_word > saved_state(before).t_topic_word
    assert update_model(tmp_path / "model", big).version is None  # nothing new


def test_pcvb0_models_are_refused_with_what_to_do(stores: dict[str, Path], tmp_path: Path) -> None:
    small = Corpus.open(stores["same"])
    cfg = config("pcvb0")
    model = collapsed_model(small, initial(small, cfg), cfg, trace=[], shards=[0, 1])
    save_model(tmp_path / "batch-model", model)
    with pytest.raises(InvalidParameterError, match=r"batch PCVB0 .*topicflow fit .*--method pcsvb0"):
        update_model(tmp_path / "batch-model", stores["big"])
    with pytest.raises(InvalidParameterError, match="pcvb0"):
        update_model(tmp_path / "batch-model", stores["same"])  # also with nothing new
