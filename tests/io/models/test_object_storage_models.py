"""Models on object storage: versioned save/load on s3:// (moto's server, tests/objstore.py) and memory://.

A version's objects are written under its own prefix first and ``versions.json`` last, conditionally;
a failure at any object write leaves the previous version current and readable, and of two writers
racing for one model only one commits. The lock that update, rollback and prune need is a lease object
there (tests/io/models/test_lease.py); object stores without conditional writes are refused.
"""
from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from numpy.testing import assert_array_equal

from tests.io.models.test_versions import lam, make_model
from topicflow.errors import (
    ModelNotFoundError,
    StoreExistsError,
    UnsupportedStorageError,
)
from topicflow.io import storage
from topicflow.io._atomic import check_output_path
from topicflow.io.models.lease import LeaseRecord
from topicflow.io.models.store import load_model, read_model_info, save_model
from topicflow.io.models.versions import list_versions, model_lock


class FailAtWrite:
    """``storage.before_write`` hook raising at the ``n``-th object write (counted, never timed)."""

    def __init__(self, n: int) -> None:
        self.n, self.seen = n, []  # type: tuple[int, list[str]]

    def __call__(self, url: str) -> None:
        self.seen.append(url)
        if len(self.seen) == self.n:
            raise OSError(f"injected failure at write {self.n} ({url})")


def new_url(kind: str, request: pytest.FixtureRequest) -> str:
    """A model URL on the test S3 server (a fresh bucket) or in fsspec's memory filesystem."""
    if kind == "s3":
        bucket = request.getfixturevalue("s3_bucket")
        return f"s3://{bucket}/models/lda"
    return f"memory://tf-models-{uuid.uuid4().hex[:12]}/lda"


@pytest.fixture(params=["s3", "memory"])
def model_url(request: pytest.FixtureRequest) -> str:
    return new_url(request.param, request)


def objects(url: str) -> list[str]:
    return storage.list_files(url)


def test_save_and_load_versioned_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model_url = f"memory://tf-models-{uuid.uuid4().hex[:12]}/lda"  # on s3: test_fit_on_s3_equals_local_disk
    original = make_model(1.0, matrix_prior=True)
    writes = FailAtWrite(0)
    monkeypatch.setattr(storage, "before_write", writes)
    save_model(Path(model_url), original)  # a pathlib-collapsed URL (s3:/b/...) is still the URL
    monkeypatch.setattr(storage, "before_write", None)
    assert writes.seen[-1] == f"{model_url}/versions.json"  # the commit, written last
    assert all(url.startswith(f"{model_url}/versions/000001/") for url in writes.seen[:-1])
    assert sorted(f"{model_url}/{name}" for name in objects(model_url) if name != ".lease.json") == sorted(writes.seen)
    lease = LeaseRecord.from_bytes(storage.StoragePath(f"{model_url}/.lease.json").read_bytes())
    assert lease is not None and lease.action == "save" and lease.released  # the save held the lease
    loaded = load_model(model_url)
    assert loaded.version == 1
    for lang in ("en", "de"):
        assert_array_equal(loaded.state.topic_word_var[lang], original.state.topic_word_var[lang])
        assert list(loaded.vocabularies[lang].terms) == list(original.vocabularies[lang].terms)
    assert_array_equal(loaded.state.topic_word_prior["en"], original.state.topic_word_prior["en"])
    assert read_model_info(model_url).corpus["n_docs"] == 120
    assert [(v.version, v.is_current) for v in list_versions(model_url)] == [(1, True)]

    with pytest.raises(StoreExistsError, match="exists already"):
        save_model(model_url, make_model(2.0))
    with pytest.raises(StoreExistsError, match="exists already"):
        check_output_path(Path(model_url), overwrite=False, what="model")
    check_output_path(Path(model_url), overwrite=True, what="model")
    save_model(model_url, make_model(2.0), overwrite=True)
    current = load_model(model_url)
    assert lam(current) == 2.0 and current.version == 2
    with pytest.raises(ModelNotFoundError, match=r"no version 1.*versions \[2\]"):
        load_model(model_url, version=1)
    assert not any(name.startswith("versions/000001/") for name in objects(model_url))  # discarded after commit
    with pytest.raises(ModelNotFoundError, match="no topicflow model"):
        load_model(model_url + "-missing")


@pytest.mark.parametrize(("kind", "fail_at"), [("memory", 1), ("s3", 4), ("memory", "versions.json")])
def test_failed_save_leaves_previous_version_current(kind: str, fail_at: Any, request: pytest.FixtureRequest,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    model_url = new_url(kind, request)
    save_model(model_url, make_model(1.0))
    index_before = storage.read_tagged(f"{model_url}/versions.json")
    if fail_at == "versions.json":
        failure = FailAtWrite(0)
        def hook(url: str) -> None:
            failure.seen.append(url)
            if url.endswith("/versions.json"):
                raise OSError("injected failure at the commit")
        monkeypatch.setattr(storage, "before_write", hook)
    else:
        failure = FailAtWrite(fail_at)
        monkeypatch.setattr(storage, "before_write", failure)
    with pytest.raises(OSError, match="injected failure"):
        save_model(model_url, make_model(2.0), overwrite=True)
    assert failure.seen and all("/versions/000002/" in url for url in failure.seen[:-1])
    monkeypatch.setattr(storage, "before_write", None)
    assert storage.read_tagged(f"{model_url}/versions.json") == index_before
    previous = load_model(model_url)
    assert previous.version == 1 and lam(previous) == 1.0
    # The next save removes the failed one's leftovers (never listed) and commits.
    save_model(model_url, make_model(3.0), overwrite=True)
    current = load_model(model_url)
    assert lam(current) == 3.0 and current.version == 2
    assert {name.split("/")[1] for name in objects(model_url) if name.startswith("versions/")} == {"000002"}


def test_two_writers_cannot_both_commit(model_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The second writer commits just before the first one's commit (an event: the first one's write of
    versions.json); the first one's conditional put fails and the second one's model stays current."""
    def other_writer_commits_first(url: str) -> None:
        if url.endswith("/versions.json"):
            monkeypatch.setattr(storage, "before_write", None)
            save_model(model_url, make_model(7.0), overwrite=True)

    monkeypatch.setattr(storage, "before_write", other_writer_commits_first)
    with pytest.raises(StoreExistsError, match="another writer"):
        save_model(model_url, make_model(1.0))  # If-None-Match: the other one created the model first
    assert lam(load_model(model_url)) == 7.0
    monkeypatch.setattr(storage, "before_write", other_writer_commits_first)
    with pytest.raises(StoreExistsError, match="another writer"):
        save_model(model_url, make_model(2.0), overwrite=True)  # If-Match on the ETag read before
    current = load_model(model_url)
    assert lam(current) == 7.0 and current.version == 2


def test_update_takes_the_lease_on_object_storage() -> None:
    """The lock exists on object storage (a lease object; tests/io/models/test_lease.py): a commit under it works."""
    model_url = f"memory://tf-models-{uuid.uuid4().hex[:12]}/lda"
    save_model(model_url, make_model(1.0))
    with model_lock(Path(model_url), action="update"):
        with pytest.raises(UnsupportedStorageError, match="cannot update model 'gs://"):
            with model_lock("gs://bucket/lda", action="update"):
                pass
    assert np.all(load_model(model_url).state.topic_word_var["en"] == 1.0)
