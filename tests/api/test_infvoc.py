"""topicflow.InfVocLDA: the estimator over the infvoc driver (fit, partial_fit, transform, top_terms, save/load).

The model math is tested in tests/models/infvoc_lda and the driver in tests/pipeline/infvoc_lda; here the
estimator must give the driver's model, continue it as one stream, fold documents in with the model's own
sampler independently of the store's sharding, and refuse what it cannot read with what to do.
"""
from __future__ import annotations

import json
import pickle
import warnings
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import topicflow
from topicflow.errors import InvalidParameterError, NotFittedError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.tokenizer import PruneConfig
from topicflow.models.infvoc_lda import InfVocState, expected_topic_words, fold_in
from topicflow.pipeline.infvoc_lda import InfVocPlan, fit_infvoc
from topicflow.pipeline.ingest.ingest import ingest_corpus

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su"]
#: Small settings: 96 documents in minibatches of 12 (two per shard of 24), contraction every 3.
SMALL = dict(n_topics=3, batch_size=12, truncation=40, reorder_every=3, alpha_beta=50.0, seed=4)


def topic_texts(n_docs: int, *, seed: int, n_topics: int = 3, doc_length: int = 30) -> list[str]:
    """Documents mixing a few topics of made-up words, with rare words that min_df keeps out of the vocabulary."""
    rng = np.random.default_rng(seed)
    topics = [[SYLLABLES[k] + SYLLABLES[(k + j) % 10] + SYLLABLES[j] for j in range(8)] for k in range(n_topics)]
    texts = []
    for d in range(n_docs):
        theta = rng.dirichlet(np.full(n_topics, 0.3))
        words = [topics[int(rng.choice(n_topics, p=theta))][int(rng.integers(8))] for _ in range(doc_length)]
        if d % 3 == 0:
            words.insert(int(rng.integers(len(words))), f"rare{''.join(rng.choice(list('xyzw'), 4))}")
        texts.append(" ".join(words))
    return texts


