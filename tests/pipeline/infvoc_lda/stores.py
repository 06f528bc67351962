"""Small text stores for the infvoc driver's tests (made-up words of a few topics, rare and short words)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from topicflow.io.tokenizer import PruneConfig
from topicflow.pipeline.ingest.ingest import ingest_corpus

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "su"]


def topic_texts(n_docs: int, *, seed: int, n_topics: int = 3, doc_length: int = 30) -> list[str]:
    """Documents mixing a few topics of made-up words, with rare words (out-of-vocabulary after min_df)."""
    rng = np.random.default_rng(seed)
    topics = [[SYLLABLES[k] + SYLLABLES[(k + j) % 10] + SYLLABLES[j] for j in range(8)] for k in range(n_topics)]
    texts = []
    for d in range(n_docs):
        theta = rng.dirichlet(np.full(n_topics, 0.3))
        words = [topics[int(rng.choice(n_topics, p=theta))][int(rng.integers(8))] for _ in range(doc_length)]
        if d % 3 == 0:  # a word seen once: pruned from the vocabulary, kept in the ordered layer
            words.insert(int(rng.integers(len(words))), f"rare{''.join(rng.choice(list('xyzw'), 4))}")
        if d % 5 == 0:
            words.append("qq")  # two letters: G0 = 0 (log G0 = -inf) with the shipped G0
        texts.append(" ".join(words))
    return texts


def write_store(tmp: Path, texts: list[str], *, shard_size: int, keep_order: bool = True, name: str = "s") -> Path:
    src = tmp / f"{name}.jsonl"
    src.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(texts)))
    out = tmp / f"{name}.zarr"
    ingest_corpus([src], out, shard_size=shard_size, prune=PruneConfig(min_df=2), keep_order=keep_order)
    return out


