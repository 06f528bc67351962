"""Adaptor-grammar models in the versioned model store (family ``"adaptor_grammar"``; never pickle).

A grammar model is an ordinary saved model (:mod:`topicflow.io.models.store`: ``versions/<N>/`` and
``versions.json``, committed under the model's lock by :func:`~topicflow.io.models.versions.commit_version`,
so ``topicflow versions``, ``rollback`` and ``update`` work on it). Its exact state travels in:

- ``sampler_state`` arrays (``arrays/sampler_state/`` in zarr): ``ag_gamma``, ``ag_g_tilde`` and per
  adapted position m ``ag_f_tilde_<m>``, ``ag_nu1_<m>``, ``ag_nu2_<m>``, and ``ag_py_a``, ``ag_py_b`` (the
  Pitman-Yor a, b per adapted position as last re-estimated; they override the grammar file's on load);
- ``model.json`` (key ``adaptor_grammar``): the grammar (its file text, template parameters and
  truncations, so it re-parses to the same rules), the terminals it was bound to (in order), the counters
  (minibatch l, prod (1 - eps), sentences seen), the store language and sentence mode, and per adapted
  nonterminal its TNG: each atom's tree key as nested JSON lists of rule indices (see
  :mod:`topicflow.models.adaptor_grammar.online`) and its yield as a string (for reading; the key is
  authoritative); ``settings`` holds the fit settings and ``online`` the :class:`OnlineParams`.

The LDA arrays every saved model has are a readable *view*: one row per adapted nonterminal (its name is
the topic name), one column per distinct atom yield or terminal, the row holding 0.01 + the raw f~ of the
atoms with that yield; ``topicflow topics MODEL`` shows the most used cached subtrees per adaptor. The view
is never read back.
"""
from __future__ import annotations

from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from topicflow._typing import Family
from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io.models.info import ModelInfo
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.models.adaptor_grammar.grammar import parse_grammar
from topicflow.models.adaptor_grammar.online import (
    TNG,
    AGState,
    OnlineParams,
    atom_from_key,
)
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.state import LDAState

FORMAT = 2
FAMILY: Family = "adaptor_grammar"
#: The model kind, also the key of its ``topicflow update`` continuation.
KIND = "adaptor_grammar"
#: Prefix of the sampler-state arrays.
PREFIX = "ag_"
#: Pseudo-count of the LDA view's rows.
VIEW_ETA = 0.01


def _key_to_json(key: tuple[Any, ...]) -> list[Any]:
    return [int(key[0]), *(_key_to_json(k) for k in key[1:])]


def _key_from_json(value: Any, where: str) -> tuple[Any, ...]:
    if not isinstance(value, list) or not value or not isinstance(value[0], int):
        raise ModelFormatError(f"{where}: a TNG atom key must be a nested list starting with a rule index",
                               field="adaptor_grammar.tngs")
    return (value[0], *(_key_from_json(v, where) for v in value[1:]))


def _view(state: AGState) -> tuple[LDAState, Vocabulary, tuple[str, ...]]:
    grammar = state.grammar
    names = tuple(grammar.nonterminals[c] for c in grammar.adapted) or ("(no adaptor)",)
    yields = [["".join(grammar.terminals[t] for t in a.yield_ids) for a in tng.atoms] for tng in state.tngs]
    terms = sorted({y for ys in yields for y in ys} | {str(t) for t in grammar.terminals})
    column = {t: i for i, t in enumerate(terms)}
    lam = np.full((len(names), max(1, len(terms))), VIEW_ETA)
    for m, (tng, ys) in enumerate(zip(state.tngs, yields)):
        for y, f in zip(ys, np.asarray(tng.f_tilde, dtype=np.float64)):
            lam[m, column[y]] += max(float(f), 0.0)
    if not terms:
        terms = ["(none)"]
    zeros = np.zeros(len(terms), dtype=np.int64)
    lda = LDAState({"default": lam}, np.full(len(names), 1.0), {"default": VIEW_ETA}, topic_names=names)
    return lda, Vocabulary(np.array(terms, dtype=object), zeros, zeros.copy()), names


