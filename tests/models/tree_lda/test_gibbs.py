"""Tests of topicflow.models.tree_lda.gibbs: the collapsed (z, y) sampler of tLDA / ptLDA.

* Draw for draw against the plain-loop reference tests/reference/tree_gibbs.py (same uniforms, same
  k-major layout, same order of products), monolingual and bilingual (theta shared by languages).
* The kernel's conditional equals the ratio of exact joints p(w, z, y) (Dirichlet-multinomials per
  document and per (topic, node)), and independent chains follow the exact posterior of (z, y) of one
  token, enumerated by brute force on a toy tree where words have two paths (chi-square).
* Flat tree: the conditional is LDA's, and tLDA's topics agree with topicflow's LDA Gibbs sampler.
* Synthetic data drawn from a known tree prior: its topics are recovered.
* Normalization groups ("node_language"): the groups against the reference's own definition; draw for draw
  against the reference (group counts, pseudo-counts, joint); on a bilingual concept tree without shared
  edges the conditional is the ratio of exact joints and chains follow the enumerated posterior; with
  shared edges the product-over-groups joint is the stated surrogate; a flat bilingual tree has polylingual
  LDA's conditional and topics (closed forms) and agrees in distribution with an independent pLDA sampler;
  planted topics are recovered; shards with pseudo-counts give the full-corpus conditional and joint.
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal

from tests.reference import tree_gibbs as ref
from tests.reference.goodness_of_fit import chi_square_p
from topicflow.errors import InvalidParameterError
from topicflow.metrics.recovery import match_topics
from topicflow.models.common.blocks import DocBlock, block_from_csr
from topicflow.models.lda.gibbs import chain as lda_chain
from topicflow.models.lda.gibbs.conditional import token_conditional as lda_conditional
from topicflow.models.lda.gibbs.scores import topic_word_distribution as lda_topic_word
from topicflow.models.lda.gibbs.state import GibbsParams, state_from_topics
from topicflow.models.tree_lda import gibbs as tg
from topicflow.models.tree_lda.tree import PriorTree, flat_tree

#: Smallest chi-square p-value accepted; the draws are fixed by their seeds, so a pass is stable.
MIN_P_VALUE = 1e-3


def toy_tree() -> PriorTree:
    """ROOT -> C1, C2, leaf c; C1 -> a, b; C2 -> a, c. Words a and c have two paths, b one."""
    return PriorTree(
        languages=("en",), n_terms=(3,), node_names=("ROOT", "C1", "C2"),
        edge_parent=np.array([0, 0, 0, 1, 1, 2, 2]), edge_child=np.array([1, 2, -1, -1, -1, -1, -1]),
        edge_prior=np.array([0.3, 0.5, 0.2, 1.0, 0.7, 0.4, 0.9]),
        path_indptr=np.array([0, 2, 4, 6, 7, 9]), path_edges=np.array([0, 3, 1, 5, 0, 4, 2, 1, 6]),
        path_language=np.zeros(5, np.int64), path_term=np.array([0, 0, 1, 2, 2]),
    )


def concept_tree(n_terms: dict[str, int], concepts: list[list[tuple[str, int]]], *, root_prior: float = 0.01,
                 concept_prior: float = 1.0) -> PriorTree:
    """A two-level tree: one node per concept under the root, its words under it; other words under the root.

    Every root edge gets ``root_prior`` times the leaves under it (spec 2.7-P1), concept edges ``concept_prior``.
    """
    languages = tuple(n_terms)
    parent, child, prior = [], [], []
    leaves: list[tuple[int, int, list[int]]] = []  # (language, term, edges)
    in_concept = {(lang, term) for concept in concepts for lang, term in concept}
    for c, concept in enumerate(concepts):
        parent.append(0), child.append(c + 1), prior.append(root_prior * len(concept))
        top = len(parent) - 1
        for lang, term in concept:
            parent.append(c + 1), child.append(-1), prior.append(concept_prior)
            leaves.append((languages.index(lang), term, [top, len(parent) - 1]))
    for li, lang in enumerate(languages):
        for term in range(n_terms[lang]):
            if (lang, term) not in in_concept:
                parent.append(0), child.append(-1), prior.append(root_prior)
                leaves.append((li, term, [len(parent) - 1]))
    leaves.sort(key=lambda leaf: (leaf[0], leaf[1]))
    lengths = [len(leaf[2]) for leaf in leaves]
    return PriorTree(
        languages=languages, n_terms=tuple(n_terms.values()),
        node_names=("ROOT",) + tuple(f"c{c}" for c in range(len(concepts))),
        edge_parent=np.array(parent), edge_child=np.array(child), edge_prior=np.array(prior),
        path_indptr=np.concatenate(([0], np.cumsum(lengths))).astype(np.int64),
        path_edges=np.array([e for leaf in leaves for e in leaf[2]], dtype=np.int64),
        path_language=np.array([leaf[0] for leaf in leaves]), path_term=np.array([leaf[1] for leaf in leaves]),
    )


def draw_tree_corpus(tree: PriorTree, n_topics: int, n_docs: int, doc_length: int, alpha: float, seed: int
                     ) -> tuple[dict[str, DocBlock], np.ndarray]:
    """Draw from tLDA / ptLDA: pi per (topic, node) ~ Dir(beta), theta ~ Dir(alpha), z, then a path from the root.

    Returns the blocks per language and the true pi (n_topics, n_edges).
    """
    rng = np.random.default_rng(seed)
    pi = np.zeros((n_topics, tree.n_edges))
    for k in range(n_topics):
        for node in range(tree.n_nodes):
            edges = tree.children(node)
            pi[k, edges] = rng.dirichlet(tree.edge_prior[edges])
    leaf_of_edge = {int(e): p for p in range(tree.n_paths)
                    for e in tree.path_edges[tree.path_indptr[p + 1] - 1: tree.path_indptr[p + 1]]}
    counts = {lang: np.zeros((n_docs, n)) for lang, n in zip(tree.languages, tree.n_terms)}
    for d in range(n_docs):
        theta = rng.dirichlet(np.full(n_topics, alpha))
        for k in rng.choice(n_topics, size=doc_length, p=theta):
            node = 0
            while True:
                edges = tree.children(node)
                e = int(edges[rng.choice(edges.size, p=pi[k, edges] / pi[k, edges].sum())])
                if tree.edge_child[e] < 0:
                    p = leaf_of_edge[e]
                    counts[tree.languages[tree.path_language[p]]][d, tree.path_term[p]] += 1
                    break
                node = int(tree.edge_child[e])
    blocks = {lang: block_from_csr(sp.csr_matrix(m), language=lang) for lang, m in counts.items()}
    return blocks, pi


def toy_corpus() -> tuple[np.ndarray, np.ndarray]:
    """Two documents, four tokens: (a, c) and (a, b), in CSR order."""
    return np.array([0, 2, 4]), np.array([0, 2, 0, 1], np.int32)


def _assert_counts_consistent(state: tg.TreeGibbsState, tree: PriorTree) -> None:
    doc_topic, edge_topic, node_topic = ref.counts(state.token_indptr, state.topics, state.paths, tree,
                                                   state.n_topics)
    assert_array_equal(state.doc_topic_counts, doc_topic)
    assert_array_equal(state.edge_topic_counts, edge_topic)
    assert_array_equal(state.node_topic_counts, node_topic)


def _bilingual() -> tuple[PriorTree, dict[str, DocBlock]]:
    tree = concept_tree({"en": 6, "de": 5}, [[("en", 0), ("de", 0)], [("en", 1), ("de", 1)], [("en", 1), ("de", 2)],
                                             [("en", 2), ("en", 3)]], root_prior=0.1, concept_prior=0.5)
    rng = np.random.default_rng(4)
    blocks = {"en": block_from_csr(sp.csr_matrix(rng.poisson(0.8, (5, 6))), language="en", first_doc=7),
              "de": block_from_csr(sp.csr_matrix(rng.poisson(0.6, (5, 5))), language="de", first_doc=7)}
    return tree, blocks


# ----------------------------------------------------------------------------- against the reference


@pytest.mark.parametrize("case", ["toy", "bilingual"])
def test_start_and_sweeps_match_reference_draw_for_draw(case: str) -> None:
    if case == "toy":
        tree = toy_tree()
        blocks: DocBlock | dict[str, DocBlock] = block_from_csr(
            sp.csr_matrix(np.array([[2, 0, 1], [1, 1, 1], [0, 0, 3]])), language="en", first_doc=3)
    else:
        tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=np.array([0.2, 0.5, 0.1]), seed=11)
    state = tg.initial_state(blocks, tree, params)
    topics, paths = ref.random_start(state.token_indptr, state.token_words, tree, 3, 11, state.first_doc)
    assert_array_equal(state.topics, topics)
    assert_array_equal(state.paths, paths)
    _assert_counts_consistent(state, tree)
    later = tg.run_sweeps(state, tree, params, 4)
    topics, paths = ref.run_sweeps(state.token_indptr, state.token_words, topics, paths, tree, params.alpha, 11, 4,
                                   first_doc=state.first_doc)
    assert_array_equal(later.topics, topics)
    assert_array_equal(later.paths, paths)
    _assert_counts_consistent(later, tree)
    assert later.sweeps_done == 4
    assert_allclose(tg.joint_log_likelihood(later, tree),
                    ref.log_joint(later.token_indptr, later.topics, later.paths, tree, params.alpha), rtol=1e-12)


def test_bilingual_documents_share_theta() -> None:
    tree, blocks = _bilingual()
    state = tg.initial_state(blocks, tree, tg.TreeGibbsParams(n_topics=2))
    lengths = {lang: np.asarray(b.to_csr().sum(axis=1)).ravel() for lang, b in blocks.items()}
    assert_array_equal(state.doc_topic_counts.sum(axis=1), lengths["en"] + lengths["de"])
    # within each document, the English tokens (words 0..5) come first, then the German ones (6..10)
    for d in range(state.n_docs):
        words = state.token_words[state.token_indptr[d]:state.token_indptr[d + 1]]
        assert np.all(np.diff((words >= 6).astype(int)) >= 0)
        assert np.sum(words >= 6) == lengths["de"][d]


def test_run_in_pieces_equals_run_at_once_and_checkpoint_roundtrip() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=4, seed=2)
    state = tg.initial_state(blocks, tree, params)
    at_once = tg.run_sweeps(state, tree, params, 5)
    first = tg.run_sweeps(state, tree, params, 2)
    restored = tg.from_arrays(*tg.to_arrays(first))
    pieces = tg.run_sweeps(restored, tree, params, 3)
    for name in tg.STATE_ARRAYS:
        assert_array_equal(getattr(pieces, name), getattr(at_once, name))
    assert pieces.sweeps_done == at_once.sweeps_done == 5
    for params_ in (params, tg.TreeGibbsParams(n_topics=2, doc_topic_prior=np.array([0.1, 0.7]), seed=9)):
        again = tg.TreeGibbsParams.from_dict(json.loads(json.dumps(params_.to_dict())))
        assert_array_equal(again.alpha, params_.alpha)
        assert (again.n_topics, again.seed) == (params_.n_topics, params_.seed)


def test_sweeps_with_pseudo_counts_match_reference() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=0.3, seed=8)
    extra = np.random.default_rng(1).integers(0, 4, (2, tree.n_edges)).astype(float)
    state = tg.initial_state(blocks, tree, params)
    later = tg.run_sweeps(state, tree, params, 3, pseudo_counts=extra)
    topics, paths = ref.run_sweeps(state.token_indptr, state.token_words, state.topics, state.paths, tree,
                                   params.alpha, 8, 3, first_doc=state.first_doc, pseudo_counts=extra)
    assert_array_equal(later.topics, topics)
    assert_array_equal(later.paths, paths)
    _assert_counts_consistent(later, tree)  # the pseudo-counts never enter the state's counts
    assert not np.array_equal(later.topics, tg.run_sweeps(state, tree, params, 3).topics)


def test_conditional_of_a_shard_with_the_other_shards_edge_counts_is_the_full_corpus_conditional() -> None:
    """The distributed-sweep identity: documents split into shards A and B, the conditional of a token of A
    computed from A's counts plus B's edge counts (pseudo-counts) equals the one computed from the whole
    corpus (to rounding: the sums N + M + beta are added in another order)."""
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, seed=2)
    full = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 2)
    n_a = int(full.token_indptr[3])
    shard_a = tg.state_from_assignments(full.token_indptr[:4], full.token_words[:n_a], full.topics[:n_a],
                                        full.paths[:n_a], tree, params, first_doc=full.first_doc)
    other = full.edge_topic_counts - shard_a.edge_topic_counts
    for token in range(n_a):
        assert_allclose(tg.token_conditional(shard_a, tree, token, pseudo_counts=other),
                        tg.token_conditional(full, tree, token), rtol=1e-13)
    with pytest.raises(InvalidParameterError, match="pseudo_counts"):
        tg.run_sweeps(shard_a, tree, params, 1, pseudo_counts=-other)


@pytest.mark.parametrize("n_topics", [1, 3])
def test_sweeps_and_conditionals_leave_the_input_state_alone(n_topics: int) -> None:
    """A flat tree has one internal node and K = 1 one topic: their count arrays are both C- and F-ordered,
    the case where a transposed "copy" could silently be a view."""
    block = block_from_csr(sp.csr_matrix(np.array([[3, 1, 0], [0, 2, 2]])), language="en")
    tree = flat_tree(["en"], [3], 0.1)
    params = tg.TreeGibbsParams(n_topics=n_topics, seed=3)
    state = tg.initial_state(block, tree, params)
    before = {name: getattr(state, name).copy() for name in tg.STATE_ARRAYS}
    first = tg.token_conditional(state, tree, 4)
    tg.run_sweeps(state, tree, params, 3)
    assert_array_equal(tg.token_conditional(state, tree, 4), first)
    for name in tg.STATE_ARRAYS:
        assert_array_equal(getattr(state, name), before[name])


def test_start_and_fold_in_do_not_depend_on_how_documents_are_split() -> None:
    """Draws are keyed by global document: the random start of a split corpus is the concatenation of the
    parts' starts, and fold-in (per document, topics fixed) gives the same counts for any split."""
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, seed=6)
    whole = tg.initial_state(blocks, tree, params)
    parts = [tg.initial_state({lang: b.slice(lo, hi) for lang, b in blocks.items()}, tree, params)
             for lo, hi in ((0, 2), (2, 5))]
    assert_array_equal(np.concatenate([p.topics for p in parts]), whole.topics)
    assert_array_equal(np.concatenate([p.paths for p in parts]), whole.paths)
    assert_array_equal(sum(p.edge_topic_counts for p in parts), whole.edge_topic_counts)
    pi = tg.edge_posterior_mean(tg.run_sweeps(whole, tree, params, 3), tree)
    folded = tg.fold_in(blocks, tree, pi, 0.1, n_sweeps=3, seed=9)
    split = [tg.fold_in({lang: b.slice(lo, hi) for lang, b in blocks.items()}, tree, pi, 0.1, n_sweeps=3, seed=9)
             for lo, hi in ((0, 1), (1, 4), (4, 5))]
    assert_array_equal(np.concatenate(split), folded)


