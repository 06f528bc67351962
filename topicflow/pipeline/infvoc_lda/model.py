"""The saved infvoc model (family ``"infvoc"``): exact state, word index, G0 and an LDA view; checkpoints.

A model file is an ordinary versioned model directory (:mod:`topicflow.io.models.store`):

* ``sampler_state`` (the ``infvoc_*`` arrays of :mod:`topicflow.io.models.infvoc`): the exact state
  (truncation ordered sets, nu, ranking scores), the word index's strings and the G0 the model ranks with;
* ``model.json``: ``family="infvoc"``, ``kind="infvoc"``, ``method="online"``, ``settings`` =
  :meth:`InfVocParams.to_dict`, ``online`` = ``{"config": InfVocPlan.to_dict(), "i", "docs_seen"}`` (the plan's keys are
  OnlineConfig's, so ``topicflow update`` reads them as it reads an online LDA model's), the
  trace, the corpus provenance, and ``infvoc`` = the state's scalars, the G0's settings and the view's size;
* ``topic_word_var`` (the **LDA view**), so that commands reading LDA models (``topics``, ``infer``,
  ``evaluate``, ``export``) can read it: the columns are the words in some topic's TOS (ascending id =
  first-seen order, the vocabulary's terms), and row k is ``eta + N_k * p_k`` with p_k = E[beta_k] of
  the topic's TOS words (:func:`~topicflow.models.infvoc_lda.expected_topic_words`), the topic's remaining
  stick spread evenly over the view's words outside T_k, N_k = sum_t (nu1_kt - 1) (the topic's expected
  scaled token count: nu1 = 1 + c at the fixed point of eq. 7.6), floored at 1, and eta = 1 / (view
  size). **Approximation**: mass of strings outside every TOS is dropped (renormalized), and the view is a
  pseudo-posterior, not the model's own (an infvoc topic is a DP over all strings); infer with the
  model's own sampler (:func:`~topicflow.models.infvoc_lda.fold_in`) where that matters.

Checkpoints of the driver are driver checkpoints (:mod:`topicflow.io.models.checkpoint`) of the same
content, with the state's scalars in the position.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError, ModelFormatError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.infvoc import pack_arrays, unpack_arrays
from topicflow.io.models.store import SavedModel
from topicflow.io.storage import StoragePath
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.infvoc_lda import InfVocParams, InfVocState, expected_topic_words
from topicflow.models.infvoc_lda.g0 import CharNgramG0
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.infvoc_lda.config import InfVocPlan
from topicflow.pipeline.infvoc_lda.word_index import WordIndex

#: ``family`` and ``kind`` of an infvoc model (the continuation key of ``topicflow update``).
INFVOC_KIND = "infvoc"
#: The language name of the LDA view (an infvoc model is monolingual).
VIEW_NOTE = ("LDA view: columns are the words in some topic's TOS; row k = eta + N_k E[beta_k] with the remaining "
             "stick spread over the view's other words, N_k = sum(nu1 - 1) >= 1, eta = 1/|view|; mass outside every "
             "TOS is dropped")
_G0_SCALARS = ("charset", "order", "smoothing", "min_length", "max_length", "lowercase", "length_fit",
               "n_too_short", "n_too_long")


@dataclass(frozen=True, slots=True)
class InfVocPosition:
    """Where a stream stands: minibatches applied (i), documents processed, and the plan it used.

    Attributes
    ----------
    i : int
        Minibatches applied (``state.n_updates``).
    docs_seen : int
    plan : InfVocPlan
    """

    i: int
    docs_seen: int
    plan: InfVocPlan


def lda_view(state: InfVocState, word_index: WordIndex, params: InfVocParams) -> tuple[LDAState, Vocabulary]:
    """The LDA view of an infvoc state (module docstring): a topic-word matrix over the TOS words.

    Parameters
    ----------
    state : InfVocState
    word_index : WordIndex
    params : InfVocParams
        Its alpha^theta becomes the view's doc_topic_prior.

    Returns
    -------
    state : LDAState
        ``topic_word_var`` of shape (K, n_view), rows ``eta + N_k p_k``; ``topic_word_prior`` eta.
    vocabulary : Vocabulary
        The view's words (doc and corpus frequencies 0: the model does not count them).
    """
    view = np.unique(state.tos_words)
    n_view = view.shape[0]
    eta = 1.0 / max(n_view, 1)
    lam = np.zeros((state.n_topics, n_view))
    for k in range(state.n_topics):
        words, probs, remaining = expected_topic_words(state, k)
        cols = np.searchsorted(view, words)
        row = np.zeros(n_view)
        outside = n_view - words.shape[0]
        if outside > 0:
            row[:] = remaining / outside
        row[cols] = probs
        total = row.sum()
        if total > 0:
            row /= total
        _, nu1, _ = state.topic_tos(k)
        lam[k] = eta + max(float(np.sum(nu1 - 1.0)), 1.0) * row
    terms = np.array(word_index.strings(view), dtype=object)
    zeros = np.zeros(n_view, dtype=np.int64)
    lda = LDAState({"default": lam}, np.full(state.n_topics, params.alpha), {"default": eta})
    return lda, Vocabulary(terms, zeros, zeros.copy())


def g0_arrays(g0: CharNgramG0) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """A G0's arrays and JSON settings (what the model keeps to rank new words after a reload).

    Parameters
    ----------
    g0 : CharNgramG0

    Returns
    -------
    arrays : dict of str to ndarray
        ``g0_counts``, ``g0_length_counts``, ``g0_log_zeta``.
    settings : dict
    """
    arrays = {"g0_counts": np.asarray(g0.counts), "g0_length_counts": np.asarray(g0.length_counts),
              "g0_log_zeta": np.asarray(g0.log_zeta)}
    return arrays, {name: getattr(g0, name) for name in _G0_SCALARS}


def g0_from_arrays(arrays: Mapping[str, np.ndarray], settings: Mapping[str, Any]) -> CharNgramG0:
    """Rebuild the G0 written by :func:`g0_arrays`.

    Parameters
    ----------
    arrays : mapping of str to ndarray
    settings : mapping

    Returns
    -------
    CharNgramG0
    """
    return CharNgramG0.from_counts(
        **{name: settings[name] for name in _G0_SCALARS}, counts=np.asarray(arrays["g0_counts"], dtype=np.int64),
        length_counts=np.asarray(arrays["g0_length_counts"], dtype=np.int64),
        log_zeta=np.asarray(arrays["g0_log_zeta"], dtype=np.float64))


def _state_payload(state: InfVocState, word_index: WordIndex,
                   g0: CharNgramG0 | None) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    arrays, scalars = state.to_arrays()
    arrays = dict(arrays)
    index = word_index.to_arrays()
    arrays["word_bytes"], arrays["word_offsets"] = index["bytes"], index["offsets"]
    g0_settings = None
    if g0 is not None:
        g0_extra, g0_settings = g0_arrays(g0)
        arrays.update(g0_extra)
    return pack_arrays(arrays), {"state": scalars, "g0": g0_settings, "n_words": len(word_index)}


def _state_from_payload(sampler_state: Mapping[str, np.ndarray], payload: Mapping[str, Any],
                        where: str) -> tuple[InfVocState, WordIndex, CharNgramG0 | None]:
    arrays = unpack_arrays(sampler_state)
    try:
        state = InfVocState.from_arrays(arrays, payload["state"])
        index = WordIndex.from_arrays({"bytes": arrays["word_bytes"], "offsets": arrays["word_offsets"]})
        g0 = g0_from_arrays(arrays, payload["g0"]) if payload.get("g0") is not None else None
    except (KeyError, TypeError, InvalidParameterError) as exc:
        raise ModelFormatError(f"{where} is not a readable infvoc model ({exc}); refit it with "
                               "`topicflow fit --family infvoc` or roll back (`topicflow rollback`)",
                               path=where, field="sampler_state") from exc
    if state.tos_words.shape[0] and int(state.tos_words.max()) >= len(index):
        raise ModelFormatError(f"{where}: the state holds word id {int(state.tos_words.max())} but the word index "
                               f"has {len(index)} words; the model is damaged", path=where, field="sampler_state")
    return state, index, g0


def infvoc_model(corpus: Corpus, state: InfVocState, word_index: WordIndex, params: InfVocParams, plan: InfVocPlan,
                 *, i: int, docs_seen: int, trace: Sequence[Mapping[str, Any]] = (), g0: CharNgramG0 | None = None,
                 g0_source: str | None = None, shards: Sequence[int] | None = None,
                 seen: Sequence[dict[str, str]] = (), language: str | None = None) -> SavedModel:
    """The saved model of an infvoc stream (module docstring).

    Parameters
    ----------
    corpus : Corpus
        The training store (provenance).
    state : InfVocState
    word_index : WordIndex
    params : InfVocParams
    plan : InfVocPlan
    i, docs_seen : int
        Minibatches applied and documents processed in all.
    trace : sequence of dict
        Minibatch records (:meth:`InfVocRecord.to_dict`).
    g0 : CharNgramG0, optional
        The G0 the ranking uses (kept in the model); None: ranks without G0.
    g0_source : str, optional
        Where it came from (``"default"``, a path, ``"given"``), recorded.
    shards : sequence of int, optional
        Store positions streamed by this run (default all).
    seen : sequence of dict
        Shards processed before this run (an update passes the model's).
    language : str, optional
        The store language read (recorded).

    Returns
    -------
    SavedModel
    """
    shards = list(range(corpus.n_shards)) if shards is None else list(shards)
    view, vocabulary = lda_view(state, word_index, params)
    sampler_state, payload = _state_payload(state, word_index, g0)
    payload["g0_source"] = g0_source if g0 is not None else None
    payload["language"] = language
    payload["view"] = {"n_words": len(vocabulary), "note": VIEW_NOTE}
    info = ModelInfo(family="infvoc", kind=INFVOC_KIND, method="online", settings=params.to_dict(),
                     trace=[dict(r) for r in trace], corpus=corpus_provenance(corpus, shards, seen),
                     online={"config": plan.to_dict(), "i": int(i), "docs_seen": int(docs_seen)},
                     extra={"infvoc": payload})
    return SavedModel(view, {"default": vocabulary}, info, sampler_state=sampler_state)


def is_infvoc_model(model: SavedModel) -> bool:
    """Whether ``model`` is an infvoc model.

    Parameters
    ----------
    model : SavedModel

    Returns
    -------
    bool
    """
    return model.info.family == "infvoc" or model.info.kind == INFVOC_KIND


def saved_infvoc(model: SavedModel, *, where: str = "the model"
                 ) -> tuple[InfVocParams, InfVocState, WordIndex, InfVocPosition]:
    """Read an infvoc model back: its settings, exact state, word index and stream position.

    Parameters
    ----------
    model : SavedModel
        Written by :func:`infvoc_model` (and saved/loaded by the model store).
    where : str
        How messages name the model.

    Returns
    -------
    params : InfVocParams
    state : InfVocState
    word_index : WordIndex
    position : InfVocPosition

    Raises
    ------
    InvalidParameterError
        Not an infvoc model.
    ModelFormatError
        Its infvoc arrays are missing or inconsistent.
    """
    if not is_infvoc_model(model):
        raise InvalidParameterError(f"{where} is a {model.info.family} model ({model.info.kind}), not an infvoc model")
    payload = model.info.extra.get("infvoc")
    online = model.info.online or {}
    if not isinstance(payload, dict) or "i" not in online:
        raise ModelFormatError(f"{where}: model.json lacks the infvoc record; the model is damaged", path=where,
                               field="infvoc")
    state, index, _ = _state_from_payload(model.sampler_state, payload, where)
    position = InfVocPosition(int(online["i"]), int(online["docs_seen"]), InfVocPlan.from_dict(online.get("config", {})))
    return InfVocParams.from_dict(model.info.settings), state, index, position


def saved_g0(model: SavedModel, *, where: str = "the model") -> tuple[CharNgramG0 | None, str | None]:
    """The G0 an infvoc model ranks with (None: without G0) and where it came from.

    Parameters
    ----------
    model : SavedModel
    where : str

    Returns
    -------
    g0 : CharNgramG0 or None
    source : str or None
    """
    payload = model.info.extra.get("infvoc") or {}
    _, _, g0 = _state_from_payload(model.sampler_state, payload, where)
    return g0, payload.get("g0_source")


def write_infvoc_checkpoint(path: Path | StoragePath, state: InfVocState, word_index: WordIndex, params: InfVocParams,
                            g0: CharNgramG0 | None, position: dict[str, Any], trace: list[dict[str, Any]],
                            fingerprint: dict[str, Any]) -> None:
    """Write the driver state atomically as a driver checkpoint (two slots, ``latest.json``).

    Parameters
    ----------
    path : Path or StoragePath
    state : InfVocState
    word_index : WordIndex
    params : InfVocParams
    g0 : CharNgramG0 or None
    position : dict
        ``epoch``, ``minibatch``, ``i``, ``docs_seen``.
    trace : list of dict
    fingerprint : dict
    """
    view, vocabulary = lda_view(state, word_index, params)
    sampler_state, payload = _state_payload(state, word_index, g0)
    write_checkpoint(path, Checkpoint(view, {**position, "infvoc": payload}, trace, fingerprint, sampler_state),
                     {"default": vocabulary})


def read_infvoc_checkpoint(path: Path | StoragePath, fingerprint: dict[str, Any]
                           ) -> tuple[InfVocState, WordIndex, dict[str, Any], list[dict[str, Any]]] | None:
    """The state, word index, position and trace of the checkpoint at ``path``, or None when there is none.

    Parameters
    ----------
    path : Path or StoragePath
    fingerprint : dict
        Of the fit that would resume (another fit's checkpoint is refused by name).

    Returns
    -------
    tuple of (InfVocState, WordIndex, position dict, trace) or None

    Raises
    ------
    InvalidParameterError
        Written by a fit with other settings, store or start.
    ModelFormatError
        Damaged.
    """
    found = read_checkpoint(path, fingerprint)
    if found is None:
        return None
    payload = found.position.get("infvoc")
    if not isinstance(payload, dict):
        raise ModelFormatError(f"checkpoint {str(path)!r} holds no infvoc state; delete it, or run without resume",
                               path=str(path), field="position/infvoc")
    state, index, _ = _state_from_payload(found.sampler_state, payload, f"checkpoint {str(path)!r}")
    position = {k: v for k, v in found.position.items() if k != "infvoc"}
    return state, index, position, list(found.trace)


def finite_or_none(value: float) -> float | None:
    """``value`` for JSON: None when it is not finite."""
    return value if math.isfinite(value) else None
