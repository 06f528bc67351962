"""Hybrid E-step for LDA: Gibbs sampling of each document's topic assignments within variational inference.

This module owns the sampled E-step of Mimno, Hoffman and Blei (2012): with the topics held at
exp(E_q[log beta]), every document's token assignments z are drawn by collapsed Gibbs sampling (theta
integrated out), and the averaged assignments of the kept sweeps replace the dense phi of the
variational E-step. The result is the same mergeable :class:`~topicflow.models.lda.vb.stats.EStepStats`, so
merging, the batch and online M-steps and the alpha update are unchanged. The draw is sparse, in the
manner of SparseLDA (Yao et al. 2009): a token costs O(K_d + log K), with K_d the number of topics in
use in its document, instead of O(K).

Pure NumPy + numba; must not import dask, distributed, zarr or logging, and does no I/O.

Glossary (Mimno et al. 2012; Yao et al. 2009):
    exp_elog_topic_word (E, exp E_q[log beta], (n_topics, n_terms)): per language
    term_topic ((n_terms_total, n_topics)): E of all languages, transposed and stacked (PreparedTopics)
    doc_topic_prior (alpha, (n_topics,))
    doc_topic_counts (N_dk): tokens of document d assigned to topic k in the current sweep
    burn_in (B), samples (M): discarded and kept Gibbs sweeps after the initialization sweep
    mean_doc_topic_counts (Nbar_dk, (n_docs, n_topics)): N_dk averaged over the kept sweeps
    doc_topic_var (gamma, (n_docs, n_topics)): alpha + Nbar_d, the Dirichlet implied by the samples
    smoothing bucket s_w = sum_k alpha_k E_kw; document bucket r_w = sum_k N_dk^{-i} E_kw
    alpha_suff ((n_topics,)): sum_d E_q[log theta_dk]; ``alpha_stats="mean"``: under Dirichlet(gamma_d);
        ``"samples"``: averaged over the kept sweeps of psi(alpha_k + N_dk) - psi(sum_k alpha_k + N_d), the
        expectation under the hybrid's own q(theta_d | z_d) = Dirichlet(alpha + N_d(z_d))
    init: ``"progressive"`` (sweep 0 draws each token given the earlier ones) or ``"random"`` (sweep 0
        draws each token's topic uniformly, as Zhai 2014, section 4.2, "randomly initialize z_d")

References
----------
Mimno, Hoffman and Blei (2012). Sparse stochastic inference for latent Dirichlet allocation. ICML.
Yao, Mimno and McCallum (2009). Efficient methods for topic model inference on streaming document
collections. KDD.
Griffiths and Steyvers (2004). Finding scientific topics. PNAS 101, 5228-5235.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping

import numba
import numpy as np

from topicflow._typing import FloatArray, HybridAlphaStats, HybridInit, IntArray
from topicflow.errors import InvalidParameterError, NumericalError
from topicflow.models.common.blocks import DocBlock, expand_entries_into, present_terms
from topicflow.models.common.categorical import (
    SMOOTHING_CHUNK,
    add_sorted_count,
    draw_two_bucket,
    draw_uniform,
    remove_sorted_count,
    smoothing_chunk_sums,
)
from topicflow.models.common.dirichlet import dirichlet_entropy, dirichlet_expectation
from topicflow.models.common.rng import STREAM_GIBBS, counter_key, uniform_from_key
from topicflow.models.common.special import digamma
from topicflow.models.common.validation import (
    parse_choice,
    parse_dirichlet_prior,
    parse_int,
)
from topicflow.models.lda.vb.estep import PHI_NORM_EPS
from topicflow.models.lda.vb.layout import (
    PreparedTopics,
    _split_stats,
    _stack_languages,
    as_block_mapping,
    as_prepared_topics,
    check_blocks,
)
from topicflow.models.lda.vb.stats import EStepStats

_MAX_SEED = 2**63
#: The choices of :class:`HybridParams` ``init`` and ``alpha_stats``, in the spelling of the CLI and model files.
HYBRID_INITS: tuple[HybridInit, ...] = ("progressive", "random")
HYBRID_ALPHA_STATS: tuple[HybridAlphaStats, ...] = ("mean", "samples")


@dataclass(frozen=True, slots=True)
class HybridParams:
    """Hyperparameters of the hybrid (Gibbs within VB) E-step.

    Attributes
    ----------
    n_topics : int
        Number of topics K, at least 1.
    burn_in : int, default 5
        Gibbs sweeps B discarded after the initialization sweep, at least 0.
    samples : int, default 5
        Gibbs sweeps M kept and averaged into the statistics, at least 1.
    seed : int, default 0
        Seed of the counter-based random numbers, in [0, 2**63).
    init : {"progressive", "random"}, default "progressive"
        How sweep 0 assigns the tokens: ``progressive`` draws each token from its conditional given the
        tokens before it (a sequential start, as SparseLDA's streaming inference); ``random`` draws each
        token's topic uniformly from the K topics, as Zhai (2014, section 4.2) prints it ("we randomly
        initialize a topic configuration z_d"). B burn-in and M kept sweeps follow either way.
    alpha_stats : {"mean", "samples"}, default "mean"
        How ``alpha_suff`` (the statistics of the alpha update) is built. ``mean``: E[log theta_d] under
        Dirichlet(alpha + Nbar_d), the mean counts of the kept sweeps. ``samples``: the average over the
        kept sweeps of E[log theta_d] under Dirichlet(alpha + N_d), the conditional of theta given each
        sample, i.e. the expectation under the hybrid's own q(z_d, theta_d).

    Raises
    ------
    InvalidParameterError
        A field is outside its allowed values.

    Examples
    --------
    >>> HybridParams(n_topics=10).samples
    5
    """

    n_topics: int
    burn_in: int = 5
    samples: int = 5
    seed: int = 0
    init: HybridInit = "progressive"
    alpha_stats: HybridAlphaStats = "mean"

    def __post_init__(self) -> None:
        for name, low, high in (("n_topics", 1, None), ("burn_in", 0, None), ("samples", 1, None),
                                ("seed", 0, _MAX_SEED)):
            object.__setattr__(self, name, parse_int(f"HybridParams.{name}", getattr(self, name), low, high))
        object.__setattr__(self, "init", parse_choice("HybridParams.init", self.init, HYBRID_INITS))
        object.__setattr__(self, "alpha_stats",
                           parse_choice("HybridParams.alpha_stats", self.alpha_stats, HYBRID_ALPHA_STATS))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able fields, for model files and checkpoints."""
        return {"n_topics": self.n_topics, "burn_in": self.burn_in, "samples": self.samples, "seed": self.seed,
                "init": self.init, "alpha_stats": self.alpha_stats}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> HybridParams:
        """Inverse of :meth:`to_dict` (files written before ``init`` and ``alpha_stats`` get their defaults)."""
        return cls(n_topics=data["n_topics"], burn_in=data["burn_in"], samples=data["samples"], seed=data["seed"],
                   init=data.get("init", "progressive"), alpha_stats=data.get("alpha_stats", "mean"))


@numba.njit(nogil=True, cache=True)
def _gibbs_sweep(tok_term, tok_col, z, n_tok, first_sweep, random_init, key, first_draw,
                 term_topic, alpha, chunk_cum, chunk, doc_counts, nonzero, n_nonzero, doc_cum):
    """One sweep over the document's tokens in order.

    The first sweep assigns without removal: uniformly at random (``random_init``) or progressively,
    each token from its conditional given the tokens before it.
    """
    for t in range(n_tok):
        if not first_sweep:
            n_nonzero = remove_sorted_count(z[t], doc_counts, nonzero, n_nonzero)
        u = uniform_from_key(key, first_draw + t)
        if first_sweep and random_init:
            k = draw_uniform(u, alpha.shape[0])
        else:
            k = draw_two_bucket(u, tok_term[t], tok_col[t], term_topic, alpha, chunk_cum, chunk,
                                doc_counts, nonzero, n_nonzero, doc_cum)
        z[t] = k
        n_nonzero = add_sorted_count(k, doc_counts, nonzero, n_nonzero)
    return n_nonzero


@numba.njit(nogil=True, cache=True)
def _add_kept_sweep(d, n_tok, tok_col, z, alpha, doc_counts, nonzero, n_nonzero,
                    kept_term_topic, kept_doc_topic, with_psi, kept_doc_psi):
    """Add one kept sweep: token indicators, N_dk, and (``with_psi``) psi(alpha_k + N_dk) - psi(alpha_k) of the used topics."""
    for t in range(n_tok):
        kept_term_topic[tok_col[t], z[t]] += 1.0
    for i in range(n_nonzero):
        k = nonzero[i]
        kept_doc_topic[d, k] += doc_counts[k]
        if with_psi:
            kept_doc_psi[d, k] += digamma(alpha[k] + doc_counts[k]) - digamma(alpha[k])


@numba.njit(nogil=True, cache=True)
def _gibbs_csr(indptr, term_ids, counts, local_cols,
               term_topic, alpha, chunk_cum, chunk, first_doc, seed, epoch, burn_in, samples, random_init,
               kept_term_topic, kept_doc_topic, with_psi, kept_doc_psi,
               tok_term, tok_col, z, doc_counts, nonzero, doc_cum):
    """Sample every document; NumPy equivalent in tests/reference/hybrid_numpy.py.

    Adds, over the kept sweeps, the indicator counts of each token's (present column, topic) to
    ``kept_term_topic`` (n_present, K), N_dk to ``kept_doc_topic`` (n_docs, K) (both exact integers in
    float64) and, if ``with_psi``, psi(alpha_k + N_dk) - psi(alpha_k) of the topics in use to
    ``kept_doc_psi`` (n_docs, K).
    The rest are scratch buffers; ``doc_counts`` must be zero on entry and is zero on exit.
    """
    for d in range(indptr.shape[0] - 1):
        key = counter_key(seed, STREAM_GIBBS, epoch, first_doc + d)
        n_tok = expand_entries_into(term_ids, counts, indptr[d], indptr[d + 1], tok_term, 0)
        expand_entries_into(local_cols, counts, indptr[d], indptr[d + 1], tok_col, 0)
        n_nonzero = 0
        for sweep in range(1 + burn_in + samples):
            n_nonzero = _gibbs_sweep(tok_term, tok_col, z, n_tok, sweep == 0, random_init, key, sweep * n_tok,
                                     term_topic, alpha, chunk_cum, chunk, doc_counts, nonzero, n_nonzero,
                                     doc_cum)
            if sweep > burn_in:
                _add_kept_sweep(d, n_tok, tok_col, z, alpha, doc_counts, nonzero, n_nonzero,
                                kept_term_topic, kept_doc_topic, with_psi, kept_doc_psi)
        for i in range(n_nonzero):
            doc_counts[nonzero[i]] = 0


@numba.njit(nogil=True, cache=True)
def _log_norm_terms(indptr, term_ids, counts, term_topic, exp_elog_theta, out):
    """out_d = sum_w n_dw log(eps + sum_k exp(E[log theta_dk]) E_kw), each inner sum in k order.

    Four terms share each pass over k (independent sums, so the adds pipeline); each inner sum is
    accumulated from eps in increasing k, the order of vb_lda's phi normalizer.
    """
    for d in range(indptr.shape[0] - 1):
        eth = exp_elog_theta[d]
        total = 0.0
        j, hi = indptr[d], indptr[d + 1]
        while j + 4 <= hi:
            w0, w1, w2, w3 = term_ids[j], term_ids[j + 1], term_ids[j + 2], term_ids[j + 3]
            s0 = s1 = s2 = s3 = PHI_NORM_EPS
            for k in range(eth.shape[0]):
                s0 += eth[k] * np.float64(term_topic[w0, k])
                s1 += eth[k] * np.float64(term_topic[w1, k])
                s2 += eth[k] * np.float64(term_topic[w2, k])
                s3 += eth[k] * np.float64(term_topic[w3, k])
            total += counts[j] * math.log(s0)
            total += counts[j + 1] * math.log(s1)
            total += counts[j + 2] * math.log(s2)
            total += counts[j + 3] * math.log(s3)
            j += 4
        for j in range(j, hi):
            s0 = PHI_NORM_EPS
            for k in range(eth.shape[0]):
                s0 += eth[k] * np.float64(term_topic[term_ids[j], k])
            total += counts[j] * math.log(s0)
        out[d] = total


def _sample_block(
    indptr: IntArray, term_ids: np.ndarray, counts: np.ndarray, topics: PreparedTopics, alpha: FloatArray,
    params: HybridParams, first_doc: int, epoch: int,
) -> tuple[IntArray, FloatArray, FloatArray, FloatArray]:
    """Run the sampler; return (present terms, kept term-topic counts / M, gamma, mean psi gains / M)."""
    n_topics = params.n_topics
    present, local_cols = present_terms(term_ids, int(topics.offsets[-1]))
    chunk_cum = np.empty((present.shape[0], -(-n_topics // SMOOTHING_CHUNK)), dtype=np.float64)
    n_bad = smoothing_chunk_sums(present, topics.term_topic, alpha, SMOOTHING_CHUNK, chunk_cum)
    if n_bad or not np.all(np.isfinite(chunk_cum[:, -1])):
        raise NumericalError(
            f"exp_elog_topic_word has {n_bad} negative or non-finite values on the terms of the block starting "
            f"at document {first_doc} (or alpha * E overflows); expected finite values >= 0"
        )
    cum = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
    max_tokens = int(np.max(cum[indptr[1:]] - cum[indptr[:-1]], initial=0))
    kept_term_topic = np.zeros((present.shape[0], n_topics), dtype=np.float64)
    kept_doc_topic = np.zeros((indptr.shape[0] - 1, n_topics), dtype=np.float64)
    with_psi = params.alpha_stats == "samples"
    kept_doc_psi = np.zeros((indptr.shape[0] - 1, n_topics) if with_psi else (0, n_topics), dtype=np.float64)
    _gibbs_csr(
        indptr, term_ids, counts, local_cols, topics.term_topic, alpha, chunk_cum, SMOOTHING_CHUNK,
        first_doc, params.seed, epoch, params.burn_in, params.samples, params.init == "random",
        kept_term_topic, kept_doc_topic, with_psi, kept_doc_psi,
        np.empty(max_tokens, dtype=np.int64), np.empty(max_tokens, dtype=np.int64),
        np.empty(max_tokens, dtype=np.int64), np.zeros(n_topics, dtype=np.int64),
        np.empty(n_topics, dtype=np.int64), np.empty(n_topics, dtype=np.float64),
    )
    return (present, kept_term_topic / params.samples, alpha[None, :] + kept_doc_topic / params.samples,
            kept_doc_psi / params.samples)


def _sampled_alpha_suff(alpha: FloatArray, psi_gain: FloatArray, doc_lengths: FloatArray) -> FloatArray:
    """sum_d (1/M) sum_kept [psi(alpha_k + N_dk) - psi(sum_k alpha_k + N_d)] from the kept psi gains.

    ``psi_gain[d, k]`` is (1/M) sum_kept psi(alpha_k + N_dk) - psi(alpha_k) (zero for unused topics);
    sum_k N_dk = N_d in every sweep, so the normalizer is the same for all of them.
    """
    # Imported here, not at import: a batch-VB fit never loads scipy.special (about 0.1 s).
    from scipy.special import psi

    return psi_gain.sum(axis=0) + len(doc_lengths) * psi(alpha) - psi(alpha.sum() + doc_lengths).sum()


def hybrid_estep_block(
    blocks: Mapping[str, DocBlock] | DocBlock,
    exp_elog_topic_word: Mapping[str, FloatArray] | PreparedTopics,
    doc_topic_prior: FloatArray | float,
    params: HybridParams,
    *,
    epoch: int = 0,
    return_gamma: bool = False,
    compute_bound: bool = True,
) -> tuple[EStepStats, FloatArray | None]:
    """Sample every document's topic assignments and collect E-step statistics from the kept sweeps.

    Parameters
    ----------
    blocks : mapping of str to DocBlock, or DocBlock
        As in :func:`topicflow.models.lda.vb.estep.estep_block`: the block's documents in each language.
    exp_elog_topic_word : mapping of str to ndarray of shape (n_topics, n_terms_lang), or PreparedTopics
        Values of exp(E_q[log beta]) per language, finite and >= 0; a float32 PreparedTopics is read
        as float64.
    doc_topic_prior : float or ndarray of shape (n_topics,), float64
        The prior alpha, positive.
    params : HybridParams
    epoch : int, default 0
        Iteration or minibatch number (>= 0), mixed into the random numbers so each pass draws afresh.
    return_gamma : bool, default False
        Also return gamma = alpha + Nbar.
    compute_bound : bool, default True
        Compute ``doc_elbo``. When False, ``stats.doc_elbo`` is ``nan`` and is then not an ELBO; this
        skips one O(n_topics) pass per distinct term of each document.

    Returns
    -------
    stats : EStepStats
        ``topic_terms``: the sampled counts sum_d (1/M) sum_kept [z_i = k] per (term, topic);
        ``alpha_suff``: with ``params.alpha_stats == "mean"``, sum_d psi(gamma_dk) - psi(sum_k gamma_dk);
        with ``"samples"``, sum_d (1/M) sum_kept [psi(alpha_k + N_dk) - psi(sum_k alpha_k + N_d)];
        ``doc_elbo``: see Notes;
        ``n_doc_iter`` = n_docs * (1 + B + M); ``n_capped`` = 0.
    doc_topic_var : ndarray of shape (n_docs, n_topics), float64, or None
        The variational parameters gamma when ``return_gamma``, else None.

    Raises
    ------
    InvalidParameterError
        Languages, document alignment, term ids, shapes, priors or ``epoch`` do not fit.
    NumericalError
        exp_elog_topic_word is negative or not finite on a term of the block, or the bound is not finite.

    Notes
    -----
    The local (per-document) step of Mimno et al. (2012)'s hybrid MCMC/VB inference, with the topics
    fixed at E = exp(E_q[log beta]). Per document d, the tokens are its terms repeated by count in CSR
    order (for several languages: each language's terms in turn, in the topics' language order). A
    token of stacked term w is drawn from ``p(z = k) ∝ (N_dk^{-i} + alpha_k) E_kw``, where N^{-i} are
    the document's current counts without this token; sweep 0 assigns the tokens progressively
    (counts of the earlier tokens only; ``params.init == "progressive"``) or uniformly at random
    (``"random"``: topic ``min(floor(u K), K - 1)``), then B burn-in and M kept Gibbs sweeps follow.
    Nbar_d = (1/M) sum_kept N_d, gamma_d = alpha + Nbar_d, and ``doc_elbo`` adds
    ``sum_w n_w log(eps + sum_k exp(E[log theta_k]) E_kw) - E_q[log q(theta_d)]`` at that gamma: the
    value vb_lda's ``_doc_stats`` returns for gamma_d, i.e. the ELBO at (gamma, phi*(gamma)),
    a valid lower bound. The statistics are always the sampled ones, never phi*. With
    ``alpha_stats == "samples"``, ``doc_elbo`` also adds ``sum_k (alpha_k - 1) (S_gamma_k - S_k)``, S_gamma
    the ``"mean"`` statistics and S the sampled ones, so that
    :func:`~topicflow.models.lda.vb.objective.local_elbo_terms` at this alpha is the same bound in
    both modes: only the alpha update sees the sampled statistics.

    The draw. The i-th uniform of document g = ``first_doc + d`` is
    ``u = uniform_from_key(counter_key(seed, STREAM_GIBBS, epoch, g), i)``, one per token per sweep,
    i = sweep * n_tokens_d + t, and the token's topic is
    :func:`~topicflow.models.common.categorical.draw_two_bucket` of u with counts N_dk^{-i}, smoothing
    alpha and column weights E: the document bucket sum_k N_dk E_kw over the used topics in increasing
    topic order, then the smoothing bucket sum_k alpha_k E_kw in topic order. NumPy equivalent
    (O(K) per token)::

        r_cum = np.cumsum(doc_counts * E[:, w]); s_cum = np.cumsum(alpha * E[:, w])
        x = u * (s_cum[-1] + r_cum[-1])
        k = (np.searchsorted(r_cum, x, "right") if x < r_cum[-1]
             else np.searchsorted(s_cum, x - r_cum[-1], "right"))   # then the rounding fallback

    The kernel keeps the used topics as a sorted list (Yao et al. 2009's sparse document bucket,
    updated in O(K_d) only when a count reaches or leaves zero), and per present term of the block
    s_cum at the end of every chunk of ``SMOOTHING_CHUNK`` topics (O(K n_present) once per block): a
    smoothing draw is a binary search over the chunk ends, then the running sum is continued inside
    one chunk, which reproduces s_cum exactly. A token costs O(K_d + log K + SMOOTHING_CHUNK), not
    O(K). Randomness depends only on (seed, epoch, global document), so results do not depend on
    how documents are split into blocks.
    Full NumPy reference: ``tests/reference/hybrid_numpy.py``. Inputs are not modified.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> block = block_from_csr(sp.csr_matrix(np.array([[1, 2, 0], [0, 0, 3]])), language="en")
    >>> stats, gamma = hybrid_estep_block({"en": block}, {"en": np.full((2, 3), 0.3)}, 0.1,
    ...                                   HybridParams(n_topics=2), return_gamma=True)
    >>> stats.n_tokens, gamma.shape, float(gamma.sum().round(9))
    (6, (2, 2), 6.4)
    """
    blocks = as_block_mapping(blocks)
    topics = as_prepared_topics(exp_elog_topic_word)
    if topics.n_topics != params.n_topics:
        raise InvalidParameterError(
            f"exp_elog_topic_word has {topics.n_topics} topics but params.n_topics is {params.n_topics}"
        )
    if isinstance(epoch, bool) or not isinstance(epoch, (int, np.integer)) or not 0 <= epoch < _MAX_SEED:
        raise InvalidParameterError(f"epoch must be an integer in [0, 2**63), got {epoch!r}")
    n_docs = check_blocks(blocks, topics)
    alpha = parse_dirichlet_prior("doc_topic_prior", doc_topic_prior, params.n_topics)
    first_doc = next(iter(blocks.values())).first_doc
    indptr, term_ids, counts = _stack_languages(blocks, topics, n_docs)
    present, stats, gamma, psi_gain = _sample_block(indptr, term_ids, counts, topics, alpha, params, first_doc,
                                                    int(epoch))
    elog_theta = dirichlet_expectation(gamma)
    theta_terms = dirichlet_entropy(gamma, elog_theta)
    alpha_suff = elog_theta.sum(axis=0)
    correction = 0.0
    if params.alpha_stats == "samples":
        cum = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])
        doc_lengths = (cum[indptr[1:]] - cum[indptr[:-1]]).astype(np.float64)
        sampled = _sampled_alpha_suff(alpha, psi_gain, doc_lengths)
        correction = float(np.sum((alpha - 1.0) * (alpha_suff - sampled)))
        alpha_suff = sampled
    elbo = math.nan
    if compute_bound:
        log_norms = np.empty(n_docs, dtype=np.float64)
        _log_norm_terms(indptr, term_ids, counts, topics.term_topic, np.exp(elog_theta), log_norms)
        elbo = float(log_norms.sum() + theta_terms.sum() + correction)
        if not math.isfinite(elbo):
            raise NumericalError(
                f"hybrid E-step bound is not finite for the block starting at document {first_doc}; "
                "check exp_elog_topic_word and doc_topic_prior for zeros, infinities or NaN"
            )
    result = EStepStats(
        topic_terms=_split_stats(present, stats, topics), alpha_suff=alpha_suff, doc_elbo=elbo,
        n_docs=n_docs, n_tokens=int(counts.sum(dtype=np.int64)), n_capped=0,
        n_doc_iter=n_docs * (1 + params.burn_in + params.samples),
    )
    return result, (gamma if return_gamma else None)
