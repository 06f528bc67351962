"""Graph builders of the adaptor-grammar driver: one E-step task per partition of a minibatch, tree-merged.

Lazy only: nothing here computes or touches a Client. The math lives in
:mod:`topicflow.models.adaptor_grammar`; the task bodies only call it. Keys:
``ag-pcfg-<token>`` (G' and the TNG keys, shared by every task), ``ag-estep-<token>-<j>`` (partition j:
:func:`~topicflow.models.adaptor_grammar.estep_sentences`), ``ag-merge-<token>-...`` (the counts summed
in a tree in partition order, :func:`topicflow.tasks.reduce.tree_reduce`). Counts are integers, so the
merged counts, and the model, do not depend on the number of partitions.

:func:`map_estep_store` is the streamed variant: a task gets :class:`SentenceRef` s (shard, row, token)
instead of sentences and reads them from the store itself (:func:`sentence_tokens`; the last two shards
it read are kept per process, so consecutive minibatches in store order read each shard once).
"""
from __future__ import annotations

import threading
from typing import Any, Callable, NamedTuple, Sequence

import dask
import numpy as np

from topicflow.io.corpus.reader import Corpus
from topicflow.models.adaptor_grammar import (
    AGStats,
    DerivedPCFG,
    Grammar,
    estep_sentences,
)
from topicflow.tasks.reduce import tree_reduce


def estep_partition(grammar: Grammar, shared: tuple[DerivedPCFG, list[list[Any]]], sentences: list[np.ndarray],
                    ids: list[int], n_samples: int, seed: int, epoch: int) -> AGStats:
    """Task body: parse one partition's sentences and count their sampled trees.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    shared : tuple
        G' and the TNG keys of the current state.
    sentences : list of ndarray
        Terminal ids of each sentence.
    ids : list of int
        Global sentence indices.
    n_samples : int
        Trees per sentence.
    seed : int
        Random seed.
    epoch : int
        Minibatch counter.

    Returns
    -------
    AGStats
    """
    pcfg, keys = shared
    return estep_sentences(grammar, pcfg, keys, sentences, ids, n_samples=n_samples, seed=seed, epoch=epoch)


def merge_stats(*parts: AGStats) -> AGStats:
    """Task body: sum the counts of several partitions (in order).

    Parameters
    ----------
    *parts : AGStats
        Counts of partitions.

    Returns
    -------
    AGStats
    """
    out = parts[0]
    for part in parts[1:]:
        out = out.merge(part)
    return out


def map_estep(grammar: Grammar, pcfg: DerivedPCFG, atom_keys: list[list[Any]],
              partitions: Sequence[tuple[list[np.ndarray], list[int]]], *, n_samples: int, seed: int, epoch: int,
              split_every: int, token: str) -> Any:
    """Build the E-step of one minibatch: a task per partition and a tree merge of their counts.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    pcfg : DerivedPCFG
        G' of the current state.
    atom_keys : list of lists
        The TNG keys of the current state.
    partitions : sequence of (sentences, ids)
        The minibatch cut into partitions.
    n_samples : int
        Trees per sentence.
    seed : int
        Random seed.
    epoch : int
        Minibatch counter.
    split_every : int
        Fan-in of the merge tree.
    token : str
        Names the keys (unique per minibatch).

    Returns
    -------
    dask.delayed.Delayed
        The merged :class:`~topicflow.models.adaptor_grammar.AGStats`.
    """
    return _merged_estep(estep_partition, grammar, pcfg, atom_keys,
                         [(list(sentences), list(ids), n_samples, seed, epoch) for sentences, ids in partitions],
                         split_every=split_every, token=token)


def _merged_estep(task_function: Callable[..., AGStats], grammar: Grammar, pcfg: DerivedPCFG,
                  atom_keys: list[list[Any]], arguments: Sequence[tuple[Any, ...]], *, split_every: int,
                  token: str) -> Any:
    """One ``task_function(grammar, (pcfg, atom_keys), *args)`` task per partition, tree-merged."""
    # traverse=False: the TNG keys are deeply nested tuples that hold no Dask objects; walking them would cost
    # more than the E-step
    shared = dask.delayed((pcfg, atom_keys), pure=True, name=f"ag-pcfg-{token}", traverse=False)
    grammar_node = dask.delayed(grammar, pure=True, name=f"ag-grammar-{token}", traverse=False)
    task = dask.delayed(task_function, pure=True)
    parts = [task(grammar_node, shared, *args, dask_key_name=f"ag-estep-{token}-{j}")
             for j, args in enumerate(arguments)]
    return tree_reduce(parts, merge_stats, split_every=split_every, name=f"ag-merge-{token}")


class SentenceRef(NamedTuple):
    """Where one sentence is in a store.

    Parameters
    ----------
    shard : int
        Store position of the shard.
    row : int
        The document's row in the shard.
    token : int
        The token's position in the document (one sentence per token), or -1 (the document's tokens
        joined).
    document : int
        The document's number among the documents with tokens (the ``_j`` of a sentence per token).
    """

    shard: int
    row: int
    token: int
    document: int


