"""Graph builders of the adaptor-grammar driver: one E-step task per partition of a minibatch, tree-merged.

Lazy only: nothing here computes or touches a Client. The math lives in
:mod:`topicflow.models.adaptor_grammar`; the task bodies only call it. Keys:
``ag-pcfg-<token>`` (G' and the TNG keys, shared by every task), ``ag-estep-<token>-<j>`` (partition j:
:func:`~topicflow.models.adaptor_grammar.estep_sentences`), ``ag-merge-<token>-...`` (the counts summed
in a tree in partition order, :func:`topicflow.tasks.reduce.tree_reduce`). Counts are integers, so the
merged counts, and the model, do not depend on the number of partitions.
"""
from __future__ import annotations

from typing import Any, Sequence

import dask
import numpy as np

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
    # traverse=False: the TNG keys are deeply nested tuples that hold no Dask objects; walking them would cost
    # more than the E-step
    shared = dask.delayed((pcfg, atom_keys), pure=True, name=f"ag-pcfg-{token}", traverse=False)
    grammar_node = dask.delayed(grammar, pure=True, name=f"ag-grammar-{token}", traverse=False)
    task = dask.delayed(estep_partition, pure=True)
    parts = [task(grammar_node, shared, list(sentences), list(ids), n_samples, seed, epoch,
                  dask_key_name=f"ag-estep-{token}-{j}")
             for j, (sentences, ids) in enumerate(partitions)]
    return tree_reduce(parts, merge_stats, split_every=split_every, name=f"ag-merge-{token}")