def test_fold_in_matches_reference_and_finds_the_planted_topic() -> None:
    tree = toy_tree()
    pi = np.array([[0.9, 0.05, 0.05, 0.99, 0.01, 0.5, 0.5], [0.05, 0.05, 0.9, 0.5, 0.5, 0.5, 0.5]])
    block = block_from_csr(sp.csr_matrix(np.array([[4, 0, 0], [0, 0, 5], [2, 1, 1]])), language="en", first_doc=2)
    alpha = np.array([0.1, 0.3])
    got = tg.fold_in(block, tree, pi, alpha, n_sweeps=4, seed=5)
    indptr, words, _ = tg.tokens_from_blocks(block, tree)
    assert_array_equal(got, ref.fold_in(indptr, words, tree, pi, alpha, 5, 4, first_doc=2))
    assert got[0, 0] == 4 and got[1, 1] == 5  # word a is topic 0's, word c (direct root leaf) topic 1's


# ----------------------------------------------------------------------------- exact posterior


def test_conditional_equals_ratio_of_exact_joints() -> None:
    tree = toy_tree()
    indptr, words = toy_corpus()
    params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=np.array([0.4, 0.9]))
    state = tg.state_from_assignments(indptr, words, np.array([0, 1, 1, 0]), np.array([1, 4, 0, 2]), tree, params)
    word_paths = ref.word_paths(tree)
    for token in range(4):
        got = tg.token_conditional(state, tree, token)
        options = word_paths[words[token]]
        logs = np.zeros((2, len(options)))
        for k in range(2):
            for j, p in enumerate(options):
                topics, paths = state.topics.copy(), state.paths.copy()
                topics[token], paths[token] = k, p
                logs[k, j] = ref.log_joint(indptr, topics, paths, tree, params.alpha)
        expected = np.exp(logs - logs.max())
        assert_allclose(got, expected / expected.sum(), rtol=1e-12)


