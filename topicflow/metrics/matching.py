"""Cross-language document matching: rank the other side of aligned pairs by topic divergence.

This module owns the evaluation of a polylingual topic model by finding translations (Mimno et al.
2009, "Polylingual topic models", the document-matching experiment): for held-out aligned pairs,
theta is inferred from each language's side alone; every query document (one language) ranks every
candidate (the other language) by a divergence of their topic vectors, and the score is where its own
partner lands: precision at 1 (the partner ranks first) and the mean reciprocal rank. It must not
import dask, zarr or logging, and it does no I/O.

Glossary:
    queries ((n_pairs, n_topics)), candidates ((n_pairs, n_topics)): rows are topic distributions;
        row i of ``queries`` and row i of ``candidates`` are the two sides of pair i
    Jensen-Shannon divergence: ``1/2 KL(p || m) + 1/2 KL(q || m)``, ``m = (p + q) / 2``, in nats, in
        [0, log 2]
    Hellinger distance: ``sqrt(1/2 sum_k (sqrt p_k - sqrt q_k)^2)``
    rank of pair i: ``1 + #{j != i : d(q_i, c_j) <= d(q_i, c_i)}`` (a tie counts against the partner)
    Wilson interval: the score interval of a binomial proportion, ``(p + z^2/2n +- z sqrt(p(1-p)/n +
        z^2/4n^2)) / (1 + z^2/n)``; it stays inside [0, 1] and is not degenerate at p = 1

References
----------
Wilson (1927). Probable inference, the law of succession, and statistical inference. JASA 22.

Mimno, Wallach, Naradowsky, Smith and McCallum (2009). Polylingual topic models. EMNLP.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from topicflow._typing import FloatArray, IntArray
from topicflow.errors import InvalidParameterError

#: Divergences :func:`pairwise_divergence` computes.
MatchingDivergence = Literal["jensen-shannon", "hellinger"]


def _distributions(name: str, values: Any) -> FloatArray:
    rows = np.asarray(values, dtype=np.float64)
    if rows.ndim != 2 or rows.shape[0] == 0 or rows.shape[1] == 0:
        raise InvalidParameterError(f"{name} must be 2-d (n_docs, n_topics) with both >= 1, got shape {rows.shape!r}")
    if not np.all(np.isfinite(rows)) or np.any(rows < 0):
        raise InvalidParameterError(f"{name} must hold finite nonnegative topic proportions")
    sums = rows.sum(axis=1, keepdims=True)
    if np.any(sums <= 0):
        raise InvalidParameterError(f"{name} has a row of zeros (row {int(np.flatnonzero(sums.ravel() <= 0)[0])})")
    return rows / sums


def _xlogy_rows(p: FloatArray, m: FloatArray) -> FloatArray:
    """``sum_k p_k log(p_k / m_k)`` with 0 log 0 = 0 (``p_k > 0`` implies ``m_k > 0`` here)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(p > 0, p * (np.log(np.where(p > 0, p, 1.0)) - np.log(np.where(m > 0, m, 1.0))), 0.0)
    return terms.sum(axis=-1)


def pairwise_divergence(queries: Any, candidates: Any, *,
                        divergence: MatchingDivergence = "jensen-shannon") -> FloatArray:
    """Divergence between every query and every candidate topic distribution.

    Parameters
    ----------
    queries : array-like of shape (n_queries, n_topics)
        Topic proportions (rows are normalized here).
    candidates : array-like of shape (n_candidates, n_topics)
    divergence : {"jensen-shannon", "hellinger"}, default "jensen-shannon"
        Jensen-Shannon divergence in nats (Mimno et al.'s choice) or the Hellinger distance.

    Returns
    -------
    ndarray of shape (n_queries, n_candidates), float64
        ``out[i, j] = d(queries[i], candidates[j])``, symmetric in its arguments and 0 for equal rows.

    Raises
    ------
    InvalidParameterError
        Not 2-d, different numbers of topics, negative or non-finite values, a zero row, or an
        unknown divergence.

    Examples
    --------
    >>> d = pairwise_divergence([[1.0, 0.0]], [[1.0, 0.0], [0.0, 1.0]])
    >>> [round(float(x), 4) for x in d[0]]
    [0.0, 0.6931]
    """
    q, c = _distributions("queries", queries), _distributions("candidates", candidates)
    if q.shape[1] != c.shape[1]:
        raise InvalidParameterError(f"queries have {q.shape[1]} topics but candidates {c.shape[1]}")
    if divergence == "hellinger":
        sq, sc = np.sqrt(q), np.sqrt(c)
        squared = np.maximum(0.0, 1.0 - sq @ sc.T)  # 1/2 sum (sqrt p - sqrt q)^2 = 1 - sum sqrt(p q)
        return np.sqrt(squared)
    if divergence != "jensen-shannon":
        raise InvalidParameterError(f"divergence must be 'jensen-shannon' or 'hellinger', got {divergence!r}")
    out = np.empty((q.shape[0], c.shape[0]), dtype=np.float64)
    for i in range(q.shape[0]):  # one query at a time keeps memory at O(n_candidates * n_topics)
        m = 0.5 * (q[i][None, :] + c)
        out[i] = 0.5 * _xlogy_rows(np.broadcast_to(q[i], c.shape), m) + 0.5 * _xlogy_rows(c, m)
    return np.maximum(out, 0.0)