def write_store(directory: Path, texts: list[str], *, shard_size: int, keep_order: bool = True,
                name: str = "s") -> Path:
    """Ingest ``texts`` (ids d0, d1, ...) into a store, by default with the ordered-token layer."""
    source = directory / f"{name}.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    out = directory / f"{name}.zarr"
    ingest_corpus([source], out, shard_size=shard_size, prune=PruneConfig(min_df=2), keep_order=keep_order)
    return out


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The same 96 documents in shards of 24 and of 7, and 12 documents without token order."""
    base = tmp_path_factory.mktemp("infvoc_api")
    texts = topic_texts(96, seed=1)
    return {"s24": write_store(base, texts, shard_size=24, name="s24"),
            "s7": write_store(base, texts, shard_size=7, name="s7"),
            "plain": write_store(base, texts[:12], shard_size=6, keep_order=False, name="plain")}


def assert_same_state(a: InfVocState, b: InfVocState) -> None:
    arrays_a, scalars_a = a.to_arrays()
    arrays_b, scalars_b = b.to_arrays()
    assert scalars_a == scalars_b
    assert sorted(arrays_a) == sorted(arrays_b)
    for name in arrays_a:
        np.testing.assert_array_equal(arrays_a[name], arrays_b[name], err_msg=name)


# ----------------------------------------------------------------------------- fitting


def test_fit_is_the_driver_and_round_trips(stores: dict[str, Path], tmp_path: Path, client: object) -> None:
    model = topicflow.InfVocLDA(**SMALL, track_words=("kalolo", "rare")).fit(stores["s24"], client=client)
    direct = fit_infvoc(Corpus.open(stores["s24"]), model.params(), InfVocPlan(batch_size=12), client=client,
                        track_words=["kalolo", "rare"])
    assert_same_state(model.state_, direct.state)
    assert model.word_index_ == direct.word_index and model.n_words_ == len(direct.word_index)
    assert (model.n_iter_, model.n_docs_seen_, len(model.trace_)) == (8, 96, 8)
    assert model.components_.shape == (3, len(model.view_terms_))
    np.testing.assert_allclose(model.doc_topic_prior_, 1.0 / 3)
    np.testing.assert_array_equal(model.tos_sizes_, direct.state.tos_sizes())
    # Every new word enters every topic at expansion, so after the last contraction (i = 6) and two more
    # minibatches each TOS holds T words plus the new ones.
    assert np.all(model.tos_sizes_ >= 40)

    model.save(tmp_path / "m")
    loaded = topicflow.InfVocLDA.load(tmp_path / "m")
    assert loaded.get_params() == model.get_params()
    assert_same_state(loaded.state_, model.state_)
    assert loaded.top_terms(5) == model.top_terms(5)
    assert loaded.trace_ == model.trace_
    np.testing.assert_array_equal(loaded.word_ranks_["kalolo"], model.word_ranks_["kalolo"])
    with pytest.raises(InvalidParameterError, match="not infvoc; load it with topicflow.LDA.load"):
        topicflow.InfVocLDA.load(_lda_model(stores["s24"], tmp_path))


def _lda_model(store: Path, tmp_path: Path) -> Path:
    topicflow.LDA(n_topics=2, max_iter=2).fit(store).save(tmp_path / "lda")
    return tmp_path / "lda"


def test_partial_fit_over_shards_continues_one_stream(stores: dict[str, Path], client: object) -> None:
    whole = topicflow.InfVocLDA(**SMALL, track_words=("kalolo",)).fit(stores["s24"], client=client)
    stream = topicflow.InfVocLDA(**SMALL, track_words=("kalolo",))
    stream.partial_fit(stores["s24"], client=client, shards=[0, 1])
    assert (stream.n_iter_, stream.n_docs_seen_) == (4, 48)
    stream.partial_fit(stores["s24"], client=client)  # the unseen shards 2 and 3
    assert_same_state(stream.state_, whole.state_)
    assert stream.word_index_ == whole.word_index_
    assert (stream.n_iter_, stream.n_docs_seen_) == (8, 96)
    assert [r.epsilon for r in stream.trace_] == [r.epsilon for r in whole.trace_]  # epsilon_i goes on at i + 1
    # the tracked ranks go on across calls (Figure 7.1 over nights): one row per minibatch, as one fit
    assert stream.word_ranks_["kalolo"].shape == (8, 3)
    np.testing.assert_array_equal(stream.word_ranks_["kalolo"], whole.word_ranks_["kalolo"])


def test_restate_tail_reaches_the_driver_and_survives_a_reload(stores: dict[str, Path], tmp_path: Path) -> None:
    model = topicflow.InfVocLDA(**SMALL, restate_tail=True).fit(stores["s24"])
    assert model.params().restate_tail is True
    direct = fit_infvoc(Corpus.open(stores["s24"]), model.params(), InfVocPlan(batch_size=12))
    assert_same_state(model.state_, direct.state)
    chapter = fit_infvoc(Corpus.open(stores["s24"]), topicflow.InfVocLDA(**SMALL).params(), InfVocPlan(batch_size=12))
    assert not np.array_equal(chapter.state.nu2, direct.state.nu2)  # reorders at i = 3, 6 restated nu2
    model.save(tmp_path / "m")
    assert topicflow.InfVocLDA.load(tmp_path / "m").get_params()["restate_tail"] is True


def test_transform_folds_in_with_the_state_fixed_whatever_the_sharding(stores: dict[str, Path],
                                                                        client: object) -> None:
    model = topicflow.InfVocLDA(**SMALL).fit(stores["s24"], client=client)
    before = model.state_.to_arrays()
    theta24 = model.transform(stores["s24"]).compute()
    theta7 = model.transform(stores["s7"]).compute()
    assert theta24.shape == (96, 3)
    np.testing.assert_allclose(theta24.sum(axis=1), 1.0)
    np.testing.assert_array_equal(theta7, theta24)  # keyed by store position, not by shard
    # The reference: every document of the store folded in at once by the model's sampler, words outside
    # every TOS all given the id one past the word index (eq. 7.4 weighs them alike whatever the id).
    corpus = Corpus.open(stores["s24"])
    terms = [str(t) for t in corpus.vocabulary().terms]
    index = model.word_index_
    in_tos = set(np.unique(model.state_.tos_words).tolist())
    indptr, words = [0], []
    for block in corpus.iter_ordered():
        strings = [terms[c] if c >= 0 else str(block.oov_terms[-c - 1]) for c in block.tokens.tolist()]
        ids = index.ids(strings)
        words += [int(i) if i in in_tos else len(index) for i in ids.tolist()]
        indptr += (indptr[-1] + np.asarray(block.indptr[1:]) - block.indptr[0]).tolist()
    expected = fold_in(model.state_, np.array(indptr), np.array(words), model.params())
    np.testing.assert_array_equal(theta24, expected)
    after = model.state_.to_arrays()
    for name in before[0]:
        np.testing.assert_array_equal(before[0][name], after[0][name])


def test_top_terms_are_the_most_probable_words_with_their_tos_rank(stores: dict[str, Path]) -> None:
    model = topicflow.InfVocLDA(**SMALL).fit(stores["s24"])
    top = model.top_terms(6)
    assert len(top) == 3
    for k, row in enumerate(top):
        words, probs, _ = expected_topic_words(model.state_, k)
        order = np.lexsort((words, -probs))[:6]
        assert [w for w, _, _ in row] == model.word_index_.strings(words[order])
        np.testing.assert_allclose([p for _, p, _ in row], probs[order])
        tos, _, _ = model.state_.topic_tos(k)
        expected_ranks = [int(np.flatnonzero(tos == w)[0]) + 1 for w in words[order]]
        assert [r for _, _, r in row] == expected_ranks
        assert all(r >= 1 for _, _, r in row)


def test_tracked_words_record_their_rank_after_every_minibatch(stores: dict[str, Path]) -> None:
    model = topicflow.InfVocLDA(**SMALL, track_words=["kalolo", "neverseen"]).fit(stores["s24"])
    ranks = model.word_ranks_["kalolo"]
    assert ranks.shape == (8, 3)
    state, index = model.state_, model.word_index_
    (word_id,) = index.ids(["kalolo"])
    for k in range(3):
        tos, _, _ = state.topic_tos(k)
        hit = np.flatnonzero(tos == word_id)
        assert ranks[-1, k] == (hit[0] + 1 if hit.size else 0)
    np.testing.assert_array_equal(model.word_ranks_["neverseen"], 0)  # never in any TOS


# ----------------------------------------------------------------------------- settings and refusals


def test_store_without_order_and_matrices_are_refused_with_what_to_do(stores: dict[str, Path]) -> None:
    with pytest.raises(OrderNotKeptError, match="re-ingest it with `topicflow ingest --keep-order`"):
        topicflow.InfVocLDA(**SMALL).fit(stores["plain"])
    with pytest.raises(InvalidParameterError, match="ingested with `topicflow ingest --keep-order`"):
        topicflow.InfVocLDA(**SMALL).fit(np.ones((4, 3), dtype=np.int64))
    fitted = topicflow.InfVocLDA(**SMALL).fit(stores["s24"])
    with pytest.raises(OrderNotKeptError, match="--keep-order"):
        fitted.transform(stores["plain"])


@pytest.mark.parametrize(("settings", "message"), [
    ({"alpha_beta": -1.0}, "'alpha_beta' parameter of InfVocLDA must be a float in the range"),
    ({"kappa": 1.5}, "'kappa' parameter"),
    ({"new_word_nu": "zero"}, "one of 'one', 'prior'"),
    ({"g0": 3}, "None \\(the shipped English G0\\), False \\(no G0\\)"),
    ({"unseen_weight": "g0", "g0": False}, "give a G0 .* or use unseen_weight='remaining'"),
    ({"track_words": "kalolo"}, "a list or tuple of words"),
])
def test_bad_settings_are_refused_naming_the_allowed_values(stores: dict[str, Path], settings: dict[str, Any],
                                                            message: str) -> None:
    with pytest.raises(InvalidParameterError, match=message):
        topicflow.InfVocLDA(**{**SMALL, **settings}).fit(stores["s24"])


def test_unfitted_estimator_says_what_to_call() -> None:
    with pytest.raises(NotFittedError, match="call fit\\(store\\) or InfVocLDA.load\\(path\\) first"):
        topicflow.InfVocLDA().top_terms()


def test_g0_choices_reach_the_driver_and_survive_a_reload(stores: dict[str, Path], tmp_path: Path) -> None:
    plain = topicflow.InfVocLDA(**SMALL, g0=False).fit(stores["s24"])
    shipped = topicflow.InfVocLDA(**SMALL).fit(stores["s24"])
    assert plain.model_.info.extra["infvoc"]["g0_source"] is None
    assert shipped.model_.info.extra["infvoc"]["g0_source"] == "default"
    plain.save(tmp_path / "plain")
    assert topicflow.InfVocLDA.load(tmp_path / "plain").g0 is False
    assert topicflow.InfVocLDA.load(_saved(shipped, tmp_path / "shipped")).g0 is None


def _saved(model: topicflow.InfVocLDA, path: Path) -> Path:
    model.save(path)
    return path


def test_pickled_and_cloned_estimators_behave_alike(stores: dict[str, Path]) -> None:
    from sklearn.base import clone

    model = topicflow.InfVocLDA(**SMALL).fit(stores["s24"])
    again = pickle.loads(pickle.dumps(model))
    np.testing.assert_array_equal(again.transform(stores["s7"]).compute(), model.transform(stores["s7"]).compute())
    fresh = clone(model)
    assert fresh.get_params() == model.get_params() and not hasattr(fresh, "model_")
    assert_same_state(fresh.fit(stores["s24"]).state_, model.state_)  # fit is deterministic (idempotent)


# ----------------------------------------------------------------------------- presets


def test_infvoc_presets_are_valid_for_the_api_and_the_cli() -> None:
    from topicflow.cli.model import INFVOC_OPTION_OF
    from topicflow.cli.model import fit as fit_command
    from topicflow.pipeline.presets import INFVOC_PRESETS, get_preset, preset_names

    fit_options = {p.name for p in fit_command.params}
    assert {name for name, _ in INFVOC_PRESETS} == {"zhai2014-infvoc", "zhai2014-infvoc-denews"}
    for (name, command), preset in INFVOC_PRESETS.items():
        assert command == "fit" and name in preset_names("fit") and get_preset(name, "fit") is preset
        assert preset.settings["family"] == "infvoc" and preset.source and preset.description
        topicflow.InfVocLDA.from_preset(name).params()
        assert {INFVOC_OPTION_OF.get(key, key) for key in preset.settings} <= fit_options
    params = topicflow.InfVocLDA.from_preset("zhai2014-infvoc").params()
    # Zhai 2014, Table 7.1 (20 Newsgroups): K = 50, S = 155, alpha^beta = 3k, T = 40k, U = 10, tau0 = 64,
    # kappa = 0.6; sec. 7.5: alpha^theta = 1/K.
    assert (params.n_topics, params.stick_concentration, params.truncation, params.reorder_every, params.step.tau0,
            params.step.kappa, params.alpha, params.burn_in, params.samples) == (50, 3000.0, 40000, 10, 64.0, 0.6,
                                                                                 0.02, 5, 5)
    assert topicflow.InfVocLDA.from_preset("zhai2014-infvoc").plan().batch_size == 155
    small = topicflow.InfVocLDA.from_preset("zhai2014-infvoc-denews", n_topics=4).params()
    assert (small.n_topics, small.alpha, small.stick_concentration, small.truncation) == (4, 0.25, 2000.0, 4000)
    with pytest.raises(InvalidParameterError, match="not an infvoc preset"):
        topicflow.InfVocLDA.from_preset("zhai2014-mrlda")


# ----------------------------------------------------------------------------- scikit-learn's checks

#: The checks that apply to an estimator that fits a corpus store with token order: those about
#: parameters, cloning, repr and tags, which never fit. Excluded, and why: every check that fits or
#: transforms a NumPy matrix (fit idempotence, pickling, n_features_in_, dtypes, NaN/inf, sparse input,
#: transformer output...), because infvoc reads raw tokens in reading order with their strings, which a
#: count matrix does not hold (fit refuses one: test_store_without_order_and_matrices_are_refused...);
#: their store equivalents are tested above (pickle, clone, idempotent fit). check_array_api_input needs
#: SCIPY_ARRAY_API at import (tests/api/test_sklearn_checks.py).
APPLICABLE = ("check_estimator_cloneable", "check_estimator_repr", "check_no_attributes_set_in_init",
              "check_parameters_default_constructible", "check_get_params_invariance", "check_set_params",
              "check_do_not_raise_errors_in_init_or_set_params", "check_estimator_tags_renamed",
              "check_valid_tag_types", "check_mixin_order", "check_transformers_unfitted")
CHECKED = topicflow.InfVocLDA(**SMALL)


def _sklearn_checks() -> list[Any]:
    from sklearn.utils.estimator_checks import estimator_checks_generator

    out = []
    with warnings.catch_warnings():
        # On purpose: topicflow does not depend on scikit-learn at run time (tests/api/test_sklearn_checks.py).
        warnings.filterwarnings("ignore", message="Estimator InfVocLDA does not inherit from")
        for estimator, check in estimator_checks_generator(CHECKED, legacy=True, mark="skip"):
            name = check.func.__name__ if isinstance(check, partial) else check.__name__  # type: ignore[union-attr]
            if name in APPLICABLE:
                out.append(pytest.param(estimator, check, id=name))
    return out


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize(("estimator", "check"), _sklearn_checks())
def test_scikit_learn_checks_that_apply(estimator: Any, check: Any) -> None:
    check(estimator)  # each check raises on a failure
    assert estimator.get_params() == CHECKED.get_params()


def test_every_applicable_check_ran() -> None:
    assert {p.id for p in _sklearn_checks()} == set(APPLICABLE)
