"""Word-segmentation scores: token, boundary and word-type (lexicon) precision, recall and F1.

This module owns the scoring of unsupervised word segmentation against a gold segmentation, with the
standard definitions of Brent (1999) and Goldwater, Griffiths & Johnson (2009), and the two ways of
scoring several sampled segmentations per sentence that Zhai (2014, ch. 8) needs (pitfall P10 of
``shared/specs/unbuilt-families.md`` section 4). It must not import dask, zarr or logging, and it does
no I/O.

Glossary:
    sentence: an unsegmented string of characters (``"thedog"``)
    segmentation: the words of one sentence in order (``("the", "dog")``); their concatenation is the
        sentence
    span: the half-open character interval ``[start, end)`` a word covers in its sentence
    token P/R/F: a predicted word counts as correct when both its boundaries are gold boundaries and no
        gold boundary falls inside it, i.e. when its span is a gold span
    boundary P/R/F: over the internal boundaries only (the sentence's two ends are never counted,
        since every segmentation gets them right)
    type P/R/F (lexicon): over the sets of distinct words proposed and in the gold, corpus-wide
    sample-averaged: the counts of every sample of every sentence summed, as if the corpus were scored
        once per sample (what the reference code's evaluation of all ten samples does)
    max-probability sample: per sentence, the sample of highest log-probability (the first on a tie)

References
----------
Brent, M. R. (1999). An efficient, probabilistically sound algorithm for segmentation and word
    discovery. Machine Learning 34, 71-105.
Goldwater, S., Griffiths, T. L. & Johnson, M. (2009). A Bayesian framework for word segmentation:
    exploring the effects of context. Cognition 112, 21-54 (section 3.3, evaluation measures).
Zhai, K. (2014). Online adaptor grammars with hybrid inference. TACL 2, 465-476 (and the dissertation,
    chapter 8).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from topicflow.errors import InvalidParameterError

#: One segmentation: the words of a sentence, in order.
Segmentation = Sequence[str]


@dataclass(frozen=True, slots=True)
class PRF:
    """Precision, recall and F1 from match counts.

    Attributes
    ----------
    n_correct : int
        Predicted items that are also gold items.
    n_predicted, n_gold : int
    """

    n_correct: int
    n_predicted: int
    n_gold: int

    @property
    def precision(self) -> float:
        """``n_correct / n_predicted`` (0 when nothing is predicted)."""
        return self.n_correct / self.n_predicted if self.n_predicted else 0.0

    @property
    def recall(self) -> float:
        """``n_correct / n_gold`` (0 when the gold is empty)."""
        return self.n_correct / self.n_gold if self.n_gold else 0.0

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall, ``2 n_correct / (n_predicted + n_gold)``."""
        total = self.n_predicted + self.n_gold
        return 2.0 * self.n_correct / total if total else 0.0

    def merge(self, other: PRF) -> PRF:
        """Counts of both (associative and commutative; ``PRF(0, 0, 0)`` is the identity)."""
        return PRF(self.n_correct + other.n_correct, self.n_predicted + other.n_predicted,
                   self.n_gold + other.n_gold)

    def to_dict(self) -> dict[str, float]:
        """Precision, recall, F1 and the counts, for JSON."""
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1,
                "n_correct": self.n_correct, "n_predicted": self.n_predicted, "n_gold": self.n_gold}


@dataclass(frozen=True, slots=True)
class SegmentationScores:
    """Token, boundary and type scores of a segmented corpus.

    Attributes
    ----------
    token : PRF
        Word tokens whose span matches a gold span.
    boundary : PRF
        Internal word boundaries.
    type : PRF
        Distinct words (the lexicon).
    """

    token: PRF
    boundary: PRF
    type: PRF

    def to_dict(self) -> dict[str, dict[str, float]]:
        """The three score sets, for JSON."""
        return {"token": self.token.to_dict(), "boundary": self.boundary.to_dict(), "type": self.type.to_dict()}


