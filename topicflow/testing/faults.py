"""Fault injection for tests, triggered by events of the run and never by elapsed time.

A fault test that sleeps, polls against a deadline or kills "after a second" proves nothing: on a
faster machine the run is over before the fault, on a slower one the fault lands somewhere else.
The tests here instead wait for the run to *say* where it is, and hold it there when they must:

1. the run reports that it reached a point: a driver's callback (``on_iteration``,
   ``on_minibatch``), its :class:`~topicflow.pipeline.progress.ProgressReporter` being asked for
   the next item (:class:`OnItem`), an :class:`~topicflow.pipeline.progress.EventHook` event
   (``run_dsgs(..., hook=...)``: :class:`Barrier`, :class:`PauseAt`, :class:`InOrder`), or the
   scheduler assigning a task (:class:`TaskKiller`);
2. the test injects the fault then: :func:`kill_worker` SIGKILLs a worker and returns only once the
   scheduler has removed it, so the run continues on a cluster that knows the worker is gone;
3. when the run must not move on before the fault (a loop holding an unpushed minibatch, a command
   that would otherwise finish), it is held at the point: :class:`PauseAt` blocks a loop until the
   test calls :meth:`PauseAt.release`; :func:`suspend_this_process` stops a subprocess (SIGSTOP)
   and :func:`wait_until_suspended` is the parent's kernel-level wait for that stop.

Hooks run wherever the run reaches the point: in threads of the test process (no cluster) or on
Dask workers. Their shared flags are :class:`Signals`, ``threading.Event`` objects in the first
case and ``distributed.Event`` / ``distributed.Variable`` on the scheduler in the second (those
hooks pickle to names only).

**Hang guards.** Every wait here gives up after :data:`HANG_GUARD_SECONDS` and raises
:class:`HangGuardExpired`. The guard only turns a hang (a run that never reaches the point, a
broken hook) into a loud failure; a passing test never comes near it, and no outcome depends on it.

This module must not import ``topicflow.pipeline`` (it sits below it): hooks and reporters match
the pipeline's protocols by shape.
"""
from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import threading
import time
import uuid
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Mapping, Sequence, TypeVar

from distributed.diagnostics.plugin import SchedulerPlugin

from topicflow.errors import TopicflowError

T = TypeVar("T")

#: Seconds any wait of this module (and of the tests using it) allows before failing loudly. A hang
#: guard only: healthy runs reach every point in well under a second, even on a loaded machine.
HANG_GUARD_SECONDS = 300.0


class FaultInjectionError(TopicflowError, RuntimeError):
    """A fault could not be injected where the test asked (the run ended first, or no such worker)."""


class HangGuardExpired(FaultInjectionError, TimeoutError):
    """A wait for an event of the run exceeded :data:`HANG_GUARD_SECONDS`: the run or the test hangs."""


# ----------------------------------------------------------------------------- shared flags


