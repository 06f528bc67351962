"""Fit checkpoints on a real S3-compatible server (moto, tests/objstore.py) for every method that keeps one.

The variational fits (batch, online, svb) are tested in tests/pipeline/test_models_on_s3.py. Here each other
method runs ``fit --checkpoint s3://... --checkpoint-every 1`` until the driver "dies" at its second checkpoint
commit (the write of ``latest.json`` fails, as a killed driver's would never happen), then ``--resume`` finishes
it from the first checkpoint at the URL; the model must equal the same fit run uninterrupted on local disk
without a checkpoint. Gibbs and PCVB0 keep their per-token state (z, q) at the URL too, written by the tasks
(:mod:`topicflow.io.outputs.assignment_layer`, :mod:`topicflow.io.outputs.assignment_scratch`); scvb0 (and pcsvb0, through the same code), tree LDA and infvoc
write their slots there
(:mod:`topicflow.io.models.checkpoint`).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from tests.api.test_infvoc import topic_texts, write_store
from tests.pipeline.tree_lda.test_batch import _store_and_tree
from topicflow.io import storage
from topicflow.io.models.store import load_model

INFVOC = ["--family", "infvoc", "--topics", "3", "--batch-size", "18", "--truncation", "40", "--reorder-every", "3",
          "--alpha-beta", "50", "--no-g0", "--passes", "1"]

#: method -> (which store, fit options): tiny runs of 2 iterations (or minibatches / passes). pcsvb0 keeps its
#: checkpoint through the same code as scvb0 (``Checkpointer`` of pipeline/collapsed/stochastic.py), so it is left
#: out to save test time.
CASES: dict[str, tuple[str, list[str]]] = {
    "gibbs": ("lda", ["--method", "gibbs", "--topics", "2", "--max-iter", "2", "--executor", "threads"]),
    "scvb0": ("lda", ["--method", "scvb0", "--topics", "2", "--passes", "1", "--batch-size", "18"]),
    "pcvb0": ("lda", ["--family", "hdp", "--method", "pcvb0", "--truncation", "4", "--passes", "2"]),
    "tree_lda": ("tree", ["--topics", "2", "--max-iter", "2", "--tol", "0"]),
    "infvoc": ("ordered", INFVOC),
}


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    root = tmp_path_factory.mktemp("ck-s3")
    lda = write_store(root, topic_texts(36, seed=2), shard_size=12, keep_order=False, name="lda")
    ordered = write_store(root, topic_texts(36, seed=3), shard_size=12, name="ordered")
    tree_store, tree = _store_and_tree(root)
    return {"lda": [str(lda)], "ordered": [str(ordered)], "tree": [str(tree_store), "--prior-tree", str(tree)]}


def invoke(args: list[str]) -> Any:
    from topicflow.cli import main

    return CliRunner().invoke(main, args)


@pytest.mark.parametrize("method", sorted(CASES))
def test_checkpoint_on_s3_killed_and_resumed_equals_the_uninterrupted_local_fit(
        method: str, stores: dict[str, list[str]], s3_bucket: str, s3_server: Any, local_cluster: Any,
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    which, options = CASES[method]
    store, *extra = stores[which]
    cluster = [] if method == "gibbs" else ["--scheduler", local_cluster.scheduler_address]
    common = ["fit", store, *extra, *options, "--seed", "3", *cluster]
    local = invoke([*common, "--model", str(tmp_path / "local")])
    assert local.exit_code == 0, local.output

    checkpoint = f"s3://{s3_bucket}/checkpoints/{method}"
    remote = [*common, "--model", str(tmp_path / "remote"), "--checkpoint", checkpoint, "--checkpoint-every", "1"]
    commits: list[str] = []

    def die_at_the_second_commit(url: str) -> None:
        if url == f"{checkpoint}/latest.json":
            commits.append(url)
            if len(commits) == 2:
                raise OSError("injected: the driver dies before its second checkpoint commit")

    monkeypatch.setattr(storage, "before_write", die_at_the_second_commit)
    killed = invoke(remote)
    assert killed.exit_code != 0 and len(commits) == 2, killed.output
    assert not (tmp_path / "remote").exists()
    fs = s3_server.filesystem()
    assert json.loads(fs.cat_file(f"{s3_bucket}/checkpoints/{method}/latest.json"))  # the first commit is there
    monkeypatch.setattr(storage, "before_write", None)

    resumed = invoke([*remote, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert f"resuming from checkpoint {checkpoint}" in resumed.output
    assert not fs.exists(f"{s3_bucket}/checkpoints/{method}")  # removed once the model is saved

    got, expected = load_model(tmp_path / "remote"), load_model(tmp_path / "local")
    assert got.state.languages == expected.state.languages
    for language in expected.state.languages:
        assert_array_equal(got.state.topic_word_var[language], expected.state.topic_word_var[language])
    assert_array_equal(np.asarray(got.state.doc_topic_prior), np.asarray(expected.state.doc_topic_prior))
    assert sorted(got.sampler_state) == sorted(expected.sampler_state)
    for name, values in expected.sampler_state.items():
        assert_array_equal(got.sampler_state[name], values, err_msg=name)
