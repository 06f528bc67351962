"""Running a collapsed Gibbs chain: initialization, sweeps, hyperparameter optimization."""
from __future__ import annotations

from typing import Callable

import numba
import numpy as np

from topicflow._typing import FloatArray, GibbsInit, Int32Array, IntArray, choices
from topicflow.errors import InvalidParameterError
from topicflow.models.common.blocks import DocBlock, expand_tokens
from topicflow.models.common.special import digamma
from topicflow.models.common.validation import parse_int
from topicflow.models.lda.gibbs.cvb_start import scvb0_start
from topicflow.models.lda.gibbs.partitioned import PartitionedSweeper, plan_partitions
from topicflow.models.lda.gibbs.scores import _perplexity_from_lists
from topicflow.models.lda.gibbs.sparse import (
    _check_block,
    _prior_lists,
    _random_topics,
    _run_sweep,
    _term_topic_from_lists,
    _word_lists,
    _WordLists,
)
from topicflow.models.lda.gibbs.state import (
    GibbsParams,
    GibbsState,
    TopicWordPrior,
    _check_prior,
    state_from_topics,
)

#: Iterations and relative tolerance of the fixed-point solvers for alpha and beta.
HYPER_MAX_ITER = 100
HYPER_TOL = 1e-7
#: Smallest value the fixed point may give alpha_k or beta (an unused topic would drive alpha_k to 0).
HYPER_FLOOR = 1e-10


def initial_state(
    block: DocBlock, params: GibbsParams, *, init: GibbsInit = "random", prior: TopicWordPrior | None = None,
    threads: int | None = 1,
) -> GibbsState:
    """Build the Gibbs state of a block: its tokens with their first topic assignments and counts.

    Parameters
    ----------
    block : DocBlock
        Its ``first_doc`` keys the random numbers of each document.
    params : GibbsParams
        K, alpha, beta and the seed.
    init : {"random", "sequential", "scvb0"}, default "random"
        ``"random"``: each z uniform on the K topics. ``"sequential"``: the tokens are drawn in order
        from the collapsed conditional given the tokens before them (the "progressive" start).
        ``"scvb0"``: one SCVB0 pass over the block, then each z drawn from its posterior
        (:func:`topicflow.models.lda.gibbs.cvb_start.scvb0_start`).
    prior : TopicWordPrior, optional
        Pseudo-counts N_wk (one row per term of the block) that the sequential start conditions on
        as well ("sampling from the posterior" of Gao et al. 2016); the random start ignores them, and
        the SCVB0 start refuses them.
    threads : int or None, default 1
        Threads of the SCVB0 start's draw (None: this process's cores); the state does not depend on it.

    Returns
    -------
    GibbsState
        ``sweeps_done = 0``; alpha and beta from ``params``.

    Raises
    ------
    InvalidParameterError
        ``init`` unknown, term ids outside ``[0, block.n_terms)``, a prior of another shape, or a prior
        given with ``init="scvb0"``.

    Notes
    -----
    Token t of document d (global index g = ``first_doc + d``) uses the t-th uniform u of
    ``counter_key(seed, STREAM_GIBBS, 0, g)``. Random: ``z = floor(u K)``, so the initial state of a
    concatenation of blocks is the concatenation of their initial states. Sequential: u drives the
    sampler of :func:`run_sweeps` on counts that hold only the tokens drawn so far (all previous
    documents of the block, then the earlier tokens of d), so it depends on the block's earlier
    documents. NumPy equivalent of the random start::

        z = np.minimum((u * K).astype(np.int32), K - 1)

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> state = initial_state(block_from_csr(sp.csr_matrix(np.array([[2, 1], [0, 3]]))), GibbsParams(n_topics=2))
    >>> state.n_tokens, int(state.topic_counts.sum()), state.doc_topic_counts.sum(axis=1).tolist()
    (6, 6, [3, 3])
    """
    if init not in choices(GibbsInit):
        raise InvalidParameterError(f"init must be one of {', '.join(choices(GibbsInit))}, got {init!r}")
    _check_block(block)
    _check_prior(prior, block.n_terms, params.n_topics)
    if init == "scvb0":
        if prior is not None:
            raise InvalidParameterError("init='scvb0' starts from its own SCVB0 pass; give no prior with it")
        return scvb0_start(block, params, threads=threads)
    token_indptr, token_terms = expand_tokens(block)
    n_topics, first_doc = params.n_topics, int(block.first_doc)
    topics = np.zeros(token_terms.shape[0], dtype=np.int32)
    if init == "random":
        _random_topics(token_indptr, n_topics, params.seed, first_doc, topics)
        return state_from_topics(token_indptr, token_terms, topics, block.n_terms, params, first_doc=first_doc)
    doc_topic = np.zeros((block.n_docs, n_topics), dtype=np.int32)
    topic_counts = np.zeros(n_topics, dtype=np.int64)
    lists = _word_lists(np.zeros((block.n_terms, n_topics), dtype=np.int32), token_terms, n_topics)
    _run_sweep(token_indptr, token_terms, topics, doc_topic, topic_counts, lists, params.alpha,
               params.topic_word_prior, params.seed, 0, first_doc, True, _prior_lists(prior, block.n_terms, n_topics))
    term_topic = _term_topic_from_lists(lists, block.n_terms, n_topics)
    return GibbsState(token_indptr, token_terms, topics, doc_topic, term_topic, topic_counts, first_doc,
                      params.alpha, params.topic_word_prior, 0)


