"""Where numba keeps its compiled kernels, decided before anything imports numba.

Every kernel is ``@njit(cache=True)``: numba writes the machine code beside the source, in the
package's ``__pycache__``, and later runs load it instead of compiling. When the package directory
is not writable (a system-wide or read-only install) and ``NUMBA_CACHE_DIR`` is not set,
:func:`ensure_cache_dir` sets ``NUMBA_CACHE_DIR`` to a per-user cache directory
(``$XDG_CACHE_HOME/topicflow/numba``, else ``~/.cache/topicflow/numba``), so no run after the
first compiles on the user's clock. Numba reads the variable when it is first imported, and the
local cluster's worker processes inherit it (they import this package first when they unpickle a
task), so they load the same cache.

:func:`skip_numba_extensions` spares the command line numba's loading of other packages' extensions
(the ``numba_extensions`` entry points, e.g. pydata/sparse's) on the first kernel call: the command's
process runs only topicflow's kernels, which use none of them. This module imports only the standard
library.

:func:`share_compiles` makes processes that need the same uncompiled kernel at the same time (the
workers of a fresh local cluster, the processes of a test run) compile it once: the first takes a
file lock beside the kernel's cache index, the others wait for it and then load what it saved.
``topicflow/__init__.py`` arranges it for the moment numba's dispatcher is imported.
"""
from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import os
import sys
from pathlib import Path
from typing import Any, Callable, Mapping, MutableMapping, Sequence

try:
    import fcntl
except ImportError:  # Windows: no advisory file locks; each process compiles what it lacks
    fcntl = None  # type: ignore[assignment]

#: The directory whose ``__pycache__`` folders numba writes by default (the package itself).
PACKAGE_DIR = Path(__file__).resolve().parent
#: numba's module whose ``Dispatcher.compile`` :func:`share_compiles` wraps.
DISPATCHER_MODULE = "numba.core.dispatcher"
#: The lock files' suffix, appended to the kernel's cache index path (``NAME-LINE.py311.nbi.lock``).
LOCK_SUFFIX = ".lock"
#: Lock files this process holds (a kernel compiled while compiling itself must not wait for itself).
_HELD: set[str] = set()
#: numba's module that imports every ``numba_extensions`` entry point on the first compile or cache load.
ENTRYPOINTS_MODULE = "numba.core.entrypoints"


def user_cache_dir(environ: MutableMapping[str, str] | None = None) -> Path:
    """The per-user numba cache of topicflow: ``$XDG_CACHE_HOME/topicflow/numba`` or ``~/.cache/topicflow/numba``.

    Parameters
    ----------
    environ : mapping, optional
        The environment to read (default ``os.environ``).

    Returns
    -------
    Path
        The directory (not created).
    """
    environ = os.environ if environ is None else environ
    base = environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "topicflow" / "numba"


def ensure_cache_dir(package_dir: Path = PACKAGE_DIR, environ: MutableMapping[str, str] | None = None) -> str | None:
    """Set ``NUMBA_CACHE_DIR`` to :func:`user_cache_dir` when numba could not write beside the package.

    Nothing changes when ``NUMBA_CACHE_DIR`` is already set (the user's choice) or when
    ``package_dir`` is writable (numba's in-tree cache works). Called by ``topicflow/__init__.py``.

    Parameters
    ----------
    package_dir : Path, optional
        The package directory numba would write under (default: this package).
    environ : mapping, optional
        The environment to read and set (default ``os.environ``).

    Returns
    -------
    str or None
        The directory set, or None when nothing was set.
    """
    environ = os.environ if environ is None else environ
    if environ.get("NUMBA_CACHE_DIR") or os.access(package_dir, os.W_OK):
        return None
    directory = user_cache_dir(environ)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # numba then falls back to its own user-wide cache, or compiles
    environ["NUMBA_CACHE_DIR"] = str(directory)
    return str(directory)


def skip_numba_extensions(modules: Mapping[str, Any] | None = None) -> bool:
    """Mark numba's third-party extensions as loaded, so the first kernel call does not import them.

    On the first compile or cache load of a process, numba scans every installed distribution's entry
    points and imports those of the group ``numba_extensions`` (pydata/sparse registers one, which
    imports all of ``sparse``): 0.02 to 0.03 s of a command's start-up. topicflow's kernels take
    only NumPy arrays and scalars, so no extension can change what they compute. The command line
    calls this for its own process (after the command's module, and numba with it, is imported); the
    Python API never does, since a user's own numba code in the same process may need an extension.
    It sets numba's private flag ``numba.core.entrypoints._already_initialized``: on a numba without
    it, or before numba is imported, nothing changes (numba then loads the extensions as usual).

    Parameters
    ----------
    modules : mapping, optional
        The loaded modules to look numba up in (default ``sys.modules``).

    Returns
    -------
    bool
        Whether the flag was set here (False: numba not imported, no such flag, or already loaded).
    """
    modules = sys.modules if modules is None else modules
    entrypoints = modules.get(ENTRYPOINTS_MODULE)
    if entrypoints is None or getattr(entrypoints, "_already_initialized", True):
        return False
    setattr(entrypoints, "_already_initialized", True)  # numba's private flag: see the docstring
    return True