def grammar_saved_model(state: AGState, params: OnlineParams, *, grammar_text: str,
                        grammar_params: Mapping[str, int] | None = None,
                        truncations: Mapping[str, int] | None = None, settings: Mapping[str, Any] | None = None,
                        corpus: Mapping[str, Any] | None = None, sentences_seen: int = 0,
                        source: Mapping[str, Any] | None = None,
                        trace: list[dict[str, Any]] | None = None) -> SavedModel:
    """The saved form of a fitted adaptor grammar (module docstring).

    Parameters
    ----------
    state : AGState
        The variational state.
    params : OnlineParams
        The online settings it was fitted with.
    grammar_text : str
        The grammar file's text (re-parsed on load).
    grammar_params : mapping of str to int, optional
        Template parameters of the grammar file.
    truncations : mapping of str to int, optional
        Truncations that override the file's.
    settings : mapping, optional
        The fit settings (JSON-able; ``GrammarFitConfig`` and estimator parameters).
    corpus : mapping, optional
        Provenance (:func:`~topicflow.io.models.info.corpus_provenance`); empty for sentences given in memory.
    sentences_seen : int
        Distinct sentences of the store processed (the global index of the next new sentence).
    source : mapping, optional
        How sentences were read from the store (``language``, ``mode``).
    trace : list of dict, optional
        One record per minibatch (log-likelihood), over every run.

    Returns
    -------
    SavedModel
    """
    grammar = state.grammar
    tngs = []
    for m, tng in enumerate(state.tngs):
        tngs.append({
            "nonterminal": grammar.nonterminals[grammar.adapted[m]],
            "keys": [_key_to_json(a.key) for a in tng.atoms],
            "yields": ["".join(grammar.terminals[t] for t in a.yield_ids) for a in tng.atoms],
        })
    arrays: dict[str, np.ndarray] = {PREFIX + "gamma": np.asarray(state.gamma),
                                     PREFIX + "g_tilde": np.asarray(state.g_tilde)}
    for m, tng in enumerate(state.tngs):
        arrays[f"{PREFIX}f_tilde_{m}"] = np.asarray(tng.f_tilde, dtype=np.float64)
        arrays[f"{PREFIX}nu1_{m}"] = np.asarray(state.nu1[m], dtype=np.float64)
        arrays[f"{PREFIX}nu2_{m}"] = np.asarray(state.nu2[m], dtype=np.float64)
    arrays[PREFIX + "py_a"] = np.asarray(grammar.pitman_yor_a, dtype=np.float64)  # re-estimated ones included
    arrays[PREFIX + "py_b"] = np.asarray(grammar.pitman_yor_b, dtype=np.float64)
    for name, value in arrays.items():
        if value.dtype.kind == "f" and not np.all(np.isfinite(value)):
            raise InvalidParameterError(f"adaptor-grammar array {name!r} holds NaN or inf; it cannot be saved")
    payload = {
        "format": FORMAT,
        "grammar": {"text": grammar_text, "params": dict(grammar_params or {}),
                    "truncations": dict(truncations or {}), "path": grammar.path},
        "terminals": [str(t) for t in grammar.terminals],
        "minibatch": int(state.minibatch), "decay": float(state.decay), "sentences_seen": int(sentences_seen),
        "source": dict(source or {}),
        "tngs": tngs,
    }
    view, vocabulary, _ = _view(state)
    info = ModelInfo(family=FAMILY, kind=KIND, method="online", settings=dict(settings or {}),
                     trace=list(trace or []), corpus=dict(corpus or {}), online=asdict(params),
                     extra={"adaptor_grammar": payload})
    return SavedModel(view, {"default": vocabulary}, info, sampler_state=arrays)


def is_grammar_model(model: SavedModel) -> bool:
    """Whether ``model`` is an adaptor-grammar model.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    bool
    """
    return model.info.family == FAMILY


