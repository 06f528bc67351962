"""Adaptor grammars streamed from a store, saved as versioned models and continued by ``topicflow update``."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.pipeline.adaptor_grammar.test_fit import lexicon_texts, write_store
from topicflow.errors import InputError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.adaptor_grammar import load_grammar_model
from topicflow.io.models.store import load_model, save_model
from topicflow.io.models.versions import list_versions, rollback
from topicflow.models.adaptor_grammar import (
    SEED_EPOCH,
    AGState,
    OnlineParams,
    fit_minibatch,
    initial_state,
    prepare,
    seed_state,
    seed_update,
)
from topicflow.pipeline.adaptor_grammar import (
    GrammarFitConfig,
    bind_grammar,
    fit_grammar,
    fit_grammar_store,
    grammar_store_model,
    read_sentences,
    scan_store,
    seed_blocks,
)
from topicflow.pipeline.cluster import compute
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.update import update_model
from topicflow.tasks.adaptor_grammar import map_estep

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
    assert streamed.n_sentences == 29 and streamed.n_inside_calls == memory.n_inside_calls == 29 + 58  # seed + 2 passes
    assert_same_state(memory.state, streamed.state)


def test_seed_pass_equals_seed_state_on_any_scheduler(tmp_path: Path, client: object) -> None:
    """The distributed seed pass (E-step tasks over every sentence, tree-merged, then ``seed_update``) is
    ``seed_state`` in memory, bit for bit, for 1 or 3 partitions, threads or a distributed client; a
    seeded fit on a store equals the math layer's serial loop (seed_state, then fit_minibatch)."""
    texts = lexicon_texts(12, seed=21)
    config = GrammarFitConfig(**{**CONFIG.__dict__, "batch_size": 5, "n_samples": 2, "init": "seed"})
    grammar, _ = bind_grammar(config, [t.replace(" ", "") for t in texts])
    xs = [grammar.encode(list(t.replace(" ", ""))) for t in texts]
    params = OnlineParams(corpus_size=12, tau=config.tau, kappa=config.kappa, prune_every=config.prune_every,
                          n_samples=2, seed=config.seed)
    start = initial_state(grammar, seed=config.seed)
    expected, seed_stats = seed_state(start, xs, range(12), params)
    blocks = seed_blocks(12, GrammarFitConfig(**{**config.__dict__, "n_partitions": 3}))
    assert blocks == [(0, 2), (2, 3), (3, 5), (5, 7), (7, 8), (8, 10), (10, 11), (11, 12)]
    graph = map_estep(grammar, prepare(start), [t.keys for t in start.tngs],
                      [(xs[a:b], list(range(a, b))) for a, b in blocks], n_samples=1, seed=config.seed,
                      epoch=SEED_EPOCH, split_every=2, token="seed-test")
    (merged,) = compute(graph, client=client)
    assert merged.n_sentences == 12 and merged.h == seed_stats.h
    assert_same_state(expected, seed_update(start, merged, params))
    with pytest.raises(ValueError, match="one tree per sentence"):
        seed_update(start, type(merged)(12, 2, merged.g, merged.f, merged.h), params)
    serial = expected
    for lo in range(0, 12, 5):
        serial, _ = fit_minibatch(serial, xs[lo:lo + 5], range(lo, min(12, lo + 5)), params)
    store = write_store(tmp_path, texts)
    streamed = fit_grammar_store(Corpus.open(store), GrammarFitConfig(**{**config.__dict__, "n_partitions": 3}),
                                 client=client)
    assert streamed.n_inside_calls == 24 and streamed.state.minibatch == 3
    assert streamed.seed_log_likelihood == pytest.approx(seed_stats.log_likelihood / 12, rel=1e-12)
    assert_same_state(serial, streamed.state)


def test_update_continues_the_stream_like_one_fit(tmp_path: Path) -> None:
    """Fit 20 documents (2 whole minibatches, |X| = 40), append 20, update: equals one fit over the 40.

    Both fits start from empty TNGs: the seed pass of a fit parses only the sentences it is given (an
    update never seeds), so a seeded fit of the first 20 is not the seeded fit of all 40."""
    texts = lexicon_texts(40, seed=12)
    store = write_store(tmp_path, texts[:20])
    config = GrammarFitConfig(**{**CONFIG.__dict__, "corpus_size": 40, "init": "empty"})
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
    one_go = fit_grammar_store(grown, GrammarFitConfig(**{**CONFIG.__dict__, "init": "empty"}))
    assert params.corpus_size == one_go.params.corpus_size == 40 and payload["sentences_seen"] == 40
    assert_same_state(one_go.state, state)
    trace = load_model(model).info.trace
    assert [r["minibatch"] for r in trace] == [1, 2, 3, 4]
    assert [r["log_likelihood"] for r in trace] == pytest.approx(one_go.log_likelihood, rel=1e-12)
    assert update_model(model, grown).version is None  # nothing new
    assert [v.version for v in list_versions(model)] == [1, 2]
    rollback(model, 1)
    assert load_grammar_model(model)[0].minibatch == 2
    # Characters the model's grammar lacks join its alphabet (Char -> <any> grows a rule for each).
    before, _, _ = load_grammar_model(model)
    zed = tmp_path / "zed.jsonl"
    zed.write_text(json.dumps({"id": "z", "text": "zebra dog"}) + "\n")
    append_corpus(store, [zed])
    assert update_model(model, Corpus.open(store)).version == 3
    after, _, payload = load_grammar_model(model)  # the saved model re-binds to the grown alphabet
    new = sorted(set(payload["terminals"]) - {str(t) for t in before.grammar.terminals})
    assert new == sorted(set("zebradog") - {str(t) for t in before.grammar.terminals}) and "z" in new
    assert payload["terminals"][:len(before.grammar.terminals)] == list(before.grammar.terminals)
    assert after.grammar.n_rules == before.grammar.n_rules + len(new) and after.minibatch > before.minibatch
    assert after.grammar.path == before.grammar.path
    assert any("z" in "".join(after.grammar.terminals[i] for i in a.yield_ids) for a in after.tngs[0].atoms)


