"""Pure policies injected into driver loops: convergence, checkpoints, DSGS staleness."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from topicflow.errors import InvalidParameterError
from topicflow.io.storage import StoragePath


def has_converged(elbos: Sequence[float], rtol: float) -> bool:
    """Relative change of the last two ELBO values is below ``rtol`` (pure stopping policy)."""
    if len(elbos) < 2:
        return False
    previous, current = elbos[-2], elbos[-1]
    return abs(current - previous) <= rtol * abs(previous)


@dataclass(frozen=True, slots=True)
class CheckpointPolicy:
    """Write the driver state to ``path`` every ``every`` iterations (or minibatches).

    With ``resume``, the run first continues from the checkpoint found there, if any (see
    :mod:`topicflow.io.models.checkpoint`).

    ``path`` may be a :class:`~topicflow.io.storage.StoragePath` (a URL on object storage) for every
    method (docs/storage.md). A URL that ``pathlib`` collapsed (``Path("s3://b/c")``) is refused: pass
    ``StoragePath(url)``.
    """

    path: Path | StoragePath
    every: int = 1
    resume: bool = False

    def __post_init__(self) -> None:
        if self.every < 1:
            raise InvalidParameterError(f"checkpoint interval must be at least 1, got {self.every!r}")
        from topicflow.io.storage import url_of

        url = url_of(self.path)
        if url is not None and not isinstance(self.path, StoragePath):
            raise InvalidParameterError(
                f"checkpoint path {str(self.path)!r} is a URL that pathlib collapsed; pass "
                f"topicflow.io.storage.StoragePath({url!r}) (or a local path)", path=url)

    def due(self, done: int) -> bool:
        """Whether to write after ``done`` iterations (or minibatches) in all."""
        return done % self.every == 0


@dataclass(frozen=True, slots=True)
class SyncPolicy:
    """When a minibatch may fetch (a pure policy): the server's watermark must reach :meth:`needed`.

    Attributes
    ----------
    staleness : int or None
        The bound B of the module docstring; None: no bound (hogwild).
    sync_first : int
        Minibatches ``t < sync_first`` wait for every earlier one (bound 0).
    """

    staleness: int | None = None
    sync_first: int = 0

    def __post_init__(self) -> None:
        for name in ("staleness", "sync_first"):
            value = getattr(self, name)
            if (value is not None or name == "sync_first") and (
                    isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise InvalidParameterError(f"{name} must be {'None or ' if name == 'staleness' else ''}an integer "
                                            f">= 0, got {value!r}")

    def needed(self, t: int) -> int | None:
        """Watermark minibatch t waits for (None: no wait)."""
        if t < self.sync_first:
            return t
        return None if self.staleness is None else t - self.staleness