def test_independent_chains_follow_the_exact_posterior_of_one_token() -> None:
    """2,000 chains of 15 sweeps, each from its own seed: the last (z, y) of tokens 0 and 1 are independent
    draws whose law is within rounding of the exact posterior (the toy chain mixes in a few sweeps: its
    exact transition is a small stochastic matrix); chi-square over the K x S_w = 4 outcomes."""
    tree = toy_tree()
    indptr, words = toy_corpus()
    block = block_from_csr(sp.csr_matrix(np.array([[1, 0, 1], [1, 1, 0]])), language="en")
    alpha = np.array([0.5, 0.8])
    n_chains = 2000
    draws = np.zeros((2, n_chains), dtype=np.int64)
    for seed in range(n_chains):
        params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=alpha, seed=seed)
        state = tg.run_sweeps(tg.initial_state(block, tree, params), tree, params, 15)
        assert_array_equal(state.token_words, words)
        for token in range(2):
            options = ref.word_paths(tree)[words[token]]
            draws[token, seed] = state.topics[token] * len(options) + options.index(int(state.paths[token]))
    for token in range(2):
        exact = ref.exact_token_posterior(indptr, words, tree, alpha, token).ravel()
        observed = np.bincount(draws[token], minlength=exact.size)
        assert chi_square_p(observed, exact) > MIN_P_VALUE
        assert 0.5 * np.abs(observed / n_chains - exact).sum() < 0.05  # TV; its sd at n = 2,000 is about 0.01


# ----------------------------------------------------------------------------- flat tree = LDA


def test_flat_tree_conditional_is_ldas() -> None:
    rng = np.random.default_rng(0)
    counts = sp.csr_matrix(rng.poisson(1.0, (4, 7)))
    block = block_from_csr(counts, language="en")
    tree = flat_tree(["en"], [7], 0.05)
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.2, seed=1)
    state = tg.run_sweeps(tg.initial_state(block, tree, params), tree, params, 2)
    lda = state_from_topics(state.token_indptr, state.token_words, state.topics, 7,
                            GibbsParams(n_topics=3, doc_topic_prior=0.2, topic_word_prior=0.05))
    for token in range(0, state.n_tokens, 3):
        d = int(np.searchsorted(state.token_indptr, token, side="right") - 1)
        w, k = int(state.token_words[token]), int(state.topics[token])
        expected = lda_conditional(lda.doc_topic_counts[d], lda.term_topic_counts[w], lda.topic_counts, 0.2, 0.05, 7,
                                   exclude=k)
        assert_allclose(tg.token_conditional(state, tree, token)[:, 0], expected / expected.sum(), rtol=1e-13)
    assert_allclose(tg.topic_word_distribution(state, tree)["en"], lda_topic_word(lda), rtol=1e-13)


def test_flat_tree_with_word_specific_priors_has_ldas_conditional() -> None:
    beta = np.array([0.1, 0.4, 2.0])
    tree = flat_tree(["en"], [3], [beta])
    indptr, words = np.array([0, 3, 5]), np.array([0, 1, 2, 2, 0], np.int32)
    params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=0.3)
    state = tg.state_from_assignments(indptr, words, np.array([0, 1, 1, 0, 0]), words, tree, params)
    # token 3 (document 1, word 2, topic 0) removed from the counts:
    n_dk = np.array([1, 0])  # document 1 keeps token 4 (topic 0)
    n_wk = np.array([0, 1])  # word 2 keeps token 2 (topic 1)
    n_k = np.array([2, 2])   # tokens 0 and 4 on topic 0; 1 and 2 on topic 1
    expected = (n_dk + 0.3) * (n_wk + beta[2]) / (n_k + beta.sum())
    assert_allclose(tg.token_conditional(state, tree, 3)[:, 0], expected / expected.sum(), rtol=1e-13)


def test_flat_tree_topics_agree_with_lda_gibbs() -> None:
    """Same corpus, same priors: the posterior-mean topics of tLDA on a flat tree and of topicflow's LDA Gibbs
    (SparseLDA buckets; different draws) are estimates of the same posterior mean; averaged over 400 sweeps
    after 60 of burn-in on a well-separated planted corpus, matched topics differ by Hellinger < 0.05 (the
    Monte Carlo error of the averages: with seeds 4, 5 and 6 the worst pair is at most 0.023)."""
    rng = np.random.default_rng(3)
    true = np.zeros((3, 12))
    for k in range(3):
        true[k, 4 * k: 4 * k + 4] = rng.dirichlet(np.ones(4))
    theta = rng.dirichlet(np.full(3, 0.3), size=60)
    counts = np.stack([rng.multinomial(30, theta[d] @ true) for d in range(60)])
    block = block_from_csr(sp.csr_matrix(counts), language="en")
    tree = flat_tree(["en"], [12], 0.1)
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.3, seed=4)
    state = tg.run_sweeps(tg.initial_state(block, tree, params), tree, params, 60)
    lda_params = GibbsParams(n_topics=3, doc_topic_prior=0.3, topic_word_prior=0.1, seed=4)
    lda = lda_chain.run_sweeps(lda_chain.initial_state(block, lda_params), lda_params, 60)
    tree_mean, lda_mean = np.zeros((3, 12)), np.zeros((3, 12))
    for _ in range(400):
        state = tg.run_sweeps(state, tree, params, 1)
        lda = lda_chain.run_sweeps(lda, lda_params, 1)
        tree_mean += tg.topic_word_distribution(state, tree)["en"] / 400
        lda_mean += lda_topic_word(lda) / 400
    assert match_topics(tree_mean, lda_mean).worst < 0.05
    assert match_topics(tree_mean, true).worst < 0.15