class Signals:
    """Named one-shot flags with a value, shared by a test and the run it watches.

    Parameters
    ----------
    client : distributed.Client, optional
        None: flags are ``threading.Event`` objects of this process (for runs in threads of it).
        A client: ``distributed.Event`` and ``distributed.Variable`` on its scheduler, usable from
        any worker; the object then pickles to its name.

    Notes
    -----
    Names are prefixed with a random token, so two ``Signals`` never share a flag.
    """

    def __init__(self, client: Any = None) -> None:
        self.prefix = f"topicflow-faults-{uuid.uuid4().hex[:12]}"
        self.shared = client is not None
        # This process's flags go through the client given (it need not be the default one); on a
        # worker, unpickled, None: the worker's own client.
        self._client = client
        self._local: dict[str, threading.Event] = {}
        self._values: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        if not self.shared:
            raise TypeError("Signals made without a client exist in one process only; pass the client to "
                            "share them with Dask workers")
        return {"prefix": self.prefix}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.prefix, self.shared, self._client = state["prefix"], True, None
        self._local, self._values, self._lock = {}, {}, threading.Lock()

    def set(self, name: str, value: Any = True) -> None:
        """Set flag ``name`` with ``value`` (a small msgpack-able value on a cluster), releasing its waiters."""
        full = f"{self.prefix}/{name}"
        if self.shared:
            from distributed import Event, Variable

            Variable(full, client=self._client).set(value)
            Event(full, client=self._client).set()
            return
        with self._lock:
            self._values[full] = value
            flag = self._local.setdefault(full, threading.Event())
        flag.set()

    def is_set(self, name: str) -> bool:
        """Whether flag ``name`` is set (without waiting)."""
        full = f"{self.prefix}/{name}"
        if self.shared:
            from distributed import Event

            return bool(Event(full, client=self._client).is_set())
        with self._lock:
            flag = self._local.get(full)
        return flag is not None and flag.is_set()

    def wait(self, name: str) -> Any:
        """Block until flag ``name`` is set and return its value.

        Raises
        ------
        HangGuardExpired
            Not set within :data:`HANG_GUARD_SECONDS`.
        """
        full = f"{self.prefix}/{name}"
        if self.shared:
            from distributed import Event, Variable

            if not Event(full, client=self._client).wait(timeout=HANG_GUARD_SECONDS):
                raise _expired(f"flag {name!r}")
            return Variable(full, client=self._client).get()
        with self._lock:
            flag = self._local.setdefault(full, threading.Event())
        if not flag.wait(HANG_GUARD_SECONDS):
            raise _expired(f"flag {name!r}")
        with self._lock:
            return self._values[full]


def _expired(what: str) -> HangGuardExpired:
    return HangGuardExpired(f"waited {HANG_GUARD_SECONDS:.0f} s for {what}; the run never got there (or the test "
                            "never released it). This is a hang guard: look for the run's own error in the log.")


