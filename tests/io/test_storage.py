"""topicflow.io.storage: locations, storage options, and corpus stores on fsspec's memory:// filesystem.

The same code paths on a real S3 server are tested in tests/pipeline/ingest/test_object_storage.py.
"""
from __future__ import annotations

import json
import pickle
import uuid
from pathlib import Path
from typing import Any

import click
import dask.config
import fsspec
import numpy as np
import pytest

from topicflow import Corpus
from topicflow.cli._common import LOCATION, parse_storage_options
from topicflow.errors import (
    CorpusFormatError,
    StoreExistsError,
    StoreNotFoundError,
    UnsupportedStorageError,
)
from topicflow.io import storage
from topicflow.io._atomic import check_output_path
from topicflow.io.models.versions import model_lock
from topicflow.io.storage import StoragePath, as_location, is_url, storage_options
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus


def test_locations() -> None:
    assert as_location("news.zarr") == Path("news.zarr")
    assert as_location("file:///data/news.zarr") == Path("/data/news.zarr")
    store = as_location("s3://bucket/stores/news.zarr/")
    assert isinstance(store, StoragePath) and str(store) == "s3://bucket/stores/news.zarr"
    assert str(store / "shards" / "000001") == "s3://bucket/stores/news.zarr/shards/000001"
    assert (store.name, str(store.parent), store.protocol) == ("news.zarr", "s3://bucket/stores", "s3")
    assert pickle.loads(pickle.dumps(store)) == store and store.resolve() is store
    assert [is_url(p) for p in ("memory://x", "gs://b/x", "file:///x", "/tmp/x", "C:x", Path("s3:/b"))] == [
        True, True, False, False, False, False]


def test_storage_options_from_config_and_command_line() -> None:
    options = {"anon": False, "s3": {"endpoint_url": "http://127.0.0.1:9"}, "memory": {}}
    with dask.config.set({"topicflow.storage-options": options}):
        assert storage_options("s3://b/x") == {"anon": False, "endpoint_url": "http://127.0.0.1:9"}
        assert storage_options("gs://b/x") == {"anon": False}
    parsed = parse_storage_options(["endpoint_url=http://h:9000", "anon=true", "client_kwargs.region_name=eu-west-1",
                                    "secret=a=b", "token=null"])
    assert parsed == {"endpoint_url": "http://h:9000", "anon": True, "client_kwargs": {"region_name": "eu-west-1"},
                      "secret": "a=b", "token": "null"}
    with pytest.raises(click.BadParameter, match="KEY=VALUE"):
        parse_storage_options(["novalue"])
    assert LOCATION.convert("s3://b/x", None, None) == "s3://b/x"
    assert LOCATION.convert("rel/x", None, None) == Path("rel/x")


def _write_inputs(root: str, n: int) -> None:
    fs = fsspec.filesystem("memory")
    docs = [{"id": f"d{i}", "text": ["apple banana cherry", "dog cat mouse", "red green blue"][i % 3] + f" w{i % 4}"}
            for i in range(n)]
    fs.pipe(f"{root}/in.jsonl", "\n".join(json.dumps(d) for d in docs).encode())
    fs.pipe(f"{root}/texts/a/one.txt", b"apple banana apple")
    fs.pipe(f"{root}/texts/b/two.txt", b"dog cat dog")
    fs.pipe(f"{root}/texts/.hidden", b"never read")


@pytest.fixture
def memory_root() -> Any:
    root = f"/tf-{uuid.uuid4().hex[:12]}"
    yield root
    fsspec.filesystem("memory").rm(root, recursive=True)


def test_memory_store_equals_local_store(memory_root: str, tmp_path: Path) -> None:
    _write_inputs(memory_root, 30)
    url = f"memory://{memory_root}/news.zarr"
    ingest_corpus([f"memory://{memory_root}/in.jsonl"], url, shard_size=8)
    fsspec.filesystem("memory").get(f"{memory_root}/in.jsonl", str(tmp_path / "in.jsonl"))
    ingest_corpus([tmp_path / "in.jsonl"], tmp_path / "news.zarr", shard_size=8)
    remote, local = Corpus.open(url), Corpus.open(tmp_path / "news.zarr")
    assert isinstance(remote.path, StoragePath) and remote.verify() == []
    for i in range(local.n_shards):
        a, b = remote.read_block(i), local.read_block(i)
        assert a.doc_ids.tolist() == b.doc_ids.tolist()
        np.testing.assert_array_equal(a.to_csr().toarray(), b.to_csr().toarray())
    # Globs of URLs expand in sorted order; text directories on object storage are read too.
    texts = ingest_corpus([f"memory://{memory_root}/texts"], f"memory://{memory_root}/texts.zarr")
    assert texts.n_kept == 2
    assert sorted(Corpus.open(f"memory://{memory_root}/texts.zarr").doc_ids()) == ["texts/a/one.txt", "texts/b/two.txt"]
    assert ingest_corpus([f"memory://{memory_root}/*.jsonl"], f"memory://{memory_root}/glob.zarr").n_kept == 30
    appended = append_corpus(url, [f"memory://{memory_root}/texts"])
    assert appended.n_kept == 2 and len(Corpus.open(url)) == 32


