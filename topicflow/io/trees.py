"""Prior-tree files: reading dictionaries and hierarchies, building a tree for a store, saving and loading it.

A saved tree is a directory (docs/tree-lda.md, "Tree file format")::

    TREE/tree.json     header: format name and version, languages, n_terms, vocabulary checksums of the
                       store it was built for, node names, build settings, coverage, array descriptions
    TREE/arrays.npz    the PriorTree arrays (uncompressed .npy members with fixed timestamps; no pickle)

Both are written to a temporary sibling directory that is moved into place (:mod:`topicflow.io._atomic`).
Reading checks every array's dtype, shape and SHA-256 against the header and the tree's structure
(``tree_problems``); :func:`check_tree_matches` checks that a tree
belongs to a store's vocabularies before a fit uses it.
"""
from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from topicflow.errors import (
    InputError,
    InvalidParameterError,
    VocabularyMismatchError,
)
from topicflow.io._bundle import (
    ARRAYS_FILE,  # noqa: F401  (re-exported: the arrays' file name in a tree directory)
    BundleKind,
    arrays_source,
    read_arrays,
    read_header,
    write_bundle,
)
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.output_paths import prepare_output
from topicflow.io.storage import StoragePath, as_location, open_input
from topicflow.io.tokenizer import TokenizerConfig, make_tokenizer
from topicflow.models.tree_lda.build import (
    DEFAULT_CONCEPT_BETA,
    DEFAULT_ROOT_BETA,
    HierarchyLeaf,
    HierarchyNode,
    TreeCoverage,
    Word,
    build_tree_from_hierarchy,
    build_tree_from_pairs,
)
from topicflow.models.tree_lda.tree import PriorTree

#: Name in ``tree.json`` of the format, and its version (readers refuse newer versions).
TREE_FORMAT = "topicflow-prior-tree"
TREE_FORMAT_VERSION = 1
HEADER_FILE = "tree.json"
#: The PriorTree arrays stored in ``arrays.npz`` (all int64 but ``edge_prior``, float64).
ARRAY_NAMES: tuple[str, ...] = ("edge_parent", "edge_child", "edge_prior", "path_indptr", "path_edges",
                                "path_language", "path_term")
#: Dictionary and hierarchy file formats of :func:`build_tree_for_store`.
SOURCE_FORMATS: tuple[str, ...] = ("tsv", "json")
#: The bundle a prior tree is saved as (:mod:`topicflow.io._bundle`).
TREE_BUNDLE = BundleKind(
    format=TREE_FORMAT, version=TREE_FORMAT_VERSION, header_file=HEADER_FILE, noun="prior tree",
    make="build one with `topicflow tree build`",
    remake="Rebuild it with `topicflow tree build DICT --store STORE --out TREE --overwrite`.",
    command="topicflow tree build", array_names=ARRAY_NAMES,
)


