"""Run a GIL-free kernel over contiguous chunks of an index range on the cores of this process.

The drivers' per-iteration work on the K x V model (the ELBO's topic terms, exp(E[log beta]) in the
E-step layout) is serial Python-level code while the workers wait; on a machine with several cores
it is split here into chunks of rows or columns, each handed to a numba kernel compiled with
``nogil=True``. Every chunk writes its own part of the output and nothing is summed across chunks
here, so the result has the same bits whatever the number of threads (the callers sum per-row
values in a fixed order afterwards).
"""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

#: Below this many elements of work a call runs on the calling thread (a pool hand-off costs ~50 us).
MIN_PARALLEL_ELEMENTS = 1 << 18

_pool: ThreadPoolExecutor | None = None
_pool_size = 0
_lock = threading.Lock()


def available_cores() -> int:
    """Count the cores this process may run on (its CPU affinity where the platform reports it).

    Returns
    -------
    int
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


def _shared_pool(size: int) -> ThreadPoolExecutor:
    global _pool, _pool_size
    with _lock:
        if _pool is None or _pool_size < size:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its running chunks finish; new ones go to the larger pool
            _pool = ThreadPoolExecutor(max_workers=size, thread_name_prefix="topicflow-kernel")
            _pool_size = size
        return _pool


def chunk_bounds(n: int, n_chunks: int) -> list[tuple[int, int]]:
    """``n_chunks`` contiguous ``(start, stop)`` ranges covering ``range(n)``, as equal as possible.

    Parameters
    ----------
    n : int
    n_chunks : int

    Returns
    -------
    list of (int, int)
        Empty ranges are left out.

    Examples
    --------
    >>> chunk_bounds(10, 3)
    [(0, 4), (4, 7), (7, 10)]
    """
    n_chunks = max(1, min(n_chunks, n))
    base, extra = divmod(n, n_chunks)
    out, start = [], 0
    for i in range(n_chunks):
        stop = start + base + (1 if i < extra else 0)
        if stop > start:
            out.append((start, stop))
        start = stop
    return out


def run_chunks(kernel: Callable[[int, int], None], n: int, work: int, threads: int | None = None) -> None:
    """Call ``kernel(start, stop)`` over contiguous chunks of ``range(n)``, on several threads when worth it.

    Parameters
    ----------
    kernel : callable
        ``kernel(start, stop)``; it must release the GIL (a ``nogil`` numba function does) and write
        only its own chunk's part of the output.
    n : int
        Length of the range (rows or columns).
    work : int
        Elements of work in all (e.g. K x V); small calls run on this thread.
    threads : int, optional
        Threads to use (default: the cores of this process).

    Examples
    --------
    >>> import numpy as np
    >>> out = np.zeros(5)
    >>> def fill(start, stop):
    ...     out[start:stop] = np.arange(start, stop)
    >>> run_chunks(fill, 5, work=5, threads=2); out.tolist()
    [0.0, 1.0, 2.0, 3.0, 4.0]
    """
    threads = available_cores() if threads is None else max(1, threads)
    if threads == 1 or n < 2 or work < MIN_PARALLEL_ELEMENTS:
        kernel(0, n)
        return
    bounds = chunk_bounds(n, threads)
    futures = [_shared_pool(threads).submit(kernel, start, stop) for start, stop in bounds[1:]]
    kernel(*bounds[0])
    for future in futures:
        future.result()
