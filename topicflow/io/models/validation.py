"""What a saved model must satisfy to be used: its arrays agree with its ``model.json`` and hold sound values.

This module owns the checks every model read runs (:func:`topicflow.io.models.store.read_model_dir`, and
through it checkpoints and ``topicflow topics|infer|evaluate|export|update``). It reads no file and
raises nothing: it returns what is wrong, and the reader names the model, the version and what to do.
Each check is one or two vectorized passes over an array, so validation costs a small fraction of
reading the arrays.

Glossary (see :mod:`topicflow.models.lda.state`):
    topic_word_var (lambda, per language (n_topics, n_terms)): must be finite and > 0
    doc_topic_prior (alpha, (n_topics,)): must be finite and > 0
    topic_word_prior (eta, per language: a number or (n_topics, n_terms)): must be finite and > 0
    sampler_state: a streaming sampler's exact state (SGS: term_topic_counts (n_terms, n_topics) and
        topic_counts (n_topics,); the collapsed variational methods: topic_word (n_topics, n_terms),
        topic_totals (n_topics,) and tables (n_topics,); all finite and >= 0)
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from topicflow.models.common.vocabulary import Vocabulary

#: (field, problem): the array or ``model.json`` key, and what is wrong with it.
Problem = tuple[str, str]

#: Shapes of the sampler-state arrays topicflow writes, as functions of (n_terms, n_topics).
_SAMPLER_SHAPES = {
    "term_topic_counts": lambda n_terms, n_topics: (n_terms, n_topics),
    "topic_counts": lambda n_terms, n_topics: (n_topics,),
    "topic_word": lambda n_terms, n_topics: (n_topics, n_terms),
    "topic_totals": lambda n_terms, n_topics: (n_topics,),
    "tables": lambda n_terms, n_topics: (n_topics,),
}


def values_problem(array: np.ndarray, *, lower: float, strict: bool) -> str | None:
    """What is wrong with the values of ``array``: not numbers, not finite, or below the bound.

    Parameters
    ----------
    array : ndarray
        Any shape.
    lower : float
        The bound values must be above (``strict``) or at least equal to.
    strict : bool
        Whether a value equal to ``lower`` is refused.

    Returns
    -------
    str or None
        A phrase such as ``"holds 3 values <= 0 (smallest -0.5): values must be > 0"``; None if the values
        are sound.

    Examples
    --------
    >>> values_problem(np.array([0.1, -0.5]), lower=0.0, strict=True)
    'holds 1 value <= 0 (smallest -0.5): values must be > 0'
    >>> values_problem(np.ones(3), lower=0.0, strict=True) is None
    True
    """
    if array.dtype.kind not in "fiu":
        return f"has dtype {array.dtype}, expected numbers"
    if array.size == 0:
        return None
    # NaN propagates through min and an infinity shows in min or max: two passes and no temporary.
    low, high = array.min(), array.max()
    if not (np.isfinite(low) and np.isfinite(high)):
        bad = int(np.count_nonzero(~np.isfinite(array)))
        return f"holds {bad} non-finite value{'s' if bad != 1 else ''} (NaN or infinity)"
    if low < lower or (strict and low == lower):
        sign = "<=" if strict else "<"
        bad = int(np.count_nonzero(array <= lower if strict else array < lower))
        return (f"holds {bad} value{'s' if bad != 1 else ''} {sign} {lower:g} (smallest {float(low)!r}): "
                f"values must be {'>' if strict else '>='} {lower:g}")
    return None


def model_problems(
    info: Mapping[str, Any],
    topic_word_var: Mapping[str, np.ndarray],
    doc_topic_prior: np.ndarray,
    topic_word_prior: Mapping[str, Any],
    vocabularies: Mapping[str, Vocabulary],
    sampler_state: Mapping[str, np.ndarray],
) -> list[Problem]:
    """Everything in a model's arrays that contradicts its ``model.json`` or is not a sound value.

    Parameters
    ----------
    info : mapping
        ``model.json``: ``n_topics``, ``languages``, ``vocab_sizes`` and ``topic_names`` are checked
        where present (older models lack some).
    topic_word_var : mapping of str to ndarray
        Lambda of each language of ``info["languages"]``.
    doc_topic_prior : ndarray
        Alpha.
    topic_word_prior : mapping of str to float or ndarray
        Eta of each language.
    vocabularies : mapping of str to Vocabulary
        The model's vocabulary of each language.
    sampler_state : mapping of str to ndarray
        The streaming sampler's arrays (empty for other models).

    Returns
    -------
    list of (str, str)
        ``(field, problem)`` pairs, fields named as in ``model.json`` or under ``arrays/``; empty when
        the model is sound.

    Examples
    --------
    >>> vocab = Vocabulary(np.array(["a", "b"], dtype=object), np.ones(2, np.int64), np.ones(2, np.int64))
    >>> model_problems({"n_topics": 3, "languages": ["en"]}, {"en": np.ones((2, 2))}, np.ones(2),
    ...                {"en": 0.1}, {"en": vocab}, {})
    [('n_topics', 'is 3 in model.json but doc_topic_prior has shape (2,)')]
    """
    problems = _topic_count_problems(info, doc_topic_prior)
    n_topics = doc_topic_prior.shape[0] if doc_topic_prior.ndim == 1 else None
    found = values_problem(doc_topic_prior, lower=0.0, strict=True)
    if found:
        problems.append(("doc_topic_prior", found))
    sizes = info.get("vocab_sizes")
    if sizes is not None and (not isinstance(sizes, Mapping) or set(sizes) != set(topic_word_var)):
        problems.append(("vocab_sizes", f"names languages {sorted(sizes) if isinstance(sizes, Mapping) else sizes!r}"
                                        f" but the model has {sorted(topic_word_var)}"))
        sizes = None
    extra = sorted(set(topic_word_prior) - set(topic_word_var))
    if extra:
        problems.append(("topic_word_prior", f"names languages {extra} the model does not have"))
    for lang, lam in topic_word_var.items():
        problems.extend(_language_problems(lang, lam, n_topics, None if sizes is None else sizes[lang],
                                           topic_word_prior.get(lang), vocabularies.get(lang)))
    n_terms = next(iter(topic_word_var.values())).shape[-1] if len(topic_word_var) == 1 else None
    problems.extend(_sampler_problems(sampler_state, n_terms, n_topics))
    return problems


def _topic_count_problems(info: Mapping[str, Any], doc_topic_prior: np.ndarray) -> list[Problem]:
    """``n_topics`` and ``topic_names`` of model.json against alpha's shape."""
    problems: list[Problem] = []
    if doc_topic_prior.ndim != 1 or doc_topic_prior.shape[0] < 1:
        problems.append(("doc_topic_prior", f"has shape {doc_topic_prior.shape}, expected (n_topics,)"))
        return problems
    n_topics = doc_topic_prior.shape[0]
    recorded = info.get("n_topics")
    if recorded is not None and (isinstance(recorded, bool) or recorded != n_topics):
        problems.append(("n_topics", f"is {recorded!r} in model.json but doc_topic_prior has shape "
                                     f"{doc_topic_prior.shape}"))
    names = info.get("topic_names")
    if names and (not isinstance(names, list) or len(names) != n_topics
                  or not all(name is None or isinstance(name, str) for name in names)):
        count = len(names) if isinstance(names, list) else names
        problems.append(("topic_names", f"lists {count!r} names for {n_topics} topics, expected one string "
                                        "(or null) per topic"))
    return problems


