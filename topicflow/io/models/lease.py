"""The lock of a model on object storage: a lease object, ``MODEL/.lease.json``, kept by conditional writes.

A local model is locked with ``fcntl.flock`` on ``MODEL/.lock`` (:func:`topicflow.io.models.store.model_lock`);
object stores have no such lock, so there the lock is a small JSON object that says who holds the model
and until when. Every change of it is a compare-and-swap on the object's ETag:

- **acquire**: create the object with ``If-None-Match: *``; or, when it exists but is free (released,
  expired, or left by a process that has died on this same machine), overwrite it with ``If-Match`` on
  the ETag just read, so of two takers exactly one wins and the other gets :class:`~topicflow.errors.LockedError`;
- **renew**: overwrite it with ``If-Match`` on the holder's own last ETag, pushing ``expires`` forward.
  A background thread renews every third of the lease's duration, and the holder renews at the safe
  points (after uploading a version, before the ``versions.json`` commit; before deleting versions): a
  renewal that fails means another process took the lease over, and the holder stops without committing;
- **release**: overwrite it with ``If-Match`` by a record marked released (never deleted, so no
  unconditional delete can remove a successor's lease).

Time. ``expires`` is the holder's clock plus the duration (default 600 s, ``topicflow.model-lease-seconds``);
another host judges expiry by its own clock. The exclusion therefore assumes that the clocks of the
hosts agree to within a small part of the duration (NTP keeps them within well under a second) and that
a holder never stalls, between a successful renewal and the write that follows it, for longer than the
duration. The ``versions.json`` commit is itself conditional (``If-Match`` on the index read under the
lease), so even a holder that broke that assumption cannot overwrite another's commit: it fails instead.
Every function takes the clock as a parameter (``clock``, seconds since the epoch), so tests control
time instead of waiting for it.

Backends. ``s3://`` (s3fs: ``If-None-Match``/``If-Match`` on PutObject; AWS S3, MinIO, moto) and
``memory://`` (one process; its compare-and-swap runs under a process-wide lock). Anything else
(``gs://``, ``az://``...) is refused with :class:`~topicflow.errors.UnsupportedStorageError`: topicflow does
not use their conditional writes yet.
"""
from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from typing import Any, Callable

from topicflow import config
from topicflow.errors import LockedError, UnsupportedStorageError
from topicflow.io import storage

log = logging.getLogger(__name__)

LEASE_FILE = ".lease.json"
LEASE_FORMAT = "topicflow-model-lease"
#: Lease duration in seconds when ``topicflow.model-lease-seconds`` is not set.
DEFAULT_LEASE_SECONDS = 600.0
#: Protocols whose conditional writes the lease uses.
LEASE_PROTOCOLS = ("s3", "s3a", "memory")

#: Seconds since the epoch, like :func:`time.time` (injected by tests).
Clock = Callable[[], float]

#: Called with the lease URL just before each conditional write of :meth:`ModelLease.acquire` (tests use
#: it to interleave two takers at an event; nothing else should set it).
before_claim: Callable[[str], None] | None = None

#: Serializes the compare-and-swap of ``memory://`` objects (that filesystem lives in one process).
_MEMORY_GUARD = threading.Lock()


def lease_seconds() -> float:
    """The lease duration in seconds: the ``topicflow.model-lease-seconds`` setting, default 600."""
    return float(config.get("model-lease-seconds", DEFAULT_LEASE_SECONDS))


def supports_lease(url: str) -> bool:
    """Whether topicflow can keep a lease on the object store of ``url`` (``s3://``, ``memory://``)."""
    return url.partition("://")[0] in LEASE_PROTOCOLS


def require_lease_support(url: str, *, action: str) -> None:
    """Refuse ``action`` on a model whose object store has no conditional writes that topicflow uses.

    Parameters
    ----------
    url : str
        The model's URL.
    action : str
        What was asked (``"update"``, ``"rollback"``, ``"prune"``), named in the message.

    Raises
    ------
    UnsupportedStorageError
        The protocol is not one of :data:`LEASE_PROTOCOLS`.
    """
    if supports_lease(url):
        return
    protocol = url.partition("://")[0]
    raise UnsupportedStorageError(
        f"cannot {action} model {url!r}: it is on {protocol}://, where topicflow cannot lock a model. The lock "
        f"on object storage is a lease object written with conditional puts (If-None-Match / If-Match), which "
        f"topicflow uses on s3:// and memory:// only; without them two updates of one model could both commit. "
        f"Its versions can be read (topics, infer, export) and replaced by `fit --model {url} --overwrite`; to "
        f"{action} it, copy it to a local disk or to s3://, {action} it there and copy it back "
        "(docs/storage.md, \"Model versions and the update lock\").",
        path=url,
    )


