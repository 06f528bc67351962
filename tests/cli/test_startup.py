"""Start-up of the command line (issue 22.3): the local cluster's executor, lazy imports, the numba cache.

No timings: the executor is checked by the choice and the line the command prints, laziness by the
modules a fresh interpreter has loaded, the numba cache by numba's own compile events and cache
statistics.
"""
from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import click
import dask.config
import numpy as np
import pytest
from click.testing import CliRunner

from topicflow._numba_cache import (
    ENTRYPOINTS_MODULE,
    SOURCES_STAMP,
    drop_stale_kernels,
    ensure_cache_dir,
    skip_numba_extensions,
    user_cache_dir,
)
from topicflow.cli import COMMAND_MODULES, command_help, main
from topicflow.cli._common import cluster_options
from topicflow.pipeline.cluster import (
    ClusterConfig,
    Workload,
    choose_executor,
    connect,
    estimate_workload,
)
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

HEAVY = ("dask", "distributed", "numba", "zarr")


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    truth = draw_planted_corpus(n_docs=120, n_topics=3, n_terms=30, doc_length=30, alpha=0.3, seed=5)
    return write_test_store(tmp_path_factory.mktemp("startup") / "train.zarr", {"default": truth.counts["default"]},
                            shard_size=40)


def parsed(args: list[str]) -> ClusterConfig:
    """The ClusterConfig ``@cluster_options`` builds for a command taking a STORE and ``--topics``."""
    seen: list[ClusterConfig] = []

    @click.command()
    @click.argument("store")
    @click.option("--topics", "n_topics", type=int, default=None)
    @cluster_options
    def probe(store: str, n_topics: int | None, cluster: ClusterConfig) -> None:
        seen.append(cluster)

    result = CliRunner().invoke(probe, args, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return seen[0]


def test_auto_picks_threads_for_a_small_store_and_sizes_corpus_and_model(store: Path) -> None:
    config = parsed([str(store), "--topics", "3"])
    manifest = json.loads((store / "manifest.json").read_text())
    n_tokens, n_docs = manifest["n_tokens"]["default"], manifest["n_docs"]
    # 8 bytes per token (term id + count, at most one per token), offsets; 4 K x V matrices + gamma.
    assert config.workload == Workload(8 * n_tokens + 8 * (n_docs + 1), 8 * 3 * (4 * 30 + n_docs))
    assert config.executor is None and config.scheduler is None
    choice = choose_executor(config)
    assert choice.executor == "threads" and choice.line().startswith("executor: threads (corpus 0 MB + model 0 MB fit in ")


def test_a_tiny_memory_budget_picks_processes(store: Path) -> None:
    config = parsed([str(store), "--topics", "3"])
    with dask.config.set({"topicflow.local-cluster-memory": "1kB"}):
        choice = choose_executor(config)
    assert choice.executor == "processes"
    assert choice.line() == ("executor: processes (corpus 0 MB + model 0 MB exceed the threads budget 0 MB; "
                             "set topicflow.local-cluster-memory to change it)")
    assert choose_executor(config, budget=config.workload.total_bytes).executor == "threads"  # type: ignore[union-attr]
    assert choose_executor(config, budget=config.workload.total_bytes - 1).executor == "processes"  # type: ignore[union-attr]


def test_local_cluster_option_and_setting_force_the_executor(store: Path) -> None:
    for executor in ("threads", "processes"):
        config = parsed([str(store), "--local-cluster", executor])
        assert config.executor == executor
        assert choose_executor(config, budget=1).line() == f"executor: {executor} (asked for)"
        with dask.config.set({"topicflow.local-cluster": executor}):
            assert choose_executor(parsed([str(store)]), budget=1).executor == executor
    assert choose_executor(ClusterConfig(executor="auto")).line() == "executor: threads (no corpus or model to size)"
    assert parsed([str(store), "--scheduler", "tcp://127.0.0.1:1"]).workload is None
    with pytest.raises(ValueError, match="executor 'cores' is not one of auto, threads, processes"):
        ClusterConfig(executor="cores")  # type: ignore[arg-type]


def test_a_saved_model_counts_its_arrays(store: Path, tmp_path: Path) -> None:
    assert estimate_workload([tmp_path / "missing", store / "manifest.json"]) is None
    assert estimate_workload([tmp_path]) is None  # a directory of texts (ingest's input) is not walked
    arrays = tmp_path / "model" / "arrays" / "topic_word"
    arrays.mkdir(parents=True)
    (tmp_path / "model" / "versions.json").write_text("{}")
    (arrays / "zarr.json").write_text(json.dumps({"node_type": "array", "shape": [3, 30], "data_type": "float64"}))
    assert estimate_workload([tmp_path / "model"]) == Workload(0, 3 * 30 * 8)


def test_the_command_prints_its_executor(store: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="topicflow.pipeline.cluster")
    args = ["fit", str(store), "--topics", "3", "--max-iter", "2", "--model", str(tmp_path / "m"), "--workers", "1"]
    result = CliRunner().invoke(main, [*args, "--local-cluster", "threads"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert [r.getMessage() for r in caplog.records if r.getMessage().startswith(("executor:", "local"))] == [
        "executor: threads (asked for)",
        "local: Dask's threaded scheduler in this process, 1 threads (no cluster, no dashboard)"]
    assert "dashboard:" not in result.output
    # A dashboard asked for starts the in-process cluster that serves it.
    caplog.clear()
    result = CliRunner().invoke(main, [*args, "--overwrite", "--local-cluster", "threads",
                                       "--dashboard-address", "localhost:0"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert [r.getMessage().split(",")[0] for r in caplog.records if r.getMessage().startswith("local")] == [
        "local Dask cluster: 1 workers x 1 threads"]


def cache_stats() -> tuple[int, int]:
    """Cache hits and misses of every numba kernel this process has imported from topicflow.models."""
    from numba.core.dispatcher import Dispatcher

    kernels = [obj for name, module in list(sys.modules.items()) if name.startswith("topicflow.models")
               for obj in vars(module).values() if isinstance(obj, Dispatcher)]
    return (sum(sum(k.stats.cache_hits.values()) for k in kernels),
            sum(sum(k.stats.cache_misses.values()) for k in kernels))


def test_threads_and_processes_give_the_same_batch_vb_model_and_workers_load_cached_kernels(
        store: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Same seed, same model, bit for bit, whichever executor; a fresh worker process compiles nothing."""
    from topicflow import LDA, Corpus

    caplog.set_level(logging.INFO, logger="topicflow.pipeline.cluster")
    models = {}
    for executor, workers in (("threads", 2), ("processes", 1)):
        with dask.config.set({"topicflow.local-cluster-memory": "2GB" if executor == "threads" else "1kB"}), \
                connect(ClusterConfig(workers=workers, workload=estimate_workload([store], 3))) as client:
            models[executor] = LDA(3, max_iter=4, tol=0.0, seed=3).fit(Corpus.open(store), client).model_.state
            if executor == "processes":
                [(hits, misses)] = client.run(cache_stats).values()
    assert [r.getMessage().split(" (")[0] for r in caplog.records if r.getMessage().startswith("executor:")] == [
        "executor: threads", "executor: processes"]
    np.testing.assert_array_equal(models["threads"].topic_word_var["default"],
                                  models["processes"].topic_word_var["default"])
    np.testing.assert_array_equal(models["threads"].doc_topic_prior, models["processes"].doc_topic_prior)
    assert hits > 0 and misses == 0  # the worker process loaded the E-step kernels the threads run had cached


def loaded_after(code: str) -> list[str]:
    """The heavy packages a fresh interpreter has imported after running ``code``."""
    probe = f"import sys\n{code}\nprint('LOADED', *(m for m in {HEAVY!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()[-1].split()[1:]


def test_help_and_import_load_no_dask_numba_or_zarr() -> None:
    assert loaded_after("import topicflow") == []
    help_run = "from topicflow.cli import main\ntry:\n    main(['--help'])\nexcept SystemExit:\n    pass"
    assert loaded_after(help_run) == []


#: An LDA fit by the command line in a fresh interpreter, then the modules of ``sys.argv[1]`` it loaded.
FIT_PROBE = r"""
import sys
from topicflow.cli import main
watched = sys.argv[1].split(",")
try:
    main(sys.argv[2:])
except SystemExit as stop:
    assert not stop.code, stop.code
print("LOADED", *(m for m in watched if m in sys.modules))
"""
#: What a batch-VB fit of LDA on a store does not use: the other families' estimators and drivers,
#: the text sources (pyarrow) and ingest, the numba extension of pydata/sparse, the evaluation package
#: (reports, coherence, features), the coherence metrics and scipy.special (the hybrid E-step's only);
#: on threads, neither distributed (Dask's threaded scheduler, no cluster) nor scipy.sparse (bags are DocBlocks).
NOT_FOR_AN_LDA_FIT = ("distributed", "scipy.sparse", "topicflow.api.hdp", "topicflow.api.infvoc", "topicflow.api.tree_lda",
                      "topicflow.pipeline.collapsed", "topicflow.pipeline.tree_lda", "topicflow.io.sources",
                      "topicflow.pipeline.ingest", "pyarrow", "dask.array", "sparse", "topicflow.pipeline.evaluation",
                      "topicflow.metrics.topic_coherence", "scipy.special")


def test_an_lda_fit_imports_only_what_it_uses(store: Path, tmp_path: Path) -> None:
    args = ["fit", str(store), "--model", str(tmp_path / "model"), "--topics", "3", "--max-iter", "2",
            "--local-cluster", "threads", "--workers", "1"]
    done = subprocess.run([sys.executable, "-c", FIT_PROBE, ",".join(NOT_FOR_AN_LDA_FIT), *args],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1].split()[1:] == []
    assert (tmp_path / "model").is_dir()


#: Runs ``topicflow info STORE`` (``sys.argv[2]``) as the program or with arguments (``sys.argv[1]``), recording
#: each call of ``gc.freeze``: whether the command's module was imported by then; and which of numba,
#: scipy.sparse and distributed the store commands' module loaded (none: ingest and info need none of them).
FREEZE_PROBE = r"""
import atexit, gc, sys
calls, freeze = [], gc.freeze
gc.freeze = lambda: calls.append("topicflow.cli.corpus" in sys.modules) or freeze()
atexit.register(lambda: print("FREEZES", gc.isenabled(), *calls))  # registered first: runs after main's handlers
atexit.register(lambda: print("LOADED", *(m for m in ("numba", "scipy.sparse", "distributed") if m in sys.modules)))
from topicflow.cli import main
how, store = sys.argv[1:]
if how == "program":
    sys.argv = ["topicflow", "info", store]
    main()
else:
    main(["info", store], standalone_mode=False)
"""


@pytest.mark.parametrize(("how", "freezes"), [("program", ["True", "True"]), ("with-args", [])])
def test_the_program_freezes_its_heap_and_a_caller_with_arguments_does_not(store: Path, how: str,
                                                                            freezes: list[str]) -> None:
    done = subprocess.run([sys.executable, "-c", FREEZE_PROBE, how, str(store)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    # After the command's module is imported (the group's callback), then at exit; the collector runs again.
    assert done.stdout.splitlines()[-1].split()[1:] == ["True", *freezes]
    assert done.stdout.splitlines()[-2] == "LOADED"


def test_skip_numba_extensions_sets_numba_flag_only_when_it_can() -> None:
    fresh = SimpleNamespace(_already_initialized=False)
    assert skip_numba_extensions({ENTRYPOINTS_MODULE: fresh}) is True and fresh._already_initialized is True
    assert skip_numba_extensions({ENTRYPOINTS_MODULE: fresh}) is False  # already loaded (or marked)
    assert skip_numba_extensions({}) is False  # numba not imported yet: numba loads them as usual
    assert skip_numba_extensions({ENTRYPOINTS_MODULE: SimpleNamespace()}) is False  # a numba without the flag


def test_command_table_matches_the_command_modules() -> None:
    modules = {module for module, _ in COMMAND_MODULES.values()}
    listed = {}
    for module in modules:
        for command in __import__(f"topicflow.cli.{module}", fromlist=["COMMANDS"]).COMMANDS:
            listed[command.name] = (module, command.callback.__name__)
            # --help reads the one-line help from the source; it is what click shows for the command.
            assert (click.Command(command.name, help=command_help(command.name)).get_short_help_str(80)
                    == command.get_short_help_str(80))
    assert listed == COMMAND_MODULES
    assert list(main.commands) == sorted(COMMAND_MODULES) and main.commands["fit"].name == "fit"


def test_numba_cache_falls_back_to_a_user_directory(tmp_path: Path) -> None:
    environ = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    writable = tmp_path / "package"
    writable.mkdir()
    assert ensure_cache_dir(writable, environ) is None and "NUMBA_CACHE_DIR" not in environ
    unwritable = tmp_path / "not-writable"  # os.access is always True for root, so a path that cannot be written
    assert ensure_cache_dir(unwritable, environ) == str(tmp_path / "cache" / "topicflow" / "numba")
    assert environ["NUMBA_CACHE_DIR"] == str(user_cache_dir(environ)) and user_cache_dir(environ).is_dir()
    chosen = {"NUMBA_CACHE_DIR": "/somewhere"}
    assert ensure_cache_dir(unwritable, chosen) is None and chosen == {"NUMBA_CACHE_DIR": "/somewhere"}


def _cache_files(*dirs: Path) -> list[str]:
    return sorted(p.name for d in dirs if d.is_dir() for p in d.iterdir())


def test_cached_kernels_are_dropped_when_any_source_changes(tmp_path: Path) -> None:
    """numba checks a cached kernel against its own file only; a kernel compiled with another module's
    kernels inside must go when that module changes. Any edit deletes the package's cached kernels once,
    and nothing else (.pyc files stay); unchanged sources keep them."""
    package = tmp_path / "pkg"
    (package / "sub" / "__pycache__").mkdir(parents=True)
    (package / "__pycache__").mkdir()
    (package / "a.py").write_text("A = 1\n")
    (package / "sub" / "b.py").write_text("B = 1\n")

    def fill() -> None:
        for name in ("a.f-1.py311.nbi", "a.f-1.py311.1.nbc", "a.cpython-311.pyc"):
            (package / "__pycache__" / name).write_bytes(b"x")
        (package / "sub" / "__pycache__" / "b.g-3.py311.nbi").write_bytes(b"x")

    fill()
    environ: dict[str, str] = {}
    assert drop_stale_kernels(package, environ) == 3  # no fingerprint yet: the cache's origin is unknown
    assert _cache_files(package / "__pycache__", package / "sub" / "__pycache__") == ["a.cpython-311.pyc",
                                                                                      SOURCES_STAMP]
    fill()
    assert drop_stale_kernels(package, environ) == 0  # same sources: the kernels stay
    assert len(_cache_files(package / "__pycache__", package / "sub" / "__pycache__")) == 5
    (package / "sub" / "b.py").write_text("B = 2  # the callee changed, its caller's file did not\n")
    assert drop_stale_kernels(package, environ) == 3
    assert drop_stale_kernels(package, environ) == 0


def test_cached_kernels_in_numba_cache_dir_are_found_where_numba_puts_them(tmp_path: Path) -> None:
    from numba.core.caching import UserProvidedCacheLocator

    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "sub" / "b.py").write_text("B = 1\n")
    cache = tmp_path / "cache"
    # numba's own choice of folder for a kernel of sub/b.py, not a copy of its rule
    folder = cache / UserProvidedCacheLocator.get_suitable_cache_subpath(str(package / "sub" / "b.py"))
    folder.mkdir(parents=True)
    (folder / "b.g-3.py311.nbi").write_bytes(b"x")
    environ = {"NUMBA_CACHE_DIR": str(cache)}
    assert drop_stale_kernels(package, environ) == 1 and not any(folder.iterdir())
    assert drop_stale_kernels(package, environ) == 0
    assert not (package / "__pycache__").exists()  # the fingerprint lives beside that cache, not in the package


#: A batch-VB fit in a fresh interpreter (threads: every kernel runs here), reporting numba's compilations.
COMPILE_PROBE = r"""
import json, sys
from numba.core import event
from topicflow import LDA, Corpus
from topicflow.pipeline.cluster import ClusterConfig, connect

with event.install_recorder("numba:compile") as recorder:
    with connect(ClusterConfig(executor="threads", workers=1)) as client:
        LDA(3, max_iter=2, tol=0.0).fit(Corpus.open(sys.argv[1]), client)
compiled = sorted({getattr(e.data["dispatcher"], "__qualname__", "?") for _, e in recorder.buffer if e.is_start})
print(json.dumps({"compiled": compiled}))
"""


def test_a_second_run_compiles_no_kernel(store: Path, local_cluster: object) -> None:
    from distributed import Client

    from topicflow import LDA, Corpus

    with Client(local_cluster) as client:  # type: ignore[arg-type]  # the first run: compiles (once) into the cache
        LDA(3, max_iter=2, tol=0.0).fit(Corpus.open(store), client)
    done = subprocess.run([sys.executable, "-c", COMPILE_PROBE, str(store)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {"compiled": []}
