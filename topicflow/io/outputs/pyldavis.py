"""The pyLDAvis export (``topicflow export --format pyldavis``): the arguments of ``pyLDAvis.prepare`` as JSON.

The file holds exactly the five arguments ``pyLDAvis.prepare`` needs, under their parameter names,
so a reader passes them straight on (with ``sort_topics=False`` to keep the model's topic order)::

    with open("vis.json") as f:
        prepared = pyLDAvis.prepare(**json.load(f), sort_topics=False)

Keys: ``topic_term_dists`` (n_topics x n_terms, rows sum to 1), ``doc_topic_dists`` (n_docs x
n_topics, rows sum to 1), ``doc_lengths`` (n_docs integers), ``vocab`` (n_terms strings) and
``term_frequency`` (n_terms integers). Floats are written with full precision (``repr``), so a reader
gets the arrays back exactly.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.errors import CorpusFormatError
from topicflow.io._atomic import atomic_write_bytes

#: The keys of the file: ``pyLDAvis.prepare``'s required parameters.
PYLDAVIS_KEYS = ("topic_term_dists", "doc_topic_dists", "doc_lengths", "vocab", "term_frequency")


def write_pyldavis(path: Path, data: Mapping[str, Any]) -> None:
    """Write the arguments of ``pyLDAvis.prepare`` to a JSON file, atomically.

    Parameters
    ----------
    path : Path
        The ``.json`` file; its directory must exist.
    data : mapping of str to array_like
        The five entries of :data:`PYLDAVIS_KEYS` (arrays or lists).
    """
    payload = {key: np.asarray(data[key]).tolist() if key != "vocab" else [str(t) for t in data[key]]
               for key in PYLDAVIS_KEYS}
    atomic_write_bytes(Path(path), json.dumps(payload, ensure_ascii=False).encode("utf-8"))


def read_pyldavis(path: Path) -> dict[str, Any]:
    """Read a file written by :func:`write_pyldavis` back as arrays.

    Parameters
    ----------
    path : Path
        The ``.json`` file.

    Returns
    -------
    dict of str to ndarray or list
        ``topic_term_dists`` and ``doc_topic_dists`` as float64 arrays, ``doc_lengths`` and
        ``term_frequency`` as int64 arrays, ``vocab`` as a list of str.

    Raises
    ------
    CorpusFormatError
        The file is not JSON or lacks one of the keys.
    """
    try:
        payload = json.loads(Path(path).read_text(encoding="utf-8"))
    except ValueError as exc:
        raise CorpusFormatError(f"{str(path)!r} is not a pyLDAvis export ({exc}); write it with "
                                "`topicflow export MODEL --format pyldavis`.", path=str(path)) from exc
    missing = [key for key in PYLDAVIS_KEYS if key not in payload]
    if missing:
        raise CorpusFormatError(f"{str(path)!r} lacks {missing}; write it with `topicflow export MODEL --format "
                                "pyldavis`.", path=str(path))
    return {
        "topic_term_dists": np.asarray(payload["topic_term_dists"], dtype=np.float64),
        "doc_topic_dists": np.asarray(payload["doc_topic_dists"], dtype=np.float64),
        "doc_lengths": np.asarray(payload["doc_lengths"], dtype=np.int64),
        "vocab": [str(t) for t in payload["vocab"]],
        "term_frequency": np.asarray(payload["term_frequency"], dtype=np.int64),
    }
