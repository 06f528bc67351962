"""The collapsed variational models as saved models: the HDP family (pcsvb0, pcvb0) and SCVB0's LDA.

A saved collapsed model is an ordinary topicflow model (:mod:`topicflow.io.models.store`), so
``topics``, ``infer``, ``evaluate``, ``export``, ``coherence`` and ``report`` read it unchanged:

* ``state`` is the LDA view of the collapsed state (:meth:`topicflow.models.hdp.state.HDPState.to_lda_state`:
  lambda = n_kw + beta, the document prior alpha * pi of length T for the HDP; alpha for SCVB0);
* ``sampler_state`` holds the exact arrays of the state (``topic_word`` = n_kw, ``topic_totals`` = n_k.,
  ``tables`` = a_k), and ``info.collapsed_state`` its scalars (alpha, gamma, beta, the training totals n
  and D, the step-size counters, documents and tokens seen), so the state loads back bit for bit and
  ``topicflow update`` continues it;
* ``info`` records family ``"hdp"`` (kind ``"hdp"``, method ``pcsvb0`` or ``pcvb0``) or ``"lda"`` (kind
  ``"scvb0"``, method ``scvb0``), the settings (:func:`config_to_dict`), the trace, the topics in use and
  the corpus provenance.

This module also holds the table of what each stochastic method does (:class:`MethodOps`): the drivers
look a method up here instead of branching on its name.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.models.hdp import pcsvb0
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import HDPState
from topicflow.models.lda import scvb0
from topicflow.models.lda.scvb0 import SCVB0State
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.collapsed.config import CollapsedConfig

#: Sampler-state arrays of a collapsed model (HDPState.to_arrays).
STATE_ARRAYS = ("topic_word", "topic_totals", "tables")


def config_to_dict(config: CollapsedConfig) -> dict[str, Any]:
    """The settings of a collapsed fit as ``model.json`` records them.

    Parameters
    ----------
    config : CollapsedConfig

    Returns
    -------
    dict
        JSON-able; ``params`` is :meth:`HDPParams.to_dict`.
    """
    out: dict[str, Any] = {}
    for item in fields(config):
        value = getattr(config, item.name)
        out[item.name] = value.to_dict() if isinstance(value, HDPParams) else value
    out["family"] = config.family
    out["n_topics"] = config.params.truncation
    return out


def config_from_dict(payload: Mapping[str, Any]) -> CollapsedConfig:
    """Inverse of :func:`config_to_dict` (unknown keys are ignored).

    Parameters
    ----------
    payload : mapping

    Returns
    -------
    CollapsedConfig
    """
    known = {item.name for item in fields(CollapsedConfig)}
    kwargs: dict[str, Any] = {k: v for k, v in payload.items() if k in known}
    if "params" in kwargs:
        kwargs["params"] = HDPParams.from_dict(kwargs["params"])
    if "extra" in kwargs:
        kwargs["extra"] = dict(kwargs["extra"])
    return CollapsedConfig(**kwargs)


def training_language(corpus: Corpus) -> str:
    """The store's only language: the collapsed methods model one language.

    Parameters
    ----------
    corpus : Corpus

    Returns
    -------
    str

    Raises
    ------
    InvalidParameterError
        The store is multilingual.
    """
    if corpus.is_multilingual:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} is multilingual ({', '.join(corpus.languages)}); the collapsed "
            "variational methods (pcsvb0, pcvb0, scvb0) model one language. Ingest that language alone, or "
            "fit polylingual LDA with `topicflow fit --family lda`.",
            path=str(corpus.path),
        )
    return corpus.languages[0]


def lda_view(state: HDPState, config: CollapsedConfig, language: str) -> LDAState:
    """The state as an LDA model every reader of saved models understands.

    Parameters
    ----------
    state : HDPState
    config : CollapsedConfig
    language : str

    Returns
    -------
    LDAState
        For the HDP, lambda = n_kw + beta and the prior alpha * pi (spec P12); for SCVB0 the prior is
        its fixed symmetric alpha.
    """
    return state.to_lda_state(language)


def topics_in_use(state: HDPState, config: CollapsedConfig) -> int:
    """Count the topics holding at least ``config.topics_in_use_share`` of the expected tokens (never T).

    Parameters
    ----------
    state : HDPState
    config : CollapsedConfig

    Returns
    -------
    int
    """
    return state.topics_in_use(config.topics_in_use_share)


def collapsed_model(
    corpus: Corpus, state: HDPState, config: CollapsedConfig, *, trace: Sequence[Mapping[str, Any]],
    shards: Sequence[int], seen: Sequence[Mapping[str, str]] = (), run: Mapping[str, Any] | None = None,
    converged: bool = False,
) -> SavedModel:
    """The saved model of a collapsed fit (see the module docstring for what goes where).

    Parameters
    ----------
    corpus : Corpus
        The training store.
    state : HDPState
        The fitted state (its lazy scale is folded in; values unchanged).
    config : CollapsedConfig
    trace : sequence of dict
        The trace records of the fit (and of earlier versions, for an update).
    shards : sequence of int
        Store indices processed by this run.
    seen : sequence of dict
        Shards processed by earlier versions (``{"id", "checksum"}``).
    run : mapping, optional
        Run facts recorded under ``model.json``'s ``run`` key (fixed totals, the batch driver's settings).
    converged : bool, default False
        A batch (pcvb0) fit met its stopping rule.

    Returns
    -------
    SavedModel
    """
    language = training_language(corpus)
    arrays, scalars = state.to_arrays()
    info = ModelInfo(
        family="lda" if config.method == "scvb0" else "hdp",
        kind=OPS_KIND[config.method],
        method=config.method,
        settings=config_to_dict(config),
        trace=[dict(record) for record in trace],
        converged=converged,
        corpus=corpus_provenance(corpus, shards, [dict(entry) for entry in seen]),
        collapsed_state=_jsonable_scalars(scalars),
        topics_in_use=topics_in_use(state, config),
        extra={"run": dict(run or {})},
    )
    return SavedModel(lda_view(state, config, language), {language: corpus.vocabulary(language)}, info,
                      sampler_state={name: np.array(arrays[name], dtype=np.float64) for name in STATE_ARRAYS})


def _jsonable_scalars(scalars: Mapping[str, Any]) -> dict[str, Any]:
    """Python numbers (JSON writes a float exactly as ``repr`` gives it, so it reads back bit for bit)."""
    out: dict[str, Any] = {}
    for name, value in scalars.items():
        if isinstance(value, (bool, np.bool_)):
            out[name] = bool(value)
        elif isinstance(value, (int, np.integer)):
            out[name] = int(value)
        else:
            out[name] = float(value)
    return out


def is_collapsed_model(model: SavedModel) -> bool:
    """Whether ``model`` was saved by :func:`collapsed_model`.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    bool
    """
    return model.info.kind in OPS_KIND.values() and model.info.collapsed_state is not None


def saved_config(model: SavedModel) -> CollapsedConfig:
    """The settings a collapsed model was fitted with.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    CollapsedConfig
    """
    return config_from_dict(model.info.settings)


def saved_state(model: SavedModel) -> HDPState:
    """The exact collapsed state of a saved model (bit for bit what was saved).

    Parameters
    ----------
    model : SavedModel
        A model saved by :func:`collapsed_model`.

    Returns
    -------
    HDPState

    Raises
    ------
    ModelFormatError
        The model has no collapsed state (another kind of model, or its arrays are missing).
    """
    missing = [name for name in STATE_ARRAYS if name not in model.sampler_state]
    if model.info.collapsed_state is None or missing:
        what = f"sampler arrays {missing}" if missing else "the collapsed_state scalars in model.json"
        raise ModelFormatError(
            f"model (kind {model.info.kind!r}, method {model.info.method!r}) has no collapsed variational state "
            f"(it lacks {what}); fit it again with `topicflow fit --method pcsvb0|scvb0`.",
            field="sampler_state",
        )
    state_class = OPS[model.info.method or "pcsvb0"].state_class
    return state_class.from_arrays({name: model.sampler_state[name] for name in STATE_ARRAYS},
                                   dict(model.info.collapsed_state))


def raw_arrays(state: HDPState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """An exact copy of ``state`` with its lazy scale kept (copies; ``state`` is not changed).

    :meth:`HDPState.to_arrays` folds the scale into the counts, which changes them by rounding; a
    checkpoint or an actor's snapshot must not, so that a run resumed from it, or a run that took
    snapshots, goes on exactly as one that did not.

    Parameters
    ----------
    state : HDPState

    Returns
    -------
    arrays : dict of str to ndarray
        ``topic_word`` and ``topic_totals`` (divided by ``scale``, as stored) and ``tables``.
    scalars : dict
        Every other field, ``scale`` included (Python numbers).
    """
    arrays = {name: np.array(getattr(state, name), dtype=np.float64) for name in STATE_ARRAYS}
    scalars = _jsonable_scalars({item.name: getattr(state, item.name) for item in fields(state)
                                 if item.name not in STATE_ARRAYS})
    return arrays, scalars


def state_from_raw(arrays: Mapping[str, np.ndarray], scalars: Mapping[str, Any], method: str) -> HDPState:
    """Inverse of :func:`raw_arrays`.

    Parameters
    ----------
    arrays : mapping of str to ndarray
    scalars : mapping
    method : str
        The method whose state class to build (:data:`OPS`).

    Returns
    -------
    HDPState
    """
    known = {item.name for item in fields(HDPState)}
    values: dict[str, Any] = {name: np.array(arrays[name], dtype=np.float64) for name in STATE_ARRAYS}
    values.update({name: value for name, value in scalars.items() if name in known and name not in STATE_ARRAYS})
    return OPS[method].state_class(**values)


# ----------------------------------------------------------------------------- the methods


@dataclass(frozen=True)
class MethodOps:
    """What a collapsed method does, as the drivers call it (references to the math, nothing computed here).

    Attributes
    ----------
    state_class : type
        :class:`HDPState`, or SCVB0's subclass (whose prior is the fixed alpha).
    initial : callable
        ``initial(params, n_terms=, n_tokens=, n_docs=) -> state``: the random start.
    view : callable
        ``view(state) -> GlobalView``: what the workers need for a minibatch.
    local : callable
        ``local(view, block, params) -> CVB0Stats``: the per-partition step (module-level).
    apply : callable
        ``apply(state, stats, params) -> None``: the driver's global step.
    word_by_word : callable
        ``word_by_word(state, block, params, doc_topic=None)``: the serial algorithm over a block.

    The batch method (pcvb0) has none of the last four (they raise).
    """

    state_class: type[HDPState]
    initial: Callable[..., HDPState]
    view: Callable[[HDPState], Any]
    local: Callable[..., Any]
    apply: Callable[[HDPState, Any, HDPParams], None]
    word_by_word: Callable[..., Any]

    @property
    def stochastic(self) -> bool:
        """Whether the method has the word-by-word and minibatch forms (pcsvb0, scvb0)."""
        return self.word_by_word is not _batch_only


def _batch_only(*args: Any, **kwargs: Any) -> Any:
    raise InvalidParameterError("pcvb0 is a batch method: it has no word-by-word or minibatch step (use pcsvb0)")


#: The model record's kind of each method (the continuation registry's key).
OPS_KIND: dict[str, str] = {"pcsvb0": "hdp", "pcvb0": "hdp", "scvb0": "scvb0"}

#: The methods' operations, by method name.
OPS: dict[str, MethodOps] = {
    "pcsvb0": MethodOps(HDPState, HDPState.initial, pcsvb0.global_view, pcsvb0.local_minibatch,
                        pcsvb0.apply_minibatch, pcsvb0.run_word_by_word),
    "scvb0": MethodOps(SCVB0State, SCVB0State.initial, scvb0.global_view, scvb0.local_minibatch,
                       scvb0.apply_minibatch, scvb0.run_word_by_word),
    "pcvb0": MethodOps(HDPState, HDPState.initial, _batch_only, _batch_only, _batch_only, _batch_only),
}
