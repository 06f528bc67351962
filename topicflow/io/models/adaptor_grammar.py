"""Saved adaptor-grammar models: a directory with ``model.json`` and ``arrays.npz`` (never pickle).

Layout of ``MODEL/``:

- ``model.json``: ``format`` (:data:`FORMAT`), ``family`` (``"adaptor-grammar"``), the grammar (its file
  text, template parameters and truncations, so it re-parses to the same rules), the terminals it was
  bound to (in order), the online settings, the counters (minibatch l, prod (1 - eps)), free-form
  ``info`` (corpus, timings), and per adapted nonterminal its TNG: each atom's tree key as nested JSON
  lists of rule indices (see :mod:`topicflow.models.adaptor_grammar.online`) and its yield as a string
  (for reading; the key is authoritative);
- ``arrays.npz``: ``gamma``, ``g_tilde`` and per adapted position m ``f_tilde_m``, ``nu1_m``, ``nu2_m``;
  read with ``allow_pickle=False``.

The directory is written beside its final place and renamed into it (an existing model is replaced only
with ``overwrite``).
"""
from __future__ import annotations

import io
import json
from dataclasses import asdict
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from topicflow.errors import ModelFormatError, ModelNotFoundError
from topicflow.io._atomic import atomic_write_bytes, commit_directory, temporary_sibling
from topicflow.models.adaptor_grammar.grammar import parse_grammar
from topicflow.models.adaptor_grammar.online import (
    TNG,
    AGState,
    OnlineParams,
    atom_from_key,
)

FORMAT = 1
FAMILY = "adaptor-grammar"


def _key_to_json(key: tuple[Any, ...]) -> list[Any]:
    return [key[0], *(_key_to_json(k) for k in key[1:])]


def _key_from_json(value: Any, path: Path) -> tuple[Any, ...]:
    if not isinstance(value, list) or not value or not isinstance(value[0], int):
        raise ModelFormatError(f"{path}: a TNG atom key must be a nested list starting with a rule index",
                               field="tngs")
    return (value[0], *(_key_from_json(v, path) for v in value[1:]))


def save_grammar_model(path: str | Path, state: AGState, params: OnlineParams, *, grammar_text: str,
                       grammar_params: Mapping[str, int] | None = None, truncations: Mapping[str, int] | None = None,
                       info: Mapping[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write a fitted adaptor grammar.

    Parameters
    ----------
    path : str or Path
        The model directory.
    state : AGState
        The variational state.
    params : OnlineParams
        The settings it was fitted with.
    grammar_text : str
        The grammar file's text (re-parsed on load).
    grammar_params : mapping of str to int, optional
        Template parameters of the grammar file.
    truncations : mapping of str to int, optional
        Truncations that override the file's.
    info : mapping, optional
        Free-form JSON-able provenance (corpus, timings).
    overwrite : bool
        Replace an existing model.

    Returns
    -------
    Path
        The model directory.
    """
    final = Path(path)
    grammar = state.grammar
    tngs = []
    for m, tng in enumerate(state.tngs):
        tngs.append({
            "nonterminal": grammar.nonterminals[grammar.adapted[m]],
            "keys": [_key_to_json(a.key) for a in tng.atoms],
            "yields": ["".join(grammar.terminals[t] for t in a.yield_ids) for a in tng.atoms],
        })
    meta = {
        "format": FORMAT, "family": FAMILY,
        "grammar": {"text": grammar_text, "params": dict(grammar_params or {}),
                    "truncations": dict(truncations or {}), "path": grammar.path},
        "terminals": list(grammar.terminals),
        "online": asdict(params),
        "minibatch": state.minibatch, "decay": state.decay,
        "tngs": tngs,
        "info": dict(info or {}),
    }
    arrays: dict[str, np.ndarray] = {"gamma": state.gamma, "g_tilde": state.g_tilde}
    for m, tng in enumerate(state.tngs):
        arrays[f"f_tilde_{m}"] = tng.f_tilde
        arrays[f"nu1_{m}"] = state.nu1[m]
        arrays[f"nu2_{m}"] = state.nu2[m]
    tmp = temporary_sibling(final)
    tmp.mkdir(parents=True)
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)  # type: ignore[arg-type]
    atomic_write_bytes(tmp / "arrays.npz", buffer.getvalue())
    atomic_write_bytes(tmp / "model.json", json.dumps(meta, indent=1).encode("utf-8"))
    commit_directory(tmp, final, overwrite=overwrite)
    return final


def load_grammar_model(path: str | Path) -> tuple[AGState, OnlineParams, dict[str, Any]]:
    """Read a model written by :func:`save_grammar_model`.

    Parameters
    ----------
    path : str or Path
        The model directory.

    Returns
    -------
    state : AGState
        The variational state (grammar re-parsed and bound to the saved terminals).
    params : OnlineParams
        The settings it was fitted with.
    meta : dict
        The rest of ``model.json`` (grammar text and parameters, info).

    Raises
    ------
    ModelNotFoundError
        If there is no model at ``path``.
    ModelFormatError
        If the files do not form a model of this format.
    """
    root = Path(path)
    if not (root / "model.json").is_file():
        raise ModelNotFoundError(f"no adaptor-grammar model at {root} (model.json missing)")
    try:
        meta = json.loads((root / "model.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ModelFormatError(f"{root / 'model.json'} cannot be read: {exc}", field="model.json") from None
    if meta.get("family") != FAMILY or meta.get("format") != FORMAT:
        raise ModelFormatError(f"{root} is not an adaptor-grammar model of format {FORMAT} "
                               f"(family {meta.get('family')!r}, format {meta.get('format')!r})", field="format")
    g = meta["grammar"]
    spec = parse_grammar(g["text"], path=g.get("path", "<saved grammar>"), params=g.get("params", {}))
    if g.get("truncations"):
        spec = spec.with_adaptors(**g["truncations"])
    grammar = spec.bind(meta["terminals"])
    if list(grammar.terminals) != list(meta["terminals"]):
        raise ModelFormatError(f"{root}: the saved terminals do not rebind in order", field="terminals")
    with np.load(root / "arrays.npz", allow_pickle=False) as npz:
        arrays = {k: np.asarray(npz[k]) for k in npz.files}
    tngs = []
    nu1 = []
    nu2 = []
    for m, entry in enumerate(meta["tngs"]):
        atoms = tuple(atom_from_key(grammar, _key_from_json(k, root)) for k in entry["keys"])
        f_tilde = arrays[f"f_tilde_{m}"]
        if f_tilde.shape != (len(atoms),):
            raise ModelFormatError(f"{root}: f_tilde_{m} has shape {f_tilde.shape}, expected ({len(atoms)},)",
                                   field=f"f_tilde_{m}")
        tngs.append(TNG(atoms, f_tilde))
        nu1.append(arrays[f"nu1_{m}"])
        nu2.append(arrays[f"nu2_{m}"])
    if arrays["gamma"].shape != (grammar.n_rules,):
        raise ModelFormatError(f"{root}: gamma has shape {arrays['gamma'].shape}, expected ({grammar.n_rules},)",
                               field="gamma")
    state = AGState(grammar=grammar, gamma=arrays["gamma"], g_tilde=arrays["g_tilde"], tngs=tuple(tngs),
                    nu1=tuple(nu1), nu2=tuple(nu2), minibatch=int(meta["minibatch"]), decay=float(meta["decay"]))
    params = OnlineParams(**meta["online"])
    return state, params, meta