# ----------------------------------------------------------------------------- synthetic recovery


def test_recovers_topics_drawn_from_a_tree_prior() -> None:
    """Bilingual two-level tree (40 concepts pairing en i with de i, 10 uncorrelated words per language);
    3 topics, 150 aligned document pairs of 2 x 40 tokens. After 150 sweeps the topics' word distributions
    per language match the truth (Hungarian matching) with Hellinger < 0.15 (observed: at most 0.09; the
    random start is at 0.5-0.6). The bound covers the finite sample: about 2,000 tokens per topic and
    language over 50 words."""
    tree = concept_tree({"en": 50, "de": 50}, [[("en", i), ("de", i)] for i in range(40)], root_prior=0.05,
                        concept_prior=1.0)
    n_topics = 3
    blocks, pi = draw_tree_corpus(tree, n_topics, 150, 80, 0.2, seed=7)
    params = tg.TreeGibbsParams(n_topics=n_topics, doc_topic_prior=0.2, seed=1)
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 150)
    arrays = tg.tree_arrays(tree)
    true_word = np.add.reduceat(tg.path_probabilities(pi, tree), arrays.word_path_indptr[:-1], axis=1)
    estimated = tg.topic_word_distribution(state, tree)
    true_en = true_word[:, :50] / true_word[:, :50].sum(axis=1, keepdims=True)
    true_de = true_word[:, 50:] / true_word[:, 50:].sum(axis=1, keepdims=True)
    match = match_topics(estimated["en"], true_en)
    assert match.worst < 0.15
    # the German topics are matched by the same permutation: theta is shared across languages
    assert match_topics(estimated["de"], true_de).worst < 0.15
    assert_array_equal(match_topics(estimated["de"], true_de).estimated, match.estimated)


# ----------------------------------------------------------------------------- read-outs and scores


def test_edge_means_normalize_per_node_and_topic_word_per_language() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, seed=5)
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 3)
    pi = tg.edge_posterior_mean(state, tree)
    for node in range(tree.n_nodes):
        assert_allclose(pi[:, tree.children(node)].sum(axis=1), 1.0, rtol=1e-13)
    # every leaf's path probabilities over the whole tree sum to one per topic
    assert_allclose(tg.path_probabilities(pi, tree).sum(axis=1), 1.0, rtol=1e-13)
    for lang, phi in tg.topic_word_distribution(state, tree).items():
        assert phi.shape == (3, tree.n_terms[tree.languages.index(lang)])
        assert_allclose(phi.sum(axis=1), 1.0, rtol=1e-13)
    counts = tg.word_topic_counts(state, tree)
    for lang, block in blocks.items():
        assert_array_equal(counts[lang].sum(axis=0), np.asarray(block.to_csr().sum(axis=0)).ravel())
    assert sum(int(c.sum()) for c in counts.values()) == state.n_tokens


def test_alpha_fixed_point_is_ldas() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=np.array([0.2, 0.5, 1.0]), seed=5)
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 3)
    lda = state_from_topics(state.token_indptr, state.token_words, state.topics, 11,
                            GibbsParams(n_topics=3, doc_topic_prior=np.array([0.2, 0.5, 1.0])))
    expected, _ = lda_chain.optimize_hyperparameters(lda)
    assert_allclose(tg.optimize_doc_topic_prior(state), expected, rtol=1e-14)
    optimized = tg.run_sweeps(state, tree, params, 2, optimize_every=1, burn_in=1)
    assert not np.allclose(optimized.doc_topic_prior, state.doc_topic_prior)


# ----------------------------------------------------------------------------- bad input


def test_bad_input_is_named() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=2)
    with pytest.raises(InvalidParameterError, match="aligned"):
        tg.initial_state({"en": blocks["en"], "de": blocks["de"].slice(0, 3)}, tree, params)
    with pytest.raises(InvalidParameterError, match="'fr'"):
        tg.initial_state({"fr": blocks["en"]}, tree, params)
    wide = block_from_csr(sp.csr_matrix(np.ones((2, 9))), language="de")
    with pytest.raises(InvalidParameterError, match="term id 8"):
        tg.initial_state(wide, tree, params)
    state = tg.initial_state(blocks, tree, params)
    with pytest.raises(InvalidParameterError, match="tree the state"):
        tg.run_sweeps(state, toy_tree(), params, 1)
    with pytest.raises(InvalidParameterError, match="n_topics"):
        tg.run_sweeps(state, tree, tg.TreeGibbsParams(n_topics=3), 1)
    with pytest.raises(InvalidParameterError, match="end at the token's word"):
        tg.state_from_assignments(np.array([0, 1]), np.array([0], np.int32), np.array([0]), np.array([2]),
                                  toy_tree(), params)


# ----------------------------------------------------------------------------- normalization groups


def toy_bilingual_tree() -> PriorTree:
    """ROOT -> C1 (en a, en b), C2 (de x, de y), en c, en a, de y. No edge has leaves of two languages below it,
    so under "node_language" every edge is in one group: (ROOT, en) = {0, 2, 5}, (ROOT, de) = {1, 8},
    (C1, en) = {3, 4}, (C2, de) = {6, 7}; under "node" ROOT's group pools both languages."""
    return PriorTree(
        languages=("en", "de"), n_terms=(3, 2), node_names=("ROOT", "C1", "C2"),
        edge_parent=np.array([0, 0, 0, 1, 1, 0, 2, 2, 0]), edge_child=np.array([1, 2, -1, -1, -1, -1, -1, -1, -1]),
        edge_prior=np.array([0.05, 0.08, 0.04, 1.0, 0.7, 0.06, 0.9, 0.6, 0.05]),
        path_indptr=np.array([0, 2, 3, 5, 6, 8, 10, 11]), path_edges=np.array([0, 3, 5, 0, 4, 2, 1, 6, 1, 7, 8]),
        path_language=np.array([0, 0, 0, 0, 1, 1, 1]), path_term=np.array([0, 0, 1, 2, 0, 1, 1]),
    )


def toy_bilingual_blocks() -> dict[str, DocBlock]:
    """Two documents: (en a, de y) and (en a, en b, de x)."""
    return {"en": block_from_csr(sp.csr_matrix(np.array([[1, 0, 0], [1, 1, 0]])), language="en"),
            "de": block_from_csr(sp.csr_matrix(np.array([[0, 1], [1, 0]])), language="de")}


def _assert_group_counts(state: tg.TreeGibbsState, tree: PriorTree) -> None:
    doc_topic, edge_topic, group_topic = ref.counts(state.token_indptr, state.topics, state.paths, tree,
                                                    state.n_topics, state.normalization)
    assert_array_equal(state.doc_topic_counts, doc_topic)
    assert_array_equal(state.edge_topic_counts, edge_topic)
    assert_array_equal(state.group_topic_counts, group_topic)