def _machine() -> str:
    """What makes a pid meaningful: this boot of this kernel and this pid namespace (Linux), else ''."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            boot = handle.read().strip()
        namespace = os.stat("/proc/self/ns/pid").st_ino
    except OSError:
        return ""
    return f"{boot}:{namespace}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def _utc(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """The content of ``MODEL/.lease.json``.

    Attributes
    ----------
    token : str
        Unique per acquisition (a UUID); also makes every write's bytes, hence its ETag, unique.
    host, pid : str, int
        Where the holder runs (for messages, and for the dead-process check).
    machine : str
        Boot id and pid namespace of the holder ('' off Linux): a pid is checked only on the same one.
    action : str
        What the holder is doing (``"update"``, ``"rollback"``, ...).
    acquired, expires : float
        Seconds since the epoch, by the holder's clock.
    renewals : int
        How often it was renewed.
    released : bool
        Set by :meth:`ModelLease.release`; a released lease is free.
    """

    token: str
    host: str
    pid: int
    machine: str
    action: str
    acquired: float
    expires: float
    renewals: int = 0
    released: bool = False

    def to_bytes(self) -> bytes:
        payload = {"format": LEASE_FORMAT, "token": self.token, "host": self.host, "pid": self.pid,
                   "machine": self.machine, "action": self.action, "acquired": self.acquired,
                   "expires": self.expires, "acquired_utc": _utc(self.acquired), "expires_utc": _utc(self.expires),
                   "renewals": self.renewals, "released": self.released}
        return (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode("utf-8")

    @classmethod
    def from_bytes(cls, data: bytes) -> LeaseRecord | None:
        """The record, or None when ``data`` is not a lease this topicflow wrote."""
        try:
            payload = json.loads(data)
            if not isinstance(payload, dict) or payload.get("format") != LEASE_FORMAT:
                return None
            pid, renewals = payload["pid"], payload.get("renewals", 0)
            acquired, expires = payload["acquired"], payload["expires"]
            released = payload.get("released", False)
            # Strict types: a damaged lease must never read as free (say, "released": "no" or a NaN expiry).
            if not (_is_int(pid) and pid > 0 and _is_int(renewals) and renewals >= 0 and isinstance(released, bool)
                    and _is_time(acquired) and _is_time(expires)):
                return None
            return cls(token=str(payload["token"]), host=str(payload["host"]), pid=pid,
                       machine=str(payload.get("machine", "")), action=str(payload["action"]),
                       acquired=float(acquired), expires=float(expires), renewals=renewals, released=released)
        except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
            return None

    def holder_is_dead(self) -> bool:
        """Whether the holder ran on this machine (same boot, same pid namespace) and has exited."""
        return bool(self.machine) and self.machine == _machine() and not _pid_alive(self.pid)

    def is_free(self, now: float) -> bool:
        """Whether another process may take the lease over at time ``now``."""
        return self.released or now >= self.expires or self.holder_is_dead()

    def describe(self) -> str:
        """``host 'h' pid 12 (update since 10:00:00 UTC)``."""
        return f"host {self.host!r} pid {self.pid} ({self.action} since {_utc(self.acquired)})"


# ----------------------------------------------------------------------------- conditional objects


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_time(value: Any) -> bool:
    """A finite number of seconds since the epoch (JSON integers and floats; not booleans)."""
    return (isinstance(value, int | float) and not isinstance(value, bool)
            and math.isfinite(value) and 0 <= value < 1e11)


def _memory_etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_lease_object(url: str) -> tuple[bytes, str] | None:
    """The lease object's bytes and ETag, or None when there is none."""
    if url.startswith("memory://"):
        fs, inner = storage.filesystem(url)
        with _MEMORY_GUARD:
            try:
                data = bytes(fs.cat_file(inner))
            except FileNotFoundError:
                return None
        return data, _memory_etag(data)
    tagged = storage.read_tagged(url)
    if tagged is None:
        return None
    data, etag = tagged
    if not etag:
        raise UnsupportedStorageError(f"{url!r} has no ETag, so topicflow cannot keep a lease there.", path=url)
    return data, etag


