"""The lock of a model on object storage: a lease object kept by conditional writes (topicflow.io.models.lease).

Time is an injected clock (:class:`FakeClock`): expiry is reached by moving the clock, never by
waiting. Concurrent takers are interleaved at an event (:data:`lease.before_claim`), with threads
and ``threading.Event``; the S3 tests talk to moto's standalone server (tests/objstore.py).
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from tests.io.models.test_versions import lam, make_model
from topicflow.errors import LockedError, UnsupportedStorageError
from topicflow.io import storage
from topicflow.io.models import lease
from topicflow.io.models.lease import (
    LeaseRecord,
    ModelLease,
    read_lease_object,
    write_lease_object,
)
from topicflow.io.models.store import load_model, remote_model_lock, save_model
from topicflow.io.models.versions import (
    commit_version,
    list_versions,
    model_lock,
    prune_versions,
    rollback,
)
from topicflow.testing.faults import HANG_GUARD_SECONDS


class FakeClock:
    """Seconds since the epoch, moved by the test."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def new_url(kind: str, request: pytest.FixtureRequest) -> str:
    if kind == "s3":
        return f"s3://{request.getfixturevalue('s3_bucket')}/models/lda"
    return f"memory://tf-lease-{uuid.uuid4().hex[:12]}/lda"


def record_at(url: str) -> LeaseRecord:
    tagged = read_lease_object(f"{url}/.lease.json")
    assert tagged is not None
    record = LeaseRecord.from_bytes(tagged[0])
    assert record is not None
    return record


@pytest.mark.parametrize("kind", ["s3", "memory"])
def test_acquire_renew_release_and_takeover_after_expiry(kind: str, request: pytest.FixtureRequest) -> None:
    url = new_url(kind, request)
    where, clock = f"{url}/.lease.json", FakeClock()
    t0 = clock.now
    first = ModelLease.acquire(where, action="update", model=url, duration=60, clock=clock)
    held = record_at(url)
    assert (held.token, held.expires, held.released, held.action) == (first.record.token, t0 + 60, False, "update")
    with pytest.raises(LockedError, match=r"locked by host .* pid \d+ \(update since .*\) until .* UTC"):
        ModelLease.acquire(where, action="rollback", model=url, duration=60, clock=clock)

    clock.now = t0 + 50
    first.renew()
    assert (record_at(url).expires, record_at(url).renewals) == (t0 + 110, 1)
    clock.now = t0 + 109  # past the first expiry, not past the renewed one
    with pytest.raises(LockedError, match="until"):
        ModelLease.acquire(where, action="prune", model=url, duration=60, clock=clock)

    clock.now = t0 + 110  # expired: taken over with If-Match on the expired lease's ETag
    second = ModelLease.acquire(where, action="update", model=url, duration=60, clock=clock)
    assert record_at(url).token == second.record.token != first.record.token
    with pytest.raises(LockedError, match="taken over"):
        first.renew()  # the stale holder learns it lost the lease and must not commit
    first.release()  # a lost lease is left alone
    assert record_at(url).token == second.record.token and not record_at(url).released

    second.release()
    assert record_at(url).released
    third = ModelLease.acquire(where, action="update", model=url, duration=60, clock=clock)  # free at once
    assert record_at(url).token == third.record.token


class Ticks:
    """Stands in for the renewal thread's stop event: "an interval passed" ``n`` times, then "stop"."""

    def __init__(self, n: int) -> None:
        self.n = n

    def wait(self, timeout: float) -> bool:
        self.n -= 1
        return self.n < 0

    def set(self) -> None:
        self.n = -1


