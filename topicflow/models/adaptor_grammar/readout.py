"""Reading topics out of a fitted adaptor grammar: each adapted nonterminal's cached yields, ranked.

For the infinite-vocabulary LDA grammar ([Z] Table 8.1, section 8.4.2) every adapted ``Topic_i`` caches
whole words (``Topic_i -> Word -> Chars``), so its TNG, ranked, is the topic's word list: the grammar's
counterpart of a topic-word distribution, and what [Z] scores for coherence (the top 10 words of every
topic, Fig. 8.3) and plots over time (Fig. 8.4). The same readout lists the lexicon of a segmentation
grammar's ``Word``.

Pure math, no I/O. Two rankings (:data:`Ranking`):

- ``"stick"`` (default): the expected stick weight under q, E_q[pi_{c,i}] = E[pi'_i] prod_{j<i} E[1 - pi'_j]
  with pi'_j ~ Beta(nu1_j, nu2_j) independent ([Z] eq. 8.2's truncated stick-breaking), i.e.
  ``nu1 / (nu1 + nu2) * cumprod(nu2 / (nu1 + nu2))`` shifted by one: the probability that the adaptor
  reuses atom i, the analogue of infvoc's E_q[beta_{k,t}] (chapter 7, eq. 7.3);
- ``"count"``: the running expected count f~ of each atom (eq. 8.8); its order equals that of the
  bias-corrected count (one positive factor for all atoms).

Atoms of one adaptor with equal yields (possible when the grammar derives a string in two ways) are one
word: their weights are summed.

Glossary: nu1, nu2 (ν¹, ν²) the Beta parameters of the sticks pi' of one TNG; f~ (f̃) running expected
atom counts; yield: an atom's terminal string.
"""
from __future__ import annotations

from typing import Literal, Sequence

import numpy as np

from topicflow.models.adaptor_grammar.online import AGState

#: How the atoms of a TNG are ranked by :func:`atom_weights`.
Ranking = Literal["stick", "count"]
RANKINGS: tuple[Ranking, ...] = ("stick", "count")


def expected_sticks(nu1: np.ndarray, nu2: np.ndarray) -> np.ndarray:
    """Return E_q[pi_i] of truncated stick-breaking with independent Beta(nu1_i, nu2_i) sticks.

    Parameters
    ----------
    nu1, nu2 : ndarray of float64, shape (K,)
        Beta parameters of the sticks, in stick order.

    Returns
    -------
    ndarray of float64, shape (K,)
        E[pi'_i] prod_{j<i} E[1 - pi'_j]; their sum is at most 1 (the rest is the left-over stick, the
        weight of a new subtree).

    Notes
    -----
    NumPy equivalent: ``m = nu1 / (nu1 + nu2); m * np.concatenate([[1], np.cumprod(1 - m)[:-1]])``.
    """
    nu1 = np.asarray(nu1, np.float64)
    nu2 = np.asarray(nu2, np.float64)
    if nu1.shape != nu2.shape or nu1.ndim != 1:
        raise ValueError(f"nu1 and nu2 must be 1-d of one shape, got {nu1.shape} and {nu2.shape}")
    mean = nu1 / (nu1 + nu2)
    rest = np.concatenate([[1.0], np.cumprod(1.0 - mean)[:-1]]) if mean.size else mean
    return mean * rest


def atom_weights(state: AGState, position: int, by: Ranking = "stick") -> np.ndarray:
    """Return the weight of each atom of the ``position``-th adapted nonterminal's TNG, in stick order.

    Parameters
    ----------
    state : AGState
        A fitted state (nu1, nu2 recomputed by the last update).
    position : int
        Index into ``state.grammar.adapted``.
    by : {"stick", "count"}
        E_q[pi_i] or f~ (module docstring).

    Returns
    -------
    ndarray of float64, shape (K,)
    """
    if by == "stick":
        return expected_sticks(state.nu1[position], state.nu2[position])
    if by == "count":
        return np.asarray(state.tngs[position].f_tilde, np.float64).copy()
    raise ValueError(f"by must be one of {', '.join(RANKINGS)}, got {by!r}")


def top_yields(state: AGState, position: int, n: int, by: Ranking = "stick",
               sep: str = "") -> list[tuple[str, float]]:
    """Return the ``n`` heaviest distinct yields of one adapted nonterminal, heaviest first.

    Parameters
    ----------
    state : AGState
        A fitted state.
    position : int
        Index into ``state.grammar.adapted``.
    n : int
        How many (fewer when the TNG holds fewer distinct yields).
    by : {"stick", "count"}
        The ranking.
    sep : str, default ""
        Joins a yield's terminals (``""``: characters spell a word).

    Returns
    -------
    list of (str, float)
        Yield and weight (the summed weight of the atoms with that yield). Ties keep stick order.
    """
    weights = atom_weights(state, position, by)
    terminals = state.grammar.terminals
    total: dict[str, float] = {}
    for atom, w in zip(state.tngs[position].atoms, weights.tolist()):
        word = sep.join(terminals[t] for t in atom.yield_ids)
        total[word] = total.get(word, 0.0) + float(w)
    ranked = sorted(total.items(), key=lambda item: -item[1])  # stable: ties keep first-appearance order
    return ranked[:max(int(n), 0)]


def topic_words(state: AGState, n: int = 10, nonterminals: Sequence[str] | None = None, by: Ranking = "stick",
                sep: str = "") -> dict[str, list[tuple[str, float]]]:
    """Return each adapted nonterminal's top yields: the topics of the ``infvoc-lda`` grammar.

    Parameters
    ----------
    state : AGState
        A fitted state.
    n : int, default 10
        Words per topic.
    nonterminals : sequence of str, optional
        Which adapted nonterminals, in this order. Default: every adapted nonterminal in the grammar's
        order of first appearance (``Topic1 .. TopicK`` for ``infvoc-lda``).
    by : {"stick", "count"}
        The ranking.
    sep : str, default ""
        Joins a yield's terminals.

    Returns
    -------
    dict of str to list of (str, float)
        Nonterminal name -> its top yields with their weights.

    Raises
    ------
    ValueError
        If a name is not an adapted nonterminal, or ``by`` is unknown.

    Examples
    --------
    >>> from topicflow.models.adaptor_grammar import load_grammar, initial_state
    >>> grammar = load_grammar("infvoc-lda", D=1, K=2).bind(["_1", "a"])
    >>> topic_words(initial_state(grammar), 3)  # empty TNGs before any fit
    {'Topic1': [], 'Topic2': []}
    """
    grammar = state.grammar
    adapted = {grammar.nonterminals[int(c)]: m for m, c in enumerate(grammar.adapted)}
    if nonterminals is None:
        names = [name for name in grammar.nonterminals if name in adapted]
    else:
        names = list(nonterminals)
        unknown = [name for name in names if name not in adapted]
        if unknown:
            raise ValueError(f"{', '.join(map(repr, unknown))}: not an adapted nonterminal of the grammar; "
                             f"choose among {', '.join(adapted)}")
    return {name: top_yields(state, adapted[name], n, by, sep) for name in names}