def test_groups_are_the_vb_layouts_and_node_groups_are_the_nodes() -> None:
    """The kernel's groups (from tree_vb_layout) against the reference's, written from their definition."""
    for tree in (toy_bilingual_tree(), _bilingual()[0], toy_tree()):
        for normalization in ("node", "node_language"):
            arrays = tg.tree_arrays(tree, normalization)  # type: ignore[arg-type]
            path_groups, edge_groups, keys = ref.groups(tree, normalization)
            assert arrays.n_groups == len(keys)
            assert_array_equal(arrays.pair_group, [g for groups in path_groups for g in groups])
            assert list(zip(arrays.member_edge.tolist(), arrays.member_group.tolist())) == ref.members(tree,
                                                                                                       normalization)
            if normalization == "node":
                assert keys == [(i,) for i in range(tree.n_nodes)]
    bilingual = tg.tree_arrays(_bilingual()[0], "node_language")
    # the root -> concept edges of the cross-lingual concepts 0, 1, 2 are each in (ROOT, en) and (ROOT, de)
    assert np.diff(bilingual.edge_group_indptr)[[0, 3, 6]].tolist() == [2, 2, 2]


@pytest.mark.parametrize("case", ["toy_bilingual", "bilingual"])
def test_node_language_matches_reference_draw_for_draw(case: str) -> None:
    """Start, sweeps (with and without pseudo-counts), group counts and joint equal the reference's, on a tree
    without shared edges and on one whose cross-lingual concepts put root edges in two groups."""
    if case == "toy_bilingual":
        tree, blocks = toy_bilingual_tree(), toy_bilingual_blocks()
    else:
        tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=np.array([0.2, 0.5, 0.1]), seed=11,
                                normalization="node_language")
    state = tg.initial_state(blocks, tree, params)
    assert state.normalization == "node_language"
    _assert_group_counts(state, tree)
    later = tg.run_sweeps(state, tree, params, 4)
    topics, paths = ref.run_sweeps(state.token_indptr, state.token_words, state.topics, state.paths, tree,
                                   params.alpha, 11, 4, first_doc=state.first_doc, normalization="node_language")
    assert_array_equal(later.topics, topics)
    assert_array_equal(later.paths, paths)
    _assert_group_counts(later, tree)
    assert_allclose(tg.joint_log_likelihood(later, tree),
                    ref.log_joint(later.token_indptr, later.topics, later.paths, tree, params.alpha, "node_language"),
                    rtol=1e-12)
    extra = np.random.default_rng(1).integers(0, 4, (3, tree.n_edges)).astype(float)
    pseudo = tg.run_sweeps(state, tree, params, 3, pseudo_counts=extra)
    topics, paths = ref.run_sweeps(state.token_indptr, state.token_words, state.topics, state.paths, tree,
                                   params.alpha, 11, 3, first_doc=state.first_doc, pseudo_counts=extra,
                                   normalization="node_language")
    assert_array_equal(pseudo.topics, topics)
    assert_array_equal(pseudo.paths, paths)
    _assert_group_counts(pseudo, tree)
    # the groups matter: the "node" chain from the same start draws differently
    node_params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=np.array([0.2, 0.5, 0.1]), seed=11)
    node_later = tg.run_sweeps(tg.initial_state(blocks, tree, node_params), tree, node_params, 4)
    assert_array_equal(node_later.topics, ref.run_sweeps(state.token_indptr, state.token_words, state.topics,
                                                         state.paths, tree, params.alpha, 11, 4,
                                                         first_doc=state.first_doc)[0])


def test_node_language_conditional_equals_ratio_of_exact_joints() -> None:
    """Toy bilingual concept tree (no edge in two groups): the conditional is the ratio of the exact joints
    (one Polya term per document and per (topic, (node, language)))."""
    tree = toy_bilingual_tree()
    params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=np.array([0.4, 0.9]), normalization="node_language")
    start = tg.initial_state(toy_bilingual_blocks(), tree, params)
    indptr, words = start.token_indptr, start.token_words
    state = tg.state_from_assignments(indptr, words, np.array([0, 1, 1, 0, 1]), np.array([1, 6, 0, 2, 4]), tree,
                                      params)
    word_paths = ref.word_paths(tree)
    for token in range(state.n_tokens):
        got = tg.token_conditional(state, tree, token)
        options = word_paths[words[token]]
        logs = np.zeros((2, len(options)))
        for k in range(2):
            for j, p in enumerate(options):
                topics, paths = state.topics.copy(), state.paths.copy()
                topics[token], paths[token] = k, p
                logs[k, j] = ref.log_joint(indptr, topics, paths, tree, params.alpha, "node_language")
        expected = np.exp(logs - logs.max())
        assert_allclose(got, expected / expected.sum(), rtol=1e-12)


def test_node_language_chains_follow_the_exact_posterior_of_one_token() -> None:
    """2,000 chains of 15 sweeps on the toy bilingual corpus under "node_language": the last (z, y) of tokens
    0 (en a) and 1 (de y), both with two paths, follow the exactly enumerated posterior (chi-square over the
    K x S_w = 4 outcomes), which is not the "node" posterior (total variation 0.15 and 0.14 apart: the small root
    priors make the language split of the root group matter)."""
    tree, blocks = toy_bilingual_tree(), toy_bilingual_blocks()
    alpha = np.array([0.5, 0.8])
    n_chains = 2000
    draws = np.zeros((2, n_chains), dtype=np.int64)
    for seed in range(n_chains):
        params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=alpha, seed=seed, normalization="node_language")
        state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 15)
        for token in range(2):
            options = ref.word_paths(tree)[state.token_words[token]]
            draws[token, seed] = state.topics[token] * len(options) + options.index(int(state.paths[token]))
    for token in range(2):
        exact = ref.exact_token_posterior(state.token_indptr, state.token_words, tree, alpha, token,
                                          "node_language").ravel()
        observed = np.bincount(draws[token], minlength=exact.size)
        assert chi_square_p(observed, exact) > MIN_P_VALUE
        assert 0.5 * np.abs(observed / n_chains - exact).sum() < 0.05
        node = ref.exact_token_posterior(state.token_indptr, state.token_words, tree, alpha, token).ravel()
        assert 0.5 * np.abs(node - exact).sum() > 0.1


def test_node_language_with_shared_edges_is_the_stated_surrogate() -> None:
    """With a root -> concept edge in (ROOT, en) and (ROOT, de), the product-over-groups joint counts the edge
    in both groups: the ratio of two such joints is the sampler's conditional times, for every edge e of the
    path and every OTHER group g' of e, (N_ke + beta_e) / (G_kg' + B_g') (counts without the token). This pins
    down what the surrogate is (module docstring) rather than calling it exact."""
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=0.3, seed=4, normalization="node_language")
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 2)
    path_groups, edge_groups, _ = ref.groups(tree, "node_language")
    _, group_prior = ref.topic_priors(tree, 2, normalization="node_language")
    word_paths = ref.word_paths(tree)
    shared = 0
    for token in range(state.n_tokens):
        options = word_paths[state.token_words[token]]
        keep = np.arange(state.n_tokens) != token
        _, n_ke, g_kg = ref.counts(np.array([0, state.n_tokens - 1]), state.topics[keep], state.paths[keep], tree, 2,
                                   "node_language")
        logs, extra = np.zeros((2, len(options))), np.ones((2, len(options)))
        for k in range(2):
            for j, p in enumerate(options):
                topics, paths = state.topics.copy(), state.paths.copy()
                topics[token], paths[token] = k, p
                logs[k, j] = ref.log_joint(state.token_indptr, topics, paths, tree, params.alpha, "node_language")
                for e, g in zip(ref.path_edge_list(tree, p), path_groups[p]):
                    for other in edge_groups[e]:
                        if other != g:
                            shared += 1
                            extra[k, j] *= (n_ke[k, e] + tree.edge_prior[e]) / (g_kg[k, other] + group_prior[k, other])
        joint = np.exp(logs - logs.max())
        surrogate = tg.token_conditional(state, tree, token) * extra
        assert_allclose(surrogate / surrogate.sum(), joint / joint.sum(), rtol=1e-11)
    assert shared > 0