@dataclass(frozen=True)
class TreeInfo:
    """What ``tree.json`` says about a saved prior tree.

    Attributes
    ----------
    path : str
        The tree directory.
    languages : tuple of str
    n_terms : tuple of int
    vocab_checksums : dict of str to str
        ``sha256:<hex>`` of each language's vocabulary the tree was built for (:func:`vocabulary_checksum`).
    store : str or None
        The store it was built from (informational; matching uses the checksums).
    settings : dict
        Build settings (source file, format, merge, convention, betas).
    coverage : TreeCoverage
    n_nodes, n_edges, n_paths : int
    format_version : int
    """

    path: str
    languages: tuple[str, ...]
    n_terms: tuple[int, ...]
    vocab_checksums: dict[str, str]
    store: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    coverage: TreeCoverage = field(default_factory=TreeCoverage)
    n_nodes: int = 1
    n_edges: int = 0
    n_paths: int = 0
    format_version: int = TREE_FORMAT_VERSION

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (what ``topicflow tree info --format json`` prints)."""
        return {
            "path": self.path, "format_version": self.format_version, "languages": list(self.languages),
            "n_terms": list(self.n_terms), "vocab_checksums": dict(self.vocab_checksums), "store": self.store,
            "settings": dict(self.settings), "coverage": self.coverage.to_dict(), "n_nodes": self.n_nodes,
            "n_edges": self.n_edges, "n_paths": self.n_paths,
        }


def vocabulary_checksum(terms: Sequence[Any]) -> str:
    """``sha256:<hex>`` of a vocabulary's terms in id order (newline-joined UTF-8).

    Parameters
    ----------
    terms : sequence of str

    Returns
    -------
    str
    """
    digest = hashlib.sha256()
    for term in terms:
        digest.update(str(term).encode("utf-8"))
        digest.update(b"\n")
    return "sha256:" + digest.hexdigest()


def store_vocab_checksums(corpus: Corpus, languages: Sequence[str] | None = None) -> dict[str, str]:
    """:func:`vocabulary_checksum` of each of the store's current vocabularies.

    Parameters
    ----------
    corpus : Corpus
    languages : sequence of str, optional
        Default: all the store's languages.

    Returns
    -------
    dict of str to str
    """
    return {lang: vocabulary_checksum(corpus.vocabulary(lang).terms.tolist())
            for lang in (languages or corpus.languages)}


# --------------------------------------------------------------------------------------------- sources


def read_dictionary(path: str | os.PathLike[str] | StoragePath, *, languages: Sequence[str] | None = None,
                    known_languages: Sequence[str] | None = None) -> tuple[list[tuple[Word, Word]], tuple[str, str]]:
    """Read a tab-separated dictionary: one pair per line, ``WORD_1<TAB>WORD_2``.

    Blank lines and lines starting with ``#`` are skipped; columns after the second are ignored. The
    columns' languages are ``languages``, or else the first line must be a header naming them (both in
    ``known_languages`` when given). Both columns may have the same language (synonyms).

    Parameters
    ----------
    path : path
    languages : sequence of two str, optional
    known_languages : sequence of str, optional
        Languages a header may name (the store's).

    Returns
    -------
    pairs : list of ((language, word), (language, word))
    languages : (str, str)

    Raises
    ------
    InputError
        Missing file, bad UTF-8, a line with fewer than two columns or an empty word, a missing header;
        the message names the file and line.
    """
    path = as_location(path)
    if not path.is_file():
        raise InputError(f"dictionary file {str(path)!r} does not exist; pass a tab-separated file of word pairs.",
                         path=str(path))
    if languages is not None and len(languages) != 2:
        raise InvalidParameterError(f"a dictionary has two columns; give two languages, not {list(languages)}.")
    cols: tuple[str, str] | None = (str(languages[0]), str(languages[1])) if languages is not None else None
    pairs: list[tuple[Word, Word]] = []
    with open_input(path, "rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise InputError(f"dictionary {str(path)!r}, line {number}: not valid UTF-8 ({exc.reason}); "
                                 "re-encode the file as UTF-8.", path=str(path), line=number) from exc
            if not line.strip() or line.startswith("#"):
                continue
            fields = [f.strip() for f in line.split("\t")]
            if len(fields) < 2 or not fields[0] or not fields[1]:
                raise InputError(
                    f"dictionary {str(path)!r}, line {number}: expected two tab-separated words "
                    f"(one per language), found {line!r}; fix or remove the line.", path=str(path), line=number)
            if cols is None:
                if known_languages is not None and not set(fields[:2]) <= set(known_languages):
                    raise InputError(
                        f"dictionary {str(path)!r}, line {number}: without --languages (languages=) the first line "
                        f"must name the columns' languages, found {fields[:2]}; the store has {list(known_languages)}. "
                        "Pass --languages LANG1,LANG2 or add a header line.", path=str(path), line=number)
                cols = (fields[0], fields[1])
                continue
            pairs.append(((cols[0], fields[0]), (cols[1], fields[1])))
    if cols is None:
        raise InputError(f"dictionary {str(path)!r} holds no pairs.", path=str(path))
    return pairs, cols


def read_hierarchy(path: str | os.PathLike[str] | StoragePath, *, default_language: str | None = None) -> HierarchyNode:
    """Read a nested JSON hierarchy (docs/tree-lda.md, "Prior trees").

    The file holds the root object ``{"children": [...]}``; an internal node is
    ``{"name": str, "children": [...], "beta": float (optional)}``, a leaf
    ``{"term": str, "language": str, "beta": float (optional)}`` (``language`` may be left out when
    ``default_language`` is given).

    Parameters
    ----------
    path : path
    default_language : str, optional

    Returns
    -------
    HierarchyNode
        The root.

    Raises
    ------
    InputError
        Missing file, invalid JSON, a node of the wrong shape; the message names the file and the node.
    """
    path = as_location(path)
    try:
        payload = json.loads(path.read_bytes().decode("utf-8"))
    except FileNotFoundError as exc:
        raise InputError(f"hierarchy file {str(path)!r} does not exist.", path=str(path)) from exc
    except UnicodeDecodeError as exc:
        raise InputError(f"hierarchy file {str(path)!r} is not valid UTF-8; re-encode it.", path=str(path)) from exc
    except json.JSONDecodeError as exc:
        raise InputError(f"hierarchy file {str(path)!r}, line {exc.lineno}: invalid JSON ({exc.msg}).",
                         path=str(path), line=exc.lineno) from exc

    def bad(where: str, what: str) -> InputError:
        return InputError(f"hierarchy file {str(path)!r}, node {where}: {what}; see docs/tree-lda.md for the format.",
                          path=str(path))

    def beta_of(obj: Mapping[str, Any], where: str) -> float | None:
        value = obj.get("beta")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise bad(where, f"beta must be a positive number, got {value!r}")
        return float(value)

    def parse(obj: Any, where: str) -> HierarchyNode | HierarchyLeaf:
        if not isinstance(obj, dict):
            raise bad(where, "expected a JSON object")
        if "children" in obj:
            children = obj["children"]
            if not isinstance(children, list):
                raise bad(where, "'children' must be a list")
            return HierarchyNode(str(obj.get("name", where)), [parse(c, f"{where}.children[{i}]")
                                                               for i, c in enumerate(children)], beta_of(obj, where))
        if "term" in obj:
            language = obj.get("language", default_language)
            if not isinstance(obj["term"], str) or not isinstance(language, str):
                raise bad(where, "a leaf needs a string 'term' and a string 'language'")
            return HierarchyLeaf(language, obj["term"], beta_of(obj, where))
        raise bad(where, "expected 'children' (an internal node) or 'term' (a leaf)")

    root = parse(payload, "root")
    if not isinstance(root, HierarchyNode):
        raise bad("root", "the root must have 'children'")
    return root


def build_tree_for_store(
    source: str | os.PathLike[str],
    store: Corpus | str | os.PathLike[str],
    *,
    languages: Sequence[str] | None = None,
    source_format: str = "tsv",
    merge: str = "pairs",
    convention: str = "per-leaf",
    root_beta: float = DEFAULT_ROOT_BETA,
    concept_beta: float = DEFAULT_CONCEPT_BETA,
) -> tuple[PriorTree, TreeCoverage, dict[str, Any]]:
    """Build the prior tree of a dictionary (TSV) or hierarchy (JSON) over a store's vocabularies.

    Dictionary words go through the store's own tokenizer (its manifest's settings: lowercasing, token
    pattern, minimum length, stop words); a pair whose word is not exactly one token is skipped and
    counted (``pairs_not_single_token``).

    Parameters
    ----------
    source : path
        Dictionary (``source_format="tsv"``) or hierarchy (``"json"``).
    store : Corpus or path
    languages : sequence of str, optional
        For tsv, the two columns' languages (else a header line names them); for json, the tree's
        languages. The tree covers the languages of the store that appear here, in the store's order,
        or all the store's languages when None.
    source_format : {"tsv", "json"}, default "tsv"
    merge : {"pairs", "transitive"}, default "pairs"
        As in :func:`~topicflow.models.tree_lda.build.build_tree_from_pairs` (tsv only).
    convention : {"per-leaf", "tree-tm"}, default "per-leaf"
        How edge priors follow from the two betas (:mod:`topicflow.models.tree_lda.build`).
    root_beta : float, default 0.01
        Per-leaf: prior per leaf under the root; tree-tm: the root's total mass.
    concept_beta : float, default 100
        Total prior mass of each concept's child edges.

    Returns
    -------
    tree : PriorTree
    coverage : TreeCoverage
    settings : dict
        What to record in the tree file (source, format, merge, convention, betas, store).

    Raises
    ------
    InvalidParameterError
        A language the store does not have, an unknown format.
    InputError
        A bad dictionary or hierarchy line (file and line named).
    """
    corpus = as_corpus(store)
    if source_format not in SOURCE_FORMATS:
        raise InvalidParameterError(f"unknown dictionary format {source_format!r}; use one of {list(SOURCE_FORMATS)}.")
    store_langs = corpus.languages
    if languages is not None:
        unknown = [lang for lang in languages if lang not in store_langs]
        if unknown:
            raise InvalidParameterError(f"store {str(corpus.path)!r} has no language {unknown[0]!r}; it has "
                                        f"{list(store_langs)}. Fix --languages (languages=).")
    config = TokenizerConfig.from_dict(corpus.manifest.tokenizer)
    if source_format == "tsv":
        pairs, cols = read_dictionary(source, languages=languages, known_languages=store_langs)
        for lang in cols:
            if lang not in store_langs:
                raise InvalidParameterError(f"dictionary {str(source)!r} names language {lang!r}, which store "
                                            f"{str(corpus.path)!r} does not have (it has {list(store_langs)}).")
        tree_langs = tuple(lang for lang in store_langs if lang in cols)
    else:
        tree_langs = tuple(lang for lang in store_langs if languages is None or lang in languages)
    vocabularies = {lang: corpus.vocabulary(lang).terms.tolist() for lang in tree_langs}
    # Each language's words go through its own settings (its stop list, when the store has one per language).
    tokenizer = {lang: make_tokenizer(config.for_language(lang)) for lang in tree_langs}
    if source_format == "tsv":
        tree, coverage = build_tree_from_pairs(pairs, tree_langs, vocabularies, merge=merge, convention=convention,
                                               root_beta=root_beta, concept_beta=concept_beta, normalize=tokenizer)
    else:
        root = read_hierarchy(source, default_language=tree_langs[0] if len(tree_langs) == 1 else None)
        try:
            tree, coverage = build_tree_from_hierarchy(root, tree_langs, vocabularies, convention=convention,
                                                       root_beta=root_beta, concept_beta=concept_beta,
                                                       normalize=tokenizer)
        except InvalidParameterError as exc:
            raise InputError(f"hierarchy file {str(source)!r}: {exc}", path=str(source)) from exc
    settings = {"source": str(source), "source_format": source_format, "merge": merge if source_format == "tsv" else None,
                "convention": convention, "root_beta": float(root_beta), "concept_beta": float(concept_beta),
                "store": str(corpus.path)}
    return tree, coverage, settings


# ------------------------------------------------------------------------------------------ write / read


def write_tree(
    path: str | os.PathLike[str] | StoragePath,
    tree: PriorTree,
    *,
    vocab_checksums: Mapping[str, str],
    store: str | None = None,
    settings: Mapping[str, Any] | None = None,
    coverage: TreeCoverage | None = None,
    overwrite: bool = False,
) -> TreeInfo:
    """Save ``tree`` as a tree directory, atomically.

    Parameters
    ----------
    path : path
        Directory to create; an existing one is replaced only with ``overwrite``.
    tree : PriorTree
    vocab_checksums : mapping of str to str
        Per language of the tree, the checksum of the vocabulary it was built over
        (:func:`store_vocab_checksums`).
    store : str, optional
    settings : mapping, optional
    coverage : TreeCoverage, optional
    overwrite : bool, default False

    Returns
    -------
    TreeInfo

    Raises
    ------
    StoreExistsError
        ``path`` exists and not ``overwrite``.
    InvalidParameterError
        ``vocab_checksums`` lacks one of the tree's languages.
    """
    path = prepare_output(path, what="prior tree", option="tree build --out", overwrite=overwrite,
                          markers=(HEADER_FILE,))
    missing = [lang for lang in tree.languages if lang not in vocab_checksums]
    if missing:
        raise InvalidParameterError(f"no vocabulary checksum for language(s) {missing} of the tree.")
    arrays = {name: getattr(tree, name) for name in ARRAY_NAMES}
    info = TreeInfo(path=str(path), languages=tree.languages, n_terms=tree.n_terms,
                    vocab_checksums={lang: str(vocab_checksums[lang]) for lang in tree.languages}, store=store,
                    settings=dict(settings or {}), coverage=coverage or TreeCoverage(), n_nodes=tree.n_nodes,
                    n_edges=tree.n_edges, n_paths=tree.n_paths)
    header = {
        "languages": list(tree.languages), "n_terms": list(tree.n_terms), "vocab_checksums": info.vocab_checksums,
        "store": store, "settings": info.settings, "coverage": info.coverage.to_dict(), "n_nodes": tree.n_nodes,
        "n_edges": tree.n_edges, "n_paths": tree.n_paths, "node_names": list(tree.node_names),
    }
    write_bundle(path, TREE_BUNDLE, header, arrays, overwrite=overwrite)
    return info


def _info_of(path: Path | StoragePath, header: Mapping[str, Any]) -> TreeInfo:
    try:
        return TreeInfo(
            path=str(path), languages=tuple(str(x) for x in header["languages"]),
            n_terms=tuple(int(x) for x in header["n_terms"]),
            vocab_checksums={str(k): str(v) for k, v in dict(header["vocab_checksums"]).items()},
            store=header.get("store"), settings=dict(header.get("settings") or {}),
            coverage=TreeCoverage.from_dict(header.get("coverage") or {}), n_nodes=int(header["n_nodes"]),
            n_edges=int(header["n_edges"]), n_paths=int(header["n_paths"]),
            format_version=int(header["format_version"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TREE_BUNDLE.damaged(str(path), f"{HEADER_FILE} lacks or garbles a field ({exc!r})") from exc


def read_tree_info(path: str | os.PathLike[str] | StoragePath) -> TreeInfo:
    """Read only a tree's header.

    Parameters
    ----------
    path : path
        A tree directory.

    Returns
    -------
    TreeInfo

    Raises
    ------
    StoreNotFoundError
        Nothing at ``path``.
    CorpusFormatError
        Not a tree, or a damaged header.
    FormatVersionError
        Written by a newer topicflow.
    """
    path = as_location(path)
    return _info_of(path, read_header(path, TREE_BUNDLE))


def read_tree(path: str | os.PathLike[str] | StoragePath) -> tuple[PriorTree, TreeInfo]:
    """Read and validate a saved prior tree.

    Parameters
    ----------
    path : path
        A tree directory.

    Returns
    -------
    tree : PriorTree
    info : TreeInfo

    Raises
    ------
    StoreNotFoundError
        Nothing at ``path``.
    CorpusFormatError
        Not a tree; a damaged header or arrays (checksum, dtype, shape, or an invalid tree structure).
    FormatVersionError
        Written by a newer topicflow.
    """
    path = as_location(path)
    header = read_header(path, TREE_BUNDLE)
    info = _info_of(path, header)
    arrays = read_arrays(str(path), TREE_BUNDLE, header, arrays_source(path, TREE_BUNDLE))
    names = header.get("node_names")
    if not isinstance(names, list):
        raise TREE_BUNDLE.damaged(str(path), f"{HEADER_FILE} has no node_names list")
    try:  # PriorTree validates its structure (tree_problems)
        tree = PriorTree(languages=info.languages, n_terms=info.n_terms, node_names=tuple(str(n) for n in names),
                         **arrays)
    except (InvalidParameterError, IndexError, ValueError) as exc:
        raise TREE_BUNDLE.damaged(str(path), str(exc)) from exc
    return tree, info


def check_tree_matches(tree_info: TreeInfo, corpus: Corpus | str | os.PathLike[str],
                       languages: Sequence[str] | None = None) -> None:
    """Refuse a tree built for other vocabularies than the store's current ones.

    Parameters
    ----------
    tree_info : TreeInfo
        From :func:`read_tree` or :func:`read_tree_info`.
    corpus : Corpus or path
    languages : sequence of str, optional
        The languages the fit uses (default: all the store's); each must be in the tree with the store's
        vocabulary.

    Raises
    ------
    VocabularyMismatchError
        A language missing from the tree, or a vocabulary (size or terms) that differs; the message names
        the tree, the store and how to rebuild.
    """
    corpus = as_corpus(corpus)
    wanted = tuple(languages) if languages is not None else corpus.languages
    rebuild = (f"rebuild the tree for this store: `topicflow tree build DICT --store {corpus.path!s} "
               f"--out {tree_info.path} --overwrite`.")
    for lang in wanted:
        if lang not in tree_info.languages:
            raise VocabularyMismatchError(
                f"prior tree {tree_info.path!r} has languages {list(tree_info.languages)}, not {lang!r} of store "
                f"{str(corpus.path)!r}; {rebuild}", path=tree_info.path)
        vocab = corpus.vocabulary(lang)
        n_tree = tree_info.n_terms[tree_info.languages.index(lang)]
        if len(vocab) != n_tree or vocabulary_checksum(vocab.terms.tolist()) != tree_info.vocab_checksums.get(lang):
            raise VocabularyMismatchError(
                f"prior tree {tree_info.path!r} was built for another {lang!r} vocabulary ({n_tree} terms) than store "
                f"{str(corpus.path)!r} has ({len(vocab)} terms, vocabulary version {corpus.vocab_version}); "
                f"{rebuild}", path=tree_info.path)


def build_and_write_tree(
    source: str | os.PathLike[str],
    store: Corpus | str | os.PathLike[str],
    out: str | os.PathLike[str] | StoragePath,
    *,
    languages: Sequence[str] | None = None,
    source_format: str = "tsv",
    merge: str = "pairs",
    convention: str = "per-leaf",
    root_beta: float = DEFAULT_ROOT_BETA,
    concept_beta: float = DEFAULT_CONCEPT_BETA,
    overwrite: bool = False,
) -> tuple[PriorTree, TreeInfo]:
    """:func:`build_tree_for_store`, then :func:`write_tree` with the store's vocabulary checksums.

    Parameters
    ----------
    source : path
        Dictionary or hierarchy file.
    store : Corpus or path
    out : path
        Tree directory to write.
    languages : sequence of str, optional
    source_format : {"tsv", "json"}, default "tsv"
    merge : {"pairs", "transitive"}, default "pairs"
    convention : {"per-leaf", "tree-tm"}, default "per-leaf"
    root_beta : float, default 0.01
    concept_beta : float, default 100
    overwrite : bool, default False
        Replace an existing tree once the new one is complete.

    Returns
    -------
    tree : PriorTree
    info : TreeInfo

    See Also
    --------
    build_tree_for_store : what the build options mean.
    """
    out = prepare_output(out, what="prior tree", option="tree build --out", overwrite=overwrite,
                         markers=(HEADER_FILE,))
    corpus = as_corpus(store)
    tree, coverage, settings = build_tree_for_store(
        source, corpus, languages=languages, source_format=source_format, merge=merge, convention=convention,
        root_beta=root_beta, concept_beta=concept_beta)
    info = write_tree(out, tree, vocab_checksums=store_vocab_checksums(corpus, tree.languages),
                      store=str(corpus.path), settings=settings, coverage=coverage, overwrite=overwrite)
    return tree, info
