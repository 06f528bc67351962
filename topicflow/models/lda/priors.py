"""Informed topic-word priors from seed words (Mr. LDA's LIWC-style informed priors).

This module owns the construction of an ``(n_topics, n_terms)`` topic-word prior eta from lists of
seed words, and the parser of the seed-word text format. Reading the file is the caller's job (this
module gets its text), and it must not import dask, zarr or logging.

Glossary:
    topic_word_prior (eta, (n_topics, n_terms)): Dirichlet prior of each topic's word distribution
    seed topic: a named list of words (with weights) that one topic should favour
    base: the prior of every (topic, term) pair not touched by a seed list
    seed_strength: the prior of a seed word in its own topic (times the word's weight)
    off_topic: optionally, the prior of a seed word in every topic that does not list it (a
        "push-out" that Mr. LDA does not have; by default such pairs keep ``base``)

The defaults are Mr. LDA's construction (Zhai et al. 2012, section 4.2; Zhai 2014, dissertation
section 3.3.1, the LIWC prior): ``eta[k, v] = 10`` if word v is in category k, ``0.01`` otherwise,
i.e. ``seed_strength = 10`` (:data:`PAPER_SEED_STRENGTH`), ``base = 0.01`` (the default symmetric
topic-word prior) and no push-out.

References
----------
Zhai, Boyd-Graber, Asadi and Alkhouja (2012). Mr. LDA: a flexible large scale topic modeling package
using variational inference in MapReduce. WWW. (Section 4.2, informed priors.)
Zhai (2014). Fast and scalable inference for topic models and adaptor grammars, PhD dissertation,
University of Maryland; chapter 3 (section 3.3.1 defines the prior, section 3.4.1 uses it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.models.common.validation import parse_positive_float

#: Prior of a seed word in its own topic in Mr. LDA's informed prior (eta = 10 for LIWC words).
PAPER_SEED_STRENGTH = 10.0
#: Prior of every other (topic, word) pair in Mr. LDA's informed prior (eta = 0.01 "otherwise").
PAPER_BASE = 0.01
#: The off-topic prior topicflow used before issue 18 (a push-out the paper does not have); give it
#: as ``off_topic`` to rebuild the prior of a model fitted then.
LEGACY_OFF_TOPIC = 1e-3
#: The seed strength topicflow used before issue 18.
LEGACY_SEED_STRENGTH = 1.0


@dataclass(frozen=True, slots=True)
class SeedTopic:
    """A named topic with the words it should favour.

    Attributes
    ----------
    name : str
        Topic name (non-empty, no whitespace).
    words : tuple of str
        Seed words, distinct.
    weights : tuple of float
        One positive weight per word (1.0 when the file gives none).

    Raises
    ------
    InvalidParameterError
        Empty name or word list, mismatched lengths, duplicate words, non-positive weights.

    Examples
    --------
    >>> SeedTopic("sports", ("ball", "goal"), (1.0, 2.0)).words
    ('ball', 'goal')
    """

    name: str
    words: tuple[str, ...]
    weights: tuple[float, ...]

    def __post_init__(self) -> None:
        if not self.name or any(ch.isspace() for ch in self.name):
            raise InvalidParameterError(f"seed topic name must be non-empty without whitespace, got {self.name!r}")
        words, weights = tuple(self.words), tuple(float(w) for w in self.weights)
        if not words or len(words) != len(weights):
            raise InvalidParameterError(
                f"seed topic {self.name!r} needs at least one word and one weight per word, "
                f"got {len(words)} words and {len(weights)} weights"
            )
        if len(set(words)) != len(words):
            dupes = sorted({w for w in words if words.count(w) > 1})
            raise InvalidParameterError(f"seed topic {self.name!r} lists {dupes!r} more than once")
        bad = [(w, x) for w, x in zip(words, weights) if not (math.isfinite(x) and x > 0)]
        if bad:
            raise InvalidParameterError(f"seed topic {self.name!r}: weights must be finite and > 0, got {bad!r}")
        object.__setattr__(self, "words", words)
        object.__setattr__(self, "weights", weights)


def informed_prior(
    vocab_index: Mapping[str, int],
    n_terms: int,
    n_topics: int,
    seeds: Sequence[SeedTopic],
    *,
    base: float,
    seed_strength: float = PAPER_SEED_STRENGTH,
    off_topic: float | None = None,
) -> tuple[FloatArray, list[str | None], dict[str, list[str]]]:
    """Topic-word prior eta in which the first ``len(seeds)`` topics favour their seed words.

    Parameters
    ----------
    vocab_index : mapping of str to int
        Term to term id, ids in ``[0, n_terms)``.
    n_terms : int
    n_topics : int
        At least ``len(seeds)``; topics after the seeded ones are free.
    seeds : sequence of SeedTopic
        Topic k (for k < len(seeds)) is seeded by ``seeds[k]``; names must be distinct.
    base : float
        Prior of every (topic, term) pair that no seed list touches (the usual symmetric eta;
        Mr. LDA's 0.01).
    seed_strength : float, default 10.0
        Multiplier of the seed weights: a seed word of weight 1 gets ``seed_strength`` in its topic
        (Mr. LDA's 10).
    off_topic : float, optional
        If given, the prior of a seed word in every topic (seeded or free) whose own list does not
        contain it: a push-out that keeps other topics from using seed words. By default (None,
        Mr. LDA's construction) those pairs keep ``base``.

    Returns
    -------
    prior : ndarray of shape (n_topics, n_terms), float64
        ``prior[k, w] = seed_strength * weight`` if w is a seed word of topic k; else ``off_topic``
        if that is given and w is a seed word of any topic; else ``base``. A word seeded in several
        topics gets its own weight in each of them.
    topic_names : list of (str or None), length n_topics
        Seed names, then ``None`` for free topics.
    unknown_words : dict of str to list of str
        Per seed topic name, the seed words missing from ``vocab_index`` (ignored in the prior);
        only topics with missing words appear.

    Raises
    ------
    InvalidParameterError
        More seeds than topics, duplicate topic names, a non-positive value, or a term id outside
        ``[0, n_terms)``.

    Notes
    -----
    Mr. LDA (Zhai et al. 2012; Zhai 2014, section 3.3.1) builds ``eta[k, v] = 10`` if v is in the
    LIWC category of topic k and ``0.01`` otherwise: the defaults with ``base=0.01``. NumPy
    equivalent::

        prior = np.full((n_topics, n_terms), base)
        if off_topic is not None:
            prior[:, all_seed_ids] = off_topic
        for k, seed in enumerate(seeds):
            prior[k, ids(seed.words)] = seed_strength * np.array(seed.weights)

    Examples
    --------
    >>> prior, names, unknown = informed_prior({"a": 0, "b": 1, "c": 2}, 3, 2,
    ...                                        [SeedTopic("t", ("a", "zz"), (1.0, 1.0))], base=0.01)
    >>> prior.tolist(), names, unknown
    ([[10.0, 0.01, 0.01], [0.01, 0.01, 0.01]], ['t', None], {'t': ['zz']})
    >>> informed_prior({"a": 0, "b": 1}, 2, 2, [SeedTopic("t", ("a",), (2.0,))], base=0.1,
    ...                seed_strength=1.0, off_topic=1e-3)[0].tolist()
    [[2.0, 0.1], [0.001, 0.1]]
    """
    base = parse_positive_float("base", base)
    seed_strength = parse_positive_float("seed_strength", seed_strength)
    if off_topic is not None:
        off_topic = parse_positive_float("off_topic", off_topic)
    if len(seeds) > n_topics:
        raise InvalidParameterError(f"{len(seeds)} seed topics do not fit n_topics={n_topics}; raise n_topics")
    names = [seed.name for seed in seeds]
    if len(set(names)) != len(names):
        raise InvalidParameterError(f"seed topic names must be distinct, got {names!r}")
    prior = np.full((n_topics, n_terms), base, dtype=np.float64)
    unknown: dict[str, list[str]] = {}
    seeded: list[tuple[int, list[int], list[float]]] = []
    for k, seed in enumerate(seeds):
        ids, weights = [], []
        for word, weight in zip(seed.words, seed.weights):
            if word not in vocab_index:
                unknown.setdefault(seed.name, []).append(word)
                continue
            term_id = int(vocab_index[word])
            if not 0 <= term_id < n_terms:
                raise InvalidParameterError(f"term {word!r} has id {term_id}, outside [0, {n_terms})")
            ids.append(term_id)
            weights.append(seed_strength * weight)
        seeded.append((k, ids, weights))
    if off_topic is not None:
        for _, ids, _ in seeded:
            prior[:, ids] = off_topic
    for k, ids, weights in seeded:
        prior[k, ids] = weights
    topic_names: list[str | None] = [*names, *([None] * (n_topics - len(seeds)))]
    return prior, topic_names, unknown


def seed_words_from_labels(
    label_doc_freq: np.ndarray,
    label_docs: Sequence[int],
    labels: Sequence[str],
    terms: Sequence[str],
    *,
    per_label: int = 10,
    min_label_df: int = 3,
) -> list[SeedTopic]:
    """Choose seed words per label from labeled training documents (a documented, reproducible rule).

    Each word goes to the one label where it is most over-represented, and each label keeps its
    ``per_label`` best words by document-frequency keyness::

        keyness[l, w] = df[l, w] * log((df[l, w] / n_l) / (df[w] / n))

    where ``df[l, w]`` is the number of documents of label l containing w, ``n_l`` the documents of
    label l, ``df[w]`` and ``n`` the same over all labels. A word qualifies for label l only if
    ``df[l, w] >= min_label_df`` and l is the label of its highest keyness (ties: the first label);
    words with non-positive keyness never qualify. Within a label, ties go to the lower term id.

    Parameters
    ----------
    label_doc_freq : ndarray of shape (n_labels, n_terms), int
        ``df[l, w]``, counted on training documents only.
    label_docs : sequence of int, length n_labels
        Documents per label, ``n_l`` (positive).
    labels : sequence of str, length n_labels
        Label names (they become the seed topic names; whitespace is replaced by ``_``).
    terms : sequence of str, length n_terms
        The vocabulary, by term id.
    per_label : int, default 10
        Words per label at most.
    min_label_df : int, default 3
        Minimum documents of the label that contain a chosen word.

    Returns
    -------
    list of SeedTopic
        One per label that has at least one qualifying word, in label order, each word with weight 1.

    Raises
    ------
    InvalidParameterError
        Shapes that do not agree, a label without documents, or ``per_label < 1``.

    Examples
    --------
    >>> df = np.array([[3, 0, 2], [0, 3, 2]])
    >>> [(s.name, s.words) for s in seed_words_from_labels(df, [3, 3], ["x", "y"], ["a", "b", "c"],
    ...                                                     min_label_df=1)]
    [('x', ('a',)), ('y', ('b',))]
    """
    df = np.asarray(label_doc_freq, dtype=np.float64)
    n_label = np.asarray(label_docs, dtype=np.float64)
    if df.ndim != 2 or df.shape != (len(labels), len(terms)) or n_label.shape != (len(labels),):
        raise InvalidParameterError(
            f"label_doc_freq must be (n_labels, n_terms) = ({len(labels)}, {len(terms)}) with one document count "
            f"per label, got {df.shape} and {n_label.shape}")
    if np.any(n_label <= 0):
        raise InvalidParameterError(f"every label needs documents, got counts {n_label.tolist()}")
    if per_label < 1:
        raise InvalidParameterError(f"per_label must be at least 1, got {per_label}")
    total_df = df.sum(axis=0)
    rate_all = total_df / n_label.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        keyness = np.where(df > 0, df * np.log((df / n_label[:, None]) / np.where(rate_all > 0, rate_all, 1.0)),
                           -np.inf)
    best_label = np.argmax(keyness, axis=0)
    seeds = []
    for l, name in enumerate(labels):
        ok = (best_label == l) & (df[l] >= min_label_df) & (keyness[l] > 0)
        ids = np.flatnonzero(ok)
        order = ids[np.lexsort((ids, -keyness[l, ids]))][:per_label]
        if order.size:
            clean = "_".join(str(name).split()) or f"label{l}"
            seeds.append(SeedTopic(clean, tuple(str(terms[i]) for i in order), (1.0,) * int(order.size)))
    return seeds


def _parse_token(token: str, source: str, line_no: int) -> tuple[str, float]:
    word, sep, weight_text = token.rpartition(":")
    if not sep:
        return token, 1.0
    try:
        weight = float(weight_text)
    except ValueError:
        weight = math.nan
    if not word or not (math.isfinite(weight) and weight > 0):
        raise InvalidParameterError(
            f"{source!r}, line {line_no}: {token!r} is not 'word' or 'word:weight' with a weight > 0",
            path=source, line=line_no,
        )
    return word, weight


def _parse_line(text: str, source: str, line_no: int) -> SeedTopic | None:
    content = text.split("#", 1)[0].strip()
    if not content:
        return None
    name, sep, rest = content.partition(":")
    name = name.strip()
    if not sep or not name or any(ch.isspace() for ch in name):
        raise InvalidParameterError(
            f"{source!r}, line {line_no}: expected 'topic_name: word word:weight ...', got {content!r}",
            path=source, line=line_no,
        )
    pairs = [_parse_token(token, source, line_no) for token in rest.split()]
    if not pairs:
        raise InvalidParameterError(f"{source!r}, line {line_no}: topic {name!r} lists no words",
                                    path=source, line=line_no)
    words = [w for w, _ in pairs]
    dupes = sorted({w for w in words if words.count(w) > 1})
    if dupes:
        raise InvalidParameterError(f"{source!r}, line {line_no}: topic {name!r} repeats {dupes!r}",
                                    path=source, line=line_no)
    return SeedTopic(name, tuple(words), tuple(x for _, x in pairs))


def parse_seed_words(text: str, source: str) -> list[SeedTopic]:
    """Parse a seed-word file into seed topics, in file order.

    Format: one topic per line, ``topic_name: word word:weight ...``. The name is everything before
    the first ``:`` (non-empty, no whitespace); the words follow, separated by whitespace; a word may
    carry a positive weight after its last ``:`` (default 1.0). Words are matched verbatim against the
    vocabulary, so write them as the tokenizer outputs them. ``#`` starts a comment that runs to the
    end of the line (so words cannot contain ``#``); blank lines are ignored. Each topic name appears
    once, and a word at most once per topic.

    Parameters
    ----------
    text : str
        File contents.
    source : str
        Where ``text`` came from (a path), used in error messages.

    Returns
    -------
    list of SeedTopic

    Raises
    ------
    InvalidParameterError
        A malformed line, a bad weight, a topic without words, a repeated word or topic name; the
        message and the ``path``/``line`` attributes name the source and the 1-based line.

    Examples
    --------
    >>> text = "# seeds\\nsports: ball goal:2.5\\nmoney: bank  # finance\\n"
    >>> [(s.name, s.words, s.weights) for s in parse_seed_words(text, "seeds.txt")]
    [('sports', ('ball', 'goal'), (1.0, 2.5)), ('money', ('bank',), (1.0,))]
    """
    topics: list[SeedTopic] = []
    first_line: dict[str, int] = {}
    for line_no, line in enumerate(text.splitlines(), start=1):
        topic = _parse_line(line, source, line_no)
        if topic is None:
            continue
        if topic.name in first_line:
            raise InvalidParameterError(
                f"{source!r}, line {line_no}: topic {topic.name!r} already defined on line "
                f"{first_line[topic.name]}; list each topic once",
                path=source, line=line_no,
            )
        first_line[topic.name] = line_no
        topics.append(topic)
    return topics
