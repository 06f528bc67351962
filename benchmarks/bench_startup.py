"""Fixed costs of the command line: whole-command wall time and time from command start to the first iteration.

Issue 22 part 3. Every number is taken in a fresh interpreter (a subprocess), as a user sees it:

* ``commands``: ``topicflow --help``, ``ingest`` (the bundled King James corpus, 3,667 passages),
  ``fit`` (batch VB, K=20, 3 iterations), ``infer`` and ``topics``, on each local-cluster executor
  (``--local-cluster threads|processes``; ``default`` passes no flag, which is how the numbers
  before the option existed were taken). Best of ``--repeat`` runs. For ``fit`` the run is driven
  through ``topicflow.cli.main(args, obj=reporter)`` with a reporter that stamps the moment the
  first iteration starts (the first item its ``track`` hands out), so "to first iteration" is
  measured from the moment the subprocess was launched to that stamp; ``modules`` is how many
  modules the process had imported then.
* ``breakdown`` (``--breakdown``): one batch-VB fit through the Python API in a fresh interpreter,
  split into interpreter start, imports, cluster start, store open, graph build (up to the first
  iteration), iteration 0 and iteration 1. Numba's cached kernels load (and, on a cold cache,
  compile) inside iteration 0, so ``iteration 0 - iteration 1`` is the kernel-loading cost; with
  processes the workers also import topicflow there, so compare "to end of iteration 0" across executors.
  ``numba init (registries)`` is the part of the first kernel call numba spends once per process
  (``CPUContext.load_additional_registries`` and the typing context's ``_load_builtins``: importing and
  installing its typing and lowering registries, scipy.linalg for BLAS, the extensions' entry points),
  timed by wrapping those two methods; with threads it falls inside "graph build" (the initial
  state's first kernel call). The module counts are ``len(sys.modules)`` after the imports and at
  the first iteration.

To compare with an older tree, extract its package (``git archive <commit> topicflow | tar -x -C
/tmp/before``) and pass ``--before /tmp/before``: each command then runs alternately with that
directory first on ``PYTHONPATH`` ("before") and without ("after"), so both arms see the same load.
The commands run from the temporary directory (``python -c`` puts the working directory ahead of
``PYTHONPATH``). Besides wall times, each command reports its CPU seconds (user + system, every
thread) in all and up to the first iteration: on a shared machine they vary far less than wall time.

The numba cache is warmed by one untimed run of each command first, so no timed run compiles.

Usage (one command per table; ``nice`` it on a shared machine)::

    nice .venv/bin/python benchmarks/bench_startup.py --repeat 5
    nice .venv/bin/python benchmarks/bench_startup.py --repeat 5 --breakdown
    nice .venv/bin/python benchmarks/bench_startup.py --repeat 3 --executors default   # a build without the option
    nice .venv/bin/python benchmarks/bench_startup.py --repeat 5 --floor   # what any in-process fit pays
    nice .venv/bin/python benchmarks/bench_startup.py --repeat 5 --executors threads --commands fit --before /tmp/before

``--floor`` runs no topicflow code: a fresh interpreter imports what a batch-VB fit uses (numpy,
scipy.sparse and .special, dask, distributed, numba, zarr, tqdm), calls one cached numba kernel (numba's
one-time initialization) and starts a threads ``LocalCluster`` as ``connect`` does. Its total is the
least a fit run this way can take to its first iteration, whatever topicflow imports.

Prints one JSON object (every run's numbers) and then a table.
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path
from typing import Any

PYTHON = sys.executable

#: Runs the CLI with a progress reporter that prints a wall-clock stamp when the first item of the
#: first loop it tracks starts (batch VB: iteration 0), then the CLI as usual.
CLI_DRIVER = r"""
import resource, sys, time
class Stamp:
    stamped = False
    def track(self, items, *, total, desc, unit):
        for item in items:
            if not Stamp.stamped:
                Stamp.stamped = True
                usage = resource.getrusage(resource.RUSAGE_SELF)
                print(f"BENCH-FIRST-ITEM {time.time():.6f} {len(sys.modules)} {usage.ru_utime + usage.ru_stime:.4f}",
                      file=sys.stderr, flush=True)
            yield item
    def message(self, text):
        pass