def _worker_address() -> str | None:
    """The address of the Dask worker running this code, or None outside a worker."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except ValueError:
        return None


# ----------------------------------------------------------------------------- event hooks


class Hooks:
    """Call several event hooks in turn, in the order given.

    Parameters
    ----------
    *hooks : callable
        Event hooks ``hook(event, **where)``.
    """

    def __init__(self, *hooks: Callable[..., None]) -> None:
        self.hooks = hooks

    def __call__(self, event: str, /, **where: int) -> None:
        for hook in self.hooks:
            hook(event, **where)


class Barrier:
    """Hold each party at ``event`` until every party has reached it (once; later events pass).

    Parameters
    ----------
    client : distributed.Client or None
        Where the run's hooks execute (see :class:`Signals`).
    event : str
        The event that is the barrier (e.g. ``"dsgs-claimed"``: every loop has claimed a minibatch).
    key : str
        The ``where`` field naming the party (e.g. ``"loop"``).
    parties : int
        Parties ``0 .. parties - 1`` must all arrive.

    Notes
    -----
    A party that reaches the event again (a loop rerun after its worker died) finds every flag set
    and passes.
    """

    def __init__(self, client: Any, event: str, *, key: str, parties: int) -> None:
        self.signals = Signals(client)
        self.event, self.key, self.parties = event, key, int(parties)

    def __call__(self, event: str, /, **where: int) -> None:
        if event != self.event:
            return
        self.signals.set(f"arrived-{where[self.key]}")
        for party in range(self.parties):
            self.signals.wait(f"arrived-{party}")


class PauseAt:
    """Hold the run at the first point matching ``event``, ``match`` and ``at_least`` until released.

    The test calls :meth:`reached` (which blocks until the run is there and says where, including
    the Dask worker's address), injects its fault, then :meth:`release`. Every matching call blocks
    until then; after :meth:`release` they pass, so a loop rerun after its worker was killed goes on.

    Parameters
    ----------
    client : distributed.Client or None
        Where the run's hooks execute (see :class:`Signals`).
    event : str
        Event name, e.g. ``"dsgs-claimed"``.
    match : mapping of str to int, optional
        ``where`` fields that must be equal (e.g. ``{"loop": 1}``).
    at_least : mapping of str to int, optional
        ``where`` fields that must be at least this (e.g. ``{"minibatch": 4}``).
    """

    def __init__(self, client: Any, event: str, *, match: Mapping[str, int] | None = None,
                 at_least: Mapping[str, int] | None = None) -> None:
        self.signals = Signals(client)
        self.event = event
        self.match = dict(match or {})
        self.at_least = dict(at_least or {})

    def matches(self, event: str, where: Mapping[str, int]) -> bool:
        """Whether the run's point ``event``, ``where`` is the one to pause at."""
        return (event == self.event and all(where.get(k) == v for k, v in self.match.items())
                and all(k in where and where[k] >= v for k, v in self.at_least.items()))

    def __call__(self, event: str, /, **where: int) -> None:
        if not self.matches(event, where):
            return
        if not self.signals.is_set("reached"):
            self.signals.set("reached", {"event": event, **where, "worker": _worker_address()})
        self.signals.wait("released")

    def reached(self) -> dict[str, Any]:
        """Block until the run is held at the point; return ``event``, the ``where`` fields and ``worker``."""
        return dict(self.signals.wait("reached"))

    def release(self) -> None:
        """Let the held run (and any later matching point) go on."""
        self.signals.set("released")


@dataclass(frozen=True)
class After:
    """A rule of :class:`InOrder`: ``event`` at index i waits until ``other`` happened at index ``i + offset``.

    Attributes
    ----------
    event : str
        The event that waits.
    other : str
        The event waited for.
    offset : int
        Index of ``other`` relative to the waiting event's; indices outside ``0 .. count - 1`` are
        not waited for.
    """

    event: str
    other: str
    offset: int


class InOrder:
    """Impose an order on the run's events: each :class:`After` rule holds an event until another happened.

    Parameters
    ----------
    client : distributed.Client or None
        Where the run's hooks execute (see :class:`Signals`).
    rules : sequence of After
    key : str
        The ``where`` field that indexes the events (e.g. ``"minibatch"``); events without it, or
        with a negative index, are ignored.
    count : int
        Indices ``0 .. count - 1`` exist.

    Examples
    --------
    Fetches and pushes of DSGS minibatches in the fixed order fetch 0, fetch 1, push 0, fetch 2,
    push 1, ...: every minibatch misses exactly its predecessor (lag 1, staleness 1)::

        InOrder(client, [After("dsgs-fetch", "dsgs-pushed", -2), After("dsgs-push", "dsgs-fetched", +1),
                         After("dsgs-push", "dsgs-pushed", -1)], key="minibatch", count=n_minibatches)
    """

    def __init__(self, client: Any, rules: Sequence[After], *, key: str, count: int) -> None:
        self.signals = Signals(client)
        self.rules = tuple(rules)
        self.key, self.count = key, int(count)
        self.recorded = frozenset(rule.other for rule in self.rules)

    def __call__(self, event: str, /, **where: int) -> None:
        index = where.get(self.key, -1)
        if index < 0:
            return
        for rule in self.rules:
            other = index + rule.offset
            if rule.event == event and 0 <= other < self.count:
                self.signals.wait(f"{rule.other}-{other}")
        if event in self.recorded:
            self.signals.set(f"{event}-{index}")


# ----------------------------------------------------------------------------- progress reporters


class OnItem:
    """A progress reporter that calls ``action`` once, when the run asks for item ``index`` of loop ``desc``.

    Drivers ask for item ``i + 1`` only after item ``i`` is done (batch VB: its M-step, callback and
    checkpoint), so ``OnItem("fit", 3, action)`` acts right after iteration 2's checkpoint.

    Parameters
    ----------
    desc : str
        The ``desc`` the driver tracks its loop under (``"fit"``, ``"online"``, ``"stream pf"``).
    index : int
        The item before which ``action`` runs.
    action : callable
        Called with no arguments; it may block (or stop the process).
    """

    def __init__(self, desc: str, index: int, action: Callable[[], Any]) -> None:
        self.desc, self.index, self.action = desc, int(index), action
        self.fired = False

    def track(self, items: Iterable[T], *, total: int | None, desc: str, unit: str) -> Iterator[T]:
        """Yield ``items``, running the action before item ``index`` of the loop ``desc``."""
        for position, item in enumerate(items):
            if desc == self.desc and position == self.index and not self.fired:
                self.fired = True
                self.action()
            yield item

    def message(self, text: str) -> None:
        """Ignore messages."""
        return None


def suspend_this_process() -> None:
    """Stop this process with SIGSTOP (its parent sees it in :func:`wait_until_suspended`)."""
    os.kill(os.getpid(), signal.SIGSTOP)


def wait_until_suspended(process: subprocess.Popen[Any]) -> None:
    """Block until ``process`` (a child started with ``start_new_session=True``) has stopped itself.

    This is ``waitpid(WUNTRACED)``: the kernel reports the stop, nothing is polled. If the hang guard
    expires, the process group is killed, which ends the wait.

    Raises
    ------
    FaultInjectionError
        The process ended instead (its exit status is kept in ``process.returncode``).
    """
    guard = threading.Timer(HANG_GUARD_SECONDS, kill_process_group, args=(process,))
    guard.start()
    try:
        _, status = os.waitpid(process.pid, os.WUNTRACED)
    finally:
        guard.cancel()
    if not os.WIFSTOPPED(status):
        process.returncode = os.waitstatus_to_exitcode(status)
        raise FaultInjectionError(f"process {process.pid} ended with status {process.returncode} before it "
                                  f"suspended itself (or was killed by the {HANG_GUARD_SECONDS:.0f} s hang guard)")


def kill_once_suspended(command: Sequence[str]) -> None:
    """Run ``command`` as a child in its own session; once it has stopped itself, SIGKILL its process group.

    The child stops itself (SIGSTOP) at an event of its run, so the kill lands exactly there; this
    returns once the killed child has been reaped. See :func:`wait_until_suspended`.

    Parameters
    ----------
    command : sequence of str
        The child's argv (e.g. ``[sys.executable, "-c", SCRIPT, *args]``).

    Raises
    ------
    FaultInjectionError
        The child ended before it stopped itself.
    """
    process = subprocess.Popen(list(command), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        wait_until_suspended(process)
    finally:
        kill_process_group(process)
        process.wait()


def kill_process_group(process: subprocess.Popen[Any]) -> None:
    """SIGKILL the process group that ``process`` leads (started with ``start_new_session=True``)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# ----------------------------------------------------------------------------- killing workers


def kill_worker(client: Any, address: str) -> None:
    """SIGKILL the worker process at ``address`` and return once the scheduler has removed it.

    The kill and the wait run on the scheduler (a plugin sees the removal), so when this returns the
    worker's tasks have been rescheduled and no new work goes to it. Its nanny starts a new worker.

    Parameters
    ----------
    client : distributed.Client
        Of a cluster whose workers run on this machine.
    address : str
        The worker's address.

    Raises
    ------
    FaultInjectionError
        No such worker.
    HangGuardExpired
        The scheduler did not remove it within the hang guard.
    """
    client.run_on_scheduler(_kill_and_confirm, address, HANG_GUARD_SECONDS)


#: Nanny states in which a nanny no longer restarts its worker.
_GAVE_UP = ("closing", "closed", "failed")


def restore_workers(client: Any, n_workers: int, *, poll: float = 0.05, guard: float = HANG_GUARD_SECONDS) -> list[str]:
    """Return once the local cluster behind ``client`` has ``n_workers`` running workers again.

    After a worker is killed its nanny starts a new one. Under load a nanny has been seen to give up
    instead (closed, its worker never back: "Only 1/2 workers arrived"); the cause is not known (a new
    worker refused by the scheduler while the killed one's name is still registered would do it). A
    nanny that gave up is replaced by a new one of the cluster's spec, with a warning naming it (so a
    suite that recovered still says what happened). This polls for those events (a worker registered, a
    nanny closed), with ``guard`` only as the failure bound.

    Parameters
    ----------
    client : distributed.Client
        A client of a ``LocalCluster`` of worker processes in this process (``client.cluster``).
    n_workers : int
        Running workers to wait for.
    poll : float
        Seconds between checks (how soon the event is seen, not whether).
    guard : float
        Seconds before :class:`HangGuardExpired`.

    Returns
    -------
    list of str
        The names of the nannies that had given up and were replaced (empty in a healthy run).

    Raises
    ------
    HangGuardExpired
        The cluster did not get back to ``n_workers`` within ``guard``; the message lists each nanny's state.
    """
    cluster = client.cluster
    if cluster is None:  # not made here: nothing to replace, only to wait for
        client.wait_for_workers(n_workers, timeout=guard)
        return []
    replaced: list[str] = []
    deadline = time.monotonic() + guard
    while True:
        running = [w for w in client.sync(client.scheduler.identity, n_workers=-1)["workers"].values()
                   if w.get("status") == "running"]
        # done only once the cluster's own list agrees: a nanny started by ``scale`` joins it only after its
        # worker has registered with the scheduler
        listed = [n for n in cluster.workers.values() if getattr(getattr(n, "status", None), "name", "") == "running"]
        if len(running) >= n_workers and len(listed) >= n_workers:
            if replaced:
                warnings.warn(f"the nanny of worker(s) {replaced} gave up after a kill and was replaced",
                              stacklevel=2)
            return replaced
        gave_up = [name for name, nanny in list(cluster.workers.items())
                   if getattr(getattr(nanny, "status", None), "name", "") in _GAVE_UP]
        for name in gave_up:
            del cluster.workers[name]
        # a nanny that closed may also have left the cluster's list already (seen: only the other one listed)
        missing = [name for name in cluster.worker_spec if name not in cluster.workers and str(name) not in replaced]
        if gave_up or missing or (len(cluster.workers) < n_workers and not replaced):
            replaced.extend(str(name) for name in {*gave_up, *missing} if str(name) not in replaced)
            if not (gave_up or missing):
                replaced.append("?")
            cluster.scale(n_workers)  # the spec keeps or regains the name: the cluster starts a new nanny
        if time.monotonic() > deadline:
            states = {str(name): getattr(getattr(n, "status", None), "name", "?") for name, n in cluster.workers.items()}
            raise HangGuardExpired(f"{len(running)} of {n_workers} workers running after {guard:.0f} s; nanny "
                                   f"states {states}; replaced {replaced}")
        time.sleep(poll)


async def _kill_and_confirm(address: str, guard: float, dask_scheduler: Any = None) -> None:
    scheduler = dask_scheduler
    worker = scheduler.workers.get(address)
    if worker is None or not worker.pid:
        raise FaultInjectionError(f"no worker {address!r} to kill; the scheduler has {sorted(scheduler.workers)}")
    removed = asyncio.Event()
    name = f"topicflow-faults-removal-{uuid.uuid4().hex[:12]}"
    scheduler.add_plugin(_RemovalWatch(address, removed), name=name)
    try:
        os.kill(worker.pid, signal.SIGKILL)
        try:
            await asyncio.wait_for(removed.wait(), guard)
        except TimeoutError:  # asyncio.TimeoutError is TimeoutError since Python 3.11
            raise _expired(f"the scheduler to remove worker {address!r}") from None
    finally:
        scheduler.remove_plugin(name=name)


class _RemovalWatch(SchedulerPlugin):
    """Sets ``removed`` when the scheduler removes the worker at ``address``."""

    def __init__(self, address: str, removed: asyncio.Event) -> None:
        self.address, self.removed = address, removed

    def remove_worker(self, scheduler: Any, worker: str, **kwargs: Any) -> None:
        if worker == self.address:
            self.removed.set()


def workers_with_actors(client: Any) -> list[str]:
    """Addresses of the workers that hold at least one actor, sorted."""
    return list(client.run_on_scheduler(_actor_holders))


def _actor_holders(dask_scheduler: Any = None) -> list[str]:
    return sorted(ws.address for ws in dask_scheduler.workers.values() if ws.actors)


class KillOnTask(SchedulerPlugin):
    """Scheduler plugin: once armed, SIGKILLs the worker the first task whose key contains ``key_part`` goes to.

    It acts in the scheduler's transition to ``processing`` (the task has just been assigned), so the
    worker dies holding that task and the scheduler must run it again elsewhere. Use it through
    :class:`TaskKiller`.

    Parameters
    ----------
    key_part : str
        Part of the task key, e.g. ``"estep"``.
    name : str
        The plugin's name on the scheduler.
    """

    def __init__(self, key_part: str, name: str) -> None:
        self.key_part, self.name = key_part, name
        self.armed = False
        self.killed: list[dict[str, str]] = []
        self.scheduler: Any = None

    async def start(self, scheduler: Any) -> None:
        """Remember the scheduler (called when the plugin is registered)."""
        self.scheduler = scheduler

    def transition(self, key: Any, start: str, finish: str, *args: Any, **kwargs: Any) -> None:
        """Kill the worker of the first matching task that becomes ``processing`` once armed."""
        if not self.armed or self.killed or finish != "processing" or self.key_part not in str(key):
            return
        task = self.scheduler.tasks.get(key)
        worker = None if task is None else task.processing_on
        if worker is None or not worker.pid:
            return
        os.kill(worker.pid, signal.SIGKILL)
        self.killed.append({"worker": worker.address, "key": str(key)})


class TaskKiller:
    """The test's handle on a :class:`KillOnTask` plugin: registered at construction, then armed on an event.

    Parameters
    ----------
    client : distributed.Client
        Of a cluster whose workers run on this machine.
    key_part : str
        Part of the key of the task whose worker is killed.

    Examples
    --------
    Kill a worker in the middle of batch VB's second iteration::

        killer = TaskKiller(client, "estep")
        fit_batch_vb(corpus, config, client=client, on_iteration=lambda record, state: killer.arm())
        assert killer.killed()
    """

    def __init__(self, client: Any, key_part: str) -> None:
        self.client = client
        self.name = f"topicflow-kill-on-task-{uuid.uuid4().hex[:12]}"
        client.register_plugin(KillOnTask(key_part, self.name))

    def arm(self) -> None:
        """Kill on the next matching task (the call returns once the scheduler's plugin is armed)."""
        self.client.run_on_scheduler(_arm, self.name)

    def killed(self) -> list[dict[str, str]]:
        """What was killed: ``{"worker": address, "key": task key}`` (at most one entry)."""
        return list(self.client.run_on_scheduler(_killed, self.name))


def _arm(name: str, dask_scheduler: Any = None) -> None:
    dask_scheduler.plugins[name].armed = True


def _killed(name: str, dask_scheduler: Any = None) -> list[dict[str, str]]:
    return list(dask_scheduler.plugins[name].killed)


# ----------------------------------------------------------------------------- test-side threads


class InBackground:
    """Run ``action`` in a thread of the test (say, "when the run pauses, kill a worker, release it").

    Parameters
    ----------
    action : callable
        Called with no arguments in a new daemon thread.
    """

    def __init__(self, action: Callable[[], T]) -> None:
        self._action = action
        self._result: Any = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="topicflow-fault", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = self._action()
        except BaseException as exc:  # noqa: BLE001 - handed to the test in join()
            self._error = exc

    def join(self) -> Any:
        """Wait for the action; return its result or raise its exception.

        Raises
        ------
        HangGuardExpired
            The action did not finish within :data:`HANG_GUARD_SECONDS`.
        """
        self._thread.join(HANG_GUARD_SECONDS)
        if self._thread.is_alive():
            raise _expired("the test's fault thread")
        if self._error is not None:
            raise self._error
        return self._result
