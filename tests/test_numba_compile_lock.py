"""Processes that miss the same kernel compile it once (topicflow._numba_cache.share_compiles).

No timings: the second process is seen waiting on the lock in ``/proc/locks`` (the kernel's lock is
held here until then), and what it did is read from numba's own cache statistics.
"""
from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from topicflow import _numba_cache
from topicflow._numba_cache import LOCK_SUFFIX, locked_compile, share_compiles

#: A kernel in a module named inside the topicflow package (only topicflow's kernels are locked).
KERNEL = '''
import numba

@numba.njit(cache=True)
def triple(x):
    return 3 * x
'''

#: Load the kernel's module as ``topicflow.lock_probe`` from the file given, say so, then call it.
PROBE = r'''
import importlib.util, json, sys
import topicflow
spec = importlib.util.spec_from_file_location("topicflow.lock_probe", sys.argv[1])
module = sys.modules[spec.name] = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print("calling", flush=True)
assert module.triple(7) == 21
stats = module.triple.stats
print(json.dumps({"hits": sum(stats.cache_hits.values()), "misses": sum(stats.cache_misses.values())}))
'''

#: The failure bound of waiting for the other process to block on the lock (not a success condition).
DEADLINE_SECONDS = 120.0


def _load_kernel(path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    """Import the kernel's module (registered while the test runs: numba's cache names it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("topicflow.lock_probe", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)
    spec.loader.exec_module(module)
    return module


def _blocked_on_a_lock(pid: int) -> bool:
    """Whether process ``pid`` waits for a file lock (Linux lists blocked requests with ``->``)."""
    return any("->" in line and f" {pid} " in line for line in Path("/proc/locks").read_text().splitlines())


@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks to see a process wait")
def test_a_second_process_waits_for_the_first_compile_and_loads_it(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "lock_probe.py"
    source.write_text(KERNEL)
    share_compiles()
    module = _load_kernel(source, monkeypatch)
    lock = _numba_cache._lock_path(module.triple)
    assert lock is not None and lock.endswith(".nbi" + LOCK_SUFFIX)
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # this process is the first to compile
    _numba_cache._HELD.add(lock)
    other = subprocess.Popen([sys.executable, "-c", PROBE, str(source)], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    try:
        assert other.stdout is not None and other.stdout.readline().strip() == "calling"
        deadline = time.monotonic() + DEADLINE_SECONDS
        while not _blocked_on_a_lock(other.pid):
            assert other.poll() is None, other.communicate()
            assert time.monotonic() < deadline, "the other process never waited for the kernel's lock"
            time.sleep(0.01)
        assert module.triple(7) == 21  # compiled and saved here, under the lock
    finally:
        _numba_cache._HELD.discard(lock)
        os.close(fd)
    out, err = other.communicate()
    assert other.returncode == 0, err
    assert json.loads(out.splitlines()[-1]) == {"hits": 1, "misses": 0}


def test_the_wrapped_compile_holds_the_file_lock_and_reenters(tmp_path: Path) -> None:
    index = tmp_path / "kernel-1.py311.nbi"
    dispatcher = SimpleNamespace(py_func=SimpleNamespace(__module__="topicflow.models.x"),
                                 _cache=SimpleNamespace(_cache_file=SimpleNamespace(_index_path=str(index))))
    seen = []

    def compile(self: Any, sig: Any) -> str:
        probe = os.open(str(index) + LOCK_SUFFIX, os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):  # held while numba looks up, compiles and saves
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(probe)
        seen.append(sig)
        if sig == "outer":
            assert wrapped(self, "inner") == "inner"  # compiled while compiling itself: not locked again
        return sig

    wrapped = locked_compile(compile, threading.RLock())
    assert wrapped(dispatcher, "outer") == "outer" and seen == ["outer", "inner"]
    probe = os.open(str(index) + LOCK_SUFFIX, os.O_RDWR)
    fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released afterwards
    os.close(probe)
    assert _numba_cache._HELD == set()


def test_other_functions_and_missing_cache_files_are_not_locked(tmp_path: Path) -> None:
    calls = []
    wrapped = locked_compile(lambda self, sig: calls.append(sig) or sig, threading.RLock())
    theirs = SimpleNamespace(py_func=SimpleNamespace(__module__="numpy_user_code"),
                             _cache=SimpleNamespace(_cache_file=SimpleNamespace(_index_path=str(tmp_path / "a.nbi"))))
    uncached = SimpleNamespace(py_func=SimpleNamespace(__module__="topicflow.models.x"), _cache=SimpleNamespace())
    assert wrapped(theirs, 1) == 1 and wrapped(uncached, 2) == 2 and calls == [1, 2]
    assert list(tmp_path.iterdir()) == []


def test_share_compiles_waits_for_numba_or_wraps_it_once() -> None:
    meta_path: list[Any] = []
    assert share_compiles(modules={}, meta_path=meta_path) is False and len(meta_path) == 1
    assert share_compiles(modules={}, meta_path=meta_path) is False and len(meta_path) == 1

    class Dispatcher:
        def compile(self, sig: Any) -> Any:
            return sig
    numba_dispatcher = SimpleNamespace(Dispatcher=Dispatcher, global_compiler_lock=threading.RLock())
    assert share_compiles(modules={_numba_cache.DISPATCHER_MODULE: numba_dispatcher}, meta_path=[]) is True
    wrapped = Dispatcher.compile
    share_compiles(modules={_numba_cache.DISPATCHER_MODULE: numba_dispatcher}, meta_path=[])
    assert Dispatcher.compile is wrapped and getattr(wrapped, "__wrapped__").__name__ == "compile"


def test_importing_topicflow_then_numba_wraps_the_dispatcher() -> None:
    probe = ("import topicflow, numba.core.dispatcher as d, sys; "
             "print(d.Dispatcher.compile.topicflow_locked, 'numba' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["True", "True"]