_CACHE_LOCK = threading.Lock()
_SHARD_CACHE: dict[tuple[str, str, str, str], tuple[list[list[str]], list[str]]] = {}
_CACHE_SIZE = 2


def _shard_words(corpus: Corpus, store: str, language: str, shard: int) -> tuple[list[list[str]], list[str]]:
    """Every document of one shard as its token strings, and the document ids (cached per process)."""
    info = corpus.shards[shard]
    key = (store, language, str(info.shard_id), str(info.checksum))
    with _CACHE_LOCK:
        hit = _SHARD_CACHE.get(key)
    if hit is not None:
        return hit
    block = corpus.read_ordered(shard, language)
    terms = corpus.vocabulary(language).terms
    docs = [[str(terms[t]) if t >= 0 else str(block.oov_terms[-t - 1]) for t in block.doc_tokens(row).tolist()]
            for row in range(block.n_docs)]
    value = (docs, [str(d) for d in block.doc_ids])
    with _CACHE_LOCK:
        while len(_SHARD_CACHE) >= _CACHE_SIZE:
            _SHARD_CACHE.pop(next(iter(_SHARD_CACHE)))
        _SHARD_CACHE[key] = value
    return value


def sentence_tokens(store: str, language: str, mode: str, refs: Sequence[SentenceRef]) -> list[list[str]]:
    """Read sentences from a store: a document's tokens joined into characters, or ``['_j', characters...]``.

    Parameters
    ----------
    store : str
        The store's location.
    language : str
        The language.
    mode : {"chars", "tokens"}
        A document's tokens joined, or one sentence per token.
    refs : sequence of SentenceRef
        Which sentences.

    Returns
    -------
    list of list of str
        Each sentence's terminals.
    """
    return [s for s, _ in _read_sentences(store, language, mode, refs)]


def _read_sentences(store: str, language: str, mode: str, refs: Sequence[SentenceRef]) -> list[tuple[list[str], str]]:
    corpus = Corpus.open(store)
    out: list[tuple[list[str], str]] = []
    for ref in refs:
        docs, ids = _shard_words(corpus, store, language, ref.shard)
        words = docs[ref.row]
        if mode == "tokens":
            out.append(([f"_{ref.document}", *words[ref.token]], ids[ref.row]))
        else:
            out.append((list("".join(words)), ids[ref.row]))
    return out


def estep_store_partition(grammar: Grammar, shared: tuple[DerivedPCFG, list[list[Any]]], store: str, language: str,
                          mode: str, refs: list[SentenceRef], ids: list[int], n_samples: int, seed: int,
                          epoch: int) -> AGStats:
    """Task body: read one partition's sentences from the store, parse them and count their sampled trees.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    shared : tuple
        G' and the TNG keys of the current state.
    store : str
        The store's location.
    language : str
        The language.
    mode : {"chars", "tokens"}
        How documents become sentences.
    refs : list of SentenceRef
        The partition's sentences.
    ids : list of int
        Their global sentence numbers (key the random numbers).
    n_samples : int
        Trees per sentence.
    seed : int
        Random seed.
    epoch : int
        Minibatch counter.

    Returns
    -------
    AGStats

    Raises
    ------
    InputError
        A sentence has a terminal outside the grammar's alphabet (the message names the document).
    """
    encoded = [grammar.encode(sentence, where=f"document {doc_id!r} (shard {ref.shard}, row {ref.row}) of {store}")
               for ref, (sentence, doc_id) in zip(refs, _read_sentences(store, language, mode, refs))]
    pcfg, keys = shared
    return estep_sentences(grammar, pcfg, keys, encoded, ids, n_samples=n_samples, seed=seed, epoch=epoch)


def map_estep_store(grammar: Grammar, pcfg: DerivedPCFG, atom_keys: list[list[Any]],
                    partitions: Sequence[tuple[list[SentenceRef], list[int]]], *, store: str, language: str,
                    mode: str, n_samples: int, seed: int, epoch: int, split_every: int, token: str) -> Any:
    """Build the streamed E-step of one minibatch: a task per partition reads and parses its sentences.

    Parameters
    ----------
    grammar : Grammar
        The compiled grammar.
    pcfg : DerivedPCFG
        G' of the current state.
    atom_keys : list of lists
        The TNG keys of the current state.
    partitions : sequence of (refs, ids)
        The minibatch cut into partitions: where each sentence is and its global number.
    store : str
        The store's location.
    language : str
        The language.
    mode : {"chars", "tokens"}
        How documents become sentences.
    n_samples : int
        Trees per sentence.
    seed : int
        Random seed.
    epoch : int
        Minibatch counter.
    split_every : int
        Fan-in of the merge tree.
    token : str
        Names the keys (unique per minibatch).

    Returns
    -------
    dask.delayed.Delayed
        The merged :class:`~topicflow.models.adaptor_grammar.AGStats`.
    """
    return _merged_estep(estep_store_partition, grammar, pcfg, atom_keys,
                         [(store, language, mode, list(refs), list(ids), n_samples, seed, epoch)
                          for refs, ids in partitions],
                         split_every=split_every, token=token)
