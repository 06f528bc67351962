"""The driver's K x V copies cut for issue 23 part 5: the same values as the plain NumPy forms."""
from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import gammaln, psi

from topicflow.models.lda.vb.objective import (
    mstep_batch,
    topic_elbo_terms,
)


def plain_topic_elbo_terms(lam: np.ndarray, eta_in: float | np.ndarray) -> float:
    """The one-line NumPy form (three K x V temporaries), with the same normalizers as topicflow."""
    from topicflow.models.common.dirichlet import dirichlet_expectation
    from topicflow.models.common.special import gammaln_array

    eta = np.broadcast_to(np.asarray(eta_in, dtype=np.float64), lam.shape)
    if np.ndim(eta_in) == 0:
        n_topics, n_terms = lam.shape
        prior_norm = n_topics * (math.lgamma(n_terms * float(eta_in)) - n_terms * math.lgamma(float(eta_in)))
    else:
        prior_norm = float(gammaln_array(eta.sum(axis=1)).sum() - gammaln_array(eta).sum())
    var_norm = float(gammaln_array(lam).sum() - gammaln_array(lam.sum(axis=1)).sum())
    return prior_norm + float(np.sum((eta - lam) * dirichlet_expectation(lam))) + var_norm


@pytest.mark.parametrize("n_topics", [1, 63, 67, 192])
@pytest.mark.parametrize("matrix_prior", [False, True])
def test_topic_elbo_terms_in_one_pass_on_any_number_of_threads(n_topics: int, matrix_prior: bool) -> None:
    rng = np.random.default_rng(n_topics)
    lam = rng.gamma(0.5, 3.0, (n_topics, 517)) + 0.01
    eta = rng.gamma(1.0, 1.0, lam.shape) if matrix_prior else 0.01
    values = {topic_elbo_terms(layout, eta, threads=threads)
              for layout in (lam, np.asfortranarray(lam)) for threads in (1, 2, 3)}
    assert len(values) == 1  # the same bits whatever the layout and the number of threads
    value = values.pop()
    assert value == pytest.approx(plain_topic_elbo_terms(lam, eta), rel=1e-13)
    # and the value is the ELBO's topic part (independent check with scipy, to rounding)
    e = np.broadcast_to(eta, lam.shape)
    elog = psi(lam) - psi(lam.sum(1, keepdims=True))
    expected = ((gammaln(e.sum(1)) - gammaln(e).sum(1)).sum() + ((e - lam) * elog).sum()
                + gammaln(lam).sum() - gammaln(lam.sum(1)).sum())
    assert value == pytest.approx(expected, rel=1e-13)


def test_topic_elbo_terms_threads_split_large_models() -> None:
    from topicflow.models.common.threads import MIN_PARALLEL_ELEMENTS

    rng = np.random.default_rng(3)
    lam = rng.gamma(0.05, 20.0, (40, MIN_PARALLEL_ELEMENTS // 40 + 1)) + 0.01  # above the threshold
    assert topic_elbo_terms(lam, 0.01, threads=1) == topic_elbo_terms(lam, 0.01, threads=4)


def test_mstep_in_place_has_the_same_bits() -> None:
    rng = np.random.default_rng(5)
    stats = rng.gamma(0.3, 10.0, (7, 40))
    for prior in (0.01, rng.gamma(1.0, 0.1, (7, 40))):
        expected = mstep_batch(stats, prior)
        scratch = stats.copy()
        out = mstep_batch(scratch, prior, overwrite_stats=True)
        assert out is scratch and out.tobytes() == expected.tobytes()


def test_initial_topics_filled_in_place_are_the_same_draws() -> None:
    from topicflow.models.common.rng import STREAM_TOPIC_INIT, doc_generator
    from topicflow.models.lda.vb.objective import initial_topic_word_var

    lam = initial_topic_word_var(5, 33, seed=7, language_index=1, shape=10.0)
    rows = [doc_generator(7, STREAM_TOPIC_INIT, 1, k).gamma(10.0, 0.1, size=33) for k in range(5)]
    assert lam.flags.c_contiguous and lam.tobytes() == np.asarray(rows).tobytes()
    assert initial_topic_word_var(0, 4, seed=1).shape == (0, 4)


@pytest.mark.parametrize("languages", [("en",), ("en", "de")])
def test_estep_statistics_written_directly_have_the_same_bits(languages: tuple[str, ...],
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """Large blocks write (K, terms) statistics directly; forcing that path on a small block gives the
    same bits as the (terms, K) accumulation and its transpose."""
    import scipy.sparse as sp

    from topicflow.models.common.blocks import block_from_csr
    from topicflow.models.lda.vb import estep
    from topicflow.models.lda.vb.params import VBParams

    rng = np.random.default_rng(11)
    n_topics = estep.STATS_TOPIC_BLOCK + 5
    sizes = {"en": 40, "de": 31}
    blocks, topics = {}, {}
    for lang in languages:
        counts = sp.csr_matrix(rng.poisson(0.3, (25, sizes[lang])))
        blocks[lang] = block_from_csr(counts, language=lang)
        topics[lang] = rng.gamma(1.0, 1.0, (n_topics, sizes[lang]))
    params = VBParams(n_topics=n_topics)
    by_rows, gamma_rows = estep.estep_block(blocks, topics, 0.1, params, return_gamma=True)
    monkeypatch.setattr(estep, "DIRECT_STATS_BYTES", 0)
    direct, gamma_direct = estep.estep_block(blocks, topics, 0.1, params, return_gamma=True)
    assert gamma_rows.tobytes() == gamma_direct.tobytes()
    assert by_rows.doc_elbo == direct.doc_elbo and by_rows.alpha_suff.tobytes() == direct.alpha_suff.tobytes()
    for lang in languages:
        a, b = by_rows.topic_terms[lang], direct.topic_terms[lang]
        assert np.array_equal(a.term_ids, b.term_ids)
        assert b.values.shape == (n_topics, a.term_ids.shape[0]) and b.values.flags.c_contiguous
        assert a.values.tobytes() == b.values.tobytes()
