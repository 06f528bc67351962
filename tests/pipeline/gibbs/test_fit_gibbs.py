"""The distributed collapsed Gibbs driver (topicflow.pipeline.gibbs) on stores.

Planted topics are recovered; the model is the same bit for bit on the threaded and distributed
schedulers, for other groupings of blocks into tasks and other numbers of threads; a fit interrupted
after a checkpoint and resumed ends with the uninterrupted model (also when the run directory lacks a
block's tokens, as one of an earlier version does); the assignment layer lives in the checkpoint (or a
scratch directory removed at the end).
"""
from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import zarr
from numpy.testing import assert_array_equal

from topicflow.io.corpus.reader import Corpus
from topicflow.io.outputs import assignment_layer
from topicflow.metrics.recovery import worst_matched_distance
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.gibbs import GibbsConfig, GibbsSweepRecord, fit_gibbs
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Corpus, Corpus, np.ndarray]:
    base = tmp_path_factory.mktemp("gibbs-fit")
    truth = draw_planted_corpus(n_docs=330, n_topics=5, n_terms=60, doc_length=40, alpha=0.2, seed=4)
    train = write_test_store(base / "train", {"default": truth.counts["default"][:300]}, shard_size=100)
    test = write_test_store(base / "test", {"default": truth.counts["default"][300:]}, shard_size=100)
    return Corpus.open(train), Corpus.open(test), truth.topic_word["default"]


CONFIG = GibbsConfig(n_topics=5, sweeps=6, block_size=35, burn_in=2, optimize_every=2, learn_beta=True, seed=3)


def _same(a: object, b: object) -> None:
    assert_array_equal(a.term_topic, b.term_topic)  # type: ignore[attr-defined]
    assert_array_equal(a.state.doc_topic_prior, b.state.doc_topic_prior)  # type: ignore[attr-defined]
    assert [r.log_likelihood for r in a.trace] == [r.log_likelihood for r in b.trace]  # type: ignore[attr-defined]
    assert [r.beta for r in a.trace] == [r.beta for r in b.trace]  # type: ignore[attr-defined]


def test_recovers_planted_topics_and_scores_the_test_store(planted: tuple[Corpus, Corpus, np.ndarray]) -> None:
    train, test, topic_word = planted
    result = fit_gibbs(train, GibbsConfig(n_topics=5, sweeps=30, block_size=40, seed=7, eval_every=15), test=test)
    assert worst_matched_distance(result.state.topic_word()["default"], topic_word) < 0.15
    scored = [r.heldout_perplexity for r in result.trace if r.heldout_perplexity is not None]
    assert [r.sweep for r in result.trace if r.heldout_perplexity is not None] == [15, 30]
    assert scored[-1] < scored[0] < 60  # 60 terms: a uniform model scores 60
    assert result.trace[-1].log_likelihood > result.trace[0].log_likelihood
    assert result.saved_model.info.method == "gibbs" and result.saved_model.info.kind == "gibbs_lda"
    assert_array_equal(result.topic_counts, result.term_topic.sum(axis=0))
    assert int(result.topic_counts.sum()) == train.n_tokens


def test_same_model_for_any_scheduler_grouping_and_threads(planted: tuple[Corpus, Corpus, np.ndarray],
                                                           client: object) -> None:
    train = planted[0]
    reference = fit_gibbs(train, GibbsConfig(**{**CONFIG.to_dict(), "threads": 1}), client=None)
    for threads, per_task in ((2, 3), (None, 2)):
        config = GibbsConfig(**{**CONFIG.to_dict(), "threads": threads, "blocks_per_partition": per_task})
        _same(fit_gibbs(train, config, client=client), reference)
    assert reference.trace[-1].alpha_sum != 5 * CONFIG.doc_topic_prior  # alpha was learned
    assert reference.trace[-1].beta != CONFIG.topic_word_prior