def test_failed_publish_leaves_no_store(memory_root: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_inputs(memory_root, 20)
    url = f"memory://{memory_root}/broken.zarr"
    seen: list[str] = []

    def fail_third(target: str) -> None:
        seen.append(target)
        if len(seen) == 3:
            raise OSError("injected")

    monkeypatch.setattr(storage, "before_write", fail_third)
    with pytest.raises(OSError, match="injected"):
        ingest_corpus([f"memory://{memory_root}/in.jsonl"], url, shard_size=8)
    with pytest.raises((StoreNotFoundError, CorpusFormatError)):
        Corpus.open(url)
    monkeypatch.setattr(storage, "before_write", None)
    ingest_corpus([f"memory://{memory_root}/in.jsonl"], url, shard_size=8)
    with pytest.raises(StoreExistsError, match="not supported on object storage"):
        ingest_corpus([f"memory://{memory_root}/in.jsonl"], url, overwrite=True)


def test_outputs_other_than_models_on_object_storage_are_refused_clearly() -> None:
    with pytest.raises(UnsupportedStorageError, match=r"'s3://bucket/report' \(report --out\).*not keep this report yet"):
        check_output_path(Path("s3://bucket/report"), overwrite=False, what="report")  # pathlib made it s3:/bucket
    with pytest.raises(UnsupportedStorageError, match="cannot update model 'gs://models/lda'.*conditional puts"):
        with model_lock(Path("gs://models/lda"), action="update"):  # s3:// and memory:// have a lease
            pass
    with pytest.raises(UnsupportedStorageError, match="--doc-topics"):
        check_output_path(Path("gs://b/doc-topics"), overwrite=False, what="doc-topics output")


def test_ingest_never_deletes_objects_it_did_not_write(memory_root: str) -> None:
    _write_inputs(memory_root, 10)
    fs = fsspec.filesystem("memory")
    fs.pipe(f"{memory_root}/data/notes.txt", b"the user's own object")
    with pytest.raises(StoreExistsError, match="not a topicflow store"):
        ingest_corpus([f"memory://{memory_root}/in.jsonl"], f"memory://{memory_root}/data")
    assert fs.cat(f"{memory_root}/data/notes.txt") == b"the user's own object"
    # Leftovers of an interrupted ingest (a root group, no manifest) are replaced.
    fs.pipe(f"{memory_root}/left/zarr.json", json.dumps({"attributes": {"topicflow": {}}}).encode())
    fs.pipe(f"{memory_root}/left/shards/000009/zarr.json", b"{}")
    assert ingest_corpus([f"memory://{memory_root}/in.jsonl"], f"memory://{memory_root}/left").n_kept == 10
    assert not fs.exists(f"{memory_root}/left/shards/000009/zarr.json")


def test_a_conditional_put_conflict_is_a_lost_race_not_a_storage_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    """S3 answers a conditional put racing another one with 409 ConditionalRequestConflict; s3fs wraps botocore's
    ClientError in an OSError whose text need not name it: the cause chain is read (also by the lease)."""
    from topicflow.io.models import lease

    class ClientError(Exception):  # botocore's, as s3fs raises it (the code is in the message)
        pass

    def conflict(*args: object, **kwargs: object) -> None:
        try:
            raise ClientError("An error occurred (ConditionalRequestConflict) when calling the PutObject operation")
        except ClientError as exc:
            raise OSError(5, "Input/output error") from exc

    class FakeS3:
        protocol = ("s3", "s3a")
        pipe_file = staticmethod(conflict)

    monkeypatch.setattr(storage, "filesystem", lambda url: (FakeS3(), url.partition("://")[2]))
    with pytest.raises(FileExistsError) as replaced:
        storage.replace_object("s3://b/m/versions.json", b"new", previous=(b"old", '"etag"'))
    with pytest.raises(FileExistsError):
        storage.write_object("s3://b/m/versions.json", b"new", create_only=True)
    assert storage.lost_conditional_write(replaced.value) and lease._conflict(replaced.value)
    other = OSError(5, "Input/output error")
    other.__cause__ = ClientError("An error occurred (InternalError) when calling the PutObject operation")
    assert not storage.lost_conditional_write(other) and not lease._conflict(other)
