"""Saved models: a directory of zarr arrays plus ``model.json``; written atomically, never pickled.

Layout::

    MODEL/
      model.json                      format, kind, topics, languages, topic names, settings, traces
      arrays/topic_word_var/<lang>    lambda, (n_topics, n_terms) float64
      arrays/doc_topic_prior          alpha, (n_topics,) float64
      arrays/topic_word_prior/<lang>  eta as a matrix (informed priors only; else a scalar in JSON)
      vocab/<lang>/                   terms, doc_freq, corpus_freq (same arrays as a corpus store)
"""
from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import zarr

from topicflow import __version__
from topicflow.errors import CorpusFormatError, ModelNotFoundError
from topicflow.io.atomic import (
    atomic_write_json,
    check_output_path,
    commit_directory,
    read_json,
    temporary_sibling,
)
from topicflow.io.zarr_shards import check_format, read_vocabulary, write_vocabulary
from topicflow.models.lda_model import LDAState
from topicflow.models.vocabulary import Vocabulary

MODEL_FORMAT = "topicflow-model"
MODEL_FORMAT_VERSION = 1


@dataclass(frozen=True)
class SavedModel:
    """A model as stored: its state, the vocabulary of each language and its JSON description."""

    state: LDAState
    vocabularies: dict[str, Vocabulary]
    #: Free-form JSON-able description: kind, settings, ELBO trace, corpus provenance.
    info: dict[str, Any] = field(default_factory=dict)


def save_model(path: Path, model: SavedModel, *, overwrite: bool = False) -> None:
    """Write ``model`` to the directory ``path`` atomically (temporary sibling, then rename)."""
    path = Path(path)
    check_output_path(path, overwrite=overwrite, what="model")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temporary_sibling(path)
    try:
        _write_model_dir(tmp, model)
        commit_directory(tmp, path, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _write_model_dir(directory: Path, model: SavedModel) -> None:
    state = model.state
    arrays = zarr.open_group(str(directory / "arrays"), mode="w")
    arrays.create_array("doc_topic_prior", data=np.asarray(state.doc_topic_prior, dtype=np.float64))
    lam_group = arrays.create_group("topic_word_var")
    prior_group = arrays.create_group("topic_word_prior")
    priors: dict[str, Any] = {}
    for lang in state.languages:
        lam = np.asarray(state.topic_word_var[lang], dtype=np.float64)
        lam_group.create_array(lang, data=lam, chunks=(lam.shape[0], max(1, min(lam.shape[1], 65536))))
        prior = state.topic_word_prior[lang]
        if np.ndim(prior) == 0:
            priors[lang] = float(prior)  # type: ignore[arg-type]
        else:
            prior_group.create_array(lang, data=np.asarray(prior, dtype=np.float64))
            priors[lang] = "matrix"
        write_vocabulary(directory / "vocab" / lang, model.vocabularies[lang])
    payload = dict(model.info)
    payload.update(
        format=MODEL_FORMAT,
        format_version=MODEL_FORMAT_VERSION,
        topicflow_version=__version__,
        saved=datetime.now(timezone.utc).isoformat(),
        n_topics=state.n_topics,
        languages=list(state.languages),
        vocab_sizes={lang: state.n_terms(lang) for lang in state.languages},
        topic_names=list(state.topic_names),
        topic_word_prior=priors,
    )
    atomic_write_json(directory / "model.json", payload)


def load_model(path: Path) -> SavedModel:
    """Read a model written by :func:`save_model`.

    Raises
    ------
    ModelNotFoundError
        No model at ``path``.
    FormatVersionError
        The model was written by a newer topicflow.
    """
    path = Path(path)
    if not (path / "model.json").is_file():
        raise ModelNotFoundError(
            f"no topicflow model at {str(path)!r}; fit one with `topicflow fit STORE --model {path}`.",
            path=str(path),
        )
    info = read_json(path / "model.json")
    check_format(info, path=str(path), name=MODEL_FORMAT, version=MODEL_FORMAT_VERSION)
    try:
        arrays = zarr.open_group(str(path / "arrays"), mode="r")
        lam = {lang: np.asarray(arrays["topic_word_var"][lang][:]) for lang in info["languages"]}
        priors: dict[str, Any] = {}
        for lang, prior in info["topic_word_prior"].items():
            priors[lang] = np.asarray(arrays["topic_word_prior"][lang][:]) if prior == "matrix" else float(prior)
        state = LDAState(
            topic_word_var=lam,
            doc_topic_prior=np.asarray(arrays["doc_topic_prior"][:]),
            topic_word_prior=priors,
            topic_names=tuple(info.get("topic_names") or ()),
        )
        vocabularies = {lang: read_vocabulary(path / "vocab" / lang) for lang in info["languages"]}
    except (KeyError, FileNotFoundError) as exc:
        raise CorpusFormatError(
            f"model {str(path)!r} is incomplete ({exc!r}); refit it or restore it from a copy.",
            path=str(path),
        ) from exc
    return SavedModel(state=state, vocabularies=vocabularies, info=info)


def export_npz(path: Path, model: SavedModel) -> dict[str, tuple[int, ...]]:
    """Write ``topic_word`` (rows normalized), ``alpha`` and ``vocab`` per language to an ``.npz``.

    A monolingual model uses plain names; a polylingual one suffixes each with ``_<lang>``.
    Returns the names and shapes written.
    """
    path = Path(path)
    state = model.state
    topic_word = state.topic_word()
    multi = len(state.languages) > 1
    arrays: dict[str, np.ndarray] = {"alpha": np.asarray(state.doc_topic_prior)}
    arrays["topic_names"] = np.array([state.topic_label(k) for k in range(state.n_topics)], dtype=str)
    for lang in state.languages:
        suffix = f"_{lang}" if multi else ""
        arrays[f"topic_word{suffix}"] = topic_word[lang]
        arrays[f"vocab{suffix}"] = np.asarray(model.vocabularies[lang].terms, dtype=str)
    tmp = temporary_sibling(path)
    with open(tmp, "wb") as handle:
        np.savez(handle, **arrays)
    tmp.replace(path)
    return {name: tuple(a.shape) for name, a in arrays.items()}