def test_resume_after_interruption_equals_uninterrupted(planted: tuple[Corpus, Corpus, np.ndarray],
                                                         tmp_path: Path) -> None:
    train = planted[0]
    whole = fit_gibbs(train, CONFIG)
    policy = CheckpointPolicy(tmp_path / "ckpt", every=3, resume=True)

    def interrupt(record: GibbsSweepRecord, model: LDAState) -> None:
        assert model.doc_topic_prior.shape == (5,)
        if record.sweep == 5:
            assert assignment_layer.sweeps_on_disk(policy.path) == [3, 5]  # committed 3, current 5
            block = assignment_layer.block_path(policy.path, 5, 0)
            stored = zarr.open_array(str(block), mode="r")  # an ordinary zarr array
            assert_array_equal(stored[:], assignment_layer.read_block(policy.path, 5, 0, stored.shape[0]))
            assert int(stored[:].max()) < 5
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        fit_gibbs(train, CONFIG, checkpoint=policy, on_sweep=interrupt)
    assert assignment_layer.read_tokens(policy.path, 0, CONFIG.block_size) is not None
    shutil.rmtree(assignment_layer.tokens_path(policy.path, 1))  # as a layer of an earlier version: read the store
    resumed = fit_gibbs(train, CONFIG, checkpoint=policy)
    _same(resumed, whole)
    assert [r.sweep for r in resumed.trace] == list(range(1, 7))
    assert assignment_layer.sweeps_on_disk(policy.path) == [6]


def test_scratch_layer_is_removed(planted: tuple[Corpus, Corpus, np.ndarray], tmp_path: Path) -> None:
    fit_gibbs(planted[0], GibbsConfig(n_topics=3, sweeps=2), scratch_dir=str(tmp_path))
    assert list(tmp_path.iterdir()) == []


def test_scvb0_start_is_the_in_memory_start_for_any_blocks_tasks_and_scheduler(
        tmp_path: Path, client: object) -> None:
    """``init="scvb0"`` out of core (the pass carried from task to task, then every block drawn at once)
    gives the z of the in-memory sampler's SCVB0 start on the whole store, whatever the blocks (they
    are part of the AD-LDA sweeps, not of the start), their grouping into tasks, the threads and the
    scheduler; the sweeps then run from it."""
    from topicflow.models.common.blocks import block_from_csr
    from topicflow.models.lda.gibbs.chain import initial_state
    from topicflow.models.lda.gibbs.state import GibbsParams

    truth = draw_planted_corpus(n_docs=230, n_topics=4, n_terms=50, doc_length=30, alpha=0.2, seed=8)
    counts = truth.counts["default"]
    train = Corpus.open(write_test_store(tmp_path / "train", {"default": counts}, shard_size=70))
    alpha = 0.3
    params = GibbsParams(n_topics=4, doc_topic_prior=alpha, topic_word_prior=0.02, seed=5)
    expected = initial_state(block_from_csr(counts), params, init="scvb0")
    base = dict(n_topics=4, sweeps=0, doc_topic_prior=alpha, learn_alpha=False, topic_word_prior=0.02, seed=5,
                init="scvb0")
    for block_size, per_task, threads, on in ((40, 1, 1, None), (23, 3, 2, None), (100, 2, None, client)):
        config = GibbsConfig(**base, block_size=block_size, blocks_per_partition=per_task, threads=threads)
        result = fit_gibbs(train, config, client=on)
        assert_array_equal(result.term_topic, expected.term_topic_counts)
        assert_array_equal(result.topic_counts, expected.topic_counts)
    policy = CheckpointPolicy(tmp_path / "ckpt", every=1)
    swept = fit_gibbs(train, GibbsConfig(**{**base, "sweeps": 3}, block_size=40), checkpoint=policy)
    assert swept.trace[-1].sweep == 3 and int(swept.topic_counts.sum()) == train.n_tokens
    assert not np.array_equal(swept.term_topic, expected.term_topic_counts)
    # the pass's N^theta rows lived in the run directory until the draw, and are gone after it
    assert (assignment_layer.layer_path(policy.path) / "sweep-3").is_dir()
    assert not (assignment_layer.layer_path(policy.path) / "scvb0-start").exists()
