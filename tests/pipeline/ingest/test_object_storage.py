"""Corpus stores and inputs on a real S3-compatible server (moto's standalone server, tests/objstore.py).

Ingest from s3:// JSONL and parquet into an s3:// store, fit batch and online VB from it, append (and
lose a race to another append), and fail an ingest at its Nth object write: the results must equal the
same runs on local disk, and a failed ingest or append must leave nothing a reader takes for a store.
The same on worker processes without a shared directory: tests/pipeline/test_no_shared_disk.py.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import dask.config
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from topicflow import LDA, Corpus
from topicflow.errors import (
    CorpusFormatError,
    StorageError,
    StoreExistsError,
    StoreNotFoundError,
)
from topicflow.io import storage
from topicflow.io.sources.base import FieldSpec
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus

WORDS = [["apple", "banana", "cherry", "grape"], ["dog", "cat", "mouse", "horse"], ["red", "green", "blue", "black"]]


def documents(n: int, prefix: str, seed: int) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n):
        topic = WORDS[i % 3]
        words = [topic[j] for j in rng.integers(0, 4, size=12)] + [f"w{int(rng.integers(0, 8))}"]
        docs.append({"id": f"{prefix}{i}", "text": " ".join(words), "label": f"t{i % 3}"})
    return docs


def jsonl_bytes(docs: list[dict[str, Any]]) -> bytes:
    return "\n".join(json.dumps(d) for d in docs).encode()


def parquet_bytes(docs: list[dict[str, Any]]) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(pa.Table.from_pylist(docs), sink, row_group_size=7)
    return sink.getvalue().to_pybytes()


@pytest.fixture
def inputs(s3_bucket: str, s3_server: Any, tmp_path: Path) -> dict[str, Any]:
    """The same documents on S3 and on local disk: a JSONL and a parquet file, and a later batch."""
    fs = s3_server.filesystem()
    first, second, later = documents(40, "a", 1), documents(30, "b", 2), documents(20, "c", 3)
    files = {"in.jsonl": jsonl_bytes(first), "in.parquet": parquet_bytes(second), "more.jsonl": jsonl_bytes(later)}
    for name, data in files.items():
        fs.pipe(f"{s3_bucket}/input/{name}", data)
        (tmp_path / name).write_bytes(data)
    return {"bucket": s3_bucket, "local": tmp_path, "fs": fs}


def blocks_of(corpus: Corpus) -> list[tuple[Any, ...]]:
    return [(b.doc_ids.tolist(), b.indptr.tolist(), b.term_ids.tolist(), b.counts.tolist(), list(b.labels))
            for b in (corpus.read_block(i) for i in range(corpus.n_shards))]


FIELDS = FieldSpec(label_field="label")


def test_ingest_fit_and_append_on_s3_equal_local_disk(inputs: dict[str, Any]) -> None:
    bucket, local = inputs["bucket"], inputs["local"]
    store = f"s3://{bucket}/stores/news.zarr"
    remote = ingest_corpus([f"s3://{bucket}/input/in.jsonl", f"s3://{bucket}/input/in.parquet"], store,
                           fields=FIELDS, shard_size=25)
    here = ingest_corpus([local / "in.jsonl", local / "in.parquet"], local / "news.zarr", fields=FIELDS,
                         shard_size=25)  # the reference on local disk, with Dask's threads
    assert remote.store == store and (remote.n_kept, remote.n_shards, remote.vocab_sizes) == (
        here.n_kept, here.n_shards, here.vocab_sizes)
    corpus, reference = Corpus.open(store), Corpus.open(local / "news.zarr")
    assert [s.checksum for s in corpus.shards] == [s.checksum for s in reference.shards]
    assert blocks_of(corpus) == blocks_of(reference)
    assert corpus.verify() == []

    # Batch VB reading the shards from S3, against the same fit from local disk: same seed, same model.
    fitted = LDA(n_topics=3, max_iter=4, seed=5).fit(store)
    expected = LDA(n_topics=3, max_iter=4, seed=5).fit(str(local / "news.zarr"))
    np.testing.assert_array_equal(fitted.components_, expected.components_)
    # Online VB's minibatch reader (threads here: its reads are the same code on any executor).
    online = LDA(n_topics=3, method="online", batch_size=10, seed=5).fit(store)
    online_local = LDA(n_topics=3, method="online", batch_size=10, seed=5).fit(str(local / "news.zarr"))
    np.testing.assert_array_equal(online.components_, online_local.components_)

    # Append: the new shards, index and candidates are uploaded, the manifest last.
    appended = append_corpus(store, [f"s3://{bucket}/input/more.jsonl"], fields=FIELDS)
    appended_here = append_corpus(local / "news.zarr", [local / "more.jsonl"], fields=FIELDS)
    assert (appended.n_kept, appended.n_shards) == (appended_here.n_kept, appended_here.n_shards)
    # On object storage a candidate set's name also carries the append's run (no lock to keep numbers apart).
    assert str(appended.candidates).split("-")[0] == str(appended_here.candidates)
    corpus, reference = Corpus.open(store), Corpus.open(local / "news.zarr")
    assert len(corpus) == len(reference) == 90
    assert blocks_of(corpus) == blocks_of(reference)
    assert corpus.candidates().terms.tolist() == reference.candidates().terms.tolist()
    with pytest.raises(StoreExistsError, match="exists already"):
        ingest_corpus([f"s3://{bucket}/input/in.jsonl"], store, fields=FIELDS)


class FailAtWrite:
    """Raise at the Nth object write of a publish (an event, not a timer)."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, []

    def __call__(self, url: str) -> None:
        self.seen.append(url)
        if len(self.seen) == self.n:
            raise OSError(f"injected failure at write {self.n} ({url})")