def _flat_bilingual() -> tuple[PriorTree, dict[str, DocBlock], float]:
    rng = np.random.default_rng(0)
    beta = 0.05
    blocks = {"en": block_from_csr(sp.csr_matrix(rng.poisson(1.0, (5, 7))), language="en"),
              "de": block_from_csr(sp.csr_matrix(rng.poisson(0.6, (5, 4))), language="de")}
    return flat_tree(["en", "de"], [7, 4], beta), blocks, beta


def test_flat_bilingual_tree_under_node_language_is_polylingual_lda() -> None:
    """Closed forms written here: pLDA's conditional (N_dk + alpha)(N_kw + beta) / (N_k,lang + V_lang beta), with
    N_dk over both languages and N_k,lang the topic's tokens of the word's language; its topics
    (N_kw + beta) / (N_k,lang + V_lang beta) per language; and the VB read-out of N + beta agrees."""
    from topicflow.models.tree_lda.vb import topic_word as vb_topic_word
    from topicflow.models.tree_lda.vb import tree_vb_layout

    tree, blocks, beta = _flat_bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.2, seed=1, normalization="node_language")
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 3)
    n_terms = {0: 7, 1: 4}
    language = (state.token_words >= 7).astype(int)
    doc = np.repeat(np.arange(state.n_docs), np.diff(state.token_indptr))
    for token in range(state.n_tokens):
        keep = np.arange(state.n_tokens) != token
        z, w, lang = state.topics[keep], int(state.token_words[token]), language[token]
        n_dk = np.bincount(z[doc[keep] == doc[token]], minlength=3)
        n_kw = np.bincount(z[state.token_words[keep] == w], minlength=3)
        n_kl = np.bincount(z[language[keep] == lang], minlength=3)
        expected = (n_dk + 0.2) * (n_kw + beta) / (n_kl + n_terms[lang] * beta)
        assert_allclose(tg.token_conditional(state, tree, token)[:, 0], expected / expected.sum(), rtol=1e-13)
    phi = tg.topic_word_distribution(state, tree)
    counts = tg.word_topic_counts(state, tree)
    for lang, v in (("en", 7), ("de", 4)):
        closed = (counts[lang] + beta) / (counts[lang].sum(axis=1, keepdims=True) + v * beta)
        assert_allclose(phi[lang], closed, rtol=1e-13)
    via_vb = vb_topic_word(tg.edge_posterior_params(state, tree), tree_vb_layout(tree, "node_language"))
    for lang in ("en", "de"):
        assert_allclose(via_vb[lang], phi[lang], rtol=1e-13)
    # "node" on the same tree is LDA over the stacked vocabulary: another conditional
    node = tg.state_from_assignments(state.token_indptr, state.token_words, state.topics, state.paths, tree,
                                     tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.2))
    assert not np.allclose(tg.token_conditional(node, tree, 0), tg.token_conditional(state, tree, 0))


def test_flat_bilingual_topics_agree_with_an_independent_polylingual_gibbs_sampler() -> None:
    """Same planted bilingual corpus, same priors: posterior-mean topics (400 sweeps after 60 of burn-in) of the
    tree sampler on a flat tree under "node_language" and of a textbook pLDA collapsed Gibbs sampler written in
    tests/reference (NumPy's generator; different draws) agree per language within Hellinger 0.05 (the Monte
    Carlo error of the averages; observed 0.006 and 0.011), with the same topic permutation in both languages."""
    rng = np.random.default_rng(3)
    n_terms = (12, 10)
    true = [np.zeros((3, n)) for n in n_terms]
    for k in range(3):
        true[0][k, 4 * k: 4 * k + 4] = rng.dirichlet(np.ones(4))
        true[1][k, 3 * k: 3 * k + 4] = rng.dirichlet(np.ones(4))
    theta = rng.dirichlet(np.full(3, 0.3), size=60)
    counts = [np.stack([rng.multinomial(25, theta[d] @ t) for d in range(60)]) for t in true]
    blocks = {lang: block_from_csr(sp.csr_matrix(c), language=lang) for lang, c in zip(("en", "de"), counts)}
    tree = flat_tree(["en", "de"], list(n_terms), 0.1)
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.3, seed=4, normalization="node_language")
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 60)
    means = [np.zeros((3, n)) for n in n_terms]
    for _ in range(400):
        state = tg.run_sweeps(state, tree, params, 1)
        for mean, lang in zip(means, ("en", "de")):
            mean += tg.topic_word_distribution(state, tree)[lang] / 400
    docs = [[(li, term) for li, c in enumerate(counts) for term in np.repeat(np.arange(c.shape[1]), c[d])]
            for d in range(60)]
    plda = ref.polylingual_lda_gibbs(docs, list(n_terms), 3, 0.3, 0.1, 60, 400, seed=5)
    match_en, match_de = match_topics(means[0], plda[0]), match_topics(means[1], plda[1])
    assert match_en.worst < 0.05 and match_de.worst < 0.05
    assert_array_equal(match_en.estimated, match_de.estimated)
    assert match_topics(means[0], true[0]).worst < 0.15


def draw_language_corpus(tree: PriorTree, n_topics: int, n_docs: int, doc_length: int, alpha: float, seed: int
                         ) -> tuple[dict[str, DocBlock], np.ndarray]:
    """Draw aligned documents with ``doc_length`` tokens per language: pi per (topic, node) ~ Dir(beta), and a
    token of language l walks from the root over the edges with l-leaves below, pi renormalized among them (the
    language is observed, as in ptLDA). Returns the blocks and the true pi (n_topics, n_edges)."""
    rng = np.random.default_rng(seed)
    pi = np.zeros((n_topics, tree.n_edges))
    for k in range(n_topics):
        for node in range(tree.n_nodes):
            edges = tree.children(node)
            pi[k, edges] = rng.dirichlet(tree.edge_prior[edges])
    below = [set() for _ in tree.languages]  # edges with leaves of each language below them
    leaf = {}
    for p in range(tree.n_paths):
        edges = ref.path_edge_list(tree, p)
        below[int(tree.path_language[p])].update(edges)
        leaf[edges[-1]] = int(tree.path_term[p])
    counts = {lang: np.zeros((n_docs, n)) for lang, n in zip(tree.languages, tree.n_terms)}
    for d in range(n_docs):
        theta = rng.dirichlet(np.full(n_topics, alpha))
        for li, lang in enumerate(tree.languages):
            for k in rng.choice(n_topics, size=doc_length, p=theta):
                node = 0
                while True:
                    edges = np.array([e for e in tree.children(node) if int(e) in below[li]])
                    e = int(edges[rng.choice(edges.size, p=pi[k, edges] / pi[k, edges].sum())])
                    if tree.edge_child[e] < 0:
                        counts[lang][d, leaf[e]] += 1
                        break
                    node = int(tree.edge_child[e])
    return {lang: block_from_csr(sp.csr_matrix(m), language=lang) for lang, m in counts.items()}, pi


