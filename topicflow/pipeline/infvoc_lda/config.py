"""How the infvoc driver walks a store: the minibatch plan (the model's settings are InfVocParams)."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

from topicflow.errors import InvalidParameterError


@dataclass(frozen=True, slots=True)
class InfVocPlan:
    """Minibatches of the infvoc driver (read by :func:`topicflow.pipeline.vb.plan_minibatches`).

    The step sizes epsilon_i live in :class:`~topicflow.models.infvoc_lda.InfVocParams` (``step``), not here.

    Attributes
    ----------
    batch_size : int, default 256
        Documents per minibatch, |S| (the chapter's S = 256 in its sensitivity study).
    passes : int, default 1
        Passes over the documents (the chapter streams once).
    shuffle_window : int, default 0
        Visit documents in a random order within windows of this many documents (0: store order).
    pieces : int, default 8
        Most pieces (Dask tasks) per minibatch (more at shard boundaries) ...
    min_piece_docs : int, default 64
        ... but no piece smaller than this (or the minibatch). The model does not depend on either.
    total_docs : int or None, default None
        D in the D/|S| scaling; default the number of documents of the store.
    """

    batch_size: int = 256
    passes: int = 1
    shuffle_window: int = 0
    pieces: int = 8
    min_piece_docs: int = 64
    total_docs: int | None = None

    def __post_init__(self) -> None:
        for name in ("batch_size", "passes", "pieces", "min_piece_docs"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InvalidParameterError(f"InfVocPlan.{name} must be an integer >= 1, got {value!r}")
        if isinstance(self.shuffle_window, bool) or not isinstance(self.shuffle_window, int) or self.shuffle_window < 0:
            raise InvalidParameterError(f"InfVocPlan.shuffle_window must be an integer >= 0, got {self.shuffle_window!r}")
        if self.total_docs is not None and (isinstance(self.total_docs, bool) or not isinstance(self.total_docs, int)
                                            or self.total_docs < 1):
            raise InvalidParameterError(f"InfVocPlan.total_docs must be None or an integer >= 1, got {self.total_docs!r}")

    @property
    def piece_docs(self) -> int:
        """Documents per piece: ceil(batch_size / pieces), at least min(batch_size, min_piece_docs)."""
        return max(math.ceil(self.batch_size / self.pieces), min(self.batch_size, self.min_piece_docs))

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as a JSON-able dict (inverse of :meth:`from_dict`)."""
        return {name: getattr(self, name) for name in self.__slots__}

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> InfVocPlan:
        """Rebuild the plan from :meth:`to_dict`'s output (unknown keys ignored, e.g. an OnlineConfig's).

        Parameters
        ----------
        payload : mapping

        Returns
        -------
        InfVocPlan
        """
        return cls(**{name: payload[name] for name in cls.__slots__ if name in payload})
