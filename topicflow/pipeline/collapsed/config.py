"""How a collapsed variational fit walks the corpus (the model settings are in HDPParams / SCVB0Params)."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from topicflow.errors import InvalidParameterError
from topicflow.models.hdp.params import HDPParams

#: pcsvb0 and pcvb0 fit the HDP family; scvb0 fits an LDA model with a fixed number of topics.
CollapsedMethod = Literal["pcsvb0", "pcvb0", "scvb0"]


@dataclass(frozen=True)
class CollapsedConfig:
    """Settings of :func:`fit_collapsed`.

    Attributes
    ----------
    method : {"pcsvb0", "pcvb0", "scvb0"}
    params : HDPParams
        Model and step-size settings. For scvb0, ``truncation`` is the number of topics K, ``alpha_init``
        the fixed symmetric alpha (Bleier sec. 4: 0.1) and the stick and hyperparameter settings are
        unused.
    passes : int, default 30
        Passes over the training corpus (Bleier's Fig. 1: 30 iterations).
    batch_size : int or None, default None
        Documents per minibatch; None is the word-by-word algorithm (Algorithm 1: every token updates the
        global statistics), run serially on one worker. Ignored by pcvb0 (a batch method).
    shuffle_window : int, default 0
        Visit documents in a random order within windows of this many documents (0: store order).
    eval_every : int, default 0
        Score the held-out set every this many documents seen (0: only at the end), for the trace.
    topics_in_use_share : float, default 1e-3
        Threshold of "topics in use" (share of expected tokens).
    extra : dict
        Free settings recorded with the model.
    """

    method: CollapsedMethod = "pcsvb0"
    params: HDPParams = field(default_factory=HDPParams)
    passes: int = 30
    batch_size: int | None = None
    shuffle_window: int = 0
    eval_every: int = 0
    topics_in_use_share: float = 1e-3
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.method not in ("pcsvb0", "pcvb0", "scvb0"):
            raise InvalidParameterError(f"method must be pcsvb0, pcvb0 or scvb0, got {self.method!r}")
        if not (isinstance(self.passes, int) and self.passes >= 1):
            raise InvalidParameterError(f"passes must be a positive integer, got {self.passes!r}")
        if self.batch_size is not None and not (isinstance(self.batch_size, int) and self.batch_size >= 1):
            raise InvalidParameterError(f"batch_size must be a positive integer or None, got {self.batch_size!r}")

    @property
    def family(self) -> str:
        """The model family the method fits."""
        return "lda" if self.method == "scvb0" else "hdp"
