"""The one tree reduction every graph uses (E-step statistics, vocabulary counts, frequencies).

Its shape depends only on the number of parts and the fan-in, and children are always combined left
to right in part order, so a floating-point sum is the same whatever the number of workers or the
order in which tasks finish. Lazy only.
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

import dask


def tree_reduce_now(parts: Sequence[Any], combine: Callable[..., Any], *, split_every: int) -> Any:
    """:func:`tree_reduce` evaluated in place: the same tree, the same order, hence the same sum.

    For results that are already in memory (gathered from actors); not lazy.
    """
    if not parts:
        raise ValueError("a tree reduction needs at least one part")
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every!r}")
    level = list(parts)
    while len(level) > 1:
        level = [combine(*level[i : i + split_every]) for i in range(0, len(level), split_every)]
    return level[0]


def tree_reduce(parts: Sequence[Any], combine: Callable[..., Any], *, split_every: int, name: str) -> Any:
    """Combine ``parts`` in a tree of fan-in ``split_every``; keys are ``<name>-<depth>-<index>``.

    ``combine`` takes up to ``split_every`` positional values and must be a module-level function
    (so it pickles by reference). A single part is returned as it is.

    Raises
    ------
    ValueError
        If ``parts`` is empty or ``split_every < 2``.
    """
    if not parts:
        raise ValueError(f"{name}: a tree reduction needs at least one part")
    if split_every < 2:
        raise ValueError(f"split_every must be at least 2, got {split_every!r}")
    node = dask.delayed(combine, pure=True)
    level, depth = list(parts), 0
    while len(level) > 1:
        level = [
            node(*level[i : i + split_every], dask_key_name=f"{name}-{depth}-{i // split_every}")
            for i in range(0, len(level), split_every)
        ]
        depth += 1
    return level[0]