from topicflow.cli import main
sys.argv = ["topicflow", *sys.argv[1:]]
main(obj=Stamp())  # no args: as the console script runs it (the program's exit included)
"""

#: One batch-VB fit through the Python API, printing the wall-clock time at each phase boundary.
BREAKDOWN_DRIVER = r"""
import json, sys, time
stamps = {"interpreter": time.time()}
from topicflow import LDA, Corpus
from topicflow.pipeline.cluster import ClusterConfig, connect
stamps["imports"] = time.time()
modules = {"after imports": len(sys.modules)}
# numba's one-time initialization on the first kernel call of the process (typing and lowering
# registries, their imports, the extensions' entry points), timed by wrapping the two methods.
import numba.core.cpu, numba.core.typing.context
numba_init = []
def timed(cls, name):
    method = getattr(cls, name)
    def wrapper(*args, **kwargs):
        started = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            numba_init.append(time.perf_counter() - started)
    setattr(cls, name, wrapper)
timed(numba.core.cpu.CPUContext, "load_additional_registries")
timed(numba.core.typing.context.BaseContext, "_load_builtins")
class Stamp:
    def track(self, items, *, total, desc, unit):
        for item in items:
            stamps[f"item {len([k for k in stamps if k.startswith('item')])}"] = time.time()
            modules.setdefault("at first iteration", len(sys.modules))
            yield item
    def message(self, text):
        pass
store, executor = sys.argv[1], sys.argv[2]
config = ClusterConfig() if executor == "default" else ClusterConfig(executor=executor)
with connect(config) as client:
    stamps["cluster"] = time.time()
    corpus = Corpus.open(store)
    stamps["store"] = time.time()
    LDA(20, max_iter=3, tol=0.0).fit(corpus, client, progress=Stamp())
    stamps["done"] = time.time()
stamps["numba init"] = sum(numba_init)
stamps["modules"] = modules
print("BENCH-STAMPS " + json.dumps(stamps), file=sys.stderr, flush=True)
"""

#: The floor: what any in-process fit pays before its first iteration, without topicflow. Imports the
#: libraries a batch-VB fit uses (with the collector paused, then the imports frozen, as the command
#: line does), calls one cached numba kernel (a module written to the work directory and warmed by an
#: untimed run), whose first call pays numba's one-time initialization, and starts a threads
#: LocalCluster as ``connect`` does.
FLOOR_DRIVER = r"""
import gc, json, sys, time
started = time.time()
gc.disable()  # as the command line does: no collection while importing, then the imports frozen
threads = sys.argv[2] == "threads"
if threads:  # what `topicflow fit` on the threads executor imports: no distributed, no scipy.sparse
    import numpy, scipy.special, dask, dask.delayed, dask.threaded, numba, zarr, tqdm, click
else:
    import numpy, scipy.sparse, scipy.special, dask, dask.delayed, distributed, numba, zarr, tqdm
gc.freeze()
gc.enable()
imported = time.time()
sys.path.insert(0, sys.argv[1])
import bench_floor_kernel
defined = time.time()
bench_floor_kernel.total(numpy.ones(10))
called = time.time()
if threads:  # Dask's threaded scheduler needs no start; one task through it
    dask.delayed(sum)([1, 2]).compute(scheduler="threads")
    clustered = time.time()
else:
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, memory_limit=0, processes=False,
                                       dashboard_address="127.0.0.1:0", worker_dashboard_address="127.0.0.1:0")
    client = distributed.Client(cluster, direct_to_workers=True)
    clustered = time.time()
    client.close(); cluster.close()
print("BENCH-STAMPS " + json.dumps({"interpreter": started, "imports": imported, "kernel module": defined,
                                    "first kernel call": called, "cluster": clustered}), file=sys.stderr)
"""
FLOOR_KERNEL = """import numba


@numba.njit(nogil=True, cache=True)
def total(values):
    result = 0.0
    for value in values:
        result += value
    return result
