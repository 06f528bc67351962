"""Topic coherence by brute force, written from the papers (plain Python and NumPy, no topicflow code).

Probabilities are fractions of *units*: documents for UMass (Mimno et al. 2011), sliding windows for
UCI (Newman et al. 2010), NPMI (Bouma 2009) and C_V (Röder et al. 2015). A unit "holds" a word when the
word is in the unit's word set. The smoothing constant, the window enumeration and the two set rules
are gensim 4.4's choices, which topicflow follows (docs/evaluation.md):

* windows of a text of n tokens: ``text[k:k + w]`` for ``k = 0 .. n - w``, or the whole text when
  ``n <= w`` (an empty text is one empty window);
* ``sets="exact"``: a window's words are ``set(window)`` (the papers);
  ``sets="gensim"``: the first window's words are ``set(window)``, and each slide removes the token
  that left and adds the token that entered, even if the token that left is still in the window.
"""
from __future__ import annotations

import math
from itertools import combinations

import numpy as np

EPS = 1e-12


def windows_of(text: list[str], width: int) -> list[list[str]]:
    if len(text) <= width:
        return [list(text)]
    return [text[k:k + width] for k in range(len(text) - width + 1)]


def window_sets(text: list[str], width: int, sets: str) -> list[set[str]]:
    wins = windows_of(text, width)
    if sets == "exact":
        return [set(w) for w in wins]
    out = [set(wins[0])]
    for k in range(1, len(wins)):
        current = set(out[-1])
        current.discard(wins[k - 1][0])
        current.add(wins[k][-1])
        out.append(current)
    return out


def units(texts: list[list[str]], width: int | None, sets: str = "gensim") -> list[set[str]]:
    """Word sets of the documents (``width`` None) or of every sliding window."""
    if width is None:
        return [set(t) for t in texts]
    return [s for t in texts for s in window_sets(t, width, sets)]


def probabilities(unit_sets: list[set[str]], words: list[str]) -> tuple[dict[str, float], dict[tuple[str, str], float]]:
    n = len(unit_sets)
    single = {w: sum(w in u for u in unit_sets) / n for w in words}
    joint = {(a, b): sum(a in u and b in u for u in unit_sets) / n for a in words for b in words}
    return single, joint


def umass(topic: list[str], unit_sets: list[set[str]]) -> float:
    """Mimno et al.: sum over m > l of log((D(v_m, v_l) + smoothing) / D(v_l)); gensim: mean, eps on P."""
    p, pj = probabilities(unit_sets, topic)
    scores = [math.log((pj[topic[m], topic[l]] + EPS) / p[topic[l]]) if p[topic[l]] > 0 else 0.0
              for m in range(1, len(topic)) for l in range(m)]
    return float(np.mean(scores)) if scores else math.nan


def pmi(a: str, b: str, p: dict[str, float], pj: dict[tuple[str, str], float]) -> float:
    return math.log((pj[a, b] + EPS) / (p[a] * p[b]))


def npmi(a: str, b: str, p: dict[str, float], pj: dict[tuple[str, str], float]) -> float:
    return pmi(a, b, p, pj) / -math.log(pj[a, b] + EPS)


def uci(topic: list[str], unit_sets: list[set[str]]) -> float:
    """Newman et al.: mean PMI over the topic's word pairs."""
    p, pj = probabilities(unit_sets, topic)
    scores = [pmi(a, b, p, pj) for a, b in combinations(topic, 2)]
    return float(np.mean(scores)) if scores else math.nan


def npmi_coherence(topic: list[str], unit_sets: list[set[str]]) -> float:
    """Mean NPMI over the topic's word pairs."""
    p, pj = probabilities(unit_sets, topic)
    scores = [npmi(a, b, p, pj) for a, b in combinations(topic, 2)]
    return float(np.mean(scores)) if scores else math.nan


def cv(topic: list[str], unit_sets: list[set[str]]) -> float:
    """Röder et al.: segmentation one-set, NPMI context vectors (gamma 1), cosine, mean."""
    p, pj = probabilities(unit_sets, topic)
    vector = {w: np.array([npmi(w, v, p, pj) for v in topic]) for w in topic}
    whole = sum(vector.values())
    scores = [float(vector[w] @ whole / (np.linalg.norm(vector[w]) * np.linalg.norm(whole))) for w in topic]
    return float(np.mean(scores))


MEASURES = {"u_mass": umass, "c_uci": uci, "c_npmi": npmi_coherence, "c_v": cv}
DEFAULT_WINDOW = {"u_mass": None, "c_uci": 10, "c_npmi": 10, "c_v": 110}


def coherence(topics: list[list[str]], texts: list[list[str]], measure: str, window: int | None = None,
              sets: str = "gensim") -> list[float]:
    """Each topic's coherence; topic words absent from every text are left out first (as gensim does)."""
    width = DEFAULT_WINDOW[measure] if window is None else window
    unit_sets = units(texts, width, sets)
    seen = {w for t in texts for w in t}
    return [MEASURES[measure]([w for w in topic if w in seen], unit_sets) for topic in topics]
