"""Settings of online LDA with an infinite vocabulary (Zhai 2014, ch. 7), with the chapter's values as defaults.

Pure: no Dask, no I/O. Glossary (Zhai 2014, sec. 7.2-7.4):
    n_topics (K); doc_topic_prior (alpha^theta, default 1/K, sec. 7.5);
    stick_concentration (alpha^beta, the DP scale of every topic's stick prior Beta(1, alpha^beta));
    truncation (T, the TOS size kept at each contraction); reorder_every (U, the reordering delay);
    step (epsilon_i = (tau0 + i) ** -kappa, i = 1, 2, ... the minibatch counter);
    burn_in (B) and samples (M): Gibbs sweeps after the random start, discarded and kept (spec P7);
    new_word_nu2: nu^2 of a word appended to a TOS (spec P3);
    restate_tail: after a reordering, recompute nu^2 from the new order's tail sums (an option, not the chapter's).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, Mapping, cast, get_args

from topicflow.errors import InvalidParameterError
from topicflow.models.common.validation import (
    parse_choice,
    parse_int,
    parse_positive_float,
)
from topicflow.models.lda.vb.online import StepSchedule

#: nu^2 of an appended word: ``"one"`` is the chapter's nu^1 = nu^2 = 1 (sec. 7.4.1, and the reference
#: code); ``"prior"`` starts it at the prior's alpha^beta instead (spec P3). nu^1 is 1 in both.
NewWordNu = Literal["one", "prior"]

#: Weight of a word outside a topic's TOS in the E-step: ``"remaining"`` is eq. 7.4 (the whole remaining
#: stick, the same for every such word; the chapter and the code); ``"g0"`` is the variant of spec P2,
#: remaining + E[log b] of a fresh Beta(1, alpha^beta) stick + log G0(w).
UnseenWeight = Literal["remaining", "g0"]

#: Zhai 2014, Fig. 7.3-7.6: kappa = 0.8 and tau0 = 64 in the sensitivity study.
PAPER_STEP = StepSchedule(tau0=64.0, kappa=0.8)


@dataclass(frozen=True, slots=True)
class InfVocParams:
    """Model and inference settings of infinite-vocabulary online LDA.

    Attributes
    ----------
    n_topics : int
        K, at least 1.
    doc_topic_prior : float or None, default None
        alpha^theta (symmetric); None means 1 / K (Zhai 2014, sec. 7.5).
    stick_concentration : float, default 1000.0
        alpha^beta; the chapter uses 1k-5k (Fig. 7.3-7.6), the reference code 1e3.
    truncation : int, default 1000
        T, the number of words each topic keeps at a contraction (reference code default; the
        chapter's grids use 3k-40k).
    reorder_every : int, default 10
        U: reorder and contract after every U-th minibatch (the chapter uses 10 and 20; U = 1 "was
        not effective").
    step : StepSchedule, default StepSchedule(tau0=64.0, kappa=0.8)
        epsilon_i = (tau0 + i) ** -kappa for the i-th minibatch, i from 1 (eq. 7.7).
    burn_in : int, default 5
        B, Gibbs sweeps discarded after the random start.
    samples : int, default 5
        M, Gibbs sweeps kept; the statistics are their mean (spec P7: the code's "10 samples, 5 burn-in").
    new_word_nu2 : {"one", "prior"}, default "one"
        nu^2 of a word appended to a topic's TOS (spec P3).
    unseen_weight : {"remaining", "g0"}, default "remaining"
        E-step weight of a word outside a topic's TOS: eq. 7.4, or the G0 variant of spec P2 (needs log G0).
    seed : int, default 0
        Keys every random number, with the minibatch number and the global document number.
    restate_tail : bool, default False
        False (the chapter and its code): a reordering carries each word's (nu1, nu2) to its new position.
        True: after each reorder-and-contract, nu2_kt = alpha^beta + sum_{s>t} (nu1_ks - 1) in the new order
        (:func:`~topicflow.models.infvoc_lda.update.restate_tails`), the nu2 that eqs. 7.6-7.7 would hold had
        the new order been the order all along (docs/infvoc.md, "The sawtooth at a contraction").
    """

    n_topics: int
    doc_topic_prior: float | None = None
    stick_concentration: float = 1000.0
    truncation: int = 1000
    reorder_every: int = 10
    step: StepSchedule = field(default_factory=lambda: PAPER_STEP)
    burn_in: int = 5
    samples: int = 5
    new_word_nu2: NewWordNu = "one"
    unseen_weight: UnseenWeight = "remaining"
    seed: int = 0
    restate_tail: bool = False

    def __post_init__(self) -> None:
        n_topics = parse_int("InfVocParams.n_topics", self.n_topics, 1)
        prior = 1.0 / n_topics if self.doc_topic_prior is None else self.doc_topic_prior
        object.__setattr__(self, "n_topics", n_topics)
        object.__setattr__(self, "doc_topic_prior", parse_positive_float("InfVocParams.doc_topic_prior", prior))
        object.__setattr__(self, "stick_concentration",
                           parse_positive_float("InfVocParams.stick_concentration", self.stick_concentration))
        object.__setattr__(self, "truncation", parse_int("InfVocParams.truncation", self.truncation, 1))
        object.__setattr__(self, "reorder_every", parse_int("InfVocParams.reorder_every", self.reorder_every, 1))
        object.__setattr__(self, "burn_in", parse_int("InfVocParams.burn_in", self.burn_in, 0))
        object.__setattr__(self, "samples", parse_int("InfVocParams.samples", self.samples, 1))
        object.__setattr__(self, "seed", parse_int("InfVocParams.seed", self.seed, 0, 2**63))
        parse_choice("InfVocParams.new_word_nu2", self.new_word_nu2, get_args(NewWordNu))
        parse_choice("InfVocParams.unseen_weight", self.unseen_weight, get_args(UnseenWeight))
        if not isinstance(self.restate_tail, bool):
            raise InvalidParameterError(f"InfVocParams.restate_tail must be True or False, got {self.restate_tail!r}")
        if not isinstance(self.step, StepSchedule):
            raise InvalidParameterError(f"InfVocParams.step must be a StepSchedule, got {self.step!r}")

    @property
    def alpha(self) -> float:
        """The resolved alpha^theta (a float, never None)."""
        return float(cast(float, self.doc_topic_prior))  # resolved to a float by __post_init__

    @property
    def new_nu2(self) -> float:
        """The nu^2 given to an appended word under ``new_word_nu2``."""
        return 1.0 if self.new_word_nu2 == "one" else self.stick_concentration

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as a JSON-able dict (inverse of :meth:`from_dict`)."""
        return {
            "n_topics": self.n_topics, "doc_topic_prior": self.doc_topic_prior,
            "stick_concentration": self.stick_concentration, "truncation": self.truncation,
            "reorder_every": self.reorder_every, "step": self.step.to_dict(), "burn_in": self.burn_in,
            "samples": self.samples, "new_word_nu2": self.new_word_nu2, "unseen_weight": self.unseen_weight,
            "seed": self.seed, "restate_tail": self.restate_tail,
        }

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> InfVocParams:
        """Rebuild the settings from :meth:`to_dict`'s output.

        Parameters
        ----------
        payload : mapping
            The dict written by :meth:`to_dict`.

        Returns
        -------
        InfVocParams
        """
        values = dict(payload)  # a payload written before restate_tail existed reads as False
        step = values.pop("step", None)
        if step is not None:
            values["step"] = StepSchedule(**step)
        return cls(**values)
