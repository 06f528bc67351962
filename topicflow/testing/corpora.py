"""Small corpus stores for tests: planted LDA corpora written straight from CSR matrices.

Test support only (no tokenizer, everything in memory): real corpora go through ingest or synth. The
generative process is :mod:`topicflow.models.lda.synth`'s; this module only fixes one random
generator for a whole test corpus.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import scipy.sparse as sp

from topicflow.io.corpus.layout import Manifest, ShardInfo
from topicflow.io.corpus.writer import (
    init_store,
    with_shards,
    write_manifest,
    write_shard,
    write_vocabulary,
)
from topicflow.models.common.validation import parse_dirichlet_prior
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.synth import (
    block_topic_word,
    draw_doc_lengths,
    draw_mixture_counts,
)


@dataclass(frozen=True)
class PlantedCorpus:
    """Counts drawn from a known LDA model."""

    counts: dict[str, sp.csr_matrix]  #: per language, (n_docs, n_terms)
    topic_word: dict[str, np.ndarray]  #: per language, (n_topics, n_terms)
    doc_topic: np.ndarray  #: (n_docs, n_topics)
    alpha: np.ndarray  #: (n_topics,)


def draw_planted_corpus(
    *, n_docs: int, n_topics: int, n_terms: int, doc_length: int, alpha: float | Sequence[float],
    seed: int, languages: Sequence[str] = ("default",), block_topics: bool = True,
) -> PlantedCorpus:
    """Draw a corpus from LDA; with ``block_topics`` each topic owns a disjoint block of terms.

    One generator seeded with ``seed`` draws theta for every document, then per language the topics
    (unless they are block topics, :func:`~topicflow.models.lda.synth.block_topic_word`), the
    document lengths (:func:`~topicflow.models.lda.synth.draw_doc_lengths`) and the counts
    (:func:`~topicflow.models.lda.synth.draw_mixture_counts`).
    """
    rng = np.random.default_rng(seed)
    alpha_vec = parse_dirichlet_prior("alpha", alpha, n_topics)
    theta = rng.dirichlet(alpha_vec, size=n_docs)
    counts, topic_word = {}, {}
    for lang in languages:
        if block_topics:
            beta = block_topic_word(n_topics, n_terms)
        else:
            beta = rng.dirichlet(np.full(n_terms, 0.05), size=n_topics)
        lengths = draw_doc_lengths(rng, doc_length, n_docs)
        counts[lang] = sp.csr_matrix(draw_mixture_counts(rng, theta, beta, lengths))
        topic_word[lang] = beta
    return PlantedCorpus(counts=counts, topic_word=topic_word, doc_topic=theta, alpha=alpha_vec)


def write_test_store(
    path: Path, counts: Mapping[str, sp.spmatrix], *, shard_size: int,
    labels: Sequence[str] | None = None, terms: Mapping[str, Sequence[str]] | None = None,
) -> Path:
    """Write CSR counts (same rows in every language) as a corpus store with term ids kept as given."""
    path = Path(path)
    init_store(path)
    langs = tuple(counts)
    matrices = {lang: sp.csr_matrix(m) for lang, m in counts.items()}
    n_docs = next(iter(matrices.values())).shape[0]
    for lang, matrix in matrices.items():
        names = list(terms[lang]) if terms else [f"{lang[:2]}{i:05d}" for i in range(matrix.shape[1])]
        vocab = Vocabulary(
            terms=np.array(names, dtype=object),
            doc_freq=np.asarray((matrix > 0).sum(axis=0)).ravel().astype(np.int64),
            corpus_freq=np.asarray(matrix.sum(axis=0)).ravel().astype(np.int64),
        )
        write_vocabulary(path / "vocab" / lang, vocab)
    shards = []
    for number, start in enumerate(range(0, n_docs, shard_size)):
        stop = min(n_docs, start + shard_size)
        bags = {}
        for lang, matrix in matrices.items():
            part = matrix[start:stop]
            part.sort_indices()
            bags[lang] = (part.indptr.astype(np.int64), part.indices.astype(np.int32), part.data.astype(np.int32))
        doc_ids = np.array([f"doc-{i}" for i in range(start, stop)], dtype=object)
        shard_labels = None if labels is None else np.array(labels[start:stop], dtype=object)
        checksum, n_tokens = write_shard(path / "shards" / f"{number:06d}", bags, doc_ids, labels=shard_labels)
        shards.append(ShardInfo(f"{number:06d}", 0, stop - start, n_tokens, checksum))
    manifest = Manifest(languages=langs, tokenizer={"kind": "test"}, shard_size=shard_size,
                        has_labels=labels is not None)
    write_manifest(path, with_shards(manifest, shards, {"event": "test-store", "n_docs": n_docs}))
    return path


def write_planted_jsonl(path: Path, counts: sp.csr_matrix, start: int, stop: int) -> Path:
    """Documents ``start`` to ``stop`` of ``counts`` as JSON Lines text that ingest turns back into them.

    Term ``w`` is the word ``w{w:03d}``, repeated as often as its count; ids are ``d{d}``. Ingest with
    no stop words (``TokenizerConfig(stop_words_name="none", stop_words=())``).

    Parameters
    ----------
    path : Path
        The file to write.
    counts : scipy.sparse.csr_matrix
        (n_docs, n_terms) counts, e.g. one language of :func:`draw_planted_corpus`.
    start, stop : int
        The documents to write.

    Returns
    -------
    Path
        ``path``.
    """
    lines = []
    for d in range(start, stop):
        row = counts[d].toarray().ravel()
        words = [f"w{w:03d}" for w in np.flatnonzero(row) for _ in range(row[w])]
        lines.append(json.dumps({"id": f"d{d}", "text": " ".join(words)}))
    path.write_text("\n".join(lines) + "\n")
    return path
