"""Results a reproduction saves as they finish, read back by ``topicflow reproduce --resume``.

A paper module writes each finished piece (a may2014 arm, a gao2016 job) as one JSON file holding
the settings it ran with beside its result. On ``--resume`` the file is read back only when those
settings equal the ones asked for now; otherwise the run stops with one message naming the file and
every setting that differs, before anything runs again.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io._atomic import atomic_write_bytes


def _plain(value: Any) -> Any:
    """JSON for what json does not write: NumPy numbers as floats (as the reproductions' traces write
    them), anything else as its text."""
    return float(value) if isinstance(value, np.number) else str(value)


def as_json(value: Any) -> Any:
    """``value`` as JSON reads it back (tuples become lists, NumPy numbers floats).

    Parameters
    ----------
    value : Any

    Returns
    -------
    Any
        What a saved file gives back, so a fresh result and a read-back one compare equal.

    Examples
    --------
    >>> as_json({"sizes": (1, np.int64(2))})
    {'sizes': [1, 2.0]}
    """
    return json.loads(json.dumps(value, sort_keys=True, default=_plain))


def differences(saved: Any, wanted: Any, name: str = "") -> list[str]:
    """``name: saved -> wanted`` for every setting (dotted path) where the two differ.

    Parameters
    ----------
    saved, wanted : Any
        Settings as JSON reads them back.
    name : str
        Path of the settings compared (for nested dictionaries).

    Returns
    -------
    list of str

    Examples
    --------
    >>> differences({"seed": 0, "params": {"k": 5}}, {"seed": 1, "params": {"k": 5}})
    ['seed: 0 saved, 1 now']
    """
    if isinstance(saved, dict) and isinstance(wanted, dict):
        return [change for key in sorted(set(saved) | set(wanted))
                for change in differences(saved.get(key), wanted.get(key), f"{name}.{key}" if name else key)]
    return [] if saved == wanted else [f"{name or 'settings'}: {saved!r} saved, {wanted!r} now"]


def write_saved(path: Path, payload: dict[str, Any]) -> None:
    """Write ``payload`` (with its ``settings``) to ``path`` atomically, as :func:`read_saved` reads it.

    Parameters
    ----------
    path : Path
    payload : dict
        Must hold ``settings``; the rest is the result.
    """
    atomic_write_bytes(path, json.dumps(payload, sort_keys=True, default=_plain).encode("utf-8"))


def read_saved(path: Path, settings: Any, key: str, what: str) -> Any:
    """The result saved at ``path`` under ``key``, if it was run with ``settings`` (None: nothing saved there).

    Parameters
    ----------
    path : Path
    settings : Any
        The settings asked for now, as JSON reads them back (:func:`as_json`).
    key : str
        Where the payload holds the result (``"row"``, ``"records"``).
    what : str
        What the file holds, for the messages (``"gao2016 job"``).

    Returns
    -------
    Any
        The result as JSON reads it back, or None.

    Raises
    ------
    InvalidParameterError
        The file is not such a payload, or was written with other settings (each difference named).
    """
    if not path.is_file():
        return None
    try:
        saved = json.loads(path.read_text(encoding="utf-8"))
        stored, result = saved["settings"], saved[key]
    except (ValueError, KeyError, TypeError) as error:
        raise InvalidParameterError(f"{path} is not a saved {what} ({error}); delete it to run that {what} again, "
                                    "or run again with --overwrite", path=str(path)) from error
    if stored != settings:
        raise InvalidParameterError(
            f"{path} was run with other settings ({'; '.join(differences(stored, settings))}); resume with the "
            "same --scale, --seed, --corpus and --test, or run again with --overwrite", path=str(path))
    return result
