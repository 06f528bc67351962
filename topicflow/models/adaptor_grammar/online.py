"""Online hybrid inference for adaptor grammars ([Z] sections 8.2.3-8.3.1, Alg. 6): TNGs, counts, updates.

One minibatch B_l of sentences (Alg. 6):

1. :func:`prepare` builds G' from the state (eqs. 8.5-8.7);
2. :func:`estep_sentences` runs the inside pass per sentence and draws ``n_samples`` trees from each chart
   (eq. 8.4). It counts, as integers over all samples ([Z] section 8.2.3): g, the base rules used; f, the
   cached subtrees used; h, the new subtrees of adapted nonterminals (candidates for the TNGs). Counts are
   divided by ``n_samples`` (the empirical phi_d) in the update; integer counts make the merge of
   :class:`AGStats` exact, so the model does not depend on how sentences are partitioned;
3. :func:`update_minibatch`: the candidates join the TNGs (their h counts become f counts), then with
   epsilon = (tau + l)^-kappa (l from 1)

   - f~ <- (1 - eps) f~ + eps |X| / |B| sum_d f_d (eq. 8.8), g~ the same with g_d (eq. 8.9);
   - gamma_r = alpha_r + g~_r + sum_{b,i} n(r, z_{b,i}) (eq. 8.10);
   - nu1_{a,i} = 1 - b_a + f~_{a,i} + sum_{b,k} n(a => z_{a,i}, z_{b,k}) (eq. 8.11, the printed sign of b:
     P2; PyAdaGram uses + b);
   - nu2_{a,i} = a_a + i b_a + sum_{j>i} [f~_{a,j} + sum_{b,k} n(a => z_{a,j}, z_{b,k})] (eq. 8.12 CORRECTED: [Z]
     prints sum_{j=1..K_a}, which makes nu2 the same for every i; the stick-breaking tail is j > i, P1);
   - every ``prune_every`` (u) minibatches, each TNG is sorted by Lambda = f~ x log(eps |s| + 1) and cut to
     its K_a best atoms (section 8.3.1), with nu recomputed in the new order.

n(r, t) counts rule r inside the cached atom t, one count per atom, unscaled (P5): :class:`Atom` holds
them (base rules at the atom's own level, and references to the atoms of more specific adaptors below it).
f~ and g~ start at zero, so early on they are biased low by the factor 1 - prod_l (1 - eps_l) (P3);
``bias="correct"`` (the default) divides them by it, ``bias="tau-kappa"`` multiplies them by tau^kappa as
PyAdaGram does, ``bias="none"`` uses them as printed. B = |X| with kappa = 0 gives eps = 1 every step:
the batch VARIATIONAL variant ([Z] section 8.4).

Trees and atoms are identified by *keys*: nested tuples ``(rule, child_key, ...)`` over base rules, one
child key per nonterminal child (terminal children are implied by the rule). An inner adapted node's key is
the key of its atom, so the key of an atom encodes its whole tree and equal trees have equal keys.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any, Literal, Mapping, Sequence

import numpy as np

from topicflow.models.adaptor_grammar.grammar import Grammar
from topicflow.models.adaptor_grammar.hyper import optimize_pitman_yor
from topicflow.models.adaptor_grammar.inside import (
    KIND_CACHED,
    STREAM_AG_RELABEL,
    DerivedPCFG,
    SampledTrees,
    derived_pcfg,
    inside_chart,
    sample_trees,
)
from topicflow.models.common.rng import doc_generator

#: How the zero start of f~ and g~ is handled (P3).
Bias = Literal["correct", "tau-kappa", "none"]
BIAS_CHOICES: tuple[Bias, ...] = ("correct", "tau-kappa", "none")
#: Which Pitman-Yor hyperparameters are re-estimated after every pruning (:func:`optimize_hyperparameters`).
Hyper = Literal["ab", "a", "none"]
HYPER_CHOICES: tuple[Hyper, ...] = ("ab", "a", "none")
#: Random stream of the initial gamma.
STREAM_AG_INIT = 42
#: The minibatch counter that keys the seed pass's random numbers (the online steps use 1, 2, ...).
SEED_EPOCH = 0

TreeKey = tuple[Any, ...]


@dataclass(frozen=True)
class OnlineParams:
    """Settings of online hybrid inference ([Z] section 8.3; footnote 7 for Brent).

    Parameters
    ----------
    corpus_size : int
        |X|, the number of sentences the stream stands for (scales minibatch counts, eqs. 8.8-8.9).
    tau : float
        Decay inertia tau >= 0 of eps = (tau + l)^-kappa.
    kappa : float
        Decay rate kappa (0 gives eps = 1: batch updates).
    prune_every : int
        The interval u: sort and prune the TNGs every u minibatches.
    n_samples : int
        Trees drawn per sentence ([Z] footnote 5: 10).
    bias : {"correct", "tau-kappa", "none"}
        Handling of the zero start of f~ and g~ (P3).
    seed : int
        Seed of the counter-based random numbers.
    table_labels : bool
        Resample the trees of the cached atoms after every pruning ([Z] section 8.3.1, "Rederiving";
        :func:`resample_table_labels`).
    optimize_hyper : {"ab", "a", "none"}
        Re-estimate each adaptor's Pitman-Yor concentration a and discount b ("ab", [Z] section 8.2.4 and
        footnote 20: "all PY hyper-parameters are optimized"), only a (PyAdaGram's schedule), or neither,
        after every pruning (:func:`optimize_hyperparameters`). The grammar file's a, b are the start.
    """

    corpus_size: int
    tau: float = 64.0
    kappa: float = 0.8
    prune_every: int = 10
    n_samples: int = 10
    bias: Bias = "correct"
    seed: int = 0
    table_labels: bool = False
    optimize_hyper: Hyper = "ab"

    def __post_init__(self) -> None:
        """Validate the settings."""
        if self.corpus_size < 1:
            raise ValueError(f"corpus_size must be >= 1, got {self.corpus_size}")
        if self.tau < 0 or self.kappa < 0:
            raise ValueError(f"tau and kappa must be >= 0, got tau={self.tau}, kappa={self.kappa}")
        if self.prune_every < 1 or self.n_samples < 1:
            raise ValueError("prune_every and n_samples must be >= 1")
        if self.bias not in BIAS_CHOICES:
            raise ValueError(f"bias must be one of {BIAS_CHOICES}, got {self.bias!r}")
        if self.optimize_hyper not in HYPER_CHOICES:
            raise ValueError(f"optimize_hyper must be one of {HYPER_CHOICES}, got {self.optimize_hyper!r}")

    def step_size(self, minibatch: int) -> float:
        """Return eps = (tau + l)^-kappa for minibatch counter l (from 1).

        Parameters
        ----------
        minibatch : int
            The counter l.

        Returns
        -------
        float
        """
        return float((self.tau + minibatch) ** -self.kappa)


@dataclass(frozen=True)
class Atom:
    """One cached subtree z of an adapted nonterminal (an element of its TNG).

    Parameters
    ----------
    key : tuple
        The tree (see the module docstring).
    yield_ids : tuple of int
        Terminal ids of its yield.
    rule_counts : tuple of (int, int)
        The counts n(r, z) of the base rules at the atom's own level (not inside inner adapted nodes).
    refs : tuple of (int, tuple)
        (adapted position m, atom key) of each inner adapted node, with repetition: n(m => key, z).
    size : int
        |s| of the ranking score: the length of the atom's frontier at its adaptor's level, i.e. terminals
        outside inner adapted nodes plus the number of inner adapted nodes (characters for Word, Words for
        Collocation; P8).
    """

    key: TreeKey
    yield_ids: tuple[int, ...]
    rule_counts: tuple[tuple[int, int], ...]
    refs: tuple[tuple[int, TreeKey], ...]
    size: int


def atom_from_key(grammar: Grammar, key: TreeKey) -> Atom:
    """Read an atom's yield, rule counts, references and size off its tree key.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    key : tuple
        A tree whose root rule's left-hand side is adapted.

    Returns
    -------
    Atom
    """
    n_nt = grammar.n_nonterminals
    position = grammar.adapted_index
    yield_memo: dict[int, tuple[int, ...]] = {}

    def yield_of(k: TreeKey) -> tuple[int, ...]:
        got = yield_memo.get(id(k))
        if got is not None:
            return got
        r = k[0]
        out: list[int] = []
        child = iter(k[1:])
        for s in grammar.rule_rhs[r]:
            if s < 0:
                continue
            if s >= n_nt:
                out.append(int(s - n_nt))
            else:
                out.extend(yield_of(next(child)))
        res = tuple(out)
        yield_memo[id(k)] = res
        return res

    counts: dict[int, int] = {}
    refs: list[tuple[int, TreeKey]] = []
    size = 0
    stack = [key]
    while stack:
        k = stack.pop()
        r = k[0]
        counts[r] = counts.get(r, 0) + 1
        child = iter(k[1:])
        for s in grammar.rule_rhs[r]:
            if s < 0:
                continue
            if s >= n_nt:
                size += 1
                continue
            ck = next(child)
            if position[s] >= 0:
                refs.append((int(position[s]), ck))
                size += 1
            else:
                stack.append(ck)
    return Atom(key, yield_of(key), tuple(sorted(counts.items())), tuple(refs), size)


@dataclass(frozen=True)
class TNG:
    """The truncated nonterminal grammar of one adapted nonterminal: ordered atoms and their f~.

    Parameters
    ----------
    atoms : tuple of Atom
        The cached subtrees in stick order.
    f_tilde : ndarray of float64, shape (K,)
        Running expected counts f~ (eq. 8.8), uncorrected.
    """

    atoms: tuple[Atom, ...] = ()
    f_tilde: np.ndarray = field(default_factory=lambda: np.zeros(0))

    @property
    def keys(self) -> list[TreeKey]:
        """Return the atoms' keys in stick order."""
        return [a.key for a in self.atoms]

    def __len__(self) -> int:
        """Return the number of atoms K."""
        return len(self.atoms)


@dataclass(frozen=True)
class AGState:
    """Variational state of an adaptor grammar under online hybrid inference.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar (alpha, a, b, K come from it).
    gamma : ndarray of float64, shape (R,)
        Variational Dirichlet parameters of the base rules.
    g_tilde : ndarray of float64, shape (R,)
        Running expected base-rule counts g~ (eq. 8.9), uncorrected.
    tngs : tuple of TNG
        One per adapted nonterminal, in ``grammar.adapted`` order.
    nu1, nu2 : tuple of ndarray
        Beta parameters of each TNG's sticks.
    minibatch : int
        Minibatches processed (the counter l of the last update).
    decay : float
        The product prod_l (1 - eps_l): the weight f~ and g~ still owe to their zero start (P3).
    """

    grammar: Grammar
    gamma: np.ndarray
    g_tilde: np.ndarray
    tngs: tuple[TNG, ...]
    nu1: tuple[np.ndarray, ...]
    nu2: tuple[np.ndarray, ...]
    minibatch: int = 0
    decay: float = 1.0


def initial_state(grammar: Grammar, *, seed: int = 0) -> AGState:
    """Start with random variational Dirichlets and empty TNGs ([Z] section 8.3.1, "Initialization"; P9).

    gamma_r = alpha_r x Gamma(100, 1/100) (Hoffman et al.'s initialization, around alpha).

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    seed : int
        Random seed.

    Returns
    -------
    AGState
    """
    rng = doc_generator(seed, STREAM_AG_INIT, 0, 0)
    gamma = grammar.rule_alpha * rng.gamma(100.0, 0.01, grammar.n_rules)
    m = grammar.adapted.shape[0]
    return AGState(grammar=grammar, gamma=gamma, g_tilde=np.zeros(grammar.n_rules),
                   tngs=tuple(TNG() for _ in range(m)), nu1=tuple(np.zeros(0) for _ in range(m)),
                   nu2=tuple(np.zeros(0) for _ in range(m)))


def prepare(state: AGState) -> DerivedPCFG:
    """Build G' of the current state (eq. 8.5; Alg. 6 line 3).

    Parameters
    ----------
    state : AGState
        The variational state.

    Returns
    -------
    DerivedPCFG
    """
    yields = [[a.yield_ids for a in tng.atoms] for tng in state.tngs]
    return derived_pcfg(state.grammar, state.gamma, yields, list(state.nu1), list(state.nu2))


@dataclass(frozen=True)
class AGStats:
    """Integer counts of a set of sentences' sampled trees (a monoid: :meth:`merge` is exact).

    Parameters
    ----------
    n_sentences : int
        Sentences counted.
    n_samples : int
        Trees drawn per sentence (the counts below sum over all of them).
    g : ndarray of int64, shape (R,)
        Base rules used.
    f : tuple of ndarray of int64
        Per adapted nonterminal, uses of each cached atom (TNG order at E-step time).
    h : tuple of dict
        Per adapted nonterminal, new subtree key -> uses.
    log_likelihood : float
        Sum over sentences of log p(x | G') (the inside probability of the start symbol).
    """

    n_sentences: int
    n_samples: int
    g: np.ndarray
    f: tuple[np.ndarray, ...]
    h: tuple[dict[TreeKey, int], ...]
    log_likelihood: float = 0.0

    @staticmethod
    def zeros(state: AGState, n_samples: int) -> AGStats:
        """Return empty counts shaped for a state.

        Parameters
        ----------
        state : AGState
            The state whose TNGs the counts refer to.
        n_samples : int
            Trees per sentence.

        Returns
        -------
        AGStats
        """
        return AGStats(0, n_samples, np.zeros(state.grammar.n_rules, dtype=np.int64),
                       tuple(np.zeros(len(t), dtype=np.int64) for t in state.tngs),
                       tuple({} for _ in state.tngs))

    def merge(self, other: AGStats) -> AGStats:
        """Return the counts of both sets of sentences.

        Parameters
        ----------
        other : AGStats
            Counts of other sentences under the same state.

        Returns
        -------
        AGStats
        """
        if other.n_samples != self.n_samples:
            raise ValueError("cannot merge counts drawn with different n_samples")
        h = []
        for mine, theirs in zip(self.h, other.h):
            merged = dict(mine)
            for k, v in theirs.items():
                merged[k] = merged.get(k, 0) + v
            h.append(merged)
        return AGStats(self.n_sentences + other.n_sentences, self.n_samples, self.g + other.g,
                       tuple(a + b for a, b in zip(self.f, other.f)), tuple(h),
                       self.log_likelihood + other.log_likelihood)


def tree_keys(grammar: Grammar, trees: SampledTrees, atom_keys: Sequence[Sequence[TreeKey]]) -> list[TreeKey]:
    """Return the key of every node of the sampled trees (preorder), cached subtrees by their atom keys.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    trees : SampledTrees
        Draws from one chart.
    atom_keys : sequence of sequences of tuple
        Per adapted nonterminal, the keys of its TNG at E-step time.

    Returns
    -------
    list of tuple
        One per node, aligned with the node arrays of ``trees``.
    """
    position = grammar.adapted_index.tolist()
    kinds = trees.kind.tolist()
    idents = trees.ident.tolist()
    symbols = trees.symbol.tolist()
    n_kids = grammar.rule_children
    keys: list[TreeKey] = [()] * len(kinds)
    stack: list[TreeKey] = []  # trees are whole, so walking all of them backwards in one pass is safe
    pop = stack.pop
    push = stack.append
    for p in range(len(kinds) - 1, -1, -1):
        ident = idents[p]
        if kinds[p] == KIND_CACHED:
            key = atom_keys[position[symbols[p]]][ident]
        else:
            kids = n_kids[ident]
            if kids == 2:
                key = (ident, pop(), pop())
            elif kids == 1:
                key = (ident, pop())
            else:
                key = (ident,)
        keys[p] = key
        push(key)
    return keys


class TreeCounter:
    """Count the f, g and h of many sentences' sampled trees ([Z] section 8.2.3), in place.

    A sentence costs the size of its trees: rule and atom uses are collected and binned once at the end
    (:meth:`stats`), and new subtrees go into dicts updated in place. (Counting each sentence into fresh
    arrays of every rule and a copy of h made the E-step grow with the number of rules, D (K + 1) for
    the ``infvoc-lda`` grammar, and quadratic in the sentences of a partition.)

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    atom_keys : sequence of sequences of tuple
        Per adapted nonterminal, the keys of its TNG at E-step time.
    n_samples : int
        Trees drawn per sentence.
    """

    def __init__(self, grammar: Grammar, atom_keys: Sequence[Sequence[TreeKey]], n_samples: int) -> None:
        self.grammar = grammar
        self.atom_keys = atom_keys
        self.n_samples = n_samples
        self.n_sentences = 0
        self._rules: list[np.ndarray] = []
        self._atoms: list[list[np.ndarray]] = [[] for _ in atom_keys]
        self._new: tuple[dict[TreeKey, int], ...] = tuple({} for _ in atom_keys)

    def add(self, trees: SampledTrees) -> None:
        """Count one sentence's sampled trees.

        Parameters
        ----------
        trees : SampledTrees
            Draws from one chart.
        """
        position = self.grammar.adapted_index
        cached = trees.kind == KIND_CACHED
        self._rules.append(trees.ident[~cached])
        pos_of_node = position[trees.symbol]
        if cached.any():
            for m in np.unique(pos_of_node[cached]).tolist():
                self._atoms[m].append(trees.ident[cached & (pos_of_node == m)])
        new = np.flatnonzero((~cached) & (pos_of_node >= 0))
        if new.shape[0]:
            keys = tree_keys(self.grammar, trees, self.atom_keys)
            for p, m in zip(new.tolist(), pos_of_node[new].tolist()):
                d = self._new[m]
                d[keys[p]] = d.get(keys[p], 0) + 1
        self.n_sentences += 1

    def stats(self, log_likelihood: float = 0.0) -> AGStats:
        """Return the counts so far.

        Parameters
        ----------
        log_likelihood : float
            Sum of the sentences' log p(x | G').

        Returns
        -------
        AGStats
        """
        def binned(parts: list[np.ndarray], size: int) -> np.ndarray:
            if not parts:
                return np.zeros(size, dtype=np.int64)
            return np.bincount(np.concatenate(parts), minlength=size).astype(np.int64, copy=False)

        return AGStats(self.n_sentences, self.n_samples, binned(self._rules, self.grammar.n_rules),
                       tuple(binned(parts, len(keys)) for parts, keys in zip(self._atoms, self.atom_keys)),
                       tuple(dict(d) for d in self._new), log_likelihood)


def estep_sentences(grammar: Grammar, pcfg: DerivedPCFG, atom_keys: Sequence[Sequence[TreeKey]],
                    sentences: Sequence[np.ndarray], sentence_ids: Sequence[int], *, n_samples: int, seed: int,
                    epoch: int) -> AGStats:
    """Parse sentences under G' and count their sampled trees (Alg. 6 lines 4-7).

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    pcfg : DerivedPCFG
        G' of the current state (:func:`prepare`).
    atom_keys : sequence of sequences of tuple
        Per adapted nonterminal, its TNG's keys (``[t.keys for t in state.tngs]``).
    sentences : sequence of ndarray of int64
        Terminal ids of each sentence.
    sentence_ids : sequence of int
        Global index of each sentence (keys its random numbers).
    n_samples : int
        Trees per sentence.
    seed : int
        Random seed.
    epoch : int
        Minibatch counter (keys the random numbers).

    Returns
    -------
    AGStats

    Raises
    ------
    ValueError
        If a sentence is empty or has no parse under the grammar (naming its id).
    """
    counter = TreeCounter(grammar, atom_keys[:grammar.adapted.shape[0]], n_samples)
    loglik = 0.0
    for x, sid in zip(sentences, sentence_ids):
        if len(x) == 0:
            raise ValueError(f"sentence {sid} is empty")
        chart = inside_chart(pcfg, x)
        ll = chart.log_inside(pcfg.start, 0, len(x))
        if ll == -math.inf:
            raise ValueError(f"sentence {sid} has no parse under the grammar")
        loglik += ll
        trees = sample_trees(pcfg, chart, n_samples, seed=seed, epoch=epoch, sentence=int(sid))
        counter.add(trees)
    return counter.stats(loglik)


def corrected(values: np.ndarray, state: AGState, params: OnlineParams) -> np.ndarray:
    """Return f~ or g~ as the updates use them, after the P3 handling of their zero start.

    Parameters
    ----------
    values : ndarray
        Uncorrected running counts.
    state : AGState
        Gives prod_l (1 - eps_l).
    params : OnlineParams
        Gives the bias mode (and tau, kappa for "tau-kappa").

    Returns
    -------
    ndarray
    """
    if params.bias == "correct":
        weight = 1.0 - state.decay
        return values / weight if weight > 0.0 else values
    if params.bias == "tau-kappa":
        return values * params.tau ** params.kappa
    return values


def usage_counts(state: AGState) -> tuple[np.ndarray, tuple[np.ndarray, ...]]:
    """Return sum_{b,i} n(r, z_{b,i}) per base rule and per atom (the unscaled counts of P5).

    Parameters
    ----------
    state : AGState
        The state whose TNGs are counted.

    Returns
    -------
    base : ndarray of float64, shape (R,)
        Uses of each base rule inside all cached atoms.
    adapted : tuple of ndarray of float64
        Per adapted nonterminal, uses of each of its atoms inside the atoms of more general adaptors.
    """
    base = np.zeros(state.grammar.n_rules)
    index = [{a.key: i for i, a in enumerate(t.atoms)} for t in state.tngs]
    adapted = tuple(np.zeros(len(t)) for t in state.tngs)
    for tng in state.tngs:
        for atom in tng.atoms:
            for r, c in atom.rule_counts:
                base[r] += c
            for m, k in atom.refs:
                i = index[m].get(k)
                if i is not None:
                    adapted[m][i] += 1.0
    return base, adapted


def variational_parameters(state: AGState, params: OnlineParams) -> AGState:
    """Recompute gamma, nu1, nu2 from f~, g~ and the TNGs (eqs. 8.10-8.12, P1 and P2 as printed/corrected).

    Parameters
    ----------
    state : AGState
        State with updated f~, g~ and TNGs.
    params : OnlineParams
        Gives the bias handling.

    Returns
    -------
    AGState
    """
    grammar = state.grammar
    n_base, n_adapted = usage_counts(state)
    gamma = grammar.rule_alpha + corrected(state.g_tilde, state, params) + n_base
    nu1 = []
    nu2 = []
    for m, tng in enumerate(state.tngs):
        counts = corrected(tng.f_tilde, state, params) + n_adapted[m]
        a = grammar.pitman_yor_a[m]
        b = grammar.pitman_yor_b[m]
        i = np.arange(1, len(tng) + 1, dtype=np.float64)
        tail = np.cumsum(counts[::-1])[::-1] - counts  # sum_{j > i}
        nu1.append(1.0 - b + counts)
        nu2.append(a + i * b + tail)
    return replace(state, gamma=gamma, nu1=tuple(nu1), nu2=tuple(nu2))


def add_candidates(state: AGState, stats: AGStats) -> tuple[AGState, tuple[np.ndarray, ...]]:
    """Append each adaptor's new subtrees to its TNG (Alg. 6 line 8) and merge h into f.

    Candidates join in order of decreasing count, ties by key, so the order does not depend on the order
    the counts were merged in. A candidate equal to an atom already in the TNG adds its count to that atom.

    Parameters
    ----------
    state : AGState
        The state the minibatch was parsed with.
    stats : AGStats
        The minibatch's counts.

    Returns
    -------
    state : AGState
        With the grown TNGs (new atoms' f~ = 0).
    counts : tuple of ndarray of float64
        Per adapted nonterminal, f + h of the minibatch for every atom of the grown TNG (summed over samples).
    """
    grammar = state.grammar
    tngs = []
    counts = []
    for m, tng in enumerate(state.tngs):
        index = {a.key: i for i, a in enumerate(tng.atoms)}
        atoms = list(tng.atoms)
        c = list(stats.f[m].astype(np.float64))
        for key, v in sorted(stats.h[m].items(), key=lambda kv: (-kv[1], kv[0])):
            i = index.get(key)
            if i is None:
                index[key] = len(atoms)
                atoms.append(atom_from_key(grammar, key))
                c.append(float(v))
            else:
                c[i] += v
        f_tilde = np.concatenate([tng.f_tilde, np.zeros(len(atoms) - len(tng))])
        tngs.append(TNG(tuple(atoms), f_tilde))
        counts.append(np.asarray(c, dtype=np.float64))
    return replace(state, tngs=tuple(tngs)), tuple(counts)


def ranking_scores(state: AGState, params: OnlineParams, eps: float) -> tuple[np.ndarray, ...]:
    """Return Lambda = f~ x log(eps |s| + 1) of every atom ([Z] section 8.3.1; f~ after the P3 handling).

    Parameters
    ----------
    state : AGState
        The state.
    params : OnlineParams
        Gives the bias handling.
    eps : float
        The current minibatch's step size (P8: the reward anneals with eps).

    Returns
    -------
    tuple of ndarray of float64
    """
    out = []
    for tng in state.tngs:
        size = np.asarray([a.size for a in tng.atoms], dtype=np.float64)
        out.append(corrected(tng.f_tilde, state, params) * np.log(eps * size + 1.0))
    return tuple(out)


def prune(state: AGState, params: OnlineParams, eps: float, *, reorder_only: bool = False) -> AGState:
    """Sort every TNG by Lambda and keep its K_a best atoms ([Z] section 8.3.1, "Sorting and Removing").

    Adaptors are pruned from general to specific; an atom referenced by a kept atom of a more general
    adaptor is kept too (its reference must resolve), so a TNG may hold more than K_a atoms when that many
    are referenced. Kept atoms are ordered by decreasing Lambda (ties by their old order).

    Parameters
    ----------
    state : AGState
        The state after the minibatch's update.
    params : OnlineParams
        Gives the bias handling.
    eps : float
        The current step size.
    reorder_only : bool
        Sort without removing any atom (what :func:`seed_state` does after the seed pass).

    Returns
    -------
    AGState
        With pruned TNGs and gamma, nu recomputed (eqs. 8.10-8.12).
    """
    grammar = state.grammar
    scores = ranking_scores(state, params, eps)
    tngs = list(state.tngs)
    pinned: list[set[TreeKey]] = [set() for _ in tngs]
    for m in range(len(tngs) - 1, -1, -1):
        tng = tngs[m]
        order = sorted(range(len(tng)), key=lambda i: (-scores[m][i], i))
        limit = len(tng) if reorder_only else int(grammar.truncation[m])
        keep = [i for i in order[:limit]]
        kept = set(keep)
        keep += [i for i in order[limit:] if tng.atoms[i].key in pinned[m] and i not in kept]
        keep.sort(key=lambda i: (-scores[m][i], i))
        atoms = tuple(tng.atoms[i] for i in keep)
        tngs[m] = TNG(atoms, tng.f_tilde[keep] if keep else np.zeros(0))
        for atom in atoms:
            for mm, k in atom.refs:
                pinned[mm].add(k)
    return variational_parameters(replace(state, tngs=tuple(tngs)), params)


def _rewrite(grammar: Grammar, key: TreeKey, mapping: Sequence[Mapping[TreeKey, TreeKey]]) -> TreeKey:
    """Replace, in a tree key, every inner adapted node found in ``mapping[its adaptor]`` by its new key."""
    position = grammar.adapted_index
    n_nt = grammar.n_nonterminals
    r = key[0]
    kids = iter(key[1:])
    out: list[Any] = [r]
    for sym in grammar.rule_rhs[r]:
        if not 0 <= sym < n_nt:
            continue
        child = next(kids)
        m = position[sym]
        if m >= 0:
            out.append(mapping[m].get(child, child))
        else:
            out.append(_rewrite(grammar, child, mapping))
    return tuple(out)


def rebind_state(state: AGState, grown: Grammar, params: OnlineParams) -> AGState:
    """Carry a state over to a larger binding of its grammar file (new characters, or new documents).

    ``grown`` is the state's grammar file bound to more terminals (new characters), or with larger
    template parameters as well (the ``infvoc-lda`` grammar's D: new ``Doc_j`` nonterminals, ``'_j'``
    terminals and rules). Everything is matched by name, so codes may move: base rules by their text,
    adapted nonterminals by name. Rules that are new start with g~ = 0 and are in no cached atom, so
    their gamma is their prior alpha. The rule priors are the grown grammar's: a nonterminal c whose
    rules take the default alpha = 1 / n_c and gains rules gets the smaller 1 / n_c for each, as a fit
    given the larger grammar from the start would, and as a saved model re-binds its grammar on
    loading. Each adaptor keeps its PY a, b (as last re-estimated), f~ and atoms, whose trees are
    rewritten to the new rule numbers; gamma, nu1, nu2 are then recomputed (eqs. 8.10-8.12).

    Parameters
    ----------
    state : AGState
        The state to continue.
    grown : Grammar
        The same grammar file, bound to a superset of the state's terminals, with a superset of its
        nonterminals, rules and adaptors.
    params : OnlineParams
        Gives the bias handling.

    Returns
    -------
    AGState
        The state over ``grown`` (``state`` itself when the grammar did not grow).

    Raises
    ------
    ValueError
        If ``grown`` lacks a symbol, rule or adaptor of the state's grammar.
    """
    old = state.grammar
    if grown.nonterminals == old.nonterminals and tuple(grown.terminals) == tuple(old.terminals) \
            and grown.n_rules == old.n_rules:
        return state
    lacking = sorted(set(old.nonterminals) - set(grown.nonterminals)) + \
        [repr(t) for t in sorted(set(old.terminals) - set(grown.terminals))]
    if lacking:
        raise ValueError(f"the grown grammar lacks the state's symbols {', '.join(lacking[:5])}")
    new_rule = {grown.rule_text(r): r for r in range(grown.n_rules)}
    try:
        mapping = np.asarray([new_rule[old.rule_text(r)] for r in range(old.n_rules)], dtype=np.int64)
    except KeyError as missing:
        raise ValueError(f"the grown grammar lacks the state's rule {missing}") from None
    position = {grown.nonterminals[c]: m for m, c in enumerate(grown.adapted)}
    moved_to = [position.get(old.nonterminals[c], -1) for c in old.adapted]
    if -1 in moved_to:
        raise ValueError("the grown grammar lacks an adaptor of the state's")
    a, b = np.array(grown.pitman_yor_a, dtype=np.float64), np.array(grown.pitman_yor_b, dtype=np.float64)
    a[moved_to], b[moved_to] = old.pitman_yor_a, old.pitman_yor_b
    grown = replace(grown, pitman_yor_a=a, pitman_yor_b=b)
    memo: dict[TreeKey, TreeKey] = {}

    def renumber(key: TreeKey) -> TreeKey:
        out = memo.get(key)
        if out is None:
            out = (int(mapping[key[0]]), *(renumber(child) for child in key[1:]))
            memo[key] = out
        return out

    tngs = [TNG() for _ in grown.adapted]
    for m, tng in enumerate(state.tngs):
        tngs[moved_to[m]] = TNG(tuple(atom_from_key(grown, renumber(x.key)) for x in tng.atoms), tng.f_tilde.copy())
    g_tilde = np.zeros(grown.n_rules)
    g_tilde[mapping] = state.g_tilde
    gamma = np.array(grown.rule_alpha, dtype=np.float64)
    gamma[mapping] = state.gamma  # kept only by a state never updated (its random start)
    empty = tuple(np.zeros(0) for _ in grown.adapted)
    moved = replace(state, grammar=grown, gamma=gamma, g_tilde=g_tilde, tngs=tuple(tngs), nu1=empty, nu2=empty)
    fresh = state.minibatch == 0 and state.decay == 1.0 and not np.any(state.g_tilde)  # its random start only
    return moved if fresh else variational_parameters(moved, params)


def resample_table_labels(state: AGState, params: OnlineParams) -> AGState:
    """Re-derive the tree of every cached atom, general adaptors first (table-label resampling).

    [Z] section 8.3.1, after Johnson and Goldwater (2009).
    Each atom of adaptor c keeps its yield and its f~; its tree is drawn anew from G' with c's own atoms left
    out (so the root expands by a base rule of c, inner adapted nodes by their caches or new subtrees). New
    inner subtrees join their adaptors' TNGs with f~ = 0; atoms that end up with the same tree are merged
    (f~ summed); keys of more general atoms are rewritten to the new trees they contain. gamma and nu are
    recomputed, since the counts n(r, t) change.

    Parameters
    ----------
    state : AGState
        The state (after pruning).
    params : OnlineParams
        Gives the seed and the bias handling.

    Returns
    -------
    AGState
    """
    grammar = state.grammar
    n_adapted = len(state.tngs)
    tngs = list(state.tngs)
    current = state
    for m in range(n_adapted - 1, -1, -1):
        if not tngs[m].atoms:
            continue
        c = int(grammar.adapted[m])
        yields: list[list[tuple[int, ...]]] = [[a.yield_ids for a in t.atoms] for t in tngs]
        nu1 = list(current.nu1)
        nu2 = list(current.nu2)
        yields[m] = []
        nu1[m] = np.zeros(0)
        nu2[m] = np.zeros(0)
        pcfg = derived_pcfg(grammar, current.gamma, yields, nu1, nu2)
        keys = [t.keys for t in tngs]
        position = grammar.adapted_index
        new_keys: list[TreeKey] = []
        pending: list[dict[TreeKey, None]] = [{} for _ in range(n_adapted)]
        for i, atom in enumerate(tngs[m].atoms):
            x = np.asarray(atom.yield_ids, dtype=np.int64)
            chart = inside_chart(pcfg, x)
            trees = sample_trees(pcfg, chart, 1, seed=params.seed, epoch=state.minibatch,
                                 sentence=m * (1 << 32) + i, root=c, stream=STREAM_AG_RELABEL)
            node_keys = tree_keys(grammar, trees, keys)
            new_keys.append(node_keys[0])
            pos_of_node = position[trees.symbol]
            for p in np.flatnonzero((trees.kind != KIND_CACHED) & (pos_of_node >= 0)).tolist():
                if p > 0:
                    pending[int(pos_of_node[p])][node_keys[p]] = None
        # level m: new trees, duplicates merged
        mapping: list[dict[TreeKey, TreeKey]] = [{} for _ in range(n_adapted)]
        index: dict[TreeKey, int] = {}
        atoms: list[Atom] = []
        f_tilde: list[float] = []
        for atom, f, key in zip(tngs[m].atoms, tngs[m].f_tilde.tolist(), new_keys):
            mapping[m][atom.key] = key
            if key in index:
                f_tilde[index[key]] += f
                continue
            index[key] = len(atoms)
            atoms.append(atom if key == atom.key else atom_from_key(grammar, key))
            f_tilde.append(f)
        tngs[m] = TNG(tuple(atoms), np.asarray(f_tilde, dtype=np.float64))
        # more specific levels: new inner subtrees join with f~ = 0
        for mm in range(m):
            known = {a.key for a in tngs[mm].atoms}
            extra = [k for k in pending[mm] if k not in known]
            if extra:
                tngs[mm] = TNG(tngs[mm].atoms + tuple(atom_from_key(grammar, k) for k in extra),
                               np.concatenate([tngs[mm].f_tilde, np.zeros(len(extra))]))
        # more general levels: rewrite the keys that contain changed atoms
        for mm in range(m + 1, n_adapted):
            seen: dict[TreeKey, int] = {}
            rewritten: list[Atom] = []
            counts: list[float] = []
            for atom, f in zip(tngs[mm].atoms, tngs[mm].f_tilde.tolist()):
                key = _rewrite(grammar, atom.key, mapping)
                mapping[mm][atom.key] = key
                if key in seen:  # two atoms now hold the same tree: one atom
                    counts[seen[key]] += f
                    continue
                seen[key] = len(rewritten)
                rewritten.append(atom if key == atom.key else atom_from_key(grammar, key))
                counts.append(f)
            tngs[mm] = TNG(tuple(rewritten), np.asarray(counts, dtype=np.float64))
        current = variational_parameters(replace(current, tngs=tuple(tngs)), params)
    return current


def update_minibatch(state: AGState, stats: AGStats, params: OnlineParams) -> AGState:
    """Apply one online step (Alg. 6 lines 8-11; eqs. 8.8-8.12 and section 8.3.1).

    Parameters
    ----------
    state : AGState
        The state the minibatch was parsed with.
    stats : AGStats
        The minibatch's merged counts.
    params : OnlineParams
        Settings.

    Returns
    -------
    AGState
    """
    if stats.n_sentences == 0:
        raise ValueError("cannot update on an empty minibatch")
    l = state.minibatch + 1  # noqa: E741 (the paper's symbol)
    eps = params.step_size(l)
    scale = params.corpus_size / (stats.n_sentences * stats.n_samples)
    grown, counts = add_candidates(state, stats)
    tngs = tuple(TNG(t.atoms, (1.0 - eps) * t.f_tilde + eps * scale * c) for t, c in zip(grown.tngs, counts))
    g_tilde = (1.0 - eps) * state.g_tilde + eps * scale * stats.g
    new = replace(grown, tngs=tngs, g_tilde=g_tilde, minibatch=l, decay=state.decay * (1.0 - eps))
    new = variational_parameters(new, params)
    if l % params.prune_every == 0:
        new = prune(new, params, eps)
        if params.table_labels:
            new = resample_table_labels(new, params)
        new = optimize_hyperparameters(new, params)
    return new


def optimize_hyperparameters(state: AGState, params: OnlineParams) -> AGState:
    """Re-estimate each adaptor's PY a (and b) from its sticks' q, then recompute nu ([Z] section 8.2.4).

    The empirical-Bayes step of :func:`topicflow.models.adaptor_grammar.hyper.optimize_pitman_yor` per
    adapted nonterminal, with nu held fixed; the new a, b replace the grammar's (the state's ``grammar``
    carries them from then on) and nu1, nu2 are recomputed with them (eqs. 8.11-8.12). Called by
    :func:`update_minibatch` after every pruning, the schedule of PyAdaGram (``learning``: prune, then
    ``optimize_alpha_pi``), and by :func:`seed_update` after the seed pass (not PyAdaGram's). The rule
    prior alpha is not re-estimated (module docstring of ``hyper``).

    Parameters
    ----------
    state : AGState
        The state after a pruning or the seed pass.
    params : OnlineParams
        ``optimize_hyper`` says which of a, b move ("none" returns ``state`` unchanged).

    Returns
    -------
    AGState
    """
    if params.optimize_hyper == "none":
        return state
    grammar = state.grammar
    a = np.array(grammar.pitman_yor_a, dtype=np.float64)
    b = np.array(grammar.pitman_yor_b, dtype=np.float64)
    for m in range(len(state.tngs)):
        a[m], b[m] = optimize_pitman_yor(state.nu1[m], state.nu2[m], a[m], b[m],
                                         discount=params.optimize_hyper == "ab")
    if np.array_equal(a, grammar.pitman_yor_a) and np.array_equal(b, grammar.pitman_yor_b):
        return state
    return variational_parameters(replace(state, grammar=replace(grammar, pitman_yor_a=a, pitman_yor_b=b)), params)


def seed_state(state: AGState, sentences: Sequence[np.ndarray], sentence_ids: Sequence[int],
               params: OnlineParams) -> tuple[AGState, AGStats]:
    """Seed the TNGs and counts with one parse of every training sentence before the online steps.

    The reference implementation's initialization (PyAdaGram ``launch_train.py`` calls ``seed`` on the
    whole training set before the first minibatch), and the upfront initialization that [Z] section 8.4.1
    ascribes to VARIATIONAL. Each sentence is parsed once under G' of ``state`` (one tree per sentence;
    with empty TNGs G' is the base PCFG), its f, g and h counts are scaled by |X| / n (1 when all |X|
    sentences are given), the candidates join the TNGs and f~, g~ take the step eps_0 = tau^-kappa
    (1 when tau = 0 or kappa = 0) with l = 0: after the P3 handling ``bias="correct"`` (and PyAdaGram's
    ``"tau-kappa"``) the seeded counts are the counts of the parse themselves. The TNGs are then sorted
    by Lambda without removing anything; the minibatch counter stays 0, so the first online step is l = 1.
    This is :func:`estep_sentences` (one tree per sentence) followed by :func:`seed_update`; a distributed
    driver runs the E-step over partitions, merges the counts and calls :func:`seed_update` once.

    The PY a, b are then re-estimated (:func:`seed_update`).

    This is a deviation from [Z] section 8.3.1 ("empty TNGs", no preprocessing) for ONLINE, made because
    without it the first minibatch, parsed by the random initial PCFG and scaled by |X| / |B|, fixes a
    short-fragment lexicon that one pass does not leave (docs/adaptor_grammar.md, "Known problem").

    Parameters
    ----------
    state : AGState
        Usually :func:`initial_state`'s.
    sentences : sequence of ndarray of int64
        The training sentences (ideally all |X| of them).
    sentence_ids : sequence of int
        Their global indices (key the random numbers, epoch 0: the online steps use epochs from 1).
    params : OnlineParams
        Settings (corpus size, tau, kappa, bias, seed).

    Returns
    -------
    state : AGState
        The seeded state (``minibatch`` 0).
    stats : AGStats
        The seed parse's counts (one tree per sentence).
    """
    if len(sentences) == 0:
        raise ValueError("cannot seed from no sentences")
    stats = estep_sentences(state.grammar, prepare(state), [t.keys for t in state.tngs], sentences,
                            sentence_ids, n_samples=1, seed=params.seed, epoch=SEED_EPOCH)
    return seed_update(state, stats, params), stats


def seed_update(state: AGState, stats: AGStats, params: OnlineParams) -> AGState:
    """Apply the seed pass's update to the merged counts of its parse (the driver's half of :func:`seed_state`).

    ``stats`` are the counts of one tree per sentence (``n_samples=1``, random numbers keyed by epoch
    :data:`SEED_EPOCH`) drawn under G' of ``state``, merged over any partitions (integer counts: exact).
    The candidates join the TNGs, f~ and g~ take the step eps_0 = tau^-kappa (1 when tau = 0 or kappa = 0)
    with the counts scaled by |X| / n, gamma and nu are recomputed and the TNGs sorted by Lambda without
    removing anything; the minibatch counter stays 0 (:func:`seed_state` has the reasons). Then the PY
    a, b are re-estimated as after a pruning (:func:`optimize_hyperparameters`, unless ``optimize_hyper``
    is "none"), so that the first minibatches are parsed with a, b fitted to the seeded lexicon rather
    than the grammar file's until the first pruning u minibatches later. PyAdaGram's ``seed`` has that
    call commented out; [Z] optimizes all PY hyperparameters and says nothing of a seed pass. It was
    the largest gain measured (token F1 +0.06 to +0.09 on KJV, docs/adaptor_grammar.md "Hyperparameters").

    Parameters
    ----------
    state : AGState
        The state the seed parse was drawn under (usually :func:`initial_state`'s).
    stats : AGStats
        The merged counts of the seed parse.
    params : OnlineParams
        Settings (corpus size, tau, kappa, bias).

    Returns
    -------
    AGState
        The seeded state (``minibatch`` 0).
    """
    if stats.n_sentences == 0:
        raise ValueError("cannot seed from no sentences")
    if stats.n_samples != 1:
        raise ValueError(f"the seed pass draws one tree per sentence, got counts of {stats.n_samples}")
    eps = 1.0 if params.tau <= 0.0 or params.kappa == 0.0 else float(params.tau ** -params.kappa)
    scale = params.corpus_size / stats.n_sentences
    grown, counts = add_candidates(state, stats)
    tngs = tuple(TNG(t.atoms, (1.0 - eps) * t.f_tilde + eps * scale * c) for t, c in zip(grown.tngs, counts))
    g_tilde = (1.0 - eps) * state.g_tilde + eps * scale * stats.g
    new = replace(grown, tngs=tngs, g_tilde=g_tilde, decay=state.decay * (1.0 - eps))
    new = variational_parameters(new, params)
    return optimize_hyperparameters(prune(new, params, eps, reorder_only=True), params)


def fit_minibatch(state: AGState, sentences: Sequence[np.ndarray], sentence_ids: Sequence[int],
                  params: OnlineParams) -> tuple[AGState, AGStats]:
    """Parse one minibatch and update the state: the serial form of one iteration of Alg. 6.

    Parameters
    ----------
    state : AGState
        Current state.
    sentences : sequence of ndarray of int64
        The minibatch.
    sentence_ids : sequence of int
        Their global indices.
    params : OnlineParams
        Settings.

    Returns
    -------
    state : AGState
        The updated state.
    stats : AGStats
        The minibatch's counts.
    """
    pcfg = prepare(state)
    stats = estep_sentences(state.grammar, pcfg, [t.keys for t in state.tngs], sentences, sentence_ids,
                            n_samples=params.n_samples, seed=params.seed, epoch=state.minibatch + 1)
    return update_minibatch(state, stats, params), stats


def tree_log_weight(pcfg: DerivedPCFG, trees: SampledTrees, sample: int) -> float:
    """Return the log weight of one sampled tree under G' (sum of its rules' and atoms' log weights).

    Parameters
    ----------
    pcfg : DerivedPCFG
        G' the tree was drawn from.
    trees : SampledTrees
        Draws from one chart.
    sample : int
        Which tree.

    Returns
    -------
    float
    """
    lo, hi = int(trees.tree_ptr[sample]), int(trees.tree_ptr[sample + 1])
    total = 0.0
    for p in range(lo, hi):
        if trees.kind[p] == KIND_CACHED:  # look the atom up among the entries (no dict over all of them)
            hit = np.flatnonzero((pcfg.entry_nt == trees.symbol[p]) & (pcfg.entry_atom == trees.ident[p]))
            total += math.log(float(pcfg.entry_weight[hit[0]]))
        else:
            total += math.log(pcfg.rule_weight[trees.ident[p]])
    return total


def _key_spans(grammar: Grammar, key: TreeKey, symbol: int, start: int, target: int,
               out: list[tuple[int, int]]) -> int:
    """Walk a tree key rooted at ``symbol`` from position ``start``; record spans of ``target``; return the end."""
    n_nt = grammar.n_nonterminals
    pos = start
    kids = iter(key[1:])
    for sym in grammar.rule_rhs[key[0]]:
        if sym < 0:
            continue
        if sym >= n_nt:
            pos += 1
            continue
        child_start = pos
        pos = _key_spans(grammar, next(kids), int(sym), pos, target, out)
        if sym == target:
            out.append((child_start, pos))
    return pos


def spans_of(grammar: Grammar, trees: SampledTrees, sample: int, nonterminal: int,
             atom_keys: Sequence[Sequence[TreeKey]]) -> list[tuple[int, int]]:
    """Return the spans (start, end) of the outermost nodes of a nonterminal in one sampled tree.

    Cached subtrees are leaves of a sampled tree; their trees (from ``atom_keys``) are walked too, so the
    Words inside a cached Collocation count. For the segmentation grammars, the spans of ``Word`` are the
    words of the sentence.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    trees : SampledTrees
        Draws from one chart.
    sample : int
        Which tree.
    nonterminal : int
        Nonterminal code (e.g. ``grammar.nonterminals.index("Word")``).
    atom_keys : sequence of sequences of tuple
        Per adapted nonterminal, the keys of its TNG when the trees were drawn.

    Returns
    -------
    list of (int, int)
        In sentence order.
    """
    position = grammar.adapted_index
    lo, hi = int(trees.tree_ptr[sample]), int(trees.tree_ptr[sample + 1])
    out: list[tuple[int, int]] = []
    covered_to = -1
    for p in range(lo, hi):  # preorder: the outermost node of a span comes first
        start, end, sym = int(trees.start[p]), int(trees.end[p]), int(trees.symbol[p])
        if start < covered_to:
            continue
        if sym == nonterminal:
            out.append((start, end))
            covered_to = end
        elif trees.kind[p] == KIND_CACHED:
            inner: list[tuple[int, int]] = []
            _key_spans(grammar, atom_keys[position[sym]][int(trees.ident[p])], sym, start, nonterminal, inner)
            if inner:
                out.extend(inner)
                covered_to = end
    return sorted(set(out))


def sample_segmentations(pcfg: DerivedPCFG, grammar: Grammar, atom_keys: Sequence[Sequence[TreeKey]],
                         x: np.ndarray, nonterminal: int, *, n_samples: int = 10, seed: int = 0,
                         sentence: int = 0) -> list[tuple[float, list[tuple[int, int]]]]:
    """Draw ``n_samples`` parses of a sentence and return each one's G' log weight and segmentation.

    For the evaluation protocols of the spec's P10/P11: the F1 averaged over the samples (the reference
    code's), the F1 of the highest-weight sample (:func:`segment`), and the log weight of the most likely
    sampled parse ([Z] Table 8.2's "approximate" held-out likelihood; not a marginal likelihood).

    Parameters
    ----------
    pcfg : DerivedPCFG
        G' of the fitted state (:func:`prepare`).
    grammar : Grammar
        The compiled grammar.
    atom_keys : sequence of sequences of tuple
        Per adapted nonterminal, the keys of its TNG (``[t.keys for t in state.tngs]``).
    x : ndarray of int64
        Terminal ids of the sentence.
    nonterminal : int
        Nonterminal whose spans are the segments (``Word``).
    n_samples : int
        Trees drawn.
    seed : int
        Random seed.
    sentence : int
        Index of the sentence (keys the random numbers).

    Returns
    -------
    list of (float, list of (int, int))
        Per sample, in draw order.
    """
    chart = inside_chart(pcfg, x)
    trees = sample_trees(pcfg, chart, n_samples, seed=seed, epoch=0, sentence=sentence)
    return [(tree_log_weight(pcfg, trees, s), spans_of(grammar, trees, s, nonterminal, atom_keys))
            for s in range(n_samples)]


def segment(pcfg: DerivedPCFG, grammar: Grammar, atom_keys: Sequence[Sequence[TreeKey]], x: np.ndarray,
            nonterminal: int, *, n_samples: int = 10, seed: int = 0, sentence: int = 0) -> list[tuple[int, int]]:
    """Segment a sentence: the spans of ``nonterminal`` in the highest-weight of ``n_samples`` sampled trees.

    Parameters
    ----------
    pcfg : DerivedPCFG
        G' of the fitted state (:func:`prepare`).
    grammar : Grammar
        The compiled grammar.
    atom_keys : sequence of sequences of tuple
        Per adapted nonterminal, the keys of its TNG (``[t.keys for t in state.tngs]``).
    x : ndarray of int64
        Terminal ids of the sentence.
    nonterminal : int
        Nonterminal whose spans are the segments (``Word``).
    n_samples : int
        Trees drawn; the one with the largest G' weight is used.
    seed : int
        Random seed.
    sentence : int
        Index of the sentence (keys the random numbers).

    Returns
    -------
    list of (int, int)
    """
    samples = sample_segmentations(pcfg, grammar, atom_keys, x, nonterminal, n_samples=n_samples, seed=seed,
                                   sentence=sentence)
    best = max(range(n_samples), key=lambda s: (samples[s][0], -s))
    return samples[best][1]
