"""StreamingLDA: the scikit-learn-style face of the streaming samplers."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from topicflow.errors import InvalidParameterError, NotFittedError
from topicflow.io.models.store import load_model
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.streaming.config import StreamConfig
from topicflow.pipeline.streaming import run_stream
from topicflow.api.streaming import StreamingLDA
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    planted = draw_planted_corpus(n_docs=200, n_topics=3, n_terms=30, doc_length=20, alpha=0.1, seed=2)
    labels = [f"t{k}" for k in np.argmax(planted.doc_topic, axis=1)]
    return write_test_store(tmp_path_factory.mktemp("est") / "s.zarr", planted.counts, shard_size=50, labels=labels)


SETTINGS = dict(n_particles=8, rejuvenation_steps=4, init_docs=30, init_sweeps=20, runs=2, eval_every=50, seed=3)


def test_fit_sets_attributes_like_run_stream(store: Path, tmp_path: Path) -> None:
    model = StreamingLDA("pf", n_topics=3, **SETTINGS).fit(store)
    reference = run_stream(Corpus.open(store), StreamConfig.create(algorithm="pf", n_topics=3, **SETTINGS))  # type: ignore[arg-type]
    np.testing.assert_array_equal(model.components_, reference.model.state.topic_word_var["default"])
    np.testing.assert_allclose(model.topic_word_.sum(axis=1), 1.0)
    assert model.summary_[-1]["runs"] == 2 and model.summary_[-1]["nmi_in_mean"] > 0.5
    model.save(tmp_path / "model")
    assert load_model(tmp_path / "model").info.algorithm == "pf"


def test_partial_fit_continues_the_saved_runs(store: Path, tmp_path: Path) -> None:
    whole = StreamingLDA("olda", n_topics=3, **SETTINGS).fit(store)
    model = StreamingLDA("olda", n_topics=3, max_docs=120, **SETTINGS).fit(store, out=tmp_path / "out")
    model.settings["max_docs"] = None  # the store "grew" past 120 documents
    model.partial_fit(store)
    np.testing.assert_array_equal(model.components_, whole.components_)


def test_errors_are_explained(store: Path) -> None:
    with pytest.raises(InvalidParameterError, match="unknown settings"):
        StreamingLDA("pf", n_topics=3, particles=5).fit(store)
    with pytest.raises(NotFittedError):
        StreamingLDA("pf").partial_fit(store)
    with pytest.raises(NotFittedError):
        StreamingLDA("pf").save("nowhere")