def grammar_from_saved(model: SavedModel, *, where: str = "the model") -> tuple[AGState, OnlineParams, dict[str, Any]]:
    """Rebuild the state of a model written by :func:`grammar_saved_model`.

    Parameters
    ----------
    model : SavedModel
        A loaded adaptor-grammar model.
    where : str
        How messages name it.

    Returns
    -------
    state : AGState
        The variational state (grammar re-parsed and bound to the saved terminals).
    params : OnlineParams
        The settings it was fitted with.
    payload : dict
        The ``adaptor_grammar`` entry of ``model.json`` (grammar text and parameters, counters, source).

    Raises
    ------
    InvalidParameterError
        The model is of another family.
    ModelFormatError
        The model's grammar entries or arrays do not form a state.
    """
    if not is_grammar_model(model):
        raise InvalidParameterError(f"{where} is a model of the {model.info.family!r} family, not an adaptor grammar; "
                                    "fit one with `topicflow grammar fit`", path=where)
    payload = model.info.extra.get("adaptor_grammar")
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise ModelFormatError(f"{where}: model.json has no adaptor_grammar entry of format {FORMAT}",
                               path=where, field="adaptor_grammar")
    arrays = model.sampler_state
    try:
        g = payload["grammar"]
        spec = parse_grammar(g["text"], path=g.get("path") or "<saved grammar>", params=g.get("params", {}))
        if g.get("truncations"):
            spec = spec.with_adaptors(**g["truncations"])
        grammar = spec.bind(payload["terminals"])
        if PREFIX + "py_a" in arrays:  # the PY a, b as last re-estimated (online.optimize_hyperparameters)
            grammar = replace(grammar, pitman_yor_a=np.asarray(arrays[PREFIX + "py_a"], dtype=np.float64),
                              pitman_yor_b=np.asarray(arrays[PREFIX + "py_b"], dtype=np.float64))
            if grammar.pitman_yor_a.shape != (len(grammar.adapted),):
                raise ModelFormatError(f"{where}: {PREFIX}py_a has shape {grammar.pitman_yor_a.shape}, expected "
                                       f"({len(grammar.adapted)},)", path=where, field=f"sampler_state/{PREFIX}py_a")
        if [str(t) for t in grammar.terminals] != list(payload["terminals"]):
            raise ModelFormatError(f"{where}: the saved terminals do not rebind in order", path=where,
                                   field="adaptor_grammar.terminals")
        tngs, nu1, nu2 = [], [], []
        for m, entry in enumerate(payload["tngs"]):
            atoms = tuple(atom_from_key(grammar, _key_from_json(k, where)) for k in entry["keys"])
            f_tilde = np.asarray(arrays[f"{PREFIX}f_tilde_{m}"], dtype=np.float64)
            if f_tilde.shape != (len(atoms),):
                raise ModelFormatError(f"{where}: {PREFIX}f_tilde_{m} has shape {f_tilde.shape}, expected "
                                       f"({len(atoms)},)", path=where, field=f"sampler_state/{PREFIX}f_tilde_{m}")
            tngs.append(TNG(atoms, f_tilde))
            nu1.append(np.asarray(arrays[f"{PREFIX}nu1_{m}"], dtype=np.float64))
            nu2.append(np.asarray(arrays[f"{PREFIX}nu2_{m}"], dtype=np.float64))
        gamma = np.asarray(arrays[PREFIX + "gamma"], dtype=np.float64)
        if gamma.shape != (grammar.n_rules,):
            raise ModelFormatError(f"{where}: {PREFIX}gamma has shape {gamma.shape}, expected ({grammar.n_rules},)",
                                   path=where, field=f"sampler_state/{PREFIX}gamma")
        state = AGState(grammar=grammar, gamma=gamma, g_tilde=np.asarray(arrays[PREFIX + "g_tilde"], dtype=np.float64),
                        tngs=tuple(tngs), nu1=tuple(nu1), nu2=tuple(nu2), minibatch=int(payload["minibatch"]),
                        decay=float(payload["decay"]))
        online = dict(model.info.online or {})
        online.setdefault("optimize_hyper", "none")  # models saved before the option had fixed a, b
        params = OnlineParams(**online)
    except ModelFormatError:
        raise
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise ModelFormatError(f"{where} is not a readable adaptor-grammar model ({type(exc).__name__}: {exc}); "
                               "refit it with `topicflow grammar fit` or roll back (`topicflow rollback`)",
                               path=where, field="adaptor_grammar") from exc
    return state, params, payload


def save_grammar_model(path: str | Path, state: AGState, params: OnlineParams, *, grammar_text: str,
                       grammar_params: Mapping[str, int] | None = None, truncations: Mapping[str, int] | None = None,
                       settings: Mapping[str, Any] | None = None, overwrite: bool = False) -> Path:
    """Write a fitted adaptor grammar as a new versioned model (version 1, a ``"fit"``).

    Parameters
    ----------
    path : str or Path
        The model directory (or a URL).
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
    settings : mapping, optional
        Free-form JSON-able fit settings.
    overwrite : bool
        Replace an existing model.

    Returns
    -------
    Path
        The model directory.
    """
    final = Path(path)
    save_model(final, grammar_saved_model(state, params, grammar_text=grammar_text, grammar_params=grammar_params,
                                          truncations=truncations, settings=settings), overwrite=overwrite)
    return final


def load_grammar_model(path: str | Path, version: int | None = None) -> tuple[AGState, OnlineParams, dict[str, Any]]:
    """Read an adaptor-grammar model (its current version, or ``version``).

    Parameters
    ----------
    path : str or Path
        The model directory (or a URL).
    version : int, optional
        Default: the current version.

    Returns
    -------
    state : AGState
    params : OnlineParams
    payload : dict
        The ``adaptor_grammar`` entry of ``model.json``, plus ``settings`` (the fit settings) and
        ``version``.

    Raises
    ------
    ModelNotFoundError
        If there is no model at ``path``.
    ModelFormatError
        If the files do not form an adaptor-grammar model.
    """
    model = load_model(path, version)
    state, params, payload = grammar_from_saved(model, where=str(path))
    return state, params, {**payload, "settings": dict(model.info.settings), "version": model.version}