def _lock_path(dispatcher: Any) -> str | None:
    """The lock file of one of topicflow's cached kernels (None: not ours, or numba keeps no cache file)."""
    if not getattr(getattr(dispatcher, "py_func", None), "__module__", "").startswith("topicflow."):
        return None
    index = getattr(getattr(getattr(dispatcher, "_cache", None), "_cache_file", None), "_index_path", None)
    return None if index is None else str(index) + LOCK_SUFFIX


def locked_compile(compile: Callable[[Any, Any], Any], compiler_lock: Any) -> Callable[[Any, Any], Any]:
    """Wrap numba's ``Dispatcher.compile`` so that one process at a time compiles each of topicflow's kernels.

    numba looks in its disk cache before it compiles and writes the result after, but two processes
    that miss at the same time both compile (a fresh local cluster's workers, each 1 to 5 s of CPU per
    kernel signature). The wrapper takes an exclusive ``flock`` on a file beside the kernel's cache
    index for the whole look-up, compile and save, so the second process waits and then finds the first
    one's result in the cache. It holds numba's in-process compiler lock first (an ``RLock`` the
    wrapped method takes too), so threads never wait on each other's file locks; a kernel whose lock
    this process already holds (a kernel compiled while compiling itself) is not locked again. Locks
    are taken in call order (a kernel's callees compile inside it), so processes cannot deadlock.
    Functions outside topicflow, kernels without a cache file, and a lock file that cannot be opened
    compile as numba does.

    Parameters
    ----------
    compile : callable
        numba's ``Dispatcher.compile(self, sig)``.
    compiler_lock : context manager
        numba's ``global_compiler_lock``.

    Returns
    -------
    callable
        The wrapped method (its ``__wrapped__`` is ``compile``).
    """
    @functools.wraps(compile)
    def compile_once(self: Any, sig: Any) -> Any:
        path = _lock_path(self)
        if path is None or fcntl is None:
            return compile(self, sig)
        with compiler_lock:
            if path in _HELD:
                return compile(self, sig)
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError:
                return compile(self, sig)
            _HELD.add(path)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                return compile(self, sig)
            finally:
                _HELD.discard(path)
                os.close(fd)  # releases the lock
    compile_once.topicflow_locked = True  # type: ignore[attr-defined]
    return compile_once


def _wrap_dispatcher(module: Any) -> None:
    dispatcher = module.Dispatcher
    if not getattr(dispatcher.compile, "topicflow_locked", False):
        dispatcher.compile = locked_compile(dispatcher.compile, module.global_compiler_lock)


class _AfterImport(importlib.abc.MetaPathFinder):
    """Run a callback on a module right after it is first executed (a post-import hook)."""

    def __init__(self, name: str, callback: Callable[[Any], None]) -> None:
        self.name, self.callback = name, callback

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # find the module's own spec, once
        spec = importlib.util.find_spec(fullname)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        execute, callback = spec.loader.exec_module, self.callback

        def exec_module(module: Any) -> None:
            execute(module)
            callback(module)
        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def share_compiles(modules: Mapping[str, Any] | None = None, meta_path: list[Any] | None = None) -> bool:
    """Make processes that lack the same kernel compile it once (:func:`locked_compile`), from now on or once numba is imported.

    Called by ``topicflow/__init__.py`` without importing numba: when numba's dispatcher is already
    imported its ``Dispatcher.compile`` is wrapped at once, otherwise a post-import hook wraps it when
    numba is first imported. Only topicflow's own kernels are locked. Calling it again changes nothing.

    Parameters
    ----------
    modules : mapping, optional
        The loaded modules (default ``sys.modules``).
    meta_path : list, optional
        The import system's finders (default ``sys.meta_path``).

    Returns
    -------
    bool
        True when the dispatcher was wrapped now, False when the hook waits for numba's import (or is
        already waiting).
    """
    modules = sys.modules if modules is None else modules
    meta_path = sys.meta_path if meta_path is None else meta_path
    if DISPATCHER_MODULE in modules:
        _wrap_dispatcher(modules[DISPATCHER_MODULE])
        return True
    if not any(isinstance(finder, _AfterImport) for finder in meta_path):
        meta_path.insert(0, _AfterImport(DISPATCHER_MODULE, _wrap_dispatcher))
    return False
