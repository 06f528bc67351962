"""fit_collapsed dispatches pcvb0 to the batch driver and wraps its state into a model of the HDP family."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.pipeline.collapsed.helpers import assert_same_state, config, planted_store
from topicflow.io.models.store import load_model, save_model
from topicflow.pipeline.collapsed import fit_collapsed, saved_state
from topicflow.pipeline.collapsed.batch import run_pcvb0


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_store(tmp_path_factory.mktemp("collapsed-pcvb0") / "c.zarr")


def test_pcvb0_through_fit_collapsed_is_the_batch_driver_plus_the_common_trace(store: Path, tmp_path: Path) -> None:
    cfg = config("pcvb0", passes=3, eval_every=96, extra={"q_dtype": "float64"})
    result = fit_collapsed(store, cfg, test=store, checkpoint=tmp_path / "ckpt")
    sparse = fit_collapsed(store, replace(cfg, eval_every=150), test=store)
    # 96 documents per iteration: the point 150 falls in the second iteration; the end is scored too.
    assert [r["heldout_perplexity"] is not None for r in sparse.trace] == [False, True, True]
    direct = run_pcvb0(store, cfg)
    assert_same_state(result.state, direct.state)
    assert [r["iteration"] for r in result.trace] == [0, 1, 2]
    assert [r["docs_seen"] for r in result.trace] == [96, 192, 288]
    assert all(r["heldout_perplexity"] > 1 for r in result.trace)
    assert [r["log_likelihood"] for r in result.trace] == [r.log_likelihood for r in direct.trace]
    save_model(tmp_path / "m", result.saved_model)
    model = load_model(tmp_path / "m")
    assert (model.info.family, model.info.kind, model.info.method) == ("hdp", "hdp", "pcvb0")
    assert model.info.extra["run"]["q_dtype"] == "float64"
    assert_same_state(saved_state(model), result.state)
    assert model.info.topics_in_use == result.topics_in_use == result.state.topics_in_use(1e-3)
