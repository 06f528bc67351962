"""The true model of a synthetic corpus, stored inside its corpus store under ``truth/``.

This module owns the ``truth/`` layout; it never draws anything (that is
:mod:`topicflow.models.lda.synth`). ``truth.json`` is written last, so a store whose truth has no
``truth.json`` was never committed.

Layout::

    STORE/truth/
      truth.json               generating parameters (SynthParams.to_dict) and the layout notes
      topic_word/<lang>        (n_topics, n_terms) float64; column j is term id j of vocab/<lang>
      doc_topic                (n_docs, n_topics) float64; one chunk per corpus shard

Glossary: topic_word (beta), doc_topic (theta), doc_topic_prior (alpha), topic_word_prior (eta).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np
import zarr

from topicflow.errors import CorpusFormatError, StoreNotFoundError
from topicflow.io._atomic import atomic_write_json, read_json
from topicflow.io._zarr import check_format

FORMAT_NAME = "topicflow-synth-truth"
FORMAT_VERSION = 1
TRUTH = "truth"
TRUTH_JSON = "truth.json"


def create_truth_group(store: Path, *, n_docs: int, n_topics: int, shard_size: int) -> None:
    """Create ``truth/`` with an empty ``doc_topic`` array chunked one shard per chunk.

    Shard tasks then fill disjoint chunks concurrently with :func:`write_doc_topic_rows`.
    """
    root = zarr.open_group(str(store), mode="r+")
    truth = root.create_group(TRUTH)
    truth.create_group("topic_word")
    truth.create_array(
        "doc_topic", shape=(n_docs, n_topics), dtype=np.float64, chunks=(shard_size, n_topics),
        fill_value=np.nan,
    )


def write_doc_topic_rows(store: str, first_doc: int, doc_topic: np.ndarray) -> None:
    """Write rows ``first_doc ..`` of ``truth/doc_topic`` (a whole number of chunks, or the last)."""
    array = zarr.open_array(str(Path(store) / TRUTH / "doc_topic"), mode="r+")
    array[first_doc : first_doc + doc_topic.shape[0]] = doc_topic


def write_topic_word(store: str, language: str, topic_word: np.ndarray) -> None:
    """Write ``truth/topic_word/<language>`` as one chunk."""
    group = zarr.open_group(str(Path(store) / TRUTH / "topic_word"), mode="r+")
    group.create_array(language, data=np.asarray(topic_word, dtype=np.float64))


def write_truth_json(store: Path, payload: Mapping[str, Any]) -> None:
    """Write ``truth/truth.json`` (format name and version are added here)."""
    document = {"format": FORMAT_NAME, "format_version": FORMAT_VERSION, **payload}
    atomic_write_json(Path(store) / TRUTH / TRUTH_JSON, document)


def read_truth_json(store: Path) -> dict[str, Any]:
    """The parsed ``truth.json``; raises StoreNotFoundError when the store has no truth."""
    path = Path(store) / TRUTH / TRUTH_JSON
    if not path.is_file():
        raise StoreNotFoundError(
            f"{str(store)!r} holds no synthetic truth ({TRUTH}/{TRUTH_JSON} is missing); only stores "
            "made by `topicflow synth` have one.",
            path=str(store),
        )
    payload: dict[str, Any] = read_json(path)
    check_format(payload, path=str(path), name=FORMAT_NAME, version=FORMAT_VERSION)
    return payload


def read_topic_word(store: Path, language: str) -> np.ndarray:
    """``truth/topic_word/<language>`` as an in-memory (n_topics, n_terms) array."""
    try:
        array = zarr.open_array(str(Path(store) / TRUTH / "topic_word" / language), mode="r")
    except (FileNotFoundError, KeyError) as exc:
        raise CorpusFormatError(
            f"{str(store)!r}: truth has no topic_word for language {language!r}; the store is damaged.",
            path=str(store),
        ) from exc
    return np.asarray(array[:], dtype=np.float64)


def open_doc_topic(store: Path) -> Any:
    """``truth/doc_topic`` opened read-only (nothing is loaded)."""
    return zarr.open_array(str(Path(store) / TRUTH / "doc_topic"), mode="r")