def word_boundaries(words: Segmentation) -> list[int]:
    """Cumulative end positions of the words, ``[len(w0), len(w0)+len(w1), ...]`` (the last is the length).

    Examples
    --------
    >>> word_boundaries(["the", "dog"])
    [3, 6]
    """
    ends = []
    position = 0
    for word in words:
        position += len(word)
        ends.append(position)
    return ends


def words_from_boundaries(sentence: str, boundaries: Sequence[bool] | np.ndarray) -> list[str]:
    """Split ``sentence`` where ``boundaries[i]`` is true (a boundary after character ``i``).

    Parameters
    ----------
    sentence : str
        Unsegmented characters, of length n.
    boundaries : sequence of bool, length n - 1
        ``boundaries[i]``: a word ends after ``sentence[i]`` (the final end is implied).

    Returns
    -------
    list of str

    Raises
    ------
    InvalidParameterError
        ``boundaries`` does not have ``len(sentence) - 1`` entries.

    Examples
    --------
    >>> words_from_boundaries("thedog", [0, 0, 1, 0, 0])
    ['the', 'dog']
    """
    flags = np.asarray(boundaries, dtype=bool)
    if flags.shape != (max(len(sentence) - 1, 0),):
        raise InvalidParameterError(
            f"boundaries of {sentence!r} must have {max(len(sentence) - 1, 0)} entries, got shape {flags.shape!r}.")
    cuts = [0, *(np.flatnonzero(flags) + 1).tolist(), len(sentence)]
    return [sentence[a:b] for a, b in zip(cuts, cuts[1:]) if b > a]


def _check_pair(gold: Segmentation, predicted: Segmentation, index: int) -> None:
    """Both segmentations must spell the same sentence with nonempty words."""
    gold_text, predicted_text = "".join(gold), "".join(predicted)
    if gold_text != predicted_text:
        raise InvalidParameterError(
            f"sentence {index}: the predicted words {list(predicted)!r} spell {predicted_text!r}, but the gold "
            f"words spell {gold_text!r}; a segmentation must keep the sentence's characters.")
    if any(not word for word in (*gold, *predicted)):
        raise InvalidParameterError(f"sentence {index}: a segmentation holds an empty word.")


def sentence_counts(gold: Segmentation, predicted: Segmentation) -> tuple[PRF, PRF]:
    """Token and boundary counts of one sentence (a merge walk over both boundary lists).

    Parameters
    ----------
    gold, predicted : sequence of str
        Two segmentations of the same sentence (no empty words).

    Returns
    -------
    token : PRF
        Word tokens whose span matches a gold span.
    boundary : PRF
        Internal boundaries.

    Notes
    -----
    A predicted word ``[s, e)`` is correct when ``s`` and ``e`` are gold boundaries and no gold
    boundary lies strictly between them, which the walk checks by requiring that the previous
    predicted and gold boundaries coincided (equivalent to the set of gold spans containing it).
    """
    gold_ends, predicted_ends = word_boundaries(gold), word_boundaries(predicted)
    n_correct = 0
    n_boundaries = 0
    g = p = 0
    aligned = True  # the last boundary seen was shared (the sentence start is)
    while g < len(gold_ends) and p < len(predicted_ends):
        if gold_ends[g] == predicted_ends[p]:
            n_correct += aligned
            aligned = True
            n_boundaries += 1
            g += 1
            p += 1
        elif gold_ends[g] < predicted_ends[p]:
            aligned = False
            g += 1
        else:
            aligned = False
            p += 1
    # The sentence end is a shared boundary of both lists but not an internal one.
    boundary = PRF(n_boundaries - 1, len(predicted_ends) - 1, len(gold_ends) - 1)
    return PRF(n_correct, len(predicted_ends), len(gold_ends)), boundary


