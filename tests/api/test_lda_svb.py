"""``LDA(method="svb")``: fit, partial_fit as a stream, save and load, refused online-only settings."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sklearn.base import clone

from topicflow import LDA
from topicflow.errors import InvalidParameterError
from topicflow.pipeline.vb.svb import SVBRecord
from topicflow.testing.corpora import draw_planted_corpus


@pytest.fixture(scope="module")
def counts() -> object:
    return draw_planted_corpus(n_docs=200, n_topics=3, n_terms=30, doc_length=40, alpha=0.3, seed=4).counts["default"]


def test_partial_fit_twice_equals_one_fit(counts: object, tmp_path: Path) -> None:
    whole = LDA(3, method="svb", batch_size=50, seed=2).fit(counts)
    assert whole.n_iter_ == 4 and whole.n_docs_seen_ == 200 and isinstance(whole.trace_[0], SVBRecord)
    streamed = LDA(3, method="svb", batch_size=50, seed=2)
    streamed.partial_fit(counts[:100]).partial_fit(counts[100:])  # type: ignore[index]
    assert streamed.n_iter_ == 4 and streamed.n_docs_seen_ == 200 and len(streamed.trace_) == 2
    np.testing.assert_allclose(streamed.components_, whole.components_, rtol=1e-12)
    whole.save(tmp_path / "m")
    loaded = LDA.load(tmp_path / "m")
    assert loaded.method == "svb" and loaded.batch_size == 50 and loaded.n_iter_ == 4
    np.testing.assert_array_equal(loaded.components_, whole.components_)
    assert [r.t for r in loaded.trace_] == [1, 2, 3, 4]
    assert clone(loaded).get_params()["method"] == "svb"


@pytest.mark.parametrize("setting", [{"tau0": 64.0}, {"kappa": 0.5}, {"passes": 2}, {"total_docs": 1000}])
def test_online_only_settings_are_refused(counts: object, setting: dict[str, object]) -> None:
    name = next(iter(setting))
    with pytest.raises(InvalidParameterError, match=f"{name}=.* given with method='svb'"):
        LDA(3, method="svb", **setting).fit(counts)  # type: ignore[arg-type]


def test_unknown_method_lists_svb(counts: object) -> None:
    with pytest.raises(InvalidParameterError, match="svb"):
        LDA(3, method="stochastic").fit(counts)