def test_the_renewal_loop_extends_the_lease_and_stops_when_it_is_lost() -> None:
    url = f"memory://tf-lease-{uuid.uuid4().hex[:12]}/lda"
    where, clock = f"{url}/.lease.json", FakeClock()
    held = ModelLease.acquire(where, action="update", model=url, duration=30, clock=clock)
    clock.now += 10
    held._stop = Ticks(2)  # type: ignore[assignment]
    held._renew_loop(10.0)  # the thread's body, run here: two renewals, then stopped
    assert (record_at(url).renewals, record_at(url).expires) == (2, clock.now + 30)
    clock.now += 31
    ModelLease.acquire(where, action="update", model=url, duration=30, clock=clock)  # expired: taken over
    held._stop = Ticks(5)  # type: ignore[assignment]
    held._renew_loop(10.0)  # the first renewal finds the lease lost and ends the loop
    assert isinstance(held.lost, LockedError) and held._stop.n == 4  # type: ignore[attr-defined]
    with pytest.raises(LockedError, match="taken over"):
        held.renew()


def test_a_lost_conditional_put_is_recognised_through_s3fs_wrapping() -> None:
    botocore_like = Exception("An error occurred (ConditionalRequestConflict) when calling the PutObject operation")
    wrapped = OSError(5, "A conflicting conditional operation is currently in progress")
    wrapped.__cause__ = botocore_like
    assert lease._conflict(wrapped)
    assert lease._conflict(OSError(22, "At least one of the pre-conditions you specified did not hold"))
    assert not lease._conflict(OSError(5, "connection reset"))


