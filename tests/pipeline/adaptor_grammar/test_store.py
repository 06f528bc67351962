"""Adaptor grammars streamed from a store, saved as versioned models and continued by ``topicflow update``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.adaptor_grammar.test_fit import lexicon_texts, write_store
from topicflow.errors import InputError, InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.adaptor_grammar import load_grammar_model
from topicflow.io.models.store import load_model, save_model
from topicflow.io.models.versions import list_versions, rollback
from topicflow.models.adaptor_grammar import AGState
from topicflow.pipeline.adaptor_grammar import (
    GrammarFitConfig,
    fit_grammar,
    fit_grammar_store,
    grammar_store_model,
    read_sentences,
    scan_store,
)
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.update import update_model

CONFIG = GrammarFitConfig(grammar="unigram", truncations={"Word": 30}, batch_size=10, tau=8.0, kappa=0.6,
                          prune_every=3, n_samples=3, seed=5)


def assert_same_state(a: AGState, b: AGState) -> None:
    assert a.minibatch == b.minibatch and a.decay == b.decay
    np.testing.assert_array_equal(a.gamma, b.gamma)
    np.testing.assert_array_equal(a.g_tilde, b.g_tilde)
    for ta, tb, n1a, n1b in zip(a.tngs, b.tngs, a.nu1, b.nu1):
        assert ta.keys == tb.keys
        np.testing.assert_array_equal(ta.f_tilde, tb.f_tilde)
        np.testing.assert_array_equal(n1a, n1b)


def test_streamed_fit_equals_the_in_memory_fit(tmp_path: Path) -> None:
    texts = lexicon_texts(30, seed=11)
    texts[7] = ""  # a document without tokens is no sentence in either path
    store = write_store(tmp_path, texts)
    corpus = Corpus.open(store)
    index = scan_store(corpus)
    assert len(index) == 29 and index.shard.dtype == np.int32  # (ingest drops the empty document)
    assert index.alphabet == set("".join(texts).replace(" ", ""))
    config = GrammarFitConfig(**{**CONFIG.__dict__, "shuffle": True, "passes": 2})
    memory = fit_grammar(read_sentences(corpus).texts, config)
    streamed = fit_grammar_store(corpus, GrammarFitConfig(**{**config.__dict__, "n_partitions": 3}))
    assert streamed.n_sentences == 29 and streamed.n_inside_calls == memory.n_inside_calls == 58
    assert_same_state(memory.state, streamed.state)


def test_update_continues_the_stream_like_one_fit(tmp_path: Path) -> None:
    """Fit 20 documents (2 whole minibatches, |X| = 40), append 20, update: equals one fit over the 40."""
    texts = lexicon_texts(40, seed=12)
    store = write_store(tmp_path, texts[:20])
    config = GrammarFitConfig(**{**CONFIG.__dict__, "corpus_size": 40})
    corpus = Corpus.open(store)
    first = fit_grammar_store(corpus, config)
    model = tmp_path / "m"
    save_model(model, grammar_store_model(corpus, first, config))
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"id": f"n{i}", "text": t}) + "\n" for i, t in enumerate(texts[20:])))
    append_corpus(store, [more])
    grown = Corpus.open(store)
    result = update_model(model, grown)
    assert result.version == 2 and result.new_docs == 20 and result.minibatches == 2
    state, params, payload = load_grammar_model(model)
    one_go = fit_grammar_store(grown, CONFIG)
    assert params.corpus_size == one_go.params.corpus_size == 40 and payload["sentences_seen"] == 40
    assert_same_state(one_go.state, state)
    trace = load_model(model).info.trace
    assert [r["minibatch"] for r in trace] == [1, 2, 3, 4]
    assert [r["log_likelihood"] for r in trace] == pytest.approx(one_go.log_likelihood, rel=1e-12)
    assert update_model(model, grown).version is None  # nothing new
    assert [v.version for v in list_versions(model)] == [1, 2]
    rollback(model, 1)
    assert load_grammar_model(model)[0].minibatch == 2
    # A character the model's grammar lacks is refused with what to do.
    zed = tmp_path / "zed.jsonl"
    zed.write_text(json.dumps({"id": "z", "text": "zebra dog"}) + "\n")
    append_corpus(store, [zed])
    with pytest.raises(InputError, match="'z'.*--alphabet"):
        update_model(model, Corpus.open(store))


def test_infvoc_lda_grammar_models_are_not_updated(tmp_path: Path) -> None:
    store = write_store(tmp_path, ["river boat", "stone wall"], name="lda")
    config = GrammarFitConfig(grammar="infvoc-lda", grammar_params={"K": 2}, batch_size=4, n_samples=2)
    corpus = Corpus.open(store)
    result = fit_grammar_store(corpus, config)
    assert result.grammar_params == {"D": 2, "K": 2} and result.n_sentences == 4
    save_model(tmp_path / "m", grammar_store_model(corpus, result, config))
    append_corpus(store, [write_jsonl(tmp_path / "x.jsonl", ["boat wall"])])
    with pytest.raises(InvalidParameterError, match="infvoc-lda"):
        update_model(tmp_path / "m", Corpus.open(store))


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"{path.stem}{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path
