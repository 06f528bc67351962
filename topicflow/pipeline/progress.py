"""Progress reporting through one injected object, so kernels and tasks never print."""
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