# ----------------------------------------------------------------------------- hyperparameters


@numba.njit(nogil=True, cache=True)
def _topic_count_pairs(doc_topic):
    """Histograms H_k(n) = #{d : n_dk = n} of the nonzero n_dk, run-length encoded: sorted distinct
    keys k * (max_n + 1) + n and their multiplicities (memory O(nonzero n_dk), not O(K max_n))."""
    max_n, nnz = 0, 0
    for d in range(doc_topic.shape[0]):
        for k in range(doc_topic.shape[1]):
            if doc_topic[d, k] > 0:
                nnz += 1
                max_n = max(max_n, doc_topic[d, k])
    keys = np.empty(nnz, dtype=np.int64)
    i = 0
    for d in range(doc_topic.shape[0]):
        for k in range(doc_topic.shape[1]):
            if doc_topic[d, k] > 0:
                keys[i] = k * (max_n + 1) + doc_topic[d, k]
                i += 1
    keys = np.sort(keys)
    distinct = np.empty(nnz, dtype=np.int64)
    multiplicity = np.zeros(nnz)
    n_distinct = 0
    for i in range(nnz):
        if n_distinct == 0 or keys[i] != distinct[n_distinct - 1]:
            distinct[n_distinct] = keys[i]
            n_distinct += 1
        multiplicity[n_distinct - 1] += 1.0
    return distinct[:n_distinct], multiplicity[:n_distinct], max_n + 1


@numba.njit(nogil=True, cache=True)
def _alpha_fixed_point(doc_topic, doc_lengths, alpha, max_iter, tol, floor):
    """Minka's fixed point for an asymmetric Dirichlet from the histograms of n_d and n_dk.

    Builds the histograms and runs :func:`_alpha_fixed_point_hist`. Updates ``alpha`` in place;
    returns the number of iterations run.
    """
    max_len = 0
    for d in range(doc_lengths.shape[0]):
        max_len = max(max_len, doc_lengths[d])
    len_hist = np.zeros(max_len + 1)
    for d in range(doc_lengths.shape[0]):
        len_hist[doc_lengths[d]] += 1.0
    keys, multiplicity, width = _topic_count_pairs(doc_topic)
    return _alpha_fixed_point_hist(len_hist, keys, multiplicity, width, alpha, max_iter, tol, floor)