def test_node_language_recovers_planted_topics() -> None:
    """A bilingual tree with synonym concepts within each language (15 English and 15 German pairs, 20 words of each
    language under the root): no edge is in two groups, so documents drawn with the language observed
    (:func:`draw_language_corpus`) follow the "node_language" model exactly (a Dirichlet restricted to a
    language's edges and renormalized is the Dirichlet of those edges). 150 documents of 40 tokens per
    language, 150 sweeps: the per-language topics match the truth within Hellinger 0.15 (observed 0.09 and
    0.06; the start is at 0.5), with the same permutation in both languages (theta is shared).

    With cross-lingual concepts the pooled counts are a surrogate and recover such data less well (observed
    0.08-0.19 against 0.05-0.09 for "node"; docs/tree-lda.md, "Gibbs sampling")."""
    tree = concept_tree({"en": 50, "de": 50}, [[("en", 2 * i), ("en", 2 * i + 1)] for i in range(15)]
                        + [[("de", 2 * i), ("de", 2 * i + 1)] for i in range(15)], root_prior=0.05, concept_prior=1.0)
    blocks, pi = draw_language_corpus(tree, 3, 150, 40, 0.2, seed=7)
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.2, seed=1, normalization="node_language")
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 150)
    # the truth given the language: each edge's pi renormalized within its group on the path (reference groups)
    path_groups, edge_groups, keys = ref.groups(tree, "node_language")
    group_sum = np.zeros((3, len(keys)))
    for e in range(tree.n_edges):
        for g in edge_groups[e]:
            group_sum[:, g] += pi[:, e]
    true_path = np.ones((3, tree.n_paths))
    for p in range(tree.n_paths):
        for e, g in zip(ref.path_edge_list(tree, p), path_groups[p]):
            true_path[:, p] *= pi[:, e] / group_sum[:, g]
    true_word = tree.word_sums(true_path)
    estimated = tg.topic_word_distribution(state, tree)
    matches = {lang: match_topics(estimated[lang], true_word[lang]) for lang in ("en", "de")}
    assert matches["en"].worst < 0.15 and matches["de"].worst < 0.15
    assert_array_equal(matches["de"].estimated, matches["en"].estimated)
    assert_allclose(true_word["de"].sum(axis=1), 1.0, rtol=1e-12)


def test_node_language_shard_conditional_with_pseudo_counts_is_the_full_corpus_conditional() -> None:
    """Shard A's conditional with shard B's edge counts as pseudo-counts equals the whole corpus's, also when the
    pseudo-counts of a shared edge enter two groups; the shard summaries' document parts plus the merged
    topic part give the whole corpus's joint."""
    from topicflow.tasks.tree_gibbs import counts_only_state, summarize_shard

    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, seed=2, normalization="node_language")
    full = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 2)
    n_a = int(full.token_indptr[3])
    shard_a = tg.state_from_assignments(full.token_indptr[:4], full.token_words[:n_a], full.topics[:n_a],
                                        full.paths[:n_a], tree, params, first_doc=full.first_doc)
    shard_b = tg.state_from_assignments(full.token_indptr[3:] - n_a, full.token_words[n_a:], full.topics[n_a:],
                                        full.paths[n_a:], tree, params, first_doc=full.first_doc + 3)
    other = full.edge_topic_counts - shard_a.edge_topic_counts
    for token in range(n_a):
        assert_allclose(tg.token_conditional(shard_a, tree, token, pseudo_counts=other),
                        tg.token_conditional(full, tree, token), rtol=1e-13)
    summaries = [summarize_shard(shard, tree) for shard in (shard_a, shard_b)]
    merged = counts_only_state(sum(s.edge_topic_counts for s in summaries),
                               sum(s.group_topic_counts for s in summaries), params.alpha, "node_language")
    assert_array_equal(merged.group_topic_counts, full.group_topic_counts)
    assert_array_equal(summaries[0].node_topic_counts, shard_a.group_topic_counts)
    assert_allclose(sum(s.doc_log_likelihood for s in summaries) + tg.joint_log_likelihood(merged, tree),
                    tg.joint_log_likelihood(full, tree), rtol=1e-12)
    for name, a, b in (("topics", tg.topic_word_distribution(merged, tree), tg.topic_word_distribution(full, tree)),):
        for lang in a:
            assert_allclose(a[lang], b[lang], rtol=1e-13, err_msg=name)


def test_node_language_read_outs_normalize_per_group_and_language_and_fold_in_matches_reference() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, seed=5, normalization="node_language")
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 3)
    arrays = tg.tree_arrays(tree, "node_language")
    pi = tg.edge_posterior_mean(state, tree)
    assert pi.shape == (3, arrays.n_members) and arrays.n_members > tree.n_edges
    for g in range(arrays.n_groups):
        assert_allclose(pi[:, arrays.member_group == g].sum(axis=1), 1.0, rtol=1e-13)
    paths = tg.path_probabilities(pi, tree, "node_language")
    for li in range(len(tree.languages)):  # each language's paths form one distribution per topic
        assert_allclose(paths[:, tree.path_language == li].sum(axis=1), 1.0, rtol=1e-13)
    for lang, phi in tg.topic_word_distribution(state, tree).items():
        assert_allclose(phi, tree.word_sums(paths)[lang], rtol=1e-12)
    with pytest.raises(InvalidParameterError, match="member"):
        tg.path_probabilities(pi[:, :tree.n_edges], tree, "node_language")
    folded = tg.fold_in(blocks, tree, pi, 0.1, n_sweeps=3, seed=9, normalization="node_language")
    assert_array_equal(folded, ref.fold_in(state.token_indptr, state.token_words, tree, pi, np.full(3, 0.1), 9, 3,
                                           first_doc=state.first_doc, normalization="node_language"))
    with pytest.raises(InvalidParameterError, match="edge_topic"):
        tg.fold_in(blocks, tree, pi, 0.1, normalization="node")


def test_normalization_in_params_state_and_snapshots() -> None:
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=2, seed=3, normalization="node_language")
    again = tg.TreeGibbsParams.from_dict(json.loads(json.dumps(params.to_dict())))
    assert again.normalization == "node_language"
    assert tg.TreeGibbsParams.from_dict({"n_topics": 2, "seed": 0, "doc_topic_prior": 0.1}).normalization == "node"
    with pytest.raises(InvalidParameterError, match="normalization"):
        tg.TreeGibbsParams(n_topics=2, normalization="language")  # type: ignore[arg-type]
    state = tg.initial_state(blocks, tree, params)
    at_once = tg.run_sweeps(state, tree, params, 4)
    arrays, meta = tg.to_arrays(tg.run_sweeps(state, tree, params, 2))
    restored = tg.from_arrays(arrays, json.loads(json.dumps(meta)))
    assert restored.normalization == "node_language"
    pieces = tg.run_sweeps(restored, tree, params, 2)
    for name in tg.STATE_ARRAYS:
        assert_array_equal(getattr(pieces, name), getattr(at_once, name))
    with pytest.raises(InvalidParameterError, match="normalization"):
        tg.run_sweeps(state, tree, tg.TreeGibbsParams(n_topics=2, seed=3), 1)
    # a snapshot of the "node" sampler written before the groups (node_topic_counts, no normalization) still reads
    node_params = tg.TreeGibbsParams(n_topics=2, seed=3)
    node_state = tg.run_sweeps(tg.initial_state(blocks, tree, node_params), tree, node_params, 1)
    old_arrays, old_meta = tg.to_arrays(node_state)
    old_arrays["node_topic_counts"] = old_arrays.pop("group_topic_counts")
    old_meta.pop("normalization")
    legacy = tg.from_arrays(old_arrays, old_meta)
    assert legacy.normalization == "node"
    assert_array_equal(legacy.node_topic_counts, node_state.group_topic_counts)
    with pytest.raises(InvalidParameterError, match="groups"):  # a "node" state read as "node_language"
        tg.run_sweeps(tg.from_arrays(*tg.to_arrays(node_state)[:1], {**old_meta, "normalization": "node_language"}),
                      tree, params, 1)


