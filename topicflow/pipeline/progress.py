"""Progress reporting and run events through injected objects, so kernels and tasks never print.

Two seams are passed down to the drivers:

* a :class:`ProgressReporter` wraps the driver's main loop (iterations, minibatches, evaluation
  points): the CLI shows tqdm bars, the Python API reports nothing;
* an :class:`EventHook` is told when a run reaches a named point (``hook("dsgs-claimed", loop=1,
  minibatch=4)``). Production code never passes one (the default, :data:`NO_EVENTS`, does nothing),
  and runs behave and print exactly as without it. Tests pass one to trigger faults on events
  rather than on elapsed time: the hook tells the test that the run is at that point and may hold
  the run there until the test has, say, killed a worker and seen the scheduler remove it
  (:mod:`topicflow.testing.faults` has the hooks the tests use).

Each driver's docstring lists the events it emits and where. A hook may block but must not change
anything the run computes. It is called wherever the point is reached, possibly in a thread of this
process or on a Dask worker, so a hook given to a run on a cluster must be picklable.

The reporter's own position is an event too: a driver asks its reporter for item ``i + 1`` only once
item ``i`` is done (for batch VB: iteration ``i``'s M-step and checkpoint), which is how a test
stops a command-line run in a subprocess right after a given checkpoint
(:class:`topicflow.testing.faults.OnItem`).
"""
from __future__ import annotations

import sys
from typing import Iterable, Iterator, Protocol, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")


class ProgressReporter(Protocol):
    """What long-running pipeline steps report to; implement it to plug in another display."""

    def track(self, items: Iterable[T], *, total: int | None, desc: str, unit: str) -> Iterator[T]: ...

    def message(self, text: str) -> None: ...


class NoProgress:
    """Reports nothing (the Python API default)."""

    def track(self, items: Iterable[T], *, total: int | None, desc: str, unit: str) -> Iterator[T]:
        return iter(items)

    def message(self, text: str) -> None:
        return None


class TqdmProgress:
    """Progress bars on stderr (the CLI default); bars hide themselves when stderr is not a terminal."""

    def __init__(self, *, disable: bool | None = None) -> None:
        self._disable = (not sys.stderr.isatty()) if disable is None else disable

    def track(self, items: Iterable[T], *, total: int | None, desc: str, unit: str) -> Iterator[T]:
        return iter(tqdm(items, total=total, desc=desc, unit=unit, disable=self._disable, leave=False))

    def message(self, text: str) -> None:
        tqdm.write(text, file=sys.stderr)


NO_PROGRESS: ProgressReporter = NoProgress()


class EventHook(Protocol):
    """Told by a driver that its run reached a named point; how tests inject faults on events.

    ``hook(event, **where)`` with ``event`` one of the names the driver documents and ``where``
    integers that say where (a loop number, a minibatch index). It may block; it must not change
    anything the run computes.
    """

    def __call__(self, event: str, /, **where: int) -> None: ...


class NoEvents:
    """Ignores every event (the default of every driver that emits events)."""

    def __call__(self, event: str, /, **where: int) -> None:
        return None


NO_EVENTS: EventHook = NoEvents()