@numba.njit(nogil=True, cache=True)
def _alpha_fixed_point_hist(len_hist, keys, multiplicity, width, alpha, max_iter, tol, floor):
    """Minka's fixed point for an asymmetric Dirichlet from histograms (what the distributed sampler reduces).

    alpha_k <- alpha_k sum_n H_k(n) D(n; alpha_k) / sum_n H(n) D(n; alpha_sum), with
    D(n; a) = psi(n + a) - psi(a) = sum_{i<n} 1 / (a + i) accumulated along increasing n.
    ``len_hist[n]`` = H(n), documents of length n; ``keys`` the sorted distinct k * width + n of the
    nonzero n_dk with ``multiplicity`` H_k(n). Updates ``alpha`` in place; returns the iterations run.
    """
    max_len = len_hist.shape[0] - 1
    num = np.zeros(alpha.shape[0])
    for it in range(max_iter):
        alpha_sum = alpha.sum()
        denom, digamma_diff = 0.0, 0.0
        for n in range(1, max_len + 1):
            digamma_diff += 1.0 / (alpha_sum + n - 1)
            denom += len_hist[n] * digamma_diff
        if denom <= 0.0:
            return it
        num[:] = 0.0
        k_prev, n_prev, digamma_diff = -1, 0, 0.0
        for i in range(keys.shape[0]):
            k, n = keys[i] // width, keys[i] % width
            if k != k_prev:
                k_prev, n_prev, digamma_diff = k, 0, 0.0
            for m in range(n_prev, n):
                digamma_diff += 1.0 / (alpha[k] + m)
            n_prev = n
            num[k] += multiplicity[i] * digamma_diff
        change = 0.0
        for k in range(alpha.shape[0]):
            new = max(floor, alpha[k] * num[k] / denom)
            change = max(change, abs(new - alpha[k]) / alpha[k])
            alpha[k] = new
        if change < tol:
            return it + 1
    return max_iter


@numba.njit(nogil=True, cache=True)
def _beta_fixed_point(starts, lengths, packed, shift, topic_counts,
                      n_terms, beta, max_iter, tol, floor):
    """Minka's fixed point for a symmetric Dirichlet over the n_terms words of every topic.

    Builds the histogram of the nonzero n_wk and runs :func:`_beta_fixed_point_hist`; returns the new beta.
    """
    max_count = 0
    for w in range(lengths.shape[0]):
        if lengths[w] > 0:
            max_count = max(max_count, packed[starts[w]] >> shift)  # lists are sorted: first is largest
    hist = np.zeros(max_count + 1)
    for w in range(lengths.shape[0]):
        for j in range(starts[w], starts[w] + lengths[w]):
            hist[packed[j] >> shift] += 1.0
    return _beta_fixed_point_hist(hist, topic_counts, n_terms, beta, max_iter, tol, floor)


@numba.njit(nogil=True, cache=True)
def _beta_fixed_point_hist(hist, topic_counts, n_terms, beta, max_iter, tol, floor):
    """beta <- beta sum_{w,k} D(n_wk; beta) / (V sum_k D(n_k; V beta)) from ``hist[n]`` = #{(w, k): n_wk = n}."""
    max_count = hist.shape[0] - 1
    for _ in range(max_iter):
        num, digamma_diff = 0.0, 0.0
        for n in range(1, max_count + 1):
            digamma_diff += 1.0 / (beta + n - 1)
            num += hist[n] * digamma_diff
        denom = 0.0
        for k in range(topic_counts.shape[0]):
            denom += digamma(topic_counts[k] + n_terms * beta) - digamma(n_terms * beta)
        if denom <= 0.0 or num <= 0.0:
            return beta
        new = max(floor, beta * num / (n_terms * denom))
        done = abs(new - beta) < tol * beta
        beta = new
        if done:
            break
    return beta


def _optimize_hyper(
    doc_topic: Int32Array, doc_lengths: IntArray, lists: _WordLists, topic_counts: IntArray,
    alpha: FloatArray, beta: float,
) -> tuple[FloatArray, float]:
    new_alpha = alpha.copy()
    _alpha_fixed_point(doc_topic, doc_lengths, new_alpha, HYPER_MAX_ITER, HYPER_TOL, HYPER_FLOOR)
    new_beta = _beta_fixed_point(lists.starts, lists.lengths, lists.packed, lists.shift, topic_counts,
                                 lists.lengths.shape[0], beta, HYPER_MAX_ITER, HYPER_TOL, HYPER_FLOOR)
    return new_alpha, float(new_beta)


