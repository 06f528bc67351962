"""Shared test support for the collapsed drivers: a small planted store and serial in-process references.

The references run the math of :mod:`topicflow.models` directly, one call after another, in this
process: what the Dask drivers must reproduce bit for bit.
"""
from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.io.corpus.reader import Corpus
from topicflow.models.common.cvb0 import start_doc_topic
from topicflow.models.hdp.params import HDPParams
from topicflow.models.hdp.state import HDPState
from topicflow.pipeline.collapsed import CollapsedConfig
from topicflow.pipeline.collapsed.model import OPS
from topicflow.pipeline.collapsed.stochastic import plan_settings
from topicflow.pipeline.vb import plan_minibatches
from topicflow.tasks.collapsed import merge_stats
from topicflow.tasks.reduce import tree_reduce_now
from topicflow.testing.corpora import draw_planted_corpus, write_test_store

N_DOCS, N_TERMS, SHARD = 96, 30, 32
PARAMS = HDPParams(truncation=6, seed=3)


def planted_store(path: Path, *, n_docs: int = N_DOCS, shard_size: int = SHARD, seed: int = 5) -> Path:
    """A planted LDA corpus of 4 block topics over 30 terms, written as a store."""
    truth = draw_planted_corpus(n_docs=n_docs, n_topics=4, n_terms=N_TERMS, doc_length=20, alpha=0.3, seed=seed)
    return write_test_store(path, truth.counts, shard_size=shard_size)


def config(method: str = "pcsvb0", **changes: Any) -> CollapsedConfig:
    """Two passes of the method on the small store (word by word unless ``batch_size`` is given)."""
    base = CollapsedConfig(method=method, params=PARAMS, passes=2)  # type: ignore[arg-type]
    return replace(base, **changes)


def initial(corpus: Corpus, cfg: CollapsedConfig, *, shards: list[int] | None = None) -> HDPState:
    """The method's random start with the store's totals."""
    return OPS[cfg.method].initial(cfg.params, n_terms=len(corpus.vocabulary()), n_tokens=corpus.n_tokens,
                                   n_docs=len(corpus))


def reference_minibatch(corpus: Corpus, cfg: CollapsedConfig, *, split_every: int = 8,
                        state: HDPState | None = None, shards: list[int] | None = None) -> HDPState:
    """The minibatch form as a serial loop: view, local step per piece, merge in the tree, global step."""
    assert cfg.batch_size is not None
    ops = OPS[cfg.method]
    state = initial(corpus, cfg) if state is None else state
    shards = list(range(corpus.n_shards)) if shards is None else shards
    blocks = {s: corpus.read_block(s) for s in shards}
    plan = plan_settings(cfg, cfg.batch_size)
    sizes = [s.n_docs for s in corpus.shards]
    for epoch in range(cfg.passes):
        for minibatch in plan_minibatches(sizes, shards, plan, seed=cfg.params.seed, epoch=epoch):
            view = ops.view(state)
            parts = [ops.local(view, blocks[s].slice(lo, hi), cfg.params) for s, lo, hi in minibatch.pieces]
            ops.apply(state, tree_reduce_now(parts, merge_stats, split_every=split_every), cfg.params)
    return state


def reference_word_by_word(corpus: Corpus, cfg: CollapsedConfig, *, state: HDPState | None = None,
                           shards: list[int] | None = None) -> HDPState:
    """Algorithm 1 as a serial loop over the shards in store order (``keep_doc_state``: n_dk kept per document)."""
    ops = OPS[cfg.method]
    state = initial(corpus, cfg) if state is None else state
    shards = list(range(corpus.n_shards)) if shards is None else shards
    kept: dict[int, np.ndarray] = {}
    for _ in range(cfg.passes):
        for s in shards:
            block = corpus.read_block(s)
            if cfg.params.keep_doc_state:
                if s not in kept:
                    kept[s] = start_doc_topic(block, cfg.params.truncation, doc_start=cfg.params.doc_start,
                                              seed=cfg.params.seed)
                ops.word_by_word(state, block, cfg.params, doc_topic=kept[s])
            else:
                ops.word_by_word(state, block, cfg.params)
    return state


def folded(state: HDPState) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
    """What ``state.to_arrays()`` gives, without folding ``state``'s lazy scale in place."""
    arrays = {"topic_word": state.topic_word_counts(), "topic_totals": state.topic_sums(),
              "tables": state.tables.copy()}
    scalars = {f.name: getattr(state, f.name) for f in fields(state) if f.name not in arrays and f.name != "scale"}
    return arrays, scalars


def assert_same_state(actual: HDPState, expected: HDPState) -> None:
    """Bit for bit: the arrays (scale folded, as a saved model holds them) and every scalar; nothing mutated."""
    got, got_scalars = folded(actual)
    want, want_scalars = folded(expected)
    assert type(actual) is type(expected)
    for name in want:
        np.testing.assert_array_equal(got[name], want[name], err_msg=name)
    assert got_scalars == want_scalars