def partner_ranks(distances: Any) -> IntArray:
    """Rank of each query's own partner among all candidates (1 = closest).

    Parameters
    ----------
    distances : array-like of shape (n_pairs, n_pairs)
        ``distances[i, j]`` between query i and candidate j; candidate i is query i's partner.

    Returns
    -------
    ndarray of shape (n_pairs,), int64
        ``1 + #{j != i : distances[i, j] <= distances[i, i]}``: a candidate tied with the partner
        ranks ahead of it, so ties never flatter the score.

    Raises
    ------
    InvalidParameterError
        Not a square 2-d array, or non-finite values.

    Examples
    --------
    >>> partner_ranks([[0.1, 0.5], [0.2, 0.3]]).tolist()
    [1, 2]
    """
    d = np.asarray(distances, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != d.shape[1] or d.shape[0] == 0:
        raise InvalidParameterError(f"distances must be a square (n_pairs, n_pairs) array, got shape {d.shape!r}")
    if not np.all(np.isfinite(d)):
        raise InvalidParameterError("distances must be finite")
    own = np.diag(d)
    at_most = (d <= own[:, None]).sum(axis=1)  # counts the partner itself once
    return at_most.astype(np.int64)


@dataclass(frozen=True, slots=True)
class MatchingScores:
    """How well topic vectors find each document's translation.

    Attributes
    ----------
    precision_at_1 : float
        Fraction of queries whose partner ranks first.
    mean_reciprocal_rank : float
        Mean of 1 / rank.
    n_pairs : int
    divergence : str
    ranks : tuple of int
        Every query's partner rank, in pair order.
    """

    precision_at_1: float
    mean_reciprocal_rank: float
    n_pairs: int
    divergence: str
    ranks: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (without the per-pair ranks).

        Returns
        -------
        dict
        """
        return {"precision_at_1": self.precision_at_1, "mean_reciprocal_rank": self.mean_reciprocal_rank,
                "n_pairs": self.n_pairs, "divergence": self.divergence}


def matching_scores(queries: Any, candidates: Any, *,
                    divergence: MatchingDivergence = "jensen-shannon") -> MatchingScores:
    """Precision at 1 and mean reciprocal rank of finding each query's partner by topic divergence.

    Parameters
    ----------
    queries : array-like of shape (n_pairs, n_topics)
        Topic proportions of one side of each pair (e.g. theta inferred from the English side).
    candidates : array-like of shape (n_pairs, n_topics)
        The other side, row i the partner of query i (e.g. theta from the German side).
    divergence : {"jensen-shannon", "hellinger"}, default "jensen-shannon"

    Returns
    -------
    MatchingScores

    Raises
    ------
    InvalidParameterError
        Different numbers of pairs, or what :func:`pairwise_divergence` refuses.

    Notes
    -----
    NumPy equivalent (Jensen-Shannon)::

        d = [[js(q, c) for c in candidates] for q in queries]
        rank_i = 1 + sum(d[i][j] <= d[i][i] for j != i)
        p_at_1, mrr = mean(rank == 1), mean(1 / rank)

    Examples
    --------
    >>> s = matching_scores([[0.9, 0.1], [0.2, 0.8]], [[0.8, 0.2], [0.1, 0.9]])
    >>> s.precision_at_1, s.mean_reciprocal_rank
    (1.0, 1.0)
    """
    q, c = np.asarray(queries), np.asarray(candidates)
    if q.shape[:1] != c.shape[:1]:
        raise InvalidParameterError(
            f"queries and candidates must have one row per pair, got {q.shape[:1]} and {c.shape[:1]}")
    ranks = partner_ranks(pairwise_divergence(q, c, divergence=divergence))
    return MatchingScores(
        precision_at_1=float(np.mean(ranks == 1)),
        mean_reciprocal_rank=float(np.mean(1.0 / ranks)),
        n_pairs=int(ranks.shape[0]),
        divergence=divergence,
        ranks=tuple(int(r) for r in ranks),
    )


@dataclass(frozen=True, slots=True)
class MatchingIntervals:
    """Confidence intervals of matching scores over the held-out pairs.

    Attributes
    ----------
    precision_at_1 : tuple of float
        Wilson score interval ``(low, high)`` of the share of partners ranked first.
    mean_reciprocal_rank : tuple of float
        Normal interval ``mean +- z s / sqrt(n)`` of the mean reciprocal rank (``s`` the sample
        standard deviation of 1 / rank), clipped to [0, 1].
    level : float
        Coverage, e.g. 0.95.
    """

    precision_at_1: tuple[float, float]
    mean_reciprocal_rank: tuple[float, float]
    level: float


def wilson_interval(successes: int, n: int, *, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion.

    Parameters
    ----------
    successes : int
        Number of successes, ``0 <= successes <= n``.
    n : int
        Number of trials, at least 1.
    level : float, default 0.95
        Coverage, in (0, 1).

    Returns
    -------
    tuple of float
        ``(low, high)``, inside [0, 1].

    Raises
    ------
    InvalidParameterError
        ``n < 1``, ``successes`` outside ``[0, n]`` or ``level`` outside (0, 1).

    Examples
    --------
    >>> [round(x, 3) for x in wilson_interval(69, 89)]
    [0.678, 0.85]
    """
    if n < 1 or not 0 <= successes <= n:
        raise InvalidParameterError(f"need 0 <= successes <= n and n >= 1, got successes={successes}, n={n}")
    z = _normal_quantile(level)
    p = successes / n
    denominator = 1.0 + z * z / n
    centre = (p + z * z / (2 * n)) / denominator
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denominator
    return float(max(0.0, centre - half)), float(min(1.0, centre + half))


def _normal_quantile(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise InvalidParameterError(f"level must be in (0, 1), got {level!r}")
    # Imported here: a fit imports this module and must not load scipy.special (start-up, issue 22).
    from scipy.special import ndtri

    return float(ndtri(0.5 + level / 2.0))


def matching_intervals(ranks: Any, *, level: float = 0.95) -> MatchingIntervals:
    """Confidence intervals of precision at 1 and MRR from every query's partner rank.

    Parameters
    ----------
    ranks : array-like of int, shape (n_pairs,)
        Partner ranks (1 = first), e.g. ``MatchingScores.ranks``.
    level : float, default 0.95

    Returns
    -------
    MatchingIntervals

    Raises
    ------
    InvalidParameterError
        No ranks, a rank below 1, or ``level`` outside (0, 1).

    Notes
    -----
    The pairs are treated as independent draws; with 89 pairs and P@1 near 0.8 the Wilson interval
    is about +-0.09 wide. A single split and a single fit: variation over seeds and splits is not
    included.

    Examples
    --------
    >>> iv = matching_intervals([1, 1, 2, 1])
    >>> [round(x, 3) for x in iv.precision_at_1]
    [0.301, 0.954]
    """
    r = np.asarray(ranks, dtype=np.float64).ravel()
    if r.size == 0 or np.any(r < 1) or not np.all(np.isfinite(r)):
        raise InvalidParameterError("ranks must be a non-empty array of finite ranks >= 1")
    z = _normal_quantile(level)
    n = int(r.size)
    reciprocal = 1.0 / r
    mean = float(reciprocal.mean())
    half = z * float(reciprocal.std(ddof=1)) / np.sqrt(n) if n > 1 else float("inf")
    return MatchingIntervals(
        precision_at_1=wilson_interval(int(np.sum(r == 1)), n, level=level),
        mean_reciprocal_rank=(float(max(0.0, mean - half)), float(min(1.0, mean + half))),
        level=level,
    )
