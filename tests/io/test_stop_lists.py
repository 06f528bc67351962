"""Built-in stop lists per language: ``german``, ``english+german`` and ``LANG=LIST,...`` per language."""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from topicflow import Corpus
from topicflow.cli.corpus import COMMANDS
from topicflow.errors import InputError, InvalidParameterError, VocabularyMismatchError
from topicflow.io.corpus.reader import read_manifest
from topicflow.io.sources.base import FieldSpec
from topicflow.io.tokenizer import (
    TokenizerConfig,
    load_builtin_stop_words,
    parse_stop_words,
    tokenize,
    tokenize_batch,
)
from topicflow.pipeline.ingest.append import append_corpus
from topicflow.pipeline.ingest.ingest import ingest_corpus

EN_DE = FieldSpec(lang_fields=(("en", "en"), ("de", "de")))
PER_LANGUAGE = "en=english,de=german"
ROWS = [
    {"id": "1", "en": "The cat and the dog", "de": "Die Katze und der Hund"},
    {"id": "2", "en": "A dog is in the house", "de": "Ein Hund ist in dem Haus"},
    {"id": "3", "en": "The cat sleeps in the house", "de": "Die Katze schläft in dem Haus"},
]


def write_rows(path: Path, rows: list[dict[str, str]]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def test_builtin_german_list_loads_with_its_licence() -> None:
    words = load_builtin_stop_words("german")
    assert len(words) == 231 and list(words) == sorted(set(words))
    assert {"und", "der", "die", "das", "nicht", "über", "daß"} <= set(words)
    header = resources.files("topicflow").joinpath("data", "stopwords_de.txt").read_text(encoding="utf-8")
    assert "Snowball" in header and "Martin Porter" in header and "Redistribution and use" in header


def test_german_list_is_applied_by_both_tokenizers() -> None:
    config = TokenizerConfig.from_options(stop_words="german")
    assert config.stop_words_name == "german" and config.to_dict()["stop_words_name"] == "german"
    texts = ["Der Hund und die Katze", "Über den Fluß, nicht die Brücke", "the dog"]
    assert [tokenize(t, config) for t in texts] == [["hund", "katze"], ["fluß", "brücke"], ["the", "dog"]]
    batch = tokenize_batch(texts, config)
    assert [batch.tokens(i) for i in range(len(texts))] == [tokenize(t, config) for t in texts]


def test_combined_lists_are_the_union(tmp_path: Path) -> None:
    name, words = parse_stop_words("english+german")
    assert name == "english+german"
    assert set(words) == set(load_builtin_stop_words("english")) | set(load_builtin_stop_words("german"))
    (tmp_path / "extra.txt").write_text("dass\n# modern spelling\n", encoding="utf-8")
    name, words = parse_stop_words(f"german+{tmp_path / 'extra.txt'}")
    assert name == "german+file" and set(words) == set(load_builtin_stop_words("german")) | {"dass"}
    (tmp_path / "a+b.txt").write_text("foo\n", encoding="utf-8")  # an existing path is a file, '+' or not
    assert parse_stop_words(str(tmp_path / "a+b.txt")) == ("file", ("foo",))


@pytest.mark.parametrize("spec,error,match", [
    ("english+", InvalidParameterError, "has an empty part"),
    ("none+english", InvalidParameterError, "none joined with another list"),
    ("", InvalidParameterError, "stop-word list is empty"),
    ("french", InputError, "'french' does not exist; pass an existing file, 'english', 'german' or 'none'"),
    ("en=english,de", InvalidParameterError, "part 'de' is not LANG=LIST"),
    ("=english", InvalidParameterError, "part '=english' is not LANG=LIST"),
    ("en=english,en=german", InvalidParameterError, "name language 'en' twice"),
    ("en=english,de=klingon", InputError, "'klingon' does not exist"),
])
def test_bad_specs_raise_naming_the_part(spec: str, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        TokenizerConfig.from_options(stop_words=spec)


def test_directory_is_not_a_stop_word_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="is a directory"):
        TokenizerConfig.from_options(stop_words=str(tmp_path))


def test_per_language_lists_and_manifest_round_trip() -> None:
    config = TokenizerConfig.from_options(stop_words="de=german,en=english")
    assert config == TokenizerConfig.from_options(stop_words=PER_LANGUAGE)  # order of the spec does not matter
    assert (config.stop_words_name, config.stop_words) == ("none", ())
    assert config.for_language("de").stop_words == load_builtin_stop_words("german")
    assert config.for_language("en").stop_words == load_builtin_stop_words("english")
    assert config.for_language("fr").stop_words == () and not config.for_language("fr").language_stop_words
    text = "the Katze und the cat"
    assert tokenize(text, config.for_language("de")) == ["the", "katze", "the", "cat"]
    assert tokenize(text, config.for_language("en")) == ["katze", "und", "cat"]
    payload = json.loads(json.dumps(config.to_dict()))  # as the manifest stores it
    assert payload["language_stop_words"]["de"]["name"] == "german"
    assert TokenizerConfig.from_dict(payload) == config
    assert config.differences(TokenizerConfig()) == [
        "stop_words_name: 'none' != 'english'", "stop_words: 0 words != 302 words",
        "language_stop_words: de=german (231 words), en=english (302 words) != none"]
    with pytest.raises(InvalidParameterError, match="must be 'none' or"):
        TokenizerConfig(language_stop_words={"de": ("klingon", ("a",))})


def test_existing_settings_keep_their_manifest_and_old_manifests_load() -> None:
    # A tokenizer entry as stores written before per-language lists have it (no language_stop_words key).
    old = {"lowercase": True, "token_pattern": r"(?u)\b\w+\b", "min_length": 2, "stop_words_name": "english",
           "stop_words": list(load_builtin_stop_words("english"))}
    config = TokenizerConfig.from_dict(old)
    assert config == TokenizerConfig() and config.to_dict() == old
    assert config.for_language("de") is config  # one list for every language: the same settings object
    old_file = {"lowercase": False, "token_pattern": r"\w+", "min_length": 1, "stop_words_name": "file",
                "stop_words": ["b", "a"]}
    loaded = TokenizerConfig.from_dict(old_file)
    assert loaded.stop_words == ("a", "b") and loaded.language_stop_words == ()
    assert loaded.to_dict() == {**old_file, "stop_words": ["a", "b"]}


def test_two_language_store_applies_each_list_and_append_reuses_it(tmp_path: Path) -> None:
    store = tmp_path / "s.zarr"
    tokenizer = TokenizerConfig.from_options(stop_words=PER_LANGUAGE)
    ingest_corpus([write_rows(tmp_path / "a.jsonl", ROWS)], store, fields=EN_DE, tokenizer=tokenizer)
    corpus = Corpus.open(store)
    assert set(corpus.vocabulary("en").terms.tolist()) == {"cat", "dog", "house", "sleeps"}
    assert set(corpus.vocabulary("de").terms.tolist()) == {"katze", "hund", "haus", "schläft"}
    assert TokenizerConfig.from_dict(read_manifest(store).tokenizer) == tokenizer
    new = write_rows(tmp_path / "b.jsonl", [{"id": "4", "en": "the cat in the house", "de": "die Katze und das Haus"}])
    assert corpus.tokens_by_language() == {"en": 7, "de": 7}
    append_corpus(store, [new], fields=EN_DE)  # no tokenizer given: the store's, per language
    # 2 more tokens per language (cat, house; katze, haus): 'die', 'und', 'das' are German stop words only.
    assert Corpus.open(store).tokens_by_language() == {"en": 9, "de": 9}
    with pytest.raises(VocabularyMismatchError, match="language_stop_words: none != de=german"):
        append_corpus(store, [new], fields=EN_DE, tokenizer=TokenizerConfig())


def test_prior_tree_words_go_through_their_own_languages_list(tmp_path: Path) -> None:
    from topicflow.io.trees import build_tree_for_store

    store = tmp_path / "s.zarr"
    ingest_corpus([write_rows(tmp_path / "a.jsonl", ROWS)], store, fields=EN_DE,
                  tokenizer=TokenizerConfig.from_options(stop_words=PER_LANGUAGE))
    # "die" is a German stop word: no token in German, so its pair is not a single token. "in" is a
    # stop word of both lists; "ist"/"is" of both too. The English "die" is not on the English list.
    dictionary = tmp_path / "d.tsv"
    dictionary.write_text("de\ten\nKatze\tcat\nHund\tdog\ndie\tthe\nHaus\tdie\nist\tsleeps\n", encoding="utf-8")
    tree, coverage, _ = build_tree_for_store(dictionary, store)
    assert coverage.pairs_read == 5 and coverage.pairs_in_vocabulary == 2
    # die/the: both stop words; ist/sleeps: "ist" is a German stop word. Haus/die: the English "die" is a
    # token of English (not on its list) but not in this tiny vocabulary.
    assert coverage.pairs_not_single_token == 2 and coverage.pairs_out_of_vocabulary == 1
    assert "en:cat|de:katze" in tree.node_names and "en:dog|de:hund" in tree.node_names


def test_per_language_list_for_a_language_the_store_lacks(tmp_path: Path) -> None:
    with pytest.raises(InvalidParameterError, match="language 'fr', which is not a language of the store"):
        ingest_corpus([write_rows(tmp_path / "a.jsonl", ROWS)], tmp_path / "s.zarr", fields=EN_DE,
                      tokenizer=TokenizerConfig.from_options(stop_words="en=english,fr=german"))
    assert not (tmp_path / "s.zarr").exists()


@click.group()
def cli() -> None:
    """The corpus commands alone."""


for _command in COMMANDS:
    cli.add_command(_command)


def test_cli_errors_name_the_language_and_info_shows_the_lists(tmp_path: Path) -> None:
    src = write_rows(tmp_path / "a.jsonl", ROWS)
    bad = CliRunner().invoke(cli, ["ingest", str(src), "--out", str(tmp_path / "bad.zarr"), "--lang-field", "en=en",
                                   "--lang-field", "de=de", "--stop-words", "en=english,fr=german"])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines()[-1].startswith("topicflow: error: --stop-words gives a list for language 'fr'")
    assert not (tmp_path / "bad.zarr").exists()
    store = tmp_path / "s.zarr"
    ingest_corpus([src], store, fields=EN_DE, tokenizer=TokenizerConfig.from_options(stop_words=PER_LANGUAGE))
    info = CliRunner().invoke(cli, ["info", str(store)])
    assert info.exit_code == 0, info.output
    assert "stop_words=de=german (231 words), en=english (302 words), others=none (0 words)" in info.output
    as_json = json.loads(CliRunner().invoke(cli, ["info", str(store), "--format", "json"]).output)
    assert as_json["tokenizer"]["language_stop_words"] == {"de": {"name": "german", "stop_words": 231},
                                                            "en": {"name": "english", "stop_words": 302}}