def _language_problems(lang: str, lam: np.ndarray, n_topics: int | None, recorded_terms: Any, prior: Any,
                       vocabulary: Vocabulary | None) -> list[Problem]:
    """lambda, eta and the vocabulary of one language against each other and model.json."""
    field = f"topic_word_var/{lang}"
    if lam.ndim != 2 or (n_topics is not None and lam.shape[0] != n_topics):
        return [(field, f"has shape {lam.shape}, expected ({n_topics}, n_terms)")]
    problems: list[Problem] = []
    if recorded_terms is not None and recorded_terms != lam.shape[1]:
        problems.append((f"vocab_sizes/{lang}", f"is {recorded_terms!r} in model.json but {field} has shape "
                                                f"{lam.shape}"))
    found = values_problem(lam, lower=0.0, strict=True)
    if found:
        problems.append((field, found))
    if vocabulary is not None and len(vocabulary) != lam.shape[1]:
        problems.append((f"vocab/{lang}", f"has {len(vocabulary)} terms but {field} has {lam.shape[1]} columns"))
    if prior is None:
        problems.append((f"topic_word_prior/{lang}", "is missing"))
    elif not isinstance(prior, np.ndarray):
        number = isinstance(prior, (int, float)) and not isinstance(prior, bool)
        found = (values_problem(np.asarray(prior, dtype=np.float64), lower=0.0, strict=True) if number
                 else f"is {prior!r} in model.json, expected a number or \"matrix\"")
        if found:
            problems.append((f"topic_word_prior/{lang}", found))
    elif prior.shape != lam.shape:
        problems.append((f"topic_word_prior/{lang}", f"has shape {prior.shape}, expected {lam.shape} as {field}"))
    else:
        found = values_problem(prior, lower=0.0, strict=True)
        if found:
            problems.append((f"topic_word_prior/{lang}", found))
    return problems


def _sampler_problems(sampler_state: Mapping[str, np.ndarray], n_terms: int | None,
                      n_topics: int | None) -> list[Problem]:
    """Sampler arrays: finite numbers; the known ones also >= 0 and of the shapes the model's sizes give."""
    problems: list[Problem] = []
    for name, array in sampler_state.items():
        field = f"sampler_state/{name}"
        shape_of = _SAMPLER_SHAPES.get(name)
        if shape_of is not None and n_terms is not None and n_topics is not None:
            expected = shape_of(n_terms, n_topics)
            if array.shape != expected:
                problems.append((field, f"has shape {array.shape}, expected {expected} (n_terms {n_terms}, "
                                        f"n_topics {n_topics})"))
                continue
        # Counts are >= 0; of arrays this version does not know, only finiteness is certain.
        found = values_problem(array, lower=0.0 if shape_of is not None else -np.inf, strict=False)
        if found:
            problems.append((field, found))
    return problems