# ----------------------------------------------------------------------------- sparse buckets (sparse=True)


@pytest.mark.parametrize("normalization", ["node", "node_language"])
@pytest.mark.parametrize("with_pseudo", [False, True])
def test_bucket_masses_are_the_decomposition_of_the_dense_weights(normalization: str, with_pseudo: bool) -> None:
    """s, r and q written here from the reference's groups and counts: s = sum alpha_k prod beta / prod D,
    r = sum N_dk prod beta / prod D, q = the rest of the reference's dense total; the bound is above s."""
    tree, blocks = _bilingual()
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=np.array([0.2, 0.9, 0.4]), seed=2,
                                normalization=normalization)  # type: ignore[arg-type]
    state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 3)
    extra = np.random.default_rng(1).integers(0, 4, (3, tree.n_edges)).astype(float) if with_pseudo else None
    path_groups, _, _ = ref.groups(tree, normalization)
    _, group_prior = ref.topic_priors(tree, 3, extra, normalization)
    word_paths = ref.word_paths(tree)
    for token in range(state.n_tokens):
        keep = np.arange(state.n_tokens) != token
        d = int(np.searchsorted(state.token_indptr, token, side="right") - 1)
        indptr = state.token_indptr - (state.token_indptr > token)
        doc_topic, edge_topic, group_topic = ref.counts(indptr, state.topics[keep], state.paths[keep], tree, 3,
                                                        normalization)
        w = int(state.token_words[token])
        total = sum(ref.weights(d, w, doc_topic, edge_topic, group_topic, params.alpha, tree, word_paths, extra,
                                normalization))
        s = r = 0.0
        for k in range(3):
            for p in word_paths[w]:
                prior = np.prod([tree.edge_prior[e] for e in ref.path_edge_list(tree, p)])
                norm = np.prod([group_topic[k, g] + group_prior[k, g] for g in path_groups[p]])
                s += params.alpha[k] * prior / norm
                r += doc_topic[d, k] * prior / norm
        got = tg.bucket_masses(state, tree, token, pseudo_counts=extra)
        assert_allclose([got["s"], got["r"], got["q"]], [s, r, total - s - r], rtol=1e-10, atol=1e-15)
        assert s <= got["s_bound"]


@pytest.mark.parametrize("case", ["toy", "toy_bilingual"])
def test_sparse_chains_follow_the_exact_posterior_of_one_token(case: str) -> None:
    """As the dense test: 2,000 sparse chains of 15 sweeps; the last (z, y) of tokens 0 and 1 follow the
    enumerated posterior ("node" on the toy tree, "node_language" on the toy bilingual tree)."""
    if case == "toy":
        tree, normalization = toy_tree(), "node"
        blocks: DocBlock | dict[str, DocBlock] = block_from_csr(sp.csr_matrix(np.array([[1, 0, 1], [1, 1, 0]])),
                                                                language="en")
    else:
        tree, normalization, blocks = toy_bilingual_tree(), "node_language", toy_bilingual_blocks()
    alpha = np.array([0.5, 0.8])
    n_chains = 2000
    draws = np.zeros((2, n_chains), dtype=np.int64)
    for seed in range(n_chains):
        params = tg.TreeGibbsParams(n_topics=2, doc_topic_prior=alpha, seed=seed, sparse=True,
                                    normalization=normalization)  # type: ignore[arg-type]
        state = tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 15)
        for token in range(2):
            options = ref.word_paths(tree)[state.token_words[token]]
            draws[token, seed] = state.topics[token] * len(options) + options.index(int(state.paths[token]))
    _assert_group_counts(state, tree)
    for token in range(2):
        exact = ref.exact_token_posterior(state.token_indptr, state.token_words, tree, alpha, token,
                                          normalization).ravel()
        observed = np.bincount(draws[token], minlength=exact.size)
        assert chi_square_p(observed, exact) > MIN_P_VALUE
        assert 0.5 * np.abs(observed / n_chains - exact).sum() < 0.05


@pytest.mark.parametrize("normalization", ["node", "node_language"])
def test_sparse_draws_of_a_lone_token_against_pseudo_counts_follow_the_dense_conditional(normalization: str) -> None:
    """A corpus of one token (en 2, path root -> c3 -> en 2): every sweep redraws it from its conditional given
    the pseudo-counts alone, so 3,000 sweeps are independent draws. Pseudo-counts on the sibling edge c3 -> en 3
    (not on the path) make D of group c3 much larger than its B, so the s bucket holds much of the mass and its
    bound has slack: the q, exact-s and draw-again branches are all exercised (checked)."""
    tree = _bilingual()[0]
    blocks = {"en": block_from_csr(sp.csr_matrix(np.array([[0, 0, 1, 0, 0, 0]])), language="en"),
              "de": block_from_csr(sp.csr_matrix(np.zeros((1, 5))), language="de")}
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=np.array([3.0, 5.0, 4.0]), seed=3, sparse=True,
                                normalization=normalization)  # type: ignore[arg-type]
    assert ref.path_edge_list(tree, ref.word_paths(tree)[2][0]) == [9, 10]
    extra = np.zeros((3, tree.n_edges))
    extra[:, 11] = [4.0, 6.0, 5.0]
    extra[0, 9], extra[2, 10] = 0.5, 0.3
    state = tg.initial_state(blocks, tree, params)
    masses = tg.bucket_masses(state, tree, 0, pseudo_counts=extra)
    share = masses["s"] / (masses["s"] + masses["r"] + masses["q"])
    assert 0.2 < share < 0.9 and masses["q"] > 0 and masses["s_bound"] > 1.2 * masses["s"]
    conditional = tg.token_conditional(state, tree, 0, pseudo_counts=extra).ravel()
    n_draws = 3000
    observed = np.zeros(conditional.size, dtype=np.int64)
    options = ref.word_paths(tree)[state.token_words[0]]
    for _ in range(n_draws):
        state = tg.run_sweeps(state, tree, params, 1, pseudo_counts=extra)
        observed[state.topics[0] * len(options) + options.index(int(state.paths[0]))] += 1
    assert chi_square_p(observed, conditional) > MIN_P_VALUE
    assert 0.5 * np.abs(observed / n_draws - conditional).sum() < 0.04


def test_sparse_recovers_planted_topics() -> None:
    """The planted corpus of test_recovers_topics_drawn_from_a_tree_prior ("node"), sampled with sparse=True:
    Hellinger < 0.15 per language with one permutation (as the dense sampler; the exact tests above check that
    the two have the same conditional)."""
    tree = concept_tree({"en": 50, "de": 50}, [[("en", i), ("de", i)] for i in range(40)], root_prior=0.05,
                        concept_prior=1.0)
    blocks, pi = draw_tree_corpus(tree, 3, 150, 80, 0.2, seed=7)
    params = tg.TreeGibbsParams(n_topics=3, doc_topic_prior=0.2, seed=1, sparse=True)
    estimated = tg.topic_word_distribution(tg.run_sweeps(tg.initial_state(blocks, tree, params), tree, params, 150),
                                           tree)
    true_word = tree.word_sums(tg.path_probabilities(pi, tree))
    matches = {lang: match_topics(estimated[lang], true_word[lang] / true_word[lang].sum(axis=1, keepdims=True))
               for lang in ("en", "de")}
    assert matches["en"].worst < 0.15 and matches["de"].worst < 0.15
    assert_array_equal(matches["de"].estimated, matches["en"].estimated)
