"""Vocabulary: terms with their document and corpus frequencies, in a deterministic order.

Order is corpus frequency descending, then document frequency descending, then the term itself, so the
same input gives the same term ids on any number of workers.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Mapping

import numpy as np

from topicflow._typing import IntArray


@dataclass(frozen=True)
class Vocabulary:
    """Terms of one language.

    Attributes
    ----------
    terms : ndarray of shape (n_terms,), object (str)
    doc_freq : ndarray of shape (n_terms,), int64
        Number of documents that contain the term.
    corpus_freq : ndarray of shape (n_terms,), int64
        Number of occurrences of the term in the corpus.
    """

    terms: np.ndarray
    doc_freq: IntArray
    corpus_freq: IntArray
    _index: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not (len(self.terms) == len(self.doc_freq) == len(self.corpus_freq)):
            raise ValueError("terms, doc_freq and corpus_freq must have the same length")

    def __len__(self) -> int:
        return len(self.terms)

    @property
    def index(self) -> dict[str, int]:
        """Term to id mapping, built on first use."""
        if not self._index and len(self.terms):
            self._index.update({str(t): i for i, t in enumerate(self.terms)})
        return self._index

    def id_of(self, term: str) -> int | None:
        return self.index.get(term)

    def ids_of(self, terms: Iterable[str]) -> list[int | None]:
        index = self.index
        return [index.get(t) for t in terms]

    def term_of(self, term_id: int) -> str:
        return str(self.terms[term_id])

    @classmethod
    def from_counts(cls, doc_freq: Mapping[str, int], corpus_freq: Mapping[str, int]) -> Vocabulary:
        """Build a vocabulary in canonical order from term frequency mappings."""
        terms = sorted(corpus_freq, key=lambda t: (-corpus_freq[t], -doc_freq[t], t))
        return cls(
            terms=np.array(terms, dtype=object),
            doc_freq=np.array([doc_freq[t] for t in terms], dtype=np.int64),
            corpus_freq=np.array([corpus_freq[t] for t in terms], dtype=np.int64),
        )

    @classmethod
    def empty(cls) -> Vocabulary:
        return cls(np.array([], dtype=object), np.zeros(0, np.int64), np.zeros(0, np.int64))