def optimize_hyperparameters(state: GibbsState) -> tuple[FloatArray, float]:
    """Fixed-point estimates of alpha (asymmetric) and beta (symmetric) from the state's counts.

    Parameters
    ----------
    state : GibbsState
        Its current alpha and beta are the starting point.

    Returns
    -------
    doc_topic_prior : ndarray of shape (n_topics,), float64
    topic_word_prior : float

    Notes
    -----
    Minka (2000)'s fixed point for the Dirichlet-multinomial likelihood of the counts, iterated to a
    relative change below ``HYPER_TOL`` (at most ``HYPER_MAX_ITER`` times), with the digamma
    differences summed over histograms of the counts (Wallach 2008, section 2.4; as in MALLET)::

        alpha_k <- alpha_k sum_d [psi(n_dk + alpha_k) - psi(alpha_k)]
                           / sum_d [psi(n_d + alpha_sum) - psi(alpha_sum)]
        beta    <- beta sum_{k,w} [psi(n_wk + beta) - psi(beta)]
                        / (V sum_k [psi(n_k + V beta) - psi(V beta)])

    Values are floored at ``HYPER_FLOOR`` (a topic no document uses drives its alpha_k to 0).

    Examples
    --------
    >>> state = state_from_topics(np.array([0, 2, 4]), np.array([0, 0, 1, 1], np.int32),
    ...                           np.array([0, 0, 1, 1], np.int32), 2, GibbsParams(n_topics=2))
    >>> alpha, beta = optimize_hyperparameters(state)
    >>> bool(alpha[0] < 0.1 and beta < 0.01)
    True
    """
    lists = _word_lists(state.term_topic_counts, state.token_terms, state.n_topics)
    doc_lengths = np.diff(state.token_indptr)
    return _optimize_hyper(state.doc_topic_counts, doc_lengths, lists, state.topic_counts,
                           np.asarray(state.doc_topic_prior, dtype=np.float64), state.topic_word_prior)


# ----------------------------------------------------------------------------- sweeps


def run_sweeps(
    state: GibbsState, params: GibbsParams, n_sweeps: int, *, optimize_every: int = 0, burn_in: int = 0,
    prior: TopicWordPrior | None = None, on_sweep: Callable[[GibbsState], None] | None = None,
    partitions: int = 1, threads: int = 1,
) -> GibbsState:
    """Run ``n_sweeps`` collapsed Gibbs sweeps over every token of the state.

    Parameters
    ----------
    state : GibbsState
        Not modified. Its ``doc_topic_prior`` and ``topic_word_prior`` are the alpha and beta used.
    params : GibbsParams
        Gives the seed; ``params.n_topics`` must equal the state's.
    n_sweeps : int
        At least 0.
    optimize_every : int, default 0
        If positive, re-estimate alpha and beta (:func:`optimize_hyperparameters`) after every chain
        sweep number ``n = state.sweeps_done + s + 1`` with ``n > burn_in`` and
        ``(n - burn_in) % optimize_every == 0``. Not allowed with a ``prior``.
    burn_in : int, default 0
        Chain sweeps before the first hyperparameter update.
    prior : TopicWordPrior, optional
        Pseudo-counts N_wk, one row per term of the state (see :class:`TopicWordPrior`). Without it
        (the default) the sampler is the batch sampler, bit for bit as it was before priors existed.
    on_sweep : callable, optional
        ``on_sweep(snapshot)`` after every sweep (and its hyperparameter update), e.g. to score held-out
        documents along the chain. The snapshot is the chain after that sweep; its assignments, n_dk
        and n_k are read-only views of the running chain's arrays, valid only during the call (copy
        what you keep); its n_wk is a fresh array. The chain does not depend on it: running the
        sweeps in one call with ``on_sweep`` gives the same states as one call per sweep, without
        rebuilding the word lists every sweep. An exception it raises stops the chain.
    partitions : int, default 1
        P > 1 runs partitioned sweeps (:mod:`topicflow.models.lda.gibbs.partitioned`): documents and
        words cut into P parts each, P epochs per sweep of P tasks on disjoint documents and words, n_k
        up to one epoch stale. The chain depends on P; 1 is the sequential sampler described below.
    threads : int, default 1
        Threads running each epoch's tasks when ``partitions > 1`` (the chain does not depend on it).

    Returns
    -------
    GibbsState
        New arrays; ``sweeps_done`` increased by ``n_sweeps``, alpha and beta as last optimized.
        Its counts hold the state's tokens only, never the prior.

    Raises
    ------
    InvalidParameterError
        Mismatched K, a negative ``n_sweeps``, ``optimize_every`` or ``burn_in``, a prior of another
        shape, or ``optimize_every`` with a prior.

    Notes
    -----
    Griffiths and Steyvers (2004), eq. (5): token i of document d with term w is removed from the
    counts and redrawn from

        p(z_i = k | z_-i, w) ∝ (n_dk + alpha_k) (n_wk + N_wk + beta) / (n_k + N_k + V beta)

    with all counts excluding token i (N = 0 without a prior; V is the prior's ``vocab_size``, else
    the state's ``n_terms``); tokens are visited in document order. The draw uses one
    uniform u, the (t)-th of ``counter_key(seed, STREAM_GIBBS, sweeps_done + s + 1, first_doc + d)``
    for the t-th token of d in sweep s, so a chain run in pieces equals the chain run at once. It is
    exact inverse-CDF sampling, but walks the mass in the bucket order of Yao et al. (2009): with
    ``x = u (q + q_N + r + s)``, the topic-word bucket q in the word's list order (decreasing n_wk),
    the prior's part q_N = sum_k (n_dk + alpha_k) N_wk / (n_k + N_k + V beta) over the word's
    nonzero N_wk (by decreasing N_wk), the document bucket r in the document's list order, then the
    smoothing bucket s in topic order (see the module glossary). The topic drawn for a given u
    therefore differs from a dense ``np.searchsorted(np.cumsum(p), u * p.sum())``, but has the same
    distribution. NumPy equivalent (O(K) per token) in ``tests/reference/gibbs_numpy.py`` and, with a
    prior, ``tests/reference/sgs_numpy.py``.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> params = GibbsParams(n_topics=2, seed=3)
    >>> state = initial_state(block_from_csr(sp.csr_matrix(np.array([[4, 0], [0, 4]]))), params)
    >>> later = run_sweeps(state, params, 10)
    >>> later.sweeps_done, int(later.term_topic_counts.sum())
    (10, 8)
    """
    optimize_every = parse_int("optimize_every", optimize_every, 0)
    burn_in = parse_int("burn_in", burn_in, 0)
    if optimize_every and prior is not None:
        raise InvalidParameterError("optimize_every must be 0 with a prior: the fixed points ignore the pseudo-counts")
    partitions = parse_int("partitions", partitions, 1)
    threads = parse_int("threads", threads, 1)
    final, _ = _run_chain(state, params, n_sweeps, optimize_every, burn_in, prior, None, on_sweep, partitions,
                          threads)
    return final


