"""Fit, read and use a model on a real S3-compatible server (moto's standalone server, tests/objstore.py).

``topicflow fit`` with the store and the model on s3:// gives the same model as the same run on
local disk (same seed); ``topics``, ``infer`` and ``export`` read it from s3://; a checkpointed fit keeps its
checkpoint there too. ``update`` on s3:// is tested in tests/pipeline/test_update_on_s3.py.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner
from numpy.testing import assert_allclose, assert_array_equal

from topicflow.io.models.store import load_model
from topicflow.io.outputs.doc_topics import DocTopics
from topicflow.pipeline.ingest.ingest import ingest_corpus

WORDS = [["apple", "banana", "cherry", "grape"], ["dog", "cat", "mouse", "horse"], ["red", "green", "blue", "black"]]


def jsonl(n: int, seed: int) -> bytes:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        words = [WORDS[i % 3][j] for j in rng.integers(0, 4, size=10)] + [f"w{int(rng.integers(0, 6))}"]
        lines.append(json.dumps({"id": f"d{i}", "text": " ".join(words)}))
    return "\n".join(lines).encode()


def run(*args: str) -> Any:
    from topicflow.cli import main

    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_fit_on_s3_equals_local_disk_and_is_used_from_s3(s3_bucket: str, s3_server: Any, tmp_path: Path) -> None:
    data = jsonl(36, 1)
    s3_server.filesystem().pipe(f"{s3_bucket}/in.jsonl", data)
    (tmp_path / "in.jsonl").write_bytes(data)
    store, model = f"s3://{s3_bucket}/news.zarr", f"s3://{s3_bucket}/models/news"
    ingest_corpus([f"s3://{s3_bucket}/in.jsonl"], store, shard_size=12)
    ingest_corpus([tmp_path / "in.jsonl"], tmp_path / "news.zarr", shard_size=12)
    fit = ["--topics", "3", "--max-iter", "3", "--seed", "5", "--local-cluster", "threads"]
    run("fit", store, "--model", model, *fit)
    run("fit", str(tmp_path / "news.zarr"), "--model", str(tmp_path / "model"), *fit)
    remote, local = load_model(model), load_model(tmp_path / "model")
    assert remote.version == local.version == 1
    assert remote.state.languages == local.state.languages
    for lang in local.state.languages:
        assert_array_equal(remote.state.topic_word_var[lang], local.state.topic_word_var[lang])
        assert list(remote.vocabularies[lang].terms) == list(local.vocabularies[lang].terms)
    assert_array_equal(remote.state.doc_topic_prior, local.state.doc_topic_prior)

    shown = run("topics", model)
    assert shown.output == run("topics", str(tmp_path / "model")).output and "topic-2" in shown.output
    run("infer", model, store, "--out", str(tmp_path / "dt-remote.zarr"), "--local-cluster", "threads")
    run("infer", str(tmp_path / "model"), str(tmp_path / "news.zarr"), "--out", str(tmp_path / "dt-local.zarr"),
        "--local-cluster", "threads")
    remote_dt, local_dt = list(DocTopics.open(tmp_path / "dt-remote.zarr")), list(DocTopics.open(tmp_path / "dt-local.zarr"))
    assert len(remote_dt) == len(local_dt) == 3
    for (remote_ids, remote_theta), (local_ids, local_theta) in zip(remote_dt, local_dt):
        assert list(remote_ids) == list(local_ids)
        assert_array_equal(remote_theta, local_theta)
    run("export", model, "--out", str(tmp_path / "remote.npz"))
    run("export", str(tmp_path / "model"), "--out", str(tmp_path / "local.npz"))
    with np.load(tmp_path / "remote.npz") as a, np.load(tmp_path / "local.npz") as b:
        assert sorted(a.files) == sorted(b.files)
        assert_allclose(a["topic_word"], b["topic_word"], rtol=0, atol=0)

    from topicflow.cli import main

    again = CliRunner().invoke(main, ["fit", store, "--model", model, *fit])
    assert again.exit_code != 0 and "exists already" in again.output
    assert load_model(model).version == 1  # the refused fit did not reach the model
    # Checkpoints of the variational fits live beside the model on object storage (MODEL.checkpoint), and
    # go once the model is saved.
    run("fit", store, "--model", model, "--overwrite", "--checkpoint-every", "1", *fit)
    assert load_model(model).version == 2
    assert not s3_server.filesystem().exists(f"{s3_bucket}/models/news.checkpoint")
