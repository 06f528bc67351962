"""Global state of the collapsed HDP methods, and how it reads as a topic model.

Glossary (Bleier; spec section 1): n_kw expected topic-word counts (T x V), n_k. their row sums,
a_k expected table counts (see :mod:`topicflow.models.hdp.sticks`), alpha, gamma, beta; n training
tokens and D training documents (the scale of eqs. 9-11); counters of the step-size schedules.

Lazy scale (spec P1). Eq. 9 decays *every* entry of n_kw at every token. The state keeps
``n_kw = scale * topic_word`` and ``n_k. = scale * topic_totals``, so a decay is one multiplication
of ``scale`` and a token touches one column; :meth:`HDPState.fold_scale` folds the scale back in
(the kernels do it when it falls below 1e-100, and before anything is saved or read out).

As a topic model the state is an LDA model with T topics: ``lambda = n_kw + beta`` (the
collapsed posterior of phi given the expected counts) and the document prior ``alpha * pi``
(spec P12). :meth:`HDPState.to_lda_state` gives that view, which is what ``topics``, ``infer``,
``evaluate``, ``export``, ``coherence`` and ``report`` read.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.models.common.rng import STREAM_TOPIC_INIT, doc_generator
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.sticks import stick_order, stick_params, stick_weights
from topicflow.models.lda.state import LDAState

#: A topic is reported "in use" when it holds at least this share of the expected tokens.
TOPIC_IN_USE_SHARE = 1e-3
#: Fold the lazy scale into the counts when it falls below this.
SCALE_FLOOR = 1e-100


@dataclass
class HDPState:
    """Mutable global state of PCSVB0 / PCVB0 (kernels update its arrays in place).

    Attributes
    ----------
    topic_word : ndarray of shape (T, V)
        n_kw / scale.
    topic_totals : ndarray of shape (T,)
        n_k. / scale.
    scale : float
        The lazy scale of n_kw and n_k..
    tables : ndarray of shape (T,)
        a_k per physical topic.
    alpha, gamma, beta : float
    n_tokens, n_docs : int
        n and D: training tokens and documents (the targets' scale, eqs. 9-11).
    t_topic_word : int
        Counter of rho^c (tokens word by word; minibatches in the minibatch form).
    t_hyper : int
        Counter of rho^h (documents word by word; minibatches in the minibatch form).
    docs_seen, tokens_seen : int
        Documents and tokens processed so far (over every pass).
    """

    topic_word: FloatArray
    topic_totals: FloatArray
    scale: float
    tables: FloatArray
    alpha: float
    gamma: float
    beta: float
    n_tokens: int
    n_docs: int
    t_topic_word: int = 0
    t_hyper: int = 0
    docs_seen: int = 0
    tokens_seen: int = 0

    # ------------------------------------------------------------------ construction

    @classmethod
    def initial(cls, params: HDPParams, *, n_terms: int, n_tokens: int, n_docs: int) -> HDPState:
        """The random start (spec P2, P7): n_kw ~ Gamma(init_shape, 1/init_shape) rescaled to sum to n.

        Row k is drawn from ``doc_generator(seed, STREAM_TOPIC_INIT, 0, k)``, so the start depends only on
        the arguments. Tables start at zero (u = 1, v = gamma: the prior), alpha and gamma at their
        ``*_init`` values.

        Parameters
        ----------
        params : HDPParams
        n_terms : int
            V.
        n_tokens, n_docs : int
            n and D of the training corpus (both positive).

        Returns
        -------
        HDPState
        """
        T = params.truncation
        rows = [doc_generator(params.seed, STREAM_TOPIC_INIT, 0, k).gamma(params.init_shape, 1.0 / params.init_shape,
                                                                             size=n_terms) for k in range(T)]
        topic_word = np.vstack(rows).astype(np.float64) if rows else np.zeros((T, n_terms))
        topic_word *= float(n_tokens) / float(topic_word.sum())
        return cls(topic_word=topic_word, topic_totals=topic_word.sum(axis=1), scale=1.0,
                   tables=np.zeros(T, dtype=np.float64), alpha=float(params.alpha_init),
                   gamma=float(params.gamma_init), beta=float(params.topic_word_prior),
                   n_tokens=int(n_tokens), n_docs=int(n_docs))

    # ------------------------------------------------------------------ read-outs

    @property
    def truncation(self) -> int:
        return int(self.topic_word.shape[0])

    @property
    def n_terms(self) -> int:
        return int(self.topic_word.shape[1])

    def fold_scale(self) -> None:
        """Multiply the scale into the counts and reset it to 1 (values unchanged)."""
        if self.scale != 1.0:
            self.topic_word *= self.scale
            self.topic_totals *= self.scale
            self.scale = 1.0

    def topic_word_counts(self) -> FloatArray:
        """n_kw, shape (T, V) (a new array)."""
        return self.topic_word * self.scale

    def topic_sums(self) -> FloatArray:
        """n_k., shape (T,) (a new array)."""
        return self.topic_totals * self.scale

    def stick_order(self) -> IntArray:
        """Physical topics in stick order (largest expected table count first)."""
        return stick_order(self.tables)

    def stick_params(self) -> tuple[FloatArray, FloatArray]:
        """(u, v) of the first T - 1 sticks, in stick order (eq. 4)."""
        return stick_params(self.tables, self.gamma, self.stick_order())

    def stick_weights(self) -> FloatArray:
        """pi per physical topic (eq. 3); sums to 1."""
        return stick_weights(self.tables, self.gamma, self.stick_order())

    def doc_topic_prior(self) -> FloatArray:
        """alpha * pi per physical topic: the Dirichlet prior of a document's topic proportions."""
        return self.alpha * self.stick_weights()

    def topic_shares(self) -> FloatArray:
        """Share of the expected training tokens each topic holds, ``n_k. / sum n_k.``."""
        sums = self.topic_sums()
        total = float(sums.sum())
        return sums / total if total > 0 else sums

    def topics_in_use(self, min_share: float = TOPIC_IN_USE_SHARE) -> int:
        """Topics holding at least ``min_share`` of the expected tokens: the number reported, never T.

        Parameters
        ----------
        min_share : float, default 1e-3

        Returns
        -------
        int
        """
        return int(np.count_nonzero(self.topic_shares() >= min_share))

    def to_lda_state(self, language: str = "default") -> LDAState:
        """The model as an LDA state with T topics: lambda = n_kw + beta, alpha vector = alpha * pi.

        Parameters
        ----------
        language : str, default "default"

        Returns
        -------
        LDAState
        """
        return LDAState(topic_word_var={language: self.topic_word_counts() + self.beta},
                        doc_topic_prior=self.doc_topic_prior(), topic_word_prior={language: self.beta})

    # ------------------------------------------------------------------ snapshot

    _ARRAYS = ("topic_word", "topic_totals", "tables")

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """Exact snapshot: the arrays (scale folded in) and the scalars, for a model file or checkpoint.

        Returns
        -------
        arrays : dict of str to ndarray
            ``topic_word`` (n_kw), ``topic_totals`` (n_k.), ``tables``.
        scalars : dict
            Every other field (JSON-able).
        """
        self.fold_scale()
        arrays = {name: np.asarray(getattr(self, name)) for name in self._ARRAYS}
        scalars = {item.name: getattr(self, item.name) for item in fields(self)
                   if item.name not in self._ARRAYS and item.name != "scale"}
        return arrays, scalars

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], scalars: dict[str, Any]) -> HDPState:
        """Inverse of :meth:`to_arrays`."""
        kwargs: dict[str, Any] = {name: np.array(arrays[name], dtype=np.float64) for name in cls._ARRAYS}
        for item in fields(cls):
            if item.name in scalars:
                kwargs[item.name] = scalars[item.name]
        kwargs["scale"] = 1.0
        return cls(**kwargs)

    def copy(self) -> HDPState:
        """A deep copy (arrays copied)."""
        arrays, scalars = self.to_arrays()
        return HDPState.from_arrays({k: v.copy() for k, v in arrays.items()}, dict(scalars))