def test_failed_ingest_leaves_no_store(inputs: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    bucket, fs = inputs["bucket"], inputs["fs"]
    store = f"s3://{bucket}/stores/broken.zarr"
    failure = FailAtWrite(5)
    monkeypatch.setattr(storage, "before_write", failure)
    # One thread: no other task is still writing when the failed run removes what it wrote.
    with pytest.raises(OSError, match="injected failure at write 5"), dask.config.set(num_workers=1):
        ingest_corpus([f"s3://{bucket}/input/in.jsonl"], store, fields=FIELDS, shard_size=16)
    assert len(failure.seen) == 5 and not any(url.endswith("manifest.json") for url in failure.seen)
    assert not fs.exists(f"{bucket}/stores/broken.zarr/manifest.json")
    assert fs.find(f"{bucket}/stores/broken.zarr") == []  # the partial upload was removed again
    with pytest.raises((StoreNotFoundError, CorpusFormatError)):
        Corpus.open(store)

    # The commit itself fails: every data object was written, the manifest is the last write, and still
    # nothing is a store.
    def fail_at_manifest(url: str) -> None:
        last.seen.append(url)
        if url.endswith("/manifest.json"):
            raise OSError(f"injected failure at the manifest ({url})")

    last = FailAtWrite(0)
    monkeypatch.setattr(storage, "before_write", fail_at_manifest)
    with pytest.raises(OSError, match="injected failure at the manifest"):
        ingest_corpus([f"s3://{bucket}/input/in.jsonl"], store, fields=FIELDS, shard_size=16)
    assert len(last.seen) > 5 and [u for u in last.seen if u.endswith("manifest.json")] == [last.seen[-1]]
    assert not fs.exists(f"{bucket}/stores/broken.zarr/manifest.json")
    with pytest.raises((StoreNotFoundError, CorpusFormatError)):
        Corpus.open(store)
    monkeypatch.setattr(storage, "before_write", None)
    assert ingest_corpus([f"s3://{bucket}/input/in.jsonl"], store, fields=FIELDS, shard_size=16).n_kept == 40


def test_missing_bucket_and_credentials_are_clear(s3_server: Any, monkeypatch: pytest.MonkeyPatch,
                                                 tmp_path: Path) -> None:
    import dask.config

    with dask.config.set({"topicflow.storage-options": s3_server.storage_options}):
        with pytest.raises(StorageError, match=r"'s3://no-such-bucket-tf/store'.*bucket 'no-such-bucket-tf' does not exist"):
            Corpus.open("s3://no-such-bucket-tf/store")
        with pytest.raises(StorageError, match="no-such-bucket-tf"):
            ingest_corpus(["s3://no-such-bucket-tf/in.jsonl"], tmp_path / "store")
    for name in [k for k in os.environ if k.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    options = {"endpoint_url": s3_server.endpoint, "client_kwargs": {"region_name": "eu-west-1"}}
    with dask.config.set({"topicflow.storage-options": options}):
        with pytest.raises(StorageError, match=r"'s3://some-bucket/store'.*no usable credentials"):
            Corpus.open("s3://some-bucket/store")


def test_cli_ingest_and_info_with_storage_options(s3_server: Any, tmp_path: Path) -> None:
    from topicflow.cli import main

    fs = s3_server.filesystem()
    bucket = s3_server.new_bucket()  # no storage options in the config: only the command line has them
    fs.pipe(f"{bucket}/in.jsonl", jsonl_bytes(documents(12, "d", 4)))
    options = [f"--storage-option=endpoint_url={s3_server.endpoint}", "--storage-option=key=topicflow-test-key",
               "--storage-option=secret=topicflow-test-secret", "--storage-option=client_kwargs.region_name=eu-west-1"]
    import dask.config

    before = dask.config.get("topicflow.storage-options", default=None)
    try:
        result = CliRunner().invoke(main, ["ingest", f"s3://{bucket}/in.jsonl", "--out", f"s3://{bucket}/s.zarr",
                                           "--local-cluster", "threads", *options])
        assert result.exit_code == 0, result.output
        assert f"s3://{bucket}/s.zarr" in result.output
        info = CliRunner().invoke(main, ["info", f"s3://{bucket}/s.zarr", "--format", "json", *options])
        assert info.exit_code == 0, info.output
        assert json.loads(info.output)["n_docs"] == 12
        again = CliRunner().invoke(main, ["ingest", f"s3://{bucket}/in.jsonl", "--out", f"s3://{bucket}/s.zarr",
                                          "--local-cluster", "threads", *options])
        assert again.exit_code == 2 and "exists already" in again.output
        # fit reads the store from s3 with the same command-line options (the model stays local).
        fitted = CliRunner().invoke(main, ["fit", f"s3://{bucket}/s.zarr", "--model", str(tmp_path / "m"),
                                           "--topics", "3", "--max-iter", "2", "--local-cluster", "threads", *options])
        assert fitted.exit_code == 0, fitted.output
        shown = CliRunner().invoke(main, ["topics", str(tmp_path / "m")])
        assert shown.exit_code == 0 and "topic-2" in shown.output, shown.output
    finally:
        dask.config.set({"topicflow.storage-options": before})


def test_append_on_s3_writes_in_place_and_loses_a_race_cleanly(inputs: dict[str, Any],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """An append on s3 writes its shards (and a grown vocabulary) into the store itself and commits by
    replacing the manifest only if it is still the one it read. Here a second append commits while the
    first is about to (an event: the first one's manifest write): the first fails, the store is the
    second one's, and nothing of the first is left."""
    bucket, fs, local = inputs["bucket"], inputs["fs"], inputs["local"]
    store = f"s3://{bucket}/stores/race.zarr"
    ingest_corpus([f"s3://{bucket}/input/in.jsonl"], store, fields=FIELDS, shard_size=16)
    ingest_corpus([local / "in.jsonl"], local / "race.zarr", fields=FIELDS, shard_size=16)
    before = {p for p in fs.find(f"{bucket}/stores/race.zarr")}
    grown = jsonl_bytes([{**d, "text": d["text"] + " kiwi mango"} for d in documents(20, "g", 5)])
    fs.pipe(f"{bucket}/input/grown.jsonl", grown)
    (local / "grown.jsonl").write_bytes(grown)
    # The losing append grows the vocabulary too (its own version 2 and candidate set, written first).
    fs.pipe(f"{bucket}/input/lost.jsonl", jsonl_bytes([{**d, "text": d["text"] + " papaya lime fig"}
                                                       for d in documents(10, "x", 6)]))

    def other_append_first(url: str) -> None:
        if url.endswith("/manifest.json"):
            monkeypatch.setattr(storage, "before_write", None)
            append_corpus(store, [f"s3://{bucket}/input/grown.jsonl"], fields=FIELDS, promote_min_df=2)

    monkeypatch.setattr(storage, "before_write", other_append_first)
    with pytest.raises(StoreExistsError, match="changed by another writer"):
        append_corpus(store, [f"s3://{bucket}/input/lost.jsonl"], fields=FIELDS, promote_min_df=2)
    expected = append_corpus(local / "race.zarr", [local / "grown.jsonl"], fields=FIELDS, promote_min_df=2)
    corpus, reference = Corpus.open(store), Corpus.open(local / "race.zarr")
    assert corpus.vocab_version == reference.vocab_version == expected.vocab_version == 2
    assert len(corpus) == len(reference) == 60 and blocks_of(corpus) == blocks_of(reference)
    assert corpus.verify() == [] and corpus.vocabulary().terms.tolist() == reference.vocabulary().terms.tolist()
    assert corpus.vocabulary().terms.tolist()[-2:] == ["kiwi", "mango"]
    assert corpus.candidates().terms.tolist() == reference.candidates().terms.tolist()
    # What is left is the store before, plus what the winning append's manifest references.
    listed = {f"shards/{s.shard_id}" for s in corpus.shards}
    added = {p.split("race.zarr/", 1)[1] for p in fs.find(f"{bucket}/stores/race.zarr", refresh=True)} - {
        p.split("race.zarr/", 1)[1] for p in before}
    assert {"/".join(name.split("/")[:2]) for name in added if name.startswith("shards/")} <= listed
    assert not [name for name in added if ".tokens-" in name or "/.append-" in name]
    assert {name.split("/")[1] for name in added if name.startswith("candidates/")} == {corpus.manifest.candidates}
