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
"""
from __future__ import annotations

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
