"""Where numba keeps its compiled kernels, decided before anything imports numba.

Every kernel is ``@njit(cache=True)``: numba writes the machine code beside the source, in the
package's ``__pycache__``, and later runs load it instead of compiling. When the package directory
is not writable (a system-wide or read-only install) and ``NUMBA_CACHE_DIR`` is not set,
:func:`ensure_cache_dir` sets ``NUMBA_CACHE_DIR`` to a per-user cache directory
(``$XDG_CACHE_HOME/topicflow/numba``, else ``~/.cache/topicflow/numba``), so no run after the
first compiles on the user's clock. Numba reads the variable when it is first imported, and the
local cluster's worker processes inherit it (they import this package first when they unpickle a
task), so they load the same cache. This module imports only the standard library.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import MutableMapping

#: The directory whose ``__pycache__`` folders numba writes by default (the package itself).
PACKAGE_DIR = Path(__file__).resolve().parent


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
