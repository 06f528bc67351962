"""heldout_likelihood: every protocol end to end, against direct computations, on any sharding and scheduler."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from tests.pipeline.evaluation.stores import Stores, build_stores
from tests.reference.left_to_right_numpy import left_to_right
from topicflow._typing import HeldoutProtocol, choices
from topicflow.api.lda import LDA
from topicflow.api.streaming import StreamingLDA
from topicflow.errors import InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.heldout import HeldoutStats
from topicflow.models.common.blocks import block_from_csr
from topicflow.models.lda.vb.estep import fold_in_block
from topicflow.pipeline.evaluation import PROTOCOLS, heldout_likelihood
from topicflow.pipeline.evaluation.heldout import UNITS
from topicflow.pipeline.vb.infer import evaluate_model, fold_in_params
from topicflow.testing.corpora import draw_planted_corpus, write_test_store


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> Stores:
    return build_stores(tmp_path_factory.mktemp("heldout"))


def model_ids(stores: Stores, doc_id: str) -> list[int]:
    """A document's tokens in reading order, as the model's term ids."""
    vocabulary = stores.model.vocabularies["default"]
    return [vocabulary.id_of(t) for t in stores.texts[doc_id]]


def test_protocol_registry_matches_the_literal() -> None:
    assert list(PROTOCOLS) == list(choices(HeldoutProtocol))


@pytest.mark.parametrize("protocol", choices(HeldoutProtocol))
def test_same_numbers_on_any_sharding_and_scheduler(stores: Stores, protocol: str, client: object) -> None:
    big = heldout_likelihood(stores.model, stores.ordered, protocol, seed=4)
    small = heldout_likelihood(stores.model, stores.ordered_small_shards, protocol, seed=4, client=client)
    assert (small.n_docs, small.n_tokens, small.token_order) == (big.n_docs, big.n_tokens, big.token_order)
    if protocol == "bound":
        # E-step statistics are floats tree-summed in a fixed order per sharding: equal up to rounding.
        assert small.log_likelihood == pytest.approx(big.log_likelihood, rel=1e-12)
    else:
        # Per-document values, exactly summed: the same bits for 4 or 22 shards.
        assert small.log_likelihood == big.log_likelihood
    assert big.protocol == protocol and big.units == UNITS and big.n_docs == 150
    assert big.perplexity == pytest.approx(math.exp(-big.log_lik_per_token), rel=1e-15)
    assert big.log_lik_per_token == pytest.approx(big.log_likelihood / big.n_tokens, rel=1e-15)


def test_default_protocol_is_what_evaluate_computed(stores: Stores) -> None:
    corpus = Corpus.open(stores.plain)
    before = evaluate_model(stores.model, corpus, seed=2)
    completion = heldout_likelihood(stores.model, corpus, seed=2)
    assert completion.protocol == "completion-random"
    assert completion.settings == {"seed": 2, "fraction": 0.5, "max_doc_iter": 100, "doc_tol": 1e-3}
    assert (completion.perplexity, completion.n_tokens) == (before.perplexity, before.n_heldout_tokens)
    bound = heldout_likelihood(stores.model, corpus, "bound")
    assert bound.log_lik_per_token == before.elbo_per_token and bound.n_tokens == corpus.n_tokens


def test_first_half_observes_each_document_in_reading_order(stores: Stores) -> None:
    model = stores.model
    result = heldout_likelihood(model, stores.ordered, "completion-first-half", fraction=0.4)
    assert result.token_order == "reading" and result.settings["fraction"] == 0.4
    phi = model.state.topic_word()["default"]
    n_terms = phi.shape[1]
    observed, scored = [], []
    for doc_id in sorted(stores.texts):
        tokens = model_ids(stores, doc_id)
        cut = math.floor(0.4 * len(tokens) + 0.5)
        observed.append(np.bincount(tokens[:cut], minlength=n_terms))
        scored.append(tokens[cut:])
    theta = fold_in_block(block_from_csr(sp.csr_matrix(np.array(observed))), {"default": phi},
                          model.state.doc_topic_prior, fold_in_params(model))
    want = math.fsum(math.log(theta[d] @ phi[:, w]) for d, tokens in enumerate(scored) for w in tokens)
    assert result.log_likelihood == pytest.approx(want, rel=1e-12)
    assert result.n_tokens == sum(len(t) for t in scored)


@pytest.mark.parametrize("ordered", [True, False], ids=["reading-order", "bag-order"])
def test_left_to_right_scores_the_documents_in_the_stated_order(stores: Stores, ordered: bool) -> None:
    model = stores.model
    result = heldout_likelihood(model, stores.ordered if ordered else stores.plain, "left-to-right",
                                n_particles=3, seed=9)
    assert result.token_order == ("reading" if ordered else "bag")
    assert result.settings == {"seed": 9, "particles": 3}
    phi = model.state.topic_word()["default"]
    indptr, terms = [0], []
    for doc_id in sorted(stores.texts):
        tokens = model_ids(stores, doc_id)
        terms += tokens if ordered else sorted(tokens)
        indptr.append(len(terms))
    want = left_to_right(np.array(indptr), np.array(terms), phi, model.state.doc_topic_prior, n_particles=3, seed=9)
    assert result.log_likelihood == HeldoutStats.from_documents(want, np.diff(indptr)).log_lik
    assert result.n_tokens == len(terms) == Corpus.open(stores.ordered).n_tokens


def test_polylingual_documents_share_theta_across_languages(tmp_path: Path) -> None:
    truth = draw_planted_corpus(n_docs=60, n_topics=2, n_terms=12, doc_length=10, alpha=0.3, seed=4,
                                languages=("en", "de"))
    store = write_test_store(tmp_path / "poly.zarr", truth.counts, shard_size=25)
    model = LDA(2, max_iter=5, seed=1).fit(store).model_
    result = heldout_likelihood(model, store, "left-to-right", n_particles=2)
    assert result.n_tokens == truth.counts["en"].sum() + truth.counts["de"].sum()
    phi = np.hstack([model.state.topic_word()["en"], model.state.topic_word()["de"]])
    en, de = truth.counts["en"].toarray(), truth.counts["de"].toarray()
    indptr, terms = [0], []
    for d in range(60):  # each document: its English tokens, then its German ones (stacked ids)
        terms += list(np.repeat(np.arange(12), en[d])) + list(12 + np.repeat(np.arange(12), de[d]))
        indptr.append(len(terms))
    want = left_to_right(np.array(indptr), np.array(terms), phi, model.state.doc_topic_prior, n_particles=2, seed=0)
    assert result.log_likelihood == HeldoutStats.from_documents(want, np.diff(indptr)).log_lik
    completion = heldout_likelihood(model, store)
    assert 0 < completion.n_tokens < result.n_tokens and np.isfinite(completion.log_likelihood)


def test_streamed_models_are_scored_by_the_same_path(stores: Stores) -> None:
    model = StreamingLDA("olda", n_topics=3, init_docs=20, init_sweeps=5, eval_every=1000, seed=1).fit(stores.plain)
    for protocol in choices(HeldoutProtocol):
        result = model.heldout_likelihood(stores.ordered, protocol)
        assert result.protocol == protocol and np.isfinite(result.log_lik_per_token)


def test_estimator_methods_name_their_protocols(stores: Stores) -> None:
    model = LDA.__new__(LDA)
    model.model_ = stores.model
    model.split_every = None
    result = model.heldout_likelihood(stores.ordered, "left-to-right", n_particles=2)
    assert result == heldout_likelihood(stores.model, stores.ordered, "left-to-right", n_particles=2)
    assert model.perplexity(stores.plain) == heldout_likelihood(stores.model, stores.plain).perplexity
    assert model.score(stores.plain) == heldout_likelihood(stores.model, stores.plain, "bound").log_lik_per_token


def test_clear_errors(stores: Stores) -> None:
    with pytest.raises(OrderNotKeptError, match=r"does not keep .* --keep-order"):
        heldout_likelihood(stores.model, stores.plain, "completion-first-half")
    with pytest.raises(InvalidParameterError, match="unknown held-out protocol 'perplexity'; choose one of"):
        heldout_likelihood(stores.model, stores.plain, "perplexity")
    with pytest.raises(InvalidParameterError, match="unknown held-out setting"):
        heldout_likelihood(stores.model, stores.plain, particles=3)
    with pytest.raises(InvalidParameterError, match="fraction"):
        heldout_likelihood(stores.model, stores.plain, fraction=1.5)
    with pytest.raises(InvalidParameterError, match="n_particles"):
        heldout_likelihood(stores.model, stores.plain, "left-to-right", n_particles=0)
