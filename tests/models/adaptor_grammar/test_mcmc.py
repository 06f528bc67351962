"""DP-unigram Gibbs segmenter: the kernel against a plain-NumPy sweep, held-out draws against enumeration,
and recovery of a planted lexicon."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy import stats

from topicflow.errors import InvalidParameterError
from topicflow.models.adaptor_grammar import mcmc
from topicflow.models.common.rng import STREAM_GIBBS, counter_key, uniform_from_key


def word_prob(counts: dict[str, int], word: str, n: int, p: mcmc.DPSegParams) -> float:
    base = math.exp(math.log(p.stop_prob) + (len(word) - 1) * math.log(1.0 - p.stop_prob)
                    + len(word) * -math.log(p.n_symbols))
    return (counts.get(word, 0) + p.concentration * base) / (n + p.concentration)


def end_prob(final: bool, n: int, n_final: int, rho: float) -> float:
    return ((n_final if final else n - n_final) + rho / 2.0) / (n + rho)


def reference_sweep(text: str, starts: np.ndarray, boundaries: np.ndarray, p: mcmc.DPSegParams,
                    seed: int, sweep: int) -> None:
    """Goldwater et al. (2009) appendix A, unigram model, one boundary at a time, in plain Python."""
    counts: dict[str, int] = {}
    for d in range(len(starts) - 1):
        ends = np.flatnonzero(boundaries[starts[d]:starts[d + 1]]) + 1
        for a, b in zip([0, *ends[:-1]], ends):
            word = text[starts[d] + a:starts[d] + b]
            counts[word] = counts.get(word, 0) + 1
    n = sum(counts.values())
    n_sent = len(starts) - 1
    inv_temp = mcmc.inverse_temperature(sweep, p.anneal_sweeps)
    for d in range(n_sent):
        key = np.uint64(counter_key(seed, STREAM_GIBBS, sweep + 1, d))
        a, b = int(starts[d]), int(starts[d + 1])
        for i in range(a, b - 1):
            left = [j for j in range(a, i) if boundaries[j]]
            s = left[-1] + 1 if left else a
            e = next(j for j in range(i + 1, b) if boundaries[j]) + 1
            final = e == b
            w1, w2, w12 = text[s:i + 1], text[i + 1:e], text[s:e]
            removed = [w1, w2] if boundaries[i] else [w12]
            for w in removed:
                counts[w] -= 1
            n -= len(removed)
            n_final = n_sent - 1 if final else n_sent
            p_one = word_prob(counts, w12, n, p) * end_prob(final, n, n_final, p.utterance_prior)
            counts_w2 = dict(counts)
            counts_w2[w1] = counts_w2.get(w1, 0) + 1
            p_two = (word_prob(counts, w1, n, p) * end_prob(False, n, n_final, p.utterance_prior)
                     * word_prob(counts_w2, w2, n + 1, p) * end_prob(final, n + 1, n_final, p.utterance_prior))
            p_one, p_two = p_one ** inv_temp, p_two ** inv_temp
            split = uniform_from_key(key, i - a) * (p_one + p_two) < p_two
            boundaries[i] = 1 if split else 0
            for w in ([w1, w2] if split else [w12]):
                counts[w] = counts.get(w, 0) + 1
            n += 2 if split else 1


SENTENCES = ["abab", "ab", "ba", "abba", "aab", "bbabab", "a", "abab"]


@pytest.mark.parametrize("anneal_sweeps", [0, 2])
def test_kernel_matches_reference_sweeps(anneal_sweeps: int) -> None:
    params = mcmc.DPSegParams(concentration=1.5, stop_prob=0.4, n_symbols=2, anneal_sweeps=anneal_sweeps)
    state = mcmc.init_state(SENTENCES, seed=5)
    boundaries = state.boundaries.copy()
    for sweep in range(3):
        reference_sweep(state.text, state.starts, boundaries, params, seed=9, sweep=sweep)
    fitted = mcmc.run_sweeps(state, params, seed=9, n_sweeps=3)
    np.testing.assert_array_equal(fitted.boundaries, boundaries)
    assert fitted.sweeps == 3 and state.sweeps == 0
    assert mcmc.run_sweeps(fitted, params, seed=9, n_sweeps=0).boundaries.tolist() == boundaries.tolist()
    # a count table rebuilt before every sentence (max_load 0) gives the same chain
    rebuilt = state.boundaries.copy()
    inv_temps = np.array([mcmc.inverse_temperature(s, anneal_sweeps) for s in range(3)])
    mcmc._run_sweeps(mcmc._padded(mcmc._codes(state.text)), state.starts, rebuilt, params.concentration,
                     params.stop_prob, params.n_symbols, params.utterance_prior, inv_temps, 9, 1, 0.0)
    np.testing.assert_array_equal(rebuilt, boundaries)
    # two runs of one sweep each are the run of two sweeps (the sweep number keys the draws)
    twice = mcmc.run_sweeps(mcmc.run_sweeps(state, params, seed=9, n_sweeps=1), params, seed=9, n_sweeps=2)
    np.testing.assert_array_equal(twice.boundaries, fitted.boundaries)


def test_state_invariants() -> None:
    state = mcmc.init_state(SENTENCES, seed=1)
    assert all(state.boundaries[state.starts[1:] - 1] == 1)
    assert ["".join(words) for words in mcmc.segmentations(state)] == SENTENCES
    assert sum(mcmc.word_counts(state).values()) == int(state.boundaries.sum())
    assert mcmc.init_state(["abc"], seed=0, boundary_prob=0.0).boundaries.tolist() == [0, 0, 1]
    assert [mcmc.inverse_temperature(s, 20) for s in (0, 1, 2, 19, 20, 500)] == [0.1, 0.1, 0.2, 1.0, 1.0, 1.0]
    with pytest.raises(InvalidParameterError):
        mcmc.DPSegParams(stop_prob=1.0)
    with pytest.raises(InvalidParameterError):
        mcmc.init_state(["ab", ""], seed=0)


def segmentation_log_prob(words: list[str], counts: dict[str, int], n: int, n_final: int,
                          p: mcmc.DPSegParams) -> float:
    return sum(math.log(word_prob(counts, w, n, p) * end_prob(k == len(words) - 1, n, n_final, p.utterance_prior))
               for k, w in enumerate(words))


def all_segmentations(sentence: str) -> list[list[str]]:
    result = []
    for cuts in itertools.product([0, 1], repeat=len(sentence) - 1):
        ends = [i + 1 for i, c in enumerate(cuts) if c] + [len(sentence)]
        result.append([sentence[a:b] for a, b in zip([0, *ends[:-1]], ends)])
    return result


def test_heldout_draws_follow_the_exact_posterior() -> None:
    params = mcmc.DPSegParams(concentration=2.0, stop_prob=0.5, n_symbols=2)
    state = mcmc.run_sweeps(mcmc.init_state(SENTENCES, seed=2), params, seed=2, n_sweeps=2)
    counts, n = mcmc.word_counts(state), int(state.boundaries.sum())
    sentence = "abab"
    candidates = all_segmentations(sentence)
    log_p = np.array([segmentation_log_prob(c, counts, n, state.n_sentences, params) for c in candidates])
    samples, log_probs, marginals = mcmc.sample_heldout(state, params, [sentence, "ba"], n_samples=4000, seed=3)
    assert marginals[0] == pytest.approx(np.logaddexp.reduce(log_p), rel=1e-12)
    index = {tuple(c): k for k, c in enumerate(candidates)}
    for words, lp in zip(samples[0][:50], log_probs[0][:50]):
        assert lp == pytest.approx(log_p[index[tuple(words)]], rel=1e-12)
    observed = np.bincount([index[tuple(w)] for w in samples[0]], minlength=len(candidates))
    expected = 4000 * np.exp(log_p - np.logaddexp.reduce(log_p))
    assert stats.chisquare(observed, expected).pvalue > 1e-3
    again, _, _ = mcmc.sample_heldout(state, params, [sentence, "ba"], n_samples=4000, seed=3)
    assert again == samples


def planted_corpus(n_sentences: int, seed: int) -> tuple[list[str], list[list[str]]]:
    """Sentences of 1-6 words drawn from a Zipfian lexicon of 20 words over 8 letters."""
    rng = np.random.default_rng(seed)
    letters = list("abcdefgh")
    lexicon: list[str] = []
    while len(lexicon) < 20:
        word = "".join(rng.choice(letters, size=rng.integers(2, 6)))
        if word not in lexicon:
            lexicon.append(word)
    weights = 1.0 / np.arange(1, 21)
    weights /= weights.sum()
    gold = [[lexicon[k] for k in rng.choice(20, size=rng.integers(1, 7), p=weights)] for _ in range(n_sentences)]
    return ["".join(words) for words in gold], gold


def test_recovers_a_planted_lexicon() -> None:
    sentences, gold = planted_corpus(400, seed=11)
    params = mcmc.DPSegParams(concentration=5.0, stop_prob=0.5, n_symbols=8, anneal_sweeps=40)
    state = mcmc.run_sweeps(mcmc.init_state(sentences, seed=0), params, seed=0, n_sweeps=80)
    predicted = mcmc.segmentations(state)
    gold_spans = {(d, a, b) for d, words in enumerate(gold)
                  for a, b in zip(np.cumsum([0] + [len(w) for w in words[:-1]]), np.cumsum([len(w) for w in words]))}
    predicted_spans = {(d, a, b) for d, words in enumerate(predicted)
                       for a, b in zip(np.cumsum([0] + [len(w) for w in words[:-1]]),
                                       np.cumsum([len(w) for w in words]))}
    correct = len(gold_spans & predicted_spans)
    f1 = 2 * correct / (len(gold_spans) + len(predicted_spans))
    assert f1 > 0.9
