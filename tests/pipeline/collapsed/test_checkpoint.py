"""Checkpoints of long collapsed fits: a run stopped by a fault resumes to the model of an uninterrupted run.

The fault is triggered by an event of the run (the progress reporter being asked for a given item,
:class:`topicflow.testing.faults.OnItem`), never by time.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.pipeline.collapsed.helpers import (
    PARAMS,
    assert_same_state,
    config,
    planted_store,
)
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.collapsed import CollapsedConfig, fit_collapsed
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.testing.faults import OnItem


class Crash(RuntimeError):
    """The injected fault."""


def crash() -> None:
    raise Crash("injected fault")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return planted_store(tmp_path_factory.mktemp("collapsed-ckpt") / "c.zarr")


def without_seconds(trace: object) -> list[dict[str, object]]:
    return [{k: v for k, v in record.items() if k != "seconds"} for record in trace]  # type: ignore[attr-defined]


def crash_and_resume(corpus: Corpus, cfg: CollapsedConfig, policy: CheckpointPolicy, item: int,
                     client: object) -> object:
    with pytest.raises(Crash):
        fit_collapsed(corpus, cfg, client=client, checkpoint=policy, test=corpus, progress=OnItem(cfg.method, item, crash))
    assert (policy.path / "latest.json").is_file()
    return fit_collapsed(corpus, cfg, client=client, checkpoint=policy, resume=True, test=corpus)


def test_word_by_word_resumes_from_the_last_pass_with_its_document_state(store: Path, tmp_path: Path,
                                                                         client: object) -> None:
    corpus = Corpus.open(store)
    cfg = config(passes=3, eval_every=50, params=replace(PARAMS, keep_doc_state=True))
    # One feed per pass (the store is smaller than FEED_DOCS): item 2 is pass 3's feed, after pass 2's checkpoint.
    resumed = crash_and_resume(corpus, cfg, CheckpointPolicy(tmp_path / "ckpt"), 2, client)
    whole = fit_collapsed(corpus, cfg, client=client, test=corpus)
    assert_same_state(resumed.state, whole.state)  # type: ignore[attr-defined]
    assert without_seconds(resumed.trace) == without_seconds(whole.trace)  # type: ignore[attr-defined]


def test_minibatch_form_resumes_between_minibatches(store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(store)
    cfg = config(batch_size=20, passes=2, eval_every=40)
    resumed = crash_and_resume(corpus, cfg, CheckpointPolicy(tmp_path / "ckpt", every=2), 7, None)
    whole = fit_collapsed(corpus, cfg, test=corpus)
    assert_same_state(resumed.state, whole.state)  # type: ignore[attr-defined]
    assert without_seconds(resumed.trace) == without_seconds(whole.trace)  # type: ignore[attr-defined]


def test_a_checkpoint_of_other_settings_is_refused(store: Path, tmp_path: Path) -> None:
    corpus = Corpus.open(store)
    fit_collapsed(corpus, config(batch_size=48, passes=1), checkpoint=tmp_path / "ckpt")
    with pytest.raises(InvalidParameterError, match="other settings"):
        fit_collapsed(corpus, config(batch_size=32, passes=1), checkpoint=tmp_path / "ckpt", resume=True)
    with pytest.raises(InvalidParameterError, match="resume needs a checkpoint"):
        fit_collapsed(corpus, config(), resume=True)
    with pytest.raises(InvalidParameterError, match="word by word only"):
        fit_collapsed(corpus, config(batch_size=8, params=replace(PARAMS, keep_doc_state=True)))