def _conflict(exc: BaseException) -> bool:
    """Whether a failed conditional put lost to another writer (412 PreconditionFailed, 409
    ConditionalRequestConflict, or the object vanished), looking through s3fs's wrapping of botocore's error."""
    return isinstance(exc, FileNotFoundError) or storage.lost_conditional_write(exc)


def write_lease_object(url: str, data: bytes, *, etag: str | None) -> str:
    """Write the lease object if it is still ``etag`` (None: if none exists); return the new ETag.

    Raises
    ------
    FileExistsError
        The object changed (or appeared, or vanished) since ``etag`` was read: another process won.
    """
    fs, inner = storage.filesystem(url)
    if url.startswith("memory://"):
        with _MEMORY_GUARD:
            try:
                current: bytes | None = bytes(fs.cat_file(inner))
            except FileNotFoundError:
                current = None
            if (current is None) != (etag is None) or (current is not None and _memory_etag(current) != etag):
                raise FileExistsError(url)
            fs.pipe_file(inner, data)
        return _memory_etag(data)
    try:
        if etag is None:
            out = fs.pipe_file(inner, data, mode="create")
        else:
            out = fs.pipe_file(inner, data, IfMatch=etag)
    except Exception as exc:
        if _conflict(exc):
            raise FileExistsError(url) from exc
        if "NotImplemented" in repr(exc) or "NotImplemented" in repr(exc.__cause__):
            raise UnsupportedStorageError(
                f"the object store of {url!r} does not implement conditional puts (If-None-Match / If-Match: "
                f"{exc}), so topicflow cannot lock the model there; update, roll back or prune a local copy "
                "(docs/storage.md, \"Model versions and the update lock\").", path=url) from exc
        raise storage.storage_error(url, exc) from exc
    new = (out or {}).get("ETag") if isinstance(out, dict) else None
    if not new:  # a backend that does not return it: read it back (our token makes the bytes unique)
        tagged = read_lease_object(url)
        if tagged is None or tagged[0] != data:
            raise FileExistsError(url)
        new = tagged[1]
    return str(new)


# ----------------------------------------------------------------------------- the lease


