"""Hyperparameters of the variational E-step."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

from topicflow.errors import InvalidParameterError


@dataclass(frozen=True, slots=True)
class VBParams:
    """Hyperparameters of the variational E-step.

    Attributes
    ----------
    n_topics : int
        Number of topics K, at least 1.
    max_doc_iter : int, default 100
        Most phi/gamma alternations per document, at least 1.
    doc_tol : float, default 1e-3
        A document stops when the mean absolute change of gamma falls below this positive value.
    random_init : bool, default False
        Start gamma_dk from Gamma(100, 1/100) draws (Hoffman et al. 2010) keyed by ``seed`` and the
        document's position, instead of alpha_k + N_d / K. The random start breaks the symmetry
        between topics in a single visit of a document, which online VB needs; batch VB, which
        revisits every document, does as well or better from the uniform start.
    seed : int, default 0
        Seed of the random start.

    Raises
    ------
    InvalidParameterError
        A field is outside its allowed values.

    Examples
    --------
    >>> VBParams(n_topics=10).max_doc_iter
    100
    """

    n_topics: int
    max_doc_iter: int = 100
    doc_tol: float = 1e-3
    random_init: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_topics", "max_doc_iter"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidParameterError(f"VBParams.{name} must be an integer >= 1, got {value!r}")
            object.__setattr__(self, name, int(value))
        tol = self.doc_tol
        if isinstance(tol, bool) or not isinstance(tol, (int, float, np.floating)) or not (0 < tol < math.inf):
            raise InvalidParameterError(f"VBParams.doc_tol must be a finite float > 0, got {tol!r}")
        object.__setattr__(self, "doc_tol", float(tol))
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2**63:
            raise InvalidParameterError(f"VBParams.seed must be an integer in [0, 2**63), got {self.seed!r}")
        object.__setattr__(self, "seed", int(self.seed))
        object.__setattr__(self, "random_init", bool(self.random_init))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, for model files and checkpoints."""
        return {"n_topics": self.n_topics, "max_doc_iter": self.max_doc_iter, "doc_tol": self.doc_tol,
                "random_init": self.random_init, "seed": self.seed}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> VBParams:
        """Inverse of :meth:`to_dict`."""
        return cls(n_topics=data["n_topics"], max_doc_iter=data["max_doc_iter"], doc_tol=data["doc_tol"],
                   random_init=bool(data.get("random_init", False)), seed=int(data.get("seed", 0)))