def run_sweeps_until(
    state: GibbsState, params: GibbsParams, max_sweeps: int, should_stop: Callable[[tuple[float, ...]], bool], *,
    prior: TopicWordPrior | None = None,
) -> tuple[GibbsState, tuple[float, ...]]:
    """Sweep as :func:`run_sweeps` until ``should_stop(trace)`` or ``max_sweeps``, tracing the perplexity.

    Parameters
    ----------
    state : GibbsState
        Not modified.
    params : GibbsParams
    max_sweeps : int
        At least 0.
    should_stop : callable
        A pure policy: ``should_stop(trace) -> bool``, called after every sweep with the trace so far.
    prior : TopicWordPrior, optional

    Returns
    -------
    state : GibbsState
        ``sweeps_done`` increased by the number of sweeps run (``len(trace) - 1``).
    trace : tuple of float
        :func:`training_perplexity` of the input state, then after every sweep.

    Raises
    ------
    InvalidParameterError
        As :func:`run_sweeps`.

    Notes
    -----
    The chain is the one :func:`run_sweeps` runs (same numbers, same sweeps), stopped early; the
    perplexity is computed between sweeps from the sampler's own word lists, without touching them.

    Examples
    --------
    >>> import scipy.sparse as sp
    >>> from topicflow.models.common.blocks import block_from_csr
    >>> params = GibbsParams(n_topics=2, seed=3)
    >>> state = initial_state(block_from_csr(sp.csr_matrix(np.array([[4, 0], [0, 4]]))), params)
    >>> later, trace = run_sweeps_until(state, params, 50, lambda trace: len(trace) > 5)
    >>> later.sweeps_done, len(trace)
    (5, 6)
    """
    return _run_chain(state, params, max_sweeps, 0, 0, prior, should_stop)


def _read_only(values: np.ndarray) -> np.ndarray:
    """A read-only view of ``values`` (no copy)."""
    view = values.view()
    view.flags.writeable = False
    return view