class ModelLease:
    """A held lease on a model on object storage (see :meth:`~topicflow.io.models.lease.ModelLease.acquire`).

    Parameters
    ----------
    url : str
        The lease object's URL (``MODEL/.lease.json``).
    record : LeaseRecord
        What was last written.
    etag : str
        The ETag of that write.
    duration : float
        Seconds each (re)newal extends the lease by.
    clock : callable
        Seconds since the epoch.
    """

    def __init__(self, url: str, record: LeaseRecord, etag: str, *, duration: float, clock: Clock) -> None:
        self.url, self.record, self.etag = url, record, etag
        self.duration, self.clock = duration, clock
        self.lost: BaseException | None = None
        self._guard = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @classmethod
    def acquire(cls, url: str, *, action: str, model: str, duration: float | None = None,
                clock: Clock = time.time) -> ModelLease:
        """Take the lease at ``url``, or fail at once with LockedError saying who holds it until when.

        Parameters
        ----------
        url : str
            ``MODEL/.lease.json``.
        action : str
            What the caller is about to do (named in the record and in errors).
        model : str
            The model's URL (for messages).
        duration : float, optional
            Seconds; default :func:`lease_seconds`.
        clock : callable, default time.time

        Returns
        -------
        ModelLease

        Raises
        ------
        LockedError
            The lease is held and not expired, or another process took it in the same instant.
        UnsupportedStorageError
            The backend has no conditional writes topicflow uses.
        """
        require_lease_support(url, action=action)
        duration = lease_seconds() if duration is None else float(duration)
        if not duration > 0:
            raise ValueError(f"lease duration must be positive, got {duration!r}")
        current = read_lease_object(url)
        now = clock()
        etag: str | None = None
        if current is not None:
            held = LeaseRecord.from_bytes(current[0])
            if held is None:
                raise LockedError(
                    f"model {model!r} has a lease object {url!r} that is not a topicflow lease, so this {action} "
                    "did not start; if no topicflow process is changing the model, delete that object and retry.",
                    path=model)
            if not held.is_free(now):
                raise _locked(model, url, held, action)
            etag = current[1]
            if not held.released:
                log.warning("taking over the lease of %s from %s (%s)", model, held.describe(),
                            "expired" if now >= held.expires else "its process has exited")
        record = LeaseRecord(token=uuid.uuid4().hex, host=socket.gethostname(), pid=os.getpid(), machine=_machine(),
                             action=action, acquired=now, expires=now + duration)
        data = record.to_bytes()
        if before_claim is not None:
            before_claim(url)
        try:
            new_etag = write_lease_object(url, data, etag=etag)
        except FileExistsError:
            winner = read_lease_object(url)
            held = LeaseRecord.from_bytes(winner[0]) if winner is not None else None
            if held is None:
                raise LockedError(f"model {model!r} was locked by another process in the same instant, so this "
                                  f"{action} did not start; retry.", path=model) from None
            raise _locked(model, url, held, action) from None
        return cls(url, record, new_etag, duration=duration, clock=clock)

    def renew(self) -> None:
        """Extend the lease to ``clock() + duration`` by a conditional write on its last ETag.

        Raises
        ------
        LockedError
            The lease was taken over (or released) by someone else: the caller must not commit.
        """
        with self._guard:
            if self.lost is not None:
                raise self.lost
            now = self.clock()
            record = replace(self.record, expires=now + self.duration, renewals=self.record.renewals + 1)
            try:
                self.etag = write_lease_object(self.url, record.to_bytes(), etag=self.etag)
            except FileExistsError:
                self.lost = self._lost_error()
                raise self.lost from None
            self.record = record

    def _lost_error(self) -> LockedError:
        now = read_lease_object(self.url)
        other = LeaseRecord.from_bytes(now[0]) if now is not None else None
        who = other.describe() if other is not None else "another process"
        return LockedError(
            f"the lease on {self.url!r} held since {_utc(self.record.acquired)} was taken over by {who} after it "
            f"expired at {_utc(self.record.expires)} (this process did not renew it in time: paused, or its clock "
            "disagrees with the other host's); nothing was committed. Run the command again.",
            path=self.url)

    def release(self) -> None:
        """Mark the lease released (a conditional write); a lease already lost is left alone."""
        self.stop_renewing()
        with self._guard:
            if self.lost is not None:
                return
            record = replace(self.record, released=True, expires=self.clock(), renewals=self.record.renewals + 1)
            try:
                self.etag = write_lease_object(self.url, record.to_bytes(), etag=self.etag)
                self.record = record
            except FileExistsError:
                log.warning("lease %s was taken over before it was released", self.url)
            except Exception as exc:  # it expires on its own
                log.warning("could not release the lease %s (%s); it expires at %s", self.url, exc,
                            _utc(self.record.expires))

    def start_renewing(self, every: float | None = None) -> None:
        """Renew from a daemon thread every ``every`` seconds (default: a third of the duration)."""
        interval = self.duration / 3 if every is None else float(every)
        self._thread = threading.Thread(target=self._renew_loop, args=(interval,), daemon=True,
                                        name=f"topicflow-lease-{self.record.token[:8]}")
        self._thread.start()

    def _renew_loop(self, interval: float) -> None:
        while not self._stop.wait(interval):
            try:
                self.renew()
            except LockedError:
                return  # lost: the next safe point raises it
            except Exception as exc:  # a network error: try again at the next interval
                log.warning("could not renew the lease %s (%s); retrying in %.0f s", self.url, exc, interval)

    def stop_renewing(self) -> None:
        """Stop the background renewal (if any) and wait for it."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()
        self._thread = None


def _locked(model: str, url: str, held: LeaseRecord, action: str) -> LockedError:
    return LockedError(
        f"model {model!r} is locked by {held.describe()} until {_utc(held.expires)} (lease {url!r}), so this "
        f"{action} did not start. Wait for that process to finish and retry. If it died, its lease expires at that "
        "time (a rerun on the same machine takes it over at once); nothing needs deleting.",
        path=model)