def segmentation_scores(gold: Sequence[Segmentation], predicted: Sequence[Segmentation]) -> SegmentationScores:
    """Token, boundary and type precision/recall/F1 of a segmented corpus against the gold.

    Parameters
    ----------
    gold, predicted : sequence of segmentations
        One segmentation per sentence, in the same order; each pair must spell the same sentence.

    Returns
    -------
    SegmentationScores
        Counts summed over sentences (micro-averaged), as Goldwater et al. (2009) report them.

    Raises
    ------
    InvalidParameterError
        The corpora differ in length, or a pair does not spell the same sentence.

    Examples
    --------
    >>> s = segmentation_scores([["the", "dog"]], [["the", "do", "g"]])
    >>> round(s.token.precision, 3), s.token.recall, s.boundary.precision, s.boundary.recall
    (0.333, 0.5, 0.5, 1.0)
    """
    if len(gold) != len(predicted):
        raise InvalidParameterError(
            f"{len(predicted)} predicted segmentations for {len(gold)} gold sentences; give one per sentence.")
    token = boundary = PRF(0, 0, 0)
    gold_types: set[str] = set()
    predicted_types: set[str] = set()
    for index, (gold_words, predicted_words) in enumerate(zip(gold, predicted)):
        _check_pair(gold_words, predicted_words, index)
        sentence_token, sentence_boundary = sentence_counts(gold_words, predicted_words)
        token, boundary = token.merge(sentence_token), boundary.merge(sentence_boundary)
        gold_types.update(gold_words)
        predicted_types.update(predicted_words)
    lexicon = PRF(len(gold_types & predicted_types), len(predicted_types), len(gold_types))
    return SegmentationScores(token, boundary, lexicon)


@dataclass(frozen=True, slots=True)
class SampledScores:
    """Scores of several sampled segmentations per sentence (Zhai 2014, pitfall P10).

    Attributes
    ----------
    sample_averaged : SegmentationScores
        Every sample of every sentence scored, counts summed (the corpus scored once per sample; the
        type scores pool the lexicon of all samples).
    max_probability : SegmentationScores
        Per sentence, the sample of highest log-probability scored.
    n_samples : int
        Samples per sentence (the largest, when they differ).
    """

    sample_averaged: SegmentationScores
    max_probability: SegmentationScores
    n_samples: int


def sampled_scores(gold: Sequence[Segmentation], samples: Sequence[Sequence[Segmentation]],
                   log_probs: Sequence[Sequence[float]]) -> SampledScores:
    """Sample-averaged scores and the scores of the max-probability sample.

    Parameters
    ----------
    gold : sequence of segmentations, length n_sentences
    samples : sequence of (sequence of segmentations), length n_sentences
        ``samples[d]`` holds one or more sampled segmentations of sentence ``d``.
    log_probs : sequence of (sequence of float), length n_sentences
        ``log_probs[d][j]``: log-probability of ``samples[d][j]`` under the model that drew it.

    Returns
    -------
    SampledScores

    Raises
    ------
    InvalidParameterError
        Lengths disagree, a sentence has no sample, or a sample does not spell its sentence.

    Examples
    --------
    >>> s = sampled_scores([["a", "b"]], [[["a", "b"], ["ab"]]], [[-2.0, -1.0]])
    >>> s.sample_averaged.token.f1, s.max_probability.token.f1
    (0.5714285714285714, 0.0)
    """
    if not len(gold) == len(samples) == len(log_probs):
        raise InvalidParameterError(
            f"gold, samples and log_probs must have one entry per sentence, got lengths "
            f"{len(gold)}, {len(samples)} and {len(log_probs)}.")
    flat_gold: list[Segmentation] = []
    flat_samples: list[Segmentation] = []
    best: list[Segmentation] = []
    for index, (sentence_samples, scores) in enumerate(zip(samples, log_probs)):
        if len(sentence_samples) == 0 or len(sentence_samples) != len(scores):
            raise InvalidParameterError(
                f"sentence {index}: {len(sentence_samples)} samples and {len(scores)} log-probabilities; give "
                "at least one sample and one log-probability per sample.")
        flat_gold.extend([gold[index]] * len(sentence_samples))
        flat_samples.extend(sentence_samples)
        best.append(sentence_samples[int(np.argmax(np.asarray(scores, dtype=np.float64)))])
    return SampledScores(segmentation_scores(flat_gold, flat_samples), segmentation_scores(gold, best),
                         max(len(s) for s in samples) if samples else 0)
