"""Graph builders for drawing a synthetic corpus out of core: one task per shard.

Lazy only: nothing here computes, persists or talks to a client. The generative math lives in
:mod:`topicflow.models.lda.synth`; task bodies call it and write their own shard from the worker through
:mod:`topicflow.io`, so no document ever travels through the driver.

Keys (``<token>`` identifies the parameters and the output directory)::

    synth-topic-word-<token>-<lang>   true topics of one language (drawn once, shared by shards)
    synth-truth-topic-word-<token>-<lang>   writes them to truth/topic_word/<lang>
    synth-shard-<token>-<i>           draws and writes shard i, returns a ShardOutcome
    synth-info-<token>-<i>            the ShardInfo of shard i (small; what the driver gathers)
    synth-freqs-<token>-<level>-<j>   tree-merged term frequencies
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import dask
from dask.delayed import Delayed, delayed

from topicflow.io.corpus.layout import ShardInfo
from topicflow.io.corpus.synth_truth import write_doc_topic_rows, write_topic_word
from topicflow.io.corpus.writer import write_shard
from topicflow.models.lda.synth import (
    SynthParams,
    TermFrequencyStats,
    draw_shard,
    draw_topic_word,
)
from topicflow.tasks.reduce import tree_reduce


@dataclass(frozen=True, slots=True)
class ShardPlan:
    """Where one shard goes: its directory name and the global documents it holds."""

    shard_id: str
    first_doc: int
    n_docs: int


@dataclass(frozen=True, slots=True)
class ShardOutcome:
    """What a shard task returns: the manifest entry and the shard's term frequencies."""

    info: ShardInfo
    frequencies: TermFrequencyStats


def plan_shards(n_docs: int, shard_size: int) -> list[ShardPlan]:
    """Consecutive shards of ``shard_size`` documents (the last may be shorter), ids ``000000``...

    Examples
    --------
    >>> [(p.shard_id, p.first_doc, p.n_docs) for p in plan_shards(5, 2)]
    [('000000', 0, 2), ('000001', 2, 2), ('000002', 4, 1)]
    """
    return [
        ShardPlan(f"{i:06d}", first, min(shard_size, n_docs - first))
        for i, first in enumerate(range(0, n_docs, shard_size))
    ]


def synth_token(params: SynthParams, store: str, shard_size: int) -> str:
    """Deterministic key token of one synthesis run."""
    return str(dask.base.tokenize(params.to_dict(), str(store), shard_size))


def map_topic_word(params: SynthParams, *, token: str) -> dict[str, Delayed]:
    """One task per language drawing its true ``(n_topics, n_terms)`` topic-word matrix."""
    draw = delayed(draw_topic_word, pure=True)
    return {
        lang: draw(params, lang, dask_key_name=f"synth-topic-word-{token}-{lang}")
        for lang in params.languages
    }


def map_write_topic_word(store: str, topic_word: Mapping[str, Delayed], *, token: str) -> list[Delayed]:
    """One task per language writing its topics under ``truth/topic_word/``."""
    write = delayed(write_topic_word, pure=True)
    return [
        write(store, lang, matrix, dask_key_name=f"synth-truth-topic-word-{token}-{lang}")
        for lang, matrix in topic_word.items()
    ]


def map_write_shards(
    store: str,
    params: SynthParams,
    topic_word: Mapping[str, Delayed],
    plans: Sequence[ShardPlan],
    *,
    token: str,
) -> list[Delayed]:
    """One task per shard that draws its documents and writes them (and their theta) to ``store``.

    Parameters
    ----------
    store : str
        Store directory, already initialized with ``shards/`` and ``truth/doc_topic``.
    params : SynthParams
    topic_word : dict of str to Delayed[ndarray of shape (n_topics, n_terms)]
    plans : sequence of ShardPlan

    Returns
    -------
    list of Delayed[ShardOutcome], in the order of ``plans``.
    """
    write = delayed(write_synth_shard, pure=True)
    topics = delayed(dict, pure=True)(dict(topic_word), dask_key_name=f"synth-topics-{token}")
    return [
        write(store, params, topics, plan, dask_key_name=f"synth-shard-{token}-{i}")
        for i, plan in enumerate(plans)
    ]


def map_shard_infos(outcomes: Sequence[Delayed], *, token: str) -> list[Delayed]:
    """The ``ShardInfo`` of every outcome (what the driver gathers; frequencies stay on workers)."""
    info = delayed(shard_info_of, pure=True)
    return [info(o, dask_key_name=f"synth-info-{token}-{i}") for i, o in enumerate(outcomes)]


def tree_merge_frequencies(outcomes: Sequence[Delayed], *, token: str, split_every: int = 8) -> Delayed:
    """Merge every shard's term frequencies with :func:`topicflow.tasks.reduce.tree_reduce`."""
    select = delayed(frequencies_of, pure=True)
    leaves = [select(o, dask_key_name=f"synth-freqs-{token}-leaf-{i}") for i, o in enumerate(outcomes)]
    return tree_reduce(leaves, merge_frequencies, split_every=split_every, name=f"synth-freqs-{token}")


# ----------------------------------------------------------------------------- task bodies


def write_synth_shard(
    store: str, params: SynthParams, topic_word: Mapping[str, Any], plan: ShardPlan
) -> ShardOutcome:
    """Task body: draw one shard, write its arrays and its rows of ``truth/doc_topic``."""
    shard = draw_shard(params, topic_word, plan.first_doc, plan.n_docs)
    checksum, n_tokens = write_shard(
        Path(store) / "shards" / plan.shard_id, shard.bags, shard.doc_ids, labels=shard.labels
    )
    write_doc_topic_rows(store, plan.first_doc, shard.doc_topic)
    info = ShardInfo(plan.shard_id, plan.first_doc, plan.n_docs, n_tokens, checksum)
    return ShardOutcome(info, TermFrequencyStats.of_shard(shard, params.n_terms))


def shard_info_of(outcome: ShardOutcome) -> ShardInfo:
    """Return the manifest entry of a written shard (a task body, so it pickles by reference)."""
    return outcome.info


def frequencies_of(outcome: ShardOutcome) -> TermFrequencyStats:
    """Return the term frequencies of a written shard (a task body, so it pickles by reference)."""
    return outcome.frequencies


def merge_frequencies(*parts: TermFrequencyStats) -> TermFrequencyStats:
    """Body of one tree node (module-level so it pickles by reference)."""
    return functools.reduce(TermFrequencyStats.merge, parts)