def test_a_new_terminal_no_rule_derives_is_refused(tmp_path: Path) -> None:
    spelled = tmp_path / "ab.grammar"
    spelled.write_text("start Sentence\n@ Word a=10 b=0 K=20\nSentence -> Word Sentence\nSentence -> Word\n"
                       "Word -> Chars\nChars -> Char Chars\nChars -> Char\nChar -> 'a'\nChar -> 'b'\n")
    config = GrammarFitConfig(grammar=str(spelled), batch_size=4, n_samples=2, init="empty")
    first = fit_grammar(["ab", "ba", "aab"], config)
    with pytest.raises(InputError, match="terminals in the sentences that no rule of the model's grammar derives: 'c'"):
        fit_grammar(["abc"], config, state=first.state, grammar_text_=first.grammar_text)
    with pytest.raises(InputError, match="whose text was not given"):
        fit_grammar(["abc"], config, state=first.state)


def test_infvoc_lda_grammar_models_grow_their_documents_on_update(tmp_path: Path) -> None:
    store = write_store(tmp_path, ["river boat", "stone wall"], name="lda")
    config = GrammarFitConfig(grammar="infvoc-lda", grammar_params={"K": 2}, batch_size=4, n_samples=2)
    corpus = Corpus.open(store)
    result = fit_grammar_store(corpus, config)
    assert result.grammar_params == {"D": 2, "K": 2} and result.n_sentences == 4
    save_model(tmp_path / "m", grammar_store_model(corpus, result, config))
    append_corpus(store, [write_jsonl(tmp_path / "x.jsonl", ["boat wall", "zinc river"])])
    updated = update_model(tmp_path / "m", Corpus.open(store))
    assert updated.version == 2 and updated.new_docs == 2
    state, params, payload = load_grammar_model(tmp_path / "m")
    assert payload["grammar"]["params"]["D"] == 4
    assert load_model(tmp_path / "m").info.settings["grammar_params"]["D"] == 4
    grammar = state.grammar
    assert {"_3", "_4", "z"} <= set(grammar.terminals) and "Doc4" in grammar.nonterminals
    texts = [grammar.rule_text(r) for r in range(grammar.n_rules)]
    used = {t.split()[0]: 0.0 for t in texts if t.startswith("Doc")}
    for r, t in enumerate(texts):
        if t.startswith("Doc"):
            used[t.split()[0]] += state.g_tilde[r]
    # The new documents' sentences were parsed as documents 3 and 4 (the old ones' counts only decayed):
    # 2 + 2 tokens, scaled to |X| = 8 sentences by the update's minibatch of 4.
    assert used["Doc3"] == pytest.approx(used["Doc4"]) and used["Doc3"] > used["Doc1"] > 0
    before, _, _ = load_grammar_model(tmp_path / "m", version=1)
    assert params.corpus_size == 8
    assert sum(len(t) for t in state.tngs) >= sum(len(t) for t in before.tngs)


def write_jsonl(path: Path, texts: list[str]) -> Path:
    path.write_text("".join(json.dumps({"id": f"{path.stem}{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    return path


def test_the_estimator_reads_a_store_again_as_the_same_documents_and_grows_d_for_more(tmp_path: Path) -> None:
    from topicflow import AdaptorGrammar

    store = write_store(tmp_path, ["river boat", "stone wall"], name="est")
    model = AdaptorGrammar("infvoc-lda", grammar_params={"K": 2}, batch_size=4, n_samples=2).fit(store)
    assert model.grammar_params_["D"] == 2
    model.partial_fit(store)  # a second pass over the same two documents: D stays
    assert model.grammar_params_["D"] == 2 and "_3" not in model.state_.grammar.terminals
    append_corpus(store, [write_jsonl(tmp_path / "y.jsonl", ["boat wall"])])
    model.partial_fit(store)  # the store has a third document now: '_3' joins the grammar
    assert model.grammar_params_["D"] == 3 and "_3" in model.state_.grammar.terminals
    assert "Doc3" in model.state_.grammar.nonterminals