"""


def bundled_corpus(workdir: Path) -> Path:
    """The demo corpus (King James passages) as plain JSON Lines in ``workdir``."""
    out = workdir / "kjv.jsonl"
    if not out.exists():
        source = resources.files("topicflow.data").joinpath("kjv_passages.jsonl.gz")
        with source.open("rb") as raw, gzip.open(raw) as unzipped:
            out.write_bytes(unzipped.read())
    return out


def commands(workdir: Path, executor: str) -> dict[str, list[str]]:
    """The benchmarked command lines (without the interpreter), by name."""
    flag = [] if executor == "default" else ["--local-cluster", executor]
    jsonl, store, model = workdir / "kjv.jsonl", workdir / "kjv.zarr", workdir / "model"
    return {
        "--help": ["--help"],
        "ingest": ["ingest", str(jsonl), "--out", str(workdir / f"ingested-{executor}.zarr"), "--overwrite", *flag],
        "fit": ["fit", str(store), "--model", str(workdir / f"model-{executor}"), "--topics", "20", "--max-iter", "3",
                "--overwrite", *flag],
        "infer": ["infer", str(model), str(store), "--out", str(workdir / f"doc-topics-{executor}.zarr"),
                  "--overwrite", *flag],
        "topics": ["topics", str(model)],
    }


def run_cli(args: list[str], pythonpath: str | None = None) -> dict[str, float | None]:
    """Run one command in a fresh interpreter; wall seconds and seconds to the first tracked item.

    Also the CPU seconds (user + system, every thread) of the whole command and up to the first
    tracked item: on a shared machine they vary far less than wall time. ``pythonpath``: put that
    directory first on ``PYTHONPATH`` (an older tree's package, for the "before" arm).
    """
    import resource

    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    launched = time.time()
    # Run from a directory without a package: ``python -c`` puts the working directory first on sys.path,
    # ahead of PYTHONPATH, so a run from the repository would import its package in both arms.
    done = subprocess.run([PYTHON, "-c", CLI_DRIVER, *args], capture_output=True, text=True, env=env,
                          cwd=tempfile.gettempdir())
    wall = time.time() - launched
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"{args} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    stamp = next((line.split() for line in done.stderr.splitlines() if line.startswith("BENCH-FIRST-ITEM ")), None)
    first = None if stamp is None else float(stamp[1]) - launched
    return {"wall_s": wall, "first_iteration_s": first, "modules_at_first_iteration": None if stamp is None
            else int(stamp[2]), "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
            "cpu_to_first_iteration_s": None if stamp is None or len(stamp) < 4 else float(stamp[3])}


def run_breakdown(store: Path, executor: str) -> dict[str, float]:
    """One API fit in a fresh interpreter, split into phases (seconds each)."""
    launched = time.time()
    done = subprocess.run([PYTHON, "-c", BREAKDOWN_DRIVER, str(store), executor], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"breakdown failed ({done.returncode}):\n{done.stderr[-3000:]}")
    line = next(line for line in done.stderr.splitlines() if line.startswith("BENCH-STAMPS "))
    stamps = json.loads(line.split(" ", 1)[1])
    order = ["interpreter", "imports", "cluster", "store", "item 0", "item 1", "item 2"]
    phases, previous = {}, launched
    names = ["interpreter start", "imports", "cluster start", "store open", "graph build", "iteration 0", "iteration 1"]
    for name, key in zip(names, order):
        phases[name] = stamps[key] - previous
        previous = stamps[key]
    phases["to first iteration"] = stamps["item 0"] - launched
    # With processes, the workers import topicflow and load the kernels inside iteration 0.
    phases["to end of iteration 0"] = stamps["item 1"] - launched
    phases["numba load (it0 - it1)"] = phases["iteration 0"] - phases["iteration 1"]
    # In this process (threads: the first kernel call is here; processes: only the initial state's).
    phases["numba init (registries)"] = stamps["numba init"]
    phases["modules after imports"] = stamps["modules"]["after imports"]
    phases["modules at 1st iteration"] = stamps["modules"]["at first iteration"]
    return phases


def run_floor(workdir: Path, variant: str = "distributed") -> dict[str, float]:
    """Third-party imports, numba's first cached-kernel call and a cluster, in a fresh interpreter.

    ``variant`` ``distributed``: the imports of a fit on a distributed cluster and a threads
    ``LocalCluster``; ``threads``: those of `fit` on the threads executor (no distributed, no
    scipy.sparse) and one task through Dask's threaded scheduler.
    """
    (workdir / "bench_floor_kernel.py").write_text(FLOOR_KERNEL)
    launched = time.time()
    done = subprocess.run([PYTHON, "-c", FLOOR_DRIVER, str(workdir), variant], capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"floor failed ({done.returncode}):\n{done.stderr[-3000:]}")
    stamps = json.loads(next(line for line in done.stderr.splitlines()
                             if line.startswith("BENCH-STAMPS ")).split(" ", 1)[1])
    phases, previous = {}, launched
    for name in ("interpreter", "imports", "kernel module", "first kernel call", "cluster"):
        phases[name] = stamps[name] - previous
        previous = stamps[name]
    phases["total"] = previous - launched
    return phases


def prepare(workdir: Path) -> None:
    """Corpus, store and model the commands read (untimed)."""
    bundled_corpus(workdir)
    for args in (["ingest", str(workdir / "kjv.jsonl"), "--out", str(workdir / "kjv.zarr"), "--overwrite"],
                 ["fit", str(workdir / "kjv.zarr"), "--model", str(workdir / "model"), "--topics", "20",
                  "--max-iter", "3", "--overwrite"]):
        run_cli(args)


def best(runs: list[dict[str, float | None]], key: str) -> float | None:
    values = [run[key] for run in runs if run[key] is not None]
    return min(values) if values else None  # type: ignore[type-var]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="Runs per cell (best reported).")
    parser.add_argument("--executors", default="threads,processes",
                        help="Comma-separated: threads, processes, auto, default (no flag).")
    parser.add_argument("--commands", default="--help,ingest,fit,infer,topics")
    parser.add_argument("--breakdown", action="store_true", help="Phase breakdown of one API fit instead.")
    parser.add_argument("--floor", action="store_true",
                        help="The floor instead: third-party imports, numba's first kernel call, a threads cluster.")
    parser.add_argument("--floor-variant", choices=["distributed", "threads"], default="distributed",
                        help="--floor: the imports and cluster of a distributed fit, or of `fit` on the threads "
                             "executor (no distributed, no scipy.sparse; Dask's threaded scheduler).")
    parser.add_argument("--workdir", type=Path, default=None, help="Keep the files here (default: a temp dir).")
    parser.add_argument("--before", default=None,
                        help="A directory holding an older tree's package (e.g. from git archive): each command "
                             "is run alternately with it first on PYTHONPATH ('before') and without ('after').")
    options = parser.parse_args()
    executors = options.executors.split(",")
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="bench-startup-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        if options.floor:
            run_floor(workdir, options.floor_variant)  # compiles the kernel into its cache, warms the page cache
            runs = [run_floor(workdir, options.floor_variant) for _ in range(options.repeat)]
            best_phases = {k: min(r[k] for r in runs) for k in runs[0]}
            print(json.dumps({"repeat": options.repeat, "variant": options.floor_variant, "load_average": os.getloadavg(), "runs": runs,
                              "best": best_phases}, indent=1))
            print(f"\n{'floor phase (best of %d, s)' % options.repeat:<32}")
            for phase, seconds in best_phases.items():
                print(f"{phase:<32}{seconds:>8.3f}")
            return
        prepare(workdir)
        report: dict[str, Any] = {"repeat": options.repeat, "cpu_count": os.cpu_count(),
                                  "load_average": os.getloadavg(), "results": {}}
        if options.breakdown:
            for executor in executors:
                run_breakdown(workdir / "kjv.zarr", executor)  # warm caches
                runs = [run_breakdown(workdir / "kjv.zarr", executor) for _ in range(options.repeat)]
                report["results"][executor] = {"runs": runs,
                                               "best": {k: min(r[k] for r in runs) for k in runs[0]}}
            print(json.dumps(report, indent=1))
            phases = list(next(iter(report["results"].values()))["best"])
            print(f"\n{'phase (best of %d, s)' % options.repeat:<26}" + "".join(f"{e:>12}" for e in executors))
            for phase in phases:
                cells = [report["results"][e]["best"][phase] for e in executors]
                print(f"{phase:<26}" + "".join(f"{c:>12d}" if isinstance(c, int) else f"{c:>12.3f}" for c in cells))
            return
        names = options.commands.split(",")
        arms = {"before": options.before, "after": None} if options.before else {"": None}
        for executor in executors:
            lines = commands(workdir, executor)
            for name in names:
                for path in arms.values():
                    run_cli(lines[name], path)  # warm the numba cache and the OS page cache
                runs: dict[str, list[dict[str, float | None]]] = {arm: [] for arm in arms}
                for _ in range(options.repeat):  # the arms take turns, so both see the same load
                    for arm, path in arms.items():
                        runs[arm].append(run_cli(lines[name], path))
                for arm, arm_runs in runs.items():
                    report["results"][f"{name} [{executor}]" + (f" {arm}" if arm else "")] = {
                        "command": ["topicflow", *lines[name]], "runs": arm_runs,
                        **{f"best_{key}": best(arm_runs, key) for key in
                           ("wall_s", "first_iteration_s", "cpu_s", "cpu_to_first_iteration_s")}}
        report["load_average_after"] = os.getloadavg()
        print(json.dumps(report, indent=1))
        print(f"\n{'command [executor]':<34}{'wall (s)':>10}{'to 1st iter (s)':>17}{'CPU (s)':>9}"
              f"{'CPU to 1st (s)':>16}{'modules':>9}   best of {options.repeat}")
        for key, cell in report["results"].items():
            first, modules = cell["best_first_iteration_s"], cell["runs"][0]["modules_at_first_iteration"]
            cpu_first = cell["best_cpu_to_first_iteration_s"]
            print(f"{key:<34}{cell['best_wall_s']:>10.2f}{'' if first is None else f'{first:.2f}':>17}"
                  f"{cell['best_cpu_s']:>9.2f}{'' if cpu_first is None else f'{cpu_first:.2f}':>16}"
                  f"{'' if modules is None else modules:>9}")
    finally:
        if options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
