"""Where numba keeps its compiled kernels, decided before anything imports numba.

Every kernel is ``@njit(cache=True)``: numba writes the machine code beside the source, in the
package's ``__pycache__``, and later runs load it instead of compiling. When the package directory
is not writable (a system-wide or read-only install) and ``NUMBA_CACHE_DIR`` is not set,
:func:`ensure_cache_dir` sets ``NUMBA_CACHE_DIR`` to a per-user cache directory
(``$XDG_CACHE_HOME/topicflow/numba``, else ``~/.cache/topicflow/numba``), so no run after the
first compiles on the user's clock. Numba reads the variable when it is first imported, and the
local cluster's worker processes inherit it (they import this package first when they unpickle a
task), so they load the same cache.

Numba checks a cached kernel against its own source file only, while a kernel's machine code also
holds the kernels it calls from other modules (compiled into it). After an in-place upgrade or a
``git pull`` that changes :mod:`topicflow.models.common.lineage` but not the particle filter that calls
it, numba would load the particle filter's old machine code, with the old lineage code inside.
:func:`drop_stale_kernels` (run by :func:`ensure_cache_dir`, so at every import) therefore keeps a
fingerprint of the package's sources beside the cache and deletes topicflow's cached kernels whenever
any source file changed: the next run compiles them again, once.

:func:`skip_numba_extensions` spares the command line numba's loading of other packages' extensions
(the ``numba_extensions`` entry points, e.g. pydata/sparse's) on the first kernel call: the command's
process runs only topicflow's kernels, which use none of them. This module imports only the standard
library.
"""
from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path
from typing import Any, Mapping, MutableMapping

#: The directory whose ``__pycache__`` folders numba writes by default (the package itself).
PACKAGE_DIR = Path(__file__).resolve().parent
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


#: The file, beside a cache, holding the fingerprint of the sources its kernels were compiled from.
SOURCES_STAMP = "topicflow-sources.stamp"
#: numba's cache files: the index of a function's compiled versions and their machine code.
KERNEL_SUFFIXES = (".nbi", ".nbc")


def sources_fingerprint(package_dir: Path = PACKAGE_DIR) -> str:
    """A digest of every ``.py`` file of the package: its path, size and modification time.

    Parameters
    ----------
    package_dir : Path, optional
        The package (default: this one).

    Returns
    -------
    str
        SHA-1 hex digest; any edit, added or removed module changes it (a file rewritten with the same
        bytes may change it too, which costs one recompilation and nothing else).
    """
    digest = hashlib.sha1()
    for root, dirs, files in os.walk(package_dir):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__")
        for name in sorted(f for f in files if f.endswith(".py")):
            path = os.path.join(root, name)
            info = os.stat(path)
            digest.update(f"{os.path.relpath(path, package_dir)}\0{info.st_size}\0{info.st_mtime_ns}\n".encode())
    return digest.hexdigest()


def _stamp_path(package_dir: Path, environ: Mapping[str, str]) -> Path:
    """Where the fingerprint of the cached kernels' sources is kept: beside the cache."""
    cache_dir = environ.get("NUMBA_CACHE_DIR")
    if not cache_dir:
        return package_dir / "__pycache__" / SOURCES_STAMP
    return Path(cache_dir) / f"{SOURCES_STAMP}.{hashlib.sha1(os.path.abspath(package_dir).encode()).hexdigest()}"


def _kernel_dirs(package_dir: Path, environ: Mapping[str, str]) -> list[Path]:
    """The directories holding topicflow's cached kernels.

    The package's ``__pycache__`` folders (numba's in-tree cache), or, with ``NUMBA_CACHE_DIR``, the
    folder numba makes there per source directory: ``<name>_<sha1 of its absolute path>`` (numba's
    ``UserProvidedCacheLocator``).
    """
    source_dirs = [Path(root) for root, _, _ in os.walk(package_dir) if "__pycache__" not in Path(root).parts]
    cache_dir = environ.get("NUMBA_CACHE_DIR")
    if not cache_dir:
        return [d / "__pycache__" for d in source_dirs]
    return [Path(cache_dir) / f"{d.name}_{hashlib.sha1(os.path.abspath(d).encode()).hexdigest()}" for d in source_dirs]


def drop_stale_kernels(package_dir: Path = PACKAGE_DIR, environ: Mapping[str, str] | None = None) -> int:
    """Delete topicflow's cached kernels if a source file changed since they were compiled.

    Compares :func:`sources_fingerprint` with the one recorded beside the cache; when they differ (or
    none is recorded), deletes every cached kernel of the package and records the new fingerprint.
    A process loading a kernel that is being deleted compiles it instead (numba treats a vanished
    file as a cache miss). Failures to read or write (a read-only install) are ignored.

    Parameters
    ----------
    package_dir : Path, optional
        The package (default: this one).
    environ : mapping, optional
        The environment to read ``NUMBA_CACHE_DIR`` from (default ``os.environ``).

    Returns
    -------
    int
        The number of cache files deleted (-1 when the fingerprint could not be checked or recorded).
    """
    environ = os.environ if environ is None else environ
    try:
        fingerprint = sources_fingerprint(package_dir)
        stamp = _stamp_path(package_dir, environ)
        try:
            if stamp.read_text() == fingerprint:
                return 0
        except OSError:
            pass
        deleted = 0
        for directory in _kernel_dirs(package_dir, environ):
            try:
                names = os.listdir(directory)
            except OSError:
                continue
            for name in names:
                if name.endswith(KERNEL_SUFFIXES):
                    try:
                        os.unlink(directory / name)
                        deleted += 1
                    except OSError:
                        pass
        stamp.parent.mkdir(parents=True, exist_ok=True)
        partial = stamp.with_name(f"{stamp.name}.{os.getpid()}.tmp")
        partial.write_text(fingerprint)
        os.replace(partial, stamp)
        return deleted
    except OSError:
        return -1


def ensure_cache_dir(package_dir: Path = PACKAGE_DIR, environ: MutableMapping[str, str] | None = None) -> str | None:
    """Point numba at a writable cache directory and drop its stale kernels.

    ``NUMBA_CACHE_DIR`` is set to :func:`user_cache_dir` when numba could not write beside the package;
    then the cached kernels are deleted if the sources changed (:func:`drop_stale_kernels`). The
    directory is left alone when ``NUMBA_CACHE_DIR`` is already set (the user's choice) or when
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
        drop_stale_kernels(package_dir, environ)
        return None
    directory = user_cache_dir(environ)
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None  # numba then falls back to its own user-wide cache, or compiles
    environ["NUMBA_CACHE_DIR"] = str(directory)
    drop_stale_kernels(package_dir, environ)
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
