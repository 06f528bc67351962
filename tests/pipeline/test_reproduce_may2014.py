"""The may2014 reproduction's pieces: its arms, the held-out split, the statistics and the claims."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.reproduce import PAPERS
from topicflow.pipeline.reproduce.may2014 import (
    SCALES,
    arms,
    band,
    better,
    claims,
    final_values,
    label_count,
    matches,
    mean_sd,
    split_stores,
)
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


def test_registered_with_the_papers_arms() -> None:
    assert "may2014" in PAPERS and "May, Clemmer & Van Durme" in PAPERS["may2014"].citation
    paper = {a.name: a for a in arms(SCALES["paper"])}
    assert set(paper) == {"fixed/none", "fixed/reservoir", "fixed/history", "init-0/reservoir", "init-30/reservoir",
                          "init-100/reservoir", "init-300/reservoir", "init-0/none", "init-30/none", "batch-gibbs"}
    assert paper["fixed/none"].settings == {"rejuvenation_steps": 0} and paper["fixed/none"].fixed_init
    assert paper["init-300/reservoir"].settings["init_sweeps"] == 2000
    assert SCALES["paper"].n_particles == 100 and SCALES["paper"].runs == 30 and SCALES["paper"].init_trials == 100


def test_sample_standard_deviation_and_the_comparison_rules() -> None:
    assert mean_sd(np.array([0.2, 0.4])) == pytest.approx((0.3, np.sqrt(0.02)))
    assert mean_sd(np.array([0.5])) == (0.5, 0.0)
    a, b = np.array([0.50, 0.52, 0.54]), np.array([0.51, 0.53, 0.55])
    assert matches(a, b) and not better(b, a)
    assert better(a + 0.1, a) and not matches(a + 0.1, a)


def _records(values: dict[str, list[float]]) -> list[dict[str, Any]]:
    """Two evaluation points per run; the last one carries the value."""
    out = []
    for arm, finals in values.items():
        for run, value in enumerate(finals):
            for point, nmi in ((10, 0.0), (20, value)):
                out.append({"arm": arm, "run": run, "point": point, "docs_seen": point, "nmi_out": nmi,
                            "rejuvenation_steps": 0 if arm.endswith("/none") else 120})
    return out


def test_claims_follow_the_final_out_of_sample_nmi() -> None:
    scale = SCALES["quick"]
    values = {"fixed/none": [0.60, 0.62, 0.61], "fixed/reservoir": [0.61, 0.62, 0.60],
              "fixed/history": [0.60, 0.63, 0.61], "init-0/reservoir": [0.30, 0.50, 0.40],
              "init-30/reservoir": [0.50, 0.55, 0.45], "init-0/none": [0.20, 0.25, 0.22],
              "init-30/none": [0.48, 0.50, 0.46], "batch-gibbs": [0.70, 0.71, 0.69]}
    records = _records(values)
    assert final_values(records, "fixed/none").tolist() == [0.60, 0.62, 0.61]
    x, mean, sd = band(records, "init-0/reservoir")
    assert x.tolist() == [10, 20] and mean[1] == pytest.approx(0.4) and sd[1] == pytest.approx(0.1)
    held = [claim.held for claim in claims(records, scale)]
    assert held == [True, True, True, True, True, True, True]
    values["fixed/none"] = [0.40, 0.41, 0.42]  # rejuvenation now matters from the good start
    values["batch-gibbs"] = [0.50, 0.50, 0.50]
    held = [claim.held for claim in claims(_records(values), scale)]
    assert held[0] is False and held[4] is True and held[5] is False


def test_split_holds_out_the_last_shards_unless_a_test_store_is_given(tmp_path: Path) -> None:
    truth = draw_planted_corpus(n_docs=100, n_topics=2, n_terms=12, doc_length=6, alpha=0.2, seed=2)
    labels = [f"l{i % 4}" for i in range(100)]
    counts = {"default": truth.counts["default"]}
    store = Corpus.open(write_test_store(tmp_path / "s.zarr", counts, shard_size=20, labels=labels))
    train, test, n_stream = split_stores(store, None)
    assert (n_stream, len(train), len(test)) == (60, 60, 40)
    assert label_count(train, n_stream) == 4 and label_count(train, 2) == 2
    _, held_out, n_all = split_stores(store, store)
    assert n_all == 100 and held_out is store
    one = Corpus.open(write_test_store(tmp_path / "one.zarr", counts, shard_size=100, labels=labels))
    with pytest.raises(InvalidParameterError, match="too few to hold out"):
        split_stores(one, None)
    unlabeled = Corpus.open(write_test_store(tmp_path / "u.zarr", counts, shard_size=20))
    with pytest.raises(InvalidParameterError, match="has no labels"):
        split_stores(unlabeled, None)
