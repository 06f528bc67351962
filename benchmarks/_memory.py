"""Peak resident memory of a whole process tree (driver, scheduler, nannies, workers), for benchmarks."""
from __future__ import annotations

import json
import shlex
import subprocess
import threading
import time
from typing import Any

import psutil


def run_process_tree(command: list[str], *, what: str) -> tuple[float, float, str]:
    """Run ``command``; return wall seconds, peak RSS of its process tree in MB, and its stdout.

    RSS is summed over the process and all its descendants every 50 ms.
    """
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        try:
            root = psutil.Process(process.pid)
        except psutil.Error:  # already gone
            return
        while not done.is_set():
            try:
                total = 0
                for proc in [root] + root.children(recursive=True):
                    try:
                        total += proc.memory_info().rss
                    except psutil.Error:
                        pass
                peak = max(peak, total)
            except psutil.Error:
                pass
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    done.set()
    sampler.join()
    wall = time.perf_counter() - started
    if process.returncode != 0:
        raise RuntimeError(f"{what} failed ({process.returncode}): {shlex.join(command)}\n{err[-3000:]}")
    return wall, peak / 1e6, out


def measure_process_tree(command: list[str], *, what: str) -> tuple[dict[str, Any], float, float]:
    """Run ``command``; return the JSON of its last stdout line, wall seconds and peak RSS in MB."""
    wall, peak, out = run_process_tree(command, what=what)
    return json.loads(out.strip().splitlines()[-1]), wall, peak