def _run_chain(
    state: GibbsState, params: GibbsParams, n_sweeps: int, optimize_every: int, burn_in: int,
    prior: TopicWordPrior | None, should_stop: Callable[[tuple[float, ...]], bool] | None,
    on_sweep: Callable[[GibbsState], None] | None = None, partitions: int = 1, threads: int = 1,
) -> tuple[GibbsState, tuple[float, ...]]:
    """The sweep loop shared by :func:`run_sweeps` and :func:`run_sweeps_until` (word lists live throughout)."""
    if params.n_topics != state.n_topics:
        raise InvalidParameterError(f"params.n_topics is {params.n_topics} but the state has {state.n_topics} topics")
    n_sweeps = parse_int("n_sweeps", n_sweeps, 0)
    _check_prior(prior, state.n_terms, state.n_topics)
    topics, doc_topic = state.topics.copy(), state.doc_topic_counts.copy()
    topic_counts = state.topic_counts.astype(np.int64, copy=True)
    terms, term_topic, rank = state.token_terms, state.term_topic_counts, None
    if partitions > 1:
        # Partitioned sweeps relabel the vocabulary so that each word part's lists (and their lengths)
        # are contiguous: threads on different parts then never write to the same cache line. A
        # relabeling changes no draw (each word keeps its list); rows come back in the state's order.
        plan = plan_partitions(state.token_indptr, state.token_terms, state.n_terms, partitions)
        vocab = plan.vocabulary_order()
        rank = np.empty_like(vocab)
        rank[vocab] = np.arange(vocab.shape[0])
        terms = rank[state.token_terms].astype(np.int32)
        term_topic = state.term_topic_counts[vocab]
        if prior is not None:
            prior = TopicWordPrior(prior.term_topic[vocab], prior.topic_counts, prior.vocab_size)
    lists = _word_lists(term_topic, terms, state.n_topics)
    prior_lists = _prior_lists(prior, state.n_terms, state.n_topics)

    def counts_by_term() -> np.ndarray:  # n_wk with rows in the state's term order
        found = _term_topic_from_lists(lists, state.n_terms, state.n_topics)
        return found if rank is None else found[rank]

    alpha = np.array(state.doc_topic_prior, dtype=np.float64)
    beta = float(state.topic_word_prior)
    doc_lengths = np.diff(state.token_indptr)
    trace: list[float] = []

    def perplexity() -> float:
        return _perplexity_from_lists(state.token_indptr, terms, doc_topic, topic_counts, lists, prior_lists, alpha,
                                      beta)

    if should_stop is not None:
        trace.append(perplexity())
    sweeper: PartitionedSweeper | None = None
    ordered = topics
    if partitions > 1:  # the tokens in the plan's order while sweeping; in the state's order outside
        sweeper = PartitionedSweeper(plan, state.token_indptr, np.ascontiguousarray(terms[plan.order]), threads)
        ordered = topics[plan.order]

    def sync() -> None:  # the sweeps' assignments back in the state's token order
        if sweeper is not None:
            topics[sweeper.plan.order] = ordered

    done = 0
    try:
        while done < n_sweeps:
            sweep = state.sweeps_done + done + 1
            if sweeper is None:
                _run_sweep(state.token_indptr, state.token_terms, topics, doc_topic, topic_counts, lists, alpha,
                           beta, params.seed, sweep, state.first_doc, False, prior_lists)
            else:
                sweeper.sweep(ordered, doc_topic, topic_counts, lists, prior_lists, alpha, beta, params.seed, sweep,
                              state.first_doc)
                if on_sweep is not None:  # the snapshot shows them in the state's order
                    sync()
            done += 1
            if optimize_every and sweep > burn_in and (sweep - burn_in) % optimize_every == 0:
                alpha, beta = _optimize_hyper(doc_topic, doc_lengths, lists, topic_counts, alpha, beta)
            if on_sweep is not None:
                on_sweep(GibbsState(state.token_indptr, state.token_terms, _read_only(topics), _read_only(doc_topic),
                                    counts_by_term(), _read_only(topic_counts), state.first_doc, alpha.copy(), beta,
                                    state.sweeps_done + done))
            if should_stop is not None:
                trace.append(perplexity())
                if should_stop(tuple(trace)):
                    break
    finally:
        if sweeper is not None:
            sweeper.close()
    sync()
    final = GibbsState(state.token_indptr, state.token_terms, topics, doc_topic, counts_by_term(), topic_counts,
                       state.first_doc, alpha, beta, state.sweeps_done + done)
    return final, tuple(trace)
