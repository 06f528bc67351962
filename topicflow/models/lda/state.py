"""State of a fitted variational LDA model (monolingual or polylingual), as pure data.

Glossary (Blei et al. 2003; Mimno et al. 2009):
    topic_word_var (lambda, per language (n_topics, n_terms)): Dirichlet parameters of q(beta)
    doc_topic_prior (alpha, (n_topics,)): Dirichlet prior of theta, shared by all languages
    topic_word_prior (eta, per language: a scalar or (n_topics, n_terms)): prior of beta
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Sequence

import numpy as np

from topicflow._typing import FloatArray
from topicflow.models.common.dirichlet import dirichlet_expectation, posterior_mean
from topicflow.models.lda.vb.layout import (
    PreparedTopics,
    prepare_topics,
    prepare_topics_from_var,
)


@dataclass(frozen=True)
class LDAState:
    """Variational parameters and priors of an LDA model.

    Attributes
    ----------
    topic_word_var : dict of str to ndarray of shape (n_topics, n_terms)
        lambda per language.
    doc_topic_prior : ndarray of shape (n_topics,)
        alpha.
    topic_word_prior : dict of str to float or ndarray of shape (n_topics, n_terms)
        eta per language; a matrix for informed priors.
    topic_names : tuple of (str or None)
        Names of seeded topics (None for unseeded ones), length n_topics.
    """

    topic_word_var: dict[str, FloatArray]
    doc_topic_prior: FloatArray
    topic_word_prior: dict[str, float | FloatArray]
    topic_names: tuple[str | None, ...] = field(default=())

    def __post_init__(self) -> None:
        if not self.topic_names:
            object.__setattr__(self, "topic_names", (None,) * self.n_topics)

    @property
    def languages(self) -> tuple[str, ...]:
        return tuple(self.topic_word_var)

    @property
    def n_topics(self) -> int:
        return int(self.doc_topic_prior.shape[0])

    def n_terms(self, language: str) -> int:
        return int(self.topic_word_var[language].shape[1])

    def topic_word(self) -> dict[str, FloatArray]:
        """Posterior mean topic-word distributions, rows normalized, per language."""
        return {lang: posterior_mean(lam) for lang, lam in self.topic_word_var.items()}

    def exp_elog_topic_word(self) -> dict[str, FloatArray]:
        """exp(E_q[log beta]) per language, the input of every E-step."""
        return {lang: np.exp(dirichlet_expectation(lam)) for lang, lam in self.topic_word_var.items()}

    def prepared_topics(self, languages: Sequence[str] | None = None) -> PreparedTopics:
        """exp(E[log beta]) of ``languages`` (default: all) in the layout every E-step reads."""
        langs = self.languages if languages is None else tuple(languages)
        return prepare_topics_from_var({lang: self.topic_word_var[lang] for lang in langs})

    def prepared_topic_word(self, languages: Sequence[str] | None = None) -> PreparedTopics:
        """Posterior mean topics (point estimates) in the same layout, for held-out scoring."""
        langs = self.languages if languages is None else tuple(languages)
        topic_word = self.topic_word()
        return prepare_topics({lang: topic_word[lang] for lang in langs})

    def with_updates(self, **changes: object) -> LDAState:
        return replace(self, **changes)  # type: ignore[arg-type]

    def topic_label(self, k: int) -> str:
        name = self.topic_names[k] if k < len(self.topic_names) else None
        return name if name else f"topic-{k}"

