"""`topicflow append` + `topicflow update` with the store and the model on s3:// (moto's server), and a driver
killed during the update.

The kill is an event, not a moment: the driver runs as a subprocess whose ``storage.before_write`` hook
(the write-layer hook the object-storage tests use) ends the process with ``os._exit`` when the update
is about to write ``versions.json``, i.e. after every object of ``versions/<N+1>/`` is uploaded and the
lease renewed, before the commit. The model's current version must still be N, readers must load N,
a second update must be refused while a live process holds the lease, and a rerun must take over the
dead driver's lease at once and end with the same model as an uninterrupted update.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from click.testing import CliRunner
from numpy.testing import assert_array_equal

from topicflow.api.lda import LDA
from topicflow.io import storage
from topicflow.io.models.lease import LeaseRecord, ModelLease, read_lease_object
from topicflow.io.models.store import load_model
from topicflow.io.models.versions import list_versions
from topicflow.pipeline.ingest.ingest import ingest_corpus
from topicflow.pipeline.update import update_model
from topicflow.testing.faults import HANG_GUARD_SECONDS

WORDS = [["apple", "banana", "cherry", "grape"], ["dog", "cat", "mouse", "horse"], ["red", "green", "blue", "black"]]
KILLED = 17

#: The driver: ``topicflow`` itself, with a write hook that kills the process before the commit.
DRIVER = """
import os, sys
from topicflow.io import storage

def die_before_commit(url):
    if url.endswith("/versions.json"):
        sys.stdout.write("killed before " + url + "\\n")
        sys.stdout.flush()
        os._exit(%d)

storage.before_write = die_before_commit
from topicflow.cli import main
main(sys.argv[1:], prog_name="topicflow")
""" % KILLED


def jsonl(start: int, stop: int) -> bytes:
    rng = np.random.default_rng(start)
    lines = []
    for i in range(start, stop):
        words = [WORDS[i % 3][j] for j in rng.integers(0, 4, size=10)]
        lines.append(json.dumps({"id": f"d{i}", "text": " ".join(words)}))
    return ("\n".join(lines) + "\n").encode()


def run(*args: str) -> Any:
    from topicflow.cli import main

    result = CliRunner().invoke(main, list(args))
    assert result.exit_code == 0, result.output
    return result


def test_killed_update_on_s3_keeps_the_current_version_and_a_rerun_equals_an_uninterrupted_one(
        s3_bucket: str, s3_server: Any, tmp_path: Path) -> None:
    fs = s3_server.filesystem()
    fs.pipe(f"{s3_bucket}/base.jsonl", jsonl(0, 30))
    fs.pipe(f"{s3_bucket}/new.jsonl", jsonl(30, 45))
    store, model = f"s3://{s3_bucket}/news.zarr", f"s3://{s3_bucket}/models/news"
    ingest_corpus([f"s3://{s3_bucket}/base.jsonl"], store, shard_size=30)
    fitted = LDA(3, method="online", batch_size=10, tau0=1.0, kappa=0.6, seed=3).fit(store)
    fitted.save(model)
    fitted.save(tmp_path / "local-model")  # the uninterrupted run's copy
    before = load_model(model)
    run("append", store, f"s3://{s3_bucket}/new.jsonl", "--local-cluster", "threads")

    options = [f"--storage-option={key}={value}" for key, value in
               (("endpoint_url", s3_server.endpoint), ("key", s3_server.storage_options["key"]),
                ("secret", s3_server.storage_options["secret"]),
                ("client_kwargs.region_name", s3_server.storage_options["client_kwargs"]["region_name"]))]
    driver = subprocess.run([sys.executable, "-c", DRIVER, "update", model, store, "--local-cluster", "threads",
                             *options], capture_output=True, text=True, timeout=HANG_GUARD_SECONDS,
                            env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert driver.returncode == KILLED, driver.stdout + driver.stderr
    assert f"killed before {model}/versions.json" in driver.stdout

    # The current version is intact; the killed run's upload is there but listed nowhere.
    assert [(v.version, v.is_current) for v in list_versions(model)] == [(1, True)]
    reread = load_model(model)
    assert reread.version == 1
    assert_array_equal(reread.state.topic_word_var["default"], before.state.topic_word_var["default"])
    assert any(name.startswith("versions/000002/") for name in storage.list_files(model))
    tagged = read_lease_object(f"{model}/.lease.json")
    assert tagged is not None
    left = LeaseRecord.from_bytes(tagged[0])
    assert left is not None and left.pid != os.getpid() and not left.released  # the dead driver's lease

    # While a live process holds the lease, a second update is refused, saying by whom and until when.
    holder = ModelLease.acquire(f"{model}/.lease.json", action="update", model=model)
    from topicflow.cli import main

    refused = CliRunner().invoke(main, ["update", model, store, "--local-cluster", "threads"])
    assert refused.exit_code != 0 and "is locked by host" in refused.output and "until" in refused.output
    holder.release()

    rerun = run("update", model, store, "--local-cluster", "threads")
    assert "version 2: 1 new shards, 15 documents" in rerun.output
    uninterrupted = update_model(tmp_path / "local-model", store)
    assert uninterrupted.version == 2
    remote, local = load_model(model), load_model(tmp_path / "local-model")
    assert remote.version == 2 and remote.info.online["t"] == local.info.online["t"]
    assert_array_equal(remote.state.topic_word_var["default"], local.state.topic_word_var["default"])
    assert_array_equal(remote.state.doc_topic_prior, local.state.doc_topic_prior)
    assert {name.split("/")[1] for name in storage.list_files(model) if name.startswith("versions/")} == {
        "000001", "000002"}
    released = read_lease_object(f"{model}/.lease.json")
    assert released is not None and LeaseRecord.from_bytes(released[0]).released  # type: ignore[union-attr]