@pytest.mark.parametrize(("kind", "state"), [("s3", "absent"), ("s3", "expired"), ("memory", "absent")])
def test_of_two_concurrent_takers_only_one_wins(kind: str, state: str, request: pytest.FixtureRequest,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Both takers read the lease as free (no object, or an expired one) before either writes; the
    conditional write lets exactly one of them win, whichever order the writes come in."""
    url = new_url(kind, request)
    where, clock = f"{url}/.lease.json", FakeClock()
    if state == "expired":
        ModelLease.acquire(where, action="update", model=url, duration=60, clock=clock)
        clock.now += 61
    read = {name: threading.Event() for name in ("A", "B")}
    a_wrote = threading.Event()
    outcome: dict[str, Any] = {}

    def hook(_: str) -> None:  # runs in each taker just before its conditional write
        name = threading.current_thread().name
        read[name].set()
        assert read["B" if name == "A" else "A"].wait(HANG_GUARD_SECONDS)
        if name == "B":
            assert a_wrote.wait(HANG_GUARD_SECONDS)

    def take(name: str) -> None:
        try:
            outcome[name] = ModelLease.acquire(where, action=f"update-{name}", model=url, duration=60, clock=clock)
        except LockedError as exc:
            outcome[name] = exc
        finally:
            if name == "A":
                a_wrote.set()

    monkeypatch.setattr(lease, "before_claim", hook)
    threads = [threading.Thread(target=take, args=(name,), name=name) for name in ("A", "B")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(HANG_GUARD_SECONDS)
    assert isinstance(outcome["A"], ModelLease)
    assert isinstance(outcome["B"], LockedError) and "update-A" in str(outcome["B"])
    assert record_at(url).token == outcome["A"].record.token


def test_a_lease_left_by_a_dead_process_on_this_machine_is_taken_over_at_once(s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/models/lda"
    exited = subprocess.Popen([sys.executable, "-c", "pass"])
    exited.wait()  # reaped: its pid names no process
    clock = FakeClock()
    left = LeaseRecord(token="dead", host="here", pid=exited.pid, machine=lease._machine(), action="update",
                       acquired=clock.now, expires=clock.now + 600)
    write_lease_object(f"{url}/.lease.json", left.to_bytes(), etag=None)
    taken = ModelLease.acquire(f"{url}/.lease.json", action="update", model=url, duration=600, clock=clock)
    assert record_at(url).token == taken.record.token
    elsewhere = LeaseRecord(token="other", host="there", pid=exited.pid, machine="another-boot:1", action="update",
                            acquired=clock.now, expires=clock.now + 600)
    assert not elsewhere.is_free(clock.now)  # a pid on another machine says nothing: wait for expiry


def test_object_stores_without_conditional_writes_are_refused() -> None:
    for url in ("gs://bucket/models/lda", "az://container/models/lda"):
        with pytest.raises(UnsupportedStorageError, match=r"cannot rollback .*conditional puts.*s3:// and memory://"):
            with model_lock(url, action="rollback"):
                pass
    with pytest.raises(UnsupportedStorageError, match="cannot prune"):
        prune_versions("gs://bucket/models/lda", 1)
    for command in (["rollback", "gs://bucket/models/lda", "1"], ["versions", "gs://bucket/models/lda", "--keep", "1"],
                    ["update", "az://container/models/lda", "store.zarr"]):
        refused = run_cli(*command)
        assert refused.exit_code == 2 and "where topicflow cannot lock a model" in refused.output, refused.output


def test_a_holder_that_lost_its_lease_does_not_commit() -> None:
    url, clock = f"memory://tf-lease-{uuid.uuid4().hex[:12]}/lda", FakeClock()  # the logic of every backend
    save_model(url, make_model(1.0))
    with pytest.raises(LockedError, match="taken over"):
        with remote_model_lock(url, action="update", clock=clock):
            clock.now += lease.lease_seconds() + 1  # the holder stalls past its lease...
            ModelLease.acquire(f"{url}/.lease.json", action="update", model=url, clock=clock)  # ...and is replaced
            commit_version(url, make_model(2.0), kind="update", summary={})
    current = load_model(url)
    assert current.version == 1 and lam(current) == 1.0
    assert [v.version for v in list_versions(url)] == [1]


def run_cli(*args: str) -> Any:
    from topicflow.cli import main

    return CliRunner().invoke(main, list(args))


def test_rollback_and_prune_on_s3(s3_bucket: str) -> None:
    url = f"s3://{s3_bucket}/models/lda"
    save_model(url, make_model(1.0))
    with model_lock(url, action="update"):
        commit_version(url, make_model(2.0), kind="update", summary={})
    done = run_cli("rollback", url, "1")
    assert done.exit_code == 0 and "current version is now 1 (was 2)" in done.output, done.output
    assert lam(load_model(url)) == 1.0

    # A writer holding the lease has uploaded version 3's objects but not yet committed: prune is refused
    # and leaves them alone; after its commit, prune keeps the current version even though it is the oldest.
    uploaded, commit_now = threading.Event(), threading.Event()

    def writer() -> None:
        with model_lock(url, action="update"):
            storage.write_object(f"{url}/versions/000003/partial", b"being written")
            uploaded.set()
            assert commit_now.wait(HANG_GUARD_SECONDS)
            commit_version(url, make_model(3.0), kind="update", summary={})

    thread = threading.Thread(target=writer)
    thread.start()
    assert uploaded.wait(HANG_GUARD_SECONDS)
    refused = run_cli("versions", url, "--keep", "1")
    assert refused.exit_code != 0 and "is locked by" in refused.output and "until" in refused.output
    assert storage.StoragePath(f"{url}/versions/000003/partial").is_file()
    commit_now.set()
    thread.join(HANG_GUARD_SECONDS)
    assert [(v.version, v.parent, v.is_current) for v in list_versions(url)][-1] == (3, 1, True)
    rollback(url, 1)
    listed = run_cli("versions", url, "--keep", "1", "--format", "json")
    assert listed.exit_code == 0, listed.output
    assert json.loads(listed.output)["removed"] == [2]
    assert [(v.version, v.is_current) for v in list_versions(url)] == [(1, True), (3, False)]
    prefixes = {name.split("/")[1] for name in storage.list_files(url) if name.startswith("versions/")}
    assert prefixes == {"000001", "000003"}
    assert lam(load_model(url)) == 1.0 and lam(load_model(url, version=3)) == 3.0
    assert not storage.StoragePath(f"{url}/versions/000003/partial").is_file()  # replaced by the real upload
    assert record_at(url).released


def test_path_collapsed_by_pathlib_still_takes_the_lease() -> None:
    url = f"memory://tf-lease-{uuid.uuid4().hex[:12]}/lda"
    save_model(url, make_model(1.0))
    with model_lock(Path(url), action="update"):  # Path("memory://x") is "memory:/x"
        assert commit_version(Path(url), make_model(2.0), kind="update", summary={}) == 2
        assert not record_at(url).released
    assert record_at(url).released and lam(load_model(url)) == 2.0
