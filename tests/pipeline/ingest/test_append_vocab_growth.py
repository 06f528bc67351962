"""append_corpus(promote_min_df=...): the store's vocabulary grows at its end, as a new version."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from topicflow import Corpus
from topicflow.errors import FormatVersionError, InvalidParameterError
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import TokenizerConfig
from topicflow.io.corpus.layout import Manifest
from topicflow.io.corpus.reader import read_manifest
from topicflow.models.lda.state import LDAState
from topicflow.models.lda.vocab_growth import check_vocabulary_prefix, grow_state
from topicflow.pipeline.ingest import append as append_module
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.describe import describe_store
from topicflow.pipeline.ingest.ingest import ingest_corpus

NO_STOP = TokenizerConfig(stop_words_name="none", stop_words=())
BASE = ["fox dog tax", "dog tax economy", "fox fox news"]
#: Out of vocabulary: zebra in 3 docs, quagga in 2 (one doc twice), unicorn in 1.
NEW = ["zebra quagga quagga fox", "zebra unicorn", "zebra quagga dog", "unicorn"]


def write_jsonl(path: Path, texts: list[str], prefix: str, **extra: Any) -> Path:
    rows = [{"id": f"{prefix}{i}", "text": t, **extra} for i, t in enumerate(texts)]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def bags(store: Path, language: str | None = None) -> dict[str, dict[str, int]]:
    corpus = Corpus.open(store)
    vocab = corpus.vocabulary(language)
    return {str(b.doc_ids[r]): {vocab.term_of(t): c for t, c in b.doc_bag(r).items()}
            for b in corpus.iter_blocks(language) for r in range(b.n_docs)}


def snapshot(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != ".lock"}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    ingest_corpus([write_jsonl(tmp_path / "base.jsonl", BASE, "b")], tmp_path / "s.zarr", tokenizer=NO_STOP,
                  shard_size=2)
    return tmp_path / "s.zarr"


def test_promotion_threshold_ids_and_round_trip(store: Path, tmp_path: Path) -> None:
    old = Corpus.open(store)
    old_vocab, old_shards = old.vocabulary(), snapshot(store / "shards")
    n_old = len(old_vocab)
    result = append_corpus(store, [write_jsonl(tmp_path / "new.jsonl", NEW, "n")], promote_min_df=2)
    corpus = Corpus.open(store)
    vocab = corpus.vocabulary()
    assert vocab.terms[:n_old].tolist() == old_vocab.terms.tolist()
    assert vocab.doc_freq[:n_old].tolist() == old_vocab.doc_freq.tolist()
    # Canonical order of the promoted terms: zebra and quagga tie on corpus freq 3, zebra has df 3.
    assert vocab.terms[n_old:].tolist() == ["zebra", "quagga", "unicorn"]
    assert vocab.id_of("zebra") == n_old and vocab.id_of("quagga") == n_old + 1
    # Frequencies of promoted terms are the candidate counts.
    assert vocab.doc_freq[n_old:].tolist() == [3, 2, 2] and vocab.corpus_freq[n_old:].tolist() == [3, 3, 2]
    assert result.promoted == {"default": 3} and result.vocab_version == 2
    assert result.n_candidates == {"default": 0}
    assert result.vocab_sizes == {"default": n_old + 3}
    # The new shards use the grown vocabulary: every document is kept with all its tokens.
    docs = bags(store)
    assert docs["n0"] == {"zebra": 1, "quagga": 2, "fox": 1} and docs["n3"] == {"unicorn": 1}
    assert result.n_kept == 4 and result.dropped == {}
    new_ids = np.concatenate([corpus.read_block(i).term_ids for i in range(2, corpus.n_shards)])
    assert set(new_ids[new_ids >= n_old].tolist()) == {n_old, n_old + 1, n_old + 2}
    # Old shards are untouched and still read with the same terms.
    assert {k: v for k, v in snapshot(store / "shards").items() if k in old_shards} == old_shards
    assert docs["b0"] == {"fox": 1, "dog": 1, "tax": 1} and docs["b2"] == {"fox": 2, "news": 1}
    assert [s.vocab_version for s in corpus.shards] == [1, 1, 2, 2]
    assert corpus.vocab_version == 2 and corpus.verify() == []
    assert corpus.vocabulary_version(None, 1).terms.tolist() == old_vocab.terms.tolist()
    assert (store / "vocab" / "default").is_dir() and (store / "vocabs" / "000002" / "default").is_dir()


def test_terms_below_threshold_stay_candidates(store: Path, tmp_path: Path) -> None:
    n_old = len(Corpus.open(store).vocabulary())
    result = append_corpus(store, [write_jsonl(tmp_path / "new.jsonl", NEW, "n")], promote_min_df=3)
    corpus = Corpus.open(store)
    assert corpus.vocabulary().terms[n_old:].tolist() == ["zebra"]
    cands = corpus.candidates()
    assert dict(zip(cands.terms, zip(cands.doc_freq.tolist(), cands.corpus_freq.tolist()))) == {
        "quagga": (2, 3), "unicorn": (2, 2)}
    assert bags(store)["n0"] == {"zebra": 1, "fox": 1} and "n3" not in bags(store)
    assert result.dropped == {"all_terms_out_of_vocabulary": 1}
    # A later append merges the remaining candidates with its own terms, then promotes them.
    result = append_corpus(store, [write_jsonl(tmp_path / "more.jsonl", ["quagga yak", "yak"], "m")],
                           promote_min_df=3)
    corpus = Corpus.open(store)
    assert corpus.vocab_version == 3 and result.promoted == {"default": 1}
    assert corpus.vocabulary().terms[n_old:].tolist() == ["zebra", "quagga"]
    assert corpus.vocabulary().corpus_freq[-1] == 4  # 3 earlier + 1 in this append
    assert corpus.candidates().terms.tolist() == ["unicorn", "yak"]
    assert [s.vocab_version for s in corpus.shards] == [1, 1, 2, 2, 3]
    assert bags(store)["m0"] == {"quagga": 1}
    assert [len(corpus.vocabulary_version(None, v)) for v in (1, 2, 3)] == [n_old, n_old + 1, n_old + 2]


def test_no_promotion_keeps_format_1_and_later_appends_use_current_version(store: Path, tmp_path: Path) -> None:
    append_corpus(store, [write_jsonl(tmp_path / "a.jsonl", NEW, "a")])
    append_corpus(store, [write_jsonl(tmp_path / "b.jsonl", ["yak"], "b9")], promote_min_df=5)
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["format_version"] == 1 and manifest["vocab_version"] == 1
    assert not (store / "vocabs").exists() or not any((store / "vocabs").iterdir())
    append_corpus(store, [write_jsonl(tmp_path / "c.jsonl", ["zebra zebra"], "c")], promote_min_df=2)
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["format_version"] == 2 and manifest["vocab_version"] == 2
    assert describe_store(store)["format_version"] == 2 and describe_store(store)["vocab_version"] == 2
    # An append without promotion on a grown store encodes with the current (grown) vocabulary.
    result = append_corpus(store, [write_jsonl(tmp_path / "d.jsonl", ["zebra fox", "quagga"], "d")])
    assert result.vocab_version == 2 and result.promoted == {"default": 0}
    corpus = Corpus.open(store)
    assert corpus.shards[-1].vocab_version == 2 and bags(store)["d0"] == {"zebra": 1, "fox": 1}
    assert sorted(p.name for p in (store / "vocabs").iterdir()) == ["000002"]
    # A reader that only knows format 1 refuses the grown store instead of misreading it.
    from topicflow.io import _zarr as zarr_shards

    with pytest.raises(FormatVersionError, match="format version 2, newer than version 1"):
        zarr_shards.check_format(manifest, path=str(store), name="topicflow-corpus", version=1)
    assert Manifest.from_dict(manifest).format_version == 2


def test_multilingual_promotion_per_language(tmp_path: Path) -> None:
    rows = [{"id": "a", "en": "tax policy", "de": "steuer politik"}, {"id": "b", "en": "tax", "de": "steuer"}]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    langs = FieldSpec(lang_fields=(("en", "en"), ("de", "de")))
    ingest_corpus([src], tmp_path / "s.zarr", fields=langs, tokenizer=NO_STOP)
    new = tmp_path / "new.jsonl"
    new.write_text("".join(json.dumps(r) + "\n" for r in [
        {"id": "c", "en": "budget tax", "de": "haushalt"},
        {"id": "d", "en": "budget", "de": "haushalt neu"},
        {"id": "e", "de": "neu"},
    ]))
    result = append_corpus(tmp_path / "s.zarr", [new], fields=langs, promote_min_df=2)
    corpus = Corpus.open(tmp_path / "s.zarr")
    assert result.promoted == {"en": 1, "de": 2} and corpus.vocab_version == 2
    assert corpus.vocabulary("en").terms.tolist() == ["tax", "policy", "budget"]
    assert corpus.vocabulary("de").terms.tolist() == ["steuer", "politik", "haushalt", "neu"]
    assert corpus.vocabulary_version("de", 1).terms.tolist() == ["steuer", "politik"]
    en, de = bags(tmp_path / "s.zarr", "en"), bags(tmp_path / "s.zarr", "de")
    assert en["c"] == {"budget": 1, "tax": 1} and de["d"] == {"haushalt": 1, "neu": 1} and en["e"] == {}
    assert en["a"] == {"tax": 1, "policy": 1} and corpus.verify() == []
    assert (tmp_path / "s.zarr" / "vocabs" / "000002" / "en").is_dir()


def test_interrupted_append_with_promotion_leaves_store_unchanged(store: Path, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    before = snapshot(store)
    src = write_jsonl(tmp_path / "new.jsonl", NEW, "n")

    def fail(*args: Any, **kwargs: Any) -> None:
        raise RuntimeError("killed")

    monkeypatch.setattr(append_module, "write_manifest", fail)
    with pytest.raises(RuntimeError, match="killed"):
        append_corpus(store, [src], promote_min_df=2)
    assert snapshot(store) == before and Corpus.open(store).vocab_version == 1
    # A hard kill at the same point also skips the clean-up: the debris stays, readers ignore it ...
    monkeypatch.setattr(append_module, "_remove_debris_quietly", lambda *args: None)
    with pytest.raises(RuntimeError, match="killed"):
        append_corpus(store, [src], promote_min_df=2)
    debris = set(snapshot(store)) - set(before)
    assert any(k.startswith("vocabs/000002/") for k in debris) and any(k.startswith("shards/") for k in debris)
    assert any(k.startswith("candidates/") for k in debris)
    (store / "vocabs" / ".append-deadbeef" / "vocab").mkdir(parents=True)  # killed while writing
    corpus = Corpus.open(store)
    assert corpus.vocab_version == 1 and corpus.n_shards == 2 and corpus.verify() == []
    # ... and the next append removes it, then commits normally.
    monkeypatch.undo()
    result = append_corpus(store, [src], promote_min_df=2)
    assert result.vocab_version == 2 and result.n_kept == 4
    after = set(snapshot(store))
    assert not {k for k in after if k.startswith("vocabs/") and not k.startswith("vocabs/000002/")}
    assert sorted(p.name for p in (store / "shards").iterdir() if p.is_dir()) == ["000000", "000001", "000002",
                                                                                  "000003"]
    candidate_sets = sorted(p.name for p in (store / "candidates").iterdir() if p.is_dir())
    assert candidate_sets == [read_manifest(store).candidates]
    assert not list((store / "vocabs").glob(".*"))
    assert Corpus.open(store).verify() == []


def test_invalid_threshold_is_refused_before_any_work(store: Path, tmp_path: Path) -> None:
    before = snapshot(store)
    with pytest.raises(InvalidParameterError, match="promote_min_df must be a positive integer, got 0"):
        append_corpus(store, [write_jsonl(tmp_path / "new.jsonl", NEW, "n")], promote_min_df=0)
    assert snapshot(store) == before
    with pytest.raises(InvalidParameterError, match=r"vocabulary versions 1 to 1; there is no version 2"):
        Corpus.open(store).vocabulary_version(None, 2)


def test_model_fitted_before_growth_is_a_prefix_and_grows(store: Path, tmp_path: Path) -> None:
    """The contract `topicflow update` relies on: old model + grown store -> grown state."""
    model_terms = Corpus.open(store).vocabulary().terms
    state = LDAState({"default": np.ones((2, len(model_terms)))}, np.full(2, 0.5), {"default": 0.01})
    append_corpus(store, [write_jsonl(tmp_path / "new.jsonl", NEW, "n")], promote_min_df=2)
    corpus = Corpus.open(store)
    n_new = check_vocabulary_prefix(model_terms, corpus.vocabulary().terms, language="default",
                                    model_path="m", store_path=str(store))
    assert n_new == 3
    grown = grow_state(state, corpus.vocab_sizes(), base_prior=0.01)
    assert grown.topic_word_var["default"].shape == (2, len(model_terms) + 3)
    block = corpus.read_block(corpus.n_shards - 1)
    assert block.n_terms == grown.n_terms("default") and block.term_ids.max() < block.n_terms


def test_store_token_changes_when_vocabulary_grows_without_new_shards(store: Path, tmp_path: Path) -> None:
    append_corpus(store, [write_jsonl(tmp_path / "a.jsonl", ["zebra", "zebra yak"], "a")])  # all dropped
    before = Corpus.open(store)
    assert before.n_shards == 2 and before.token() == Corpus.open(store).token()
    # Promotion from earlier candidates alone: no new shard, but block widths change.
    append_corpus(store, [write_jsonl(tmp_path / "b.jsonl", ["unknown"], "x")], promote_min_df=2)
    after = Corpus.open(store)
    assert after.n_shards == 2 and after.vocab_version == 2
    assert after.token() != before.token()
    assert after.read_block(0).n_terms == before.read_block(0).n_terms + 1


def test_terms_dropped_as_too_common_are_never_promoted(tmp_path: Path) -> None:
    from topicflow.io.tokenizer import PruneConfig

    base = ["fox dog tax", "fox tax economy", "fox news", "fox dog"]  # fox is in every document
    store = tmp_path / "common.zarr"
    ingest_corpus([write_jsonl(tmp_path / "b.jsonl", base, "b")], store, tokenizer=NO_STOP,
                  prune=PruneConfig(max_df_fraction=0.9), shard_size=2)
    assert "fox" not in Corpus.open(store).vocabulary().index
    assert Corpus.open(store).excluded_terms() == frozenset({"fox"})
    result = append_corpus(store, [write_jsonl(tmp_path / "n.jsonl", ["fox zebra", "fox zebra dog"], "n")],
                           promote_min_df=2)
    corpus = Corpus.open(store)
    assert "zebra" in corpus.vocabulary().index and "fox" not in corpus.vocabulary().index
    assert "fox" in corpus.candidates().index  # still counted, never promoted
    assert result.promoted == {"default": 1}
