"""Driver for ``topicflow synth``: draw a corpus from a true LDA model into a new store, and read it back.

The store is built in a temporary sibling directory and moved into place by
:func:`topicflow.io._atomic.commit_directory`, so an interrupted run leaves no store behind. Every
shard is drawn and written by its own Dask task on a worker; the driver only gathers the manifest
entries and the tree-merged term frequencies.

The vocabulary of a synthetic store is in *generation order* (term id ``j`` is column ``j`` of
``truth/topic_word/<lang>``), not in the frequency order of ingested stores; the manifest's tokenizer
entry says ``{"kind": "synthetic", "term_order": "generation"}``.

Glossary: topic_word (beta), doc_topic (theta), doc_topic_prior (alpha), topic_word_prior (eta).
"""
from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence, cast

import dask.array as da
import numpy as np

from topicflow import config
from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError
from topicflow.io._atomic import check_output_path, commit_directory, temporary_sibling
from topicflow.io.corpus.layout import MANIFEST, Manifest
from topicflow.io.corpus.synth_truth import (
    create_truth_group,
    open_doc_topic,
    read_topic_word,
    read_truth_json,
    write_truth_json,
)
from topicflow.io.corpus.writer import (
    init_store,
    with_shards,
    write_manifest,
    write_vocabulary,
)
from topicflow.io.storage import StoragePath, is_url, staged_new_store
from topicflow.models.common.rng import STREAM_SYNTH, STREAM_TOPIC_INIT
from topicflow.models.common.vocabulary import Vocabulary
from topicflow.models.lda.synth import SynthParams, TermFrequencyStats, term_names
from topicflow.pipeline.cluster import compute_list
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.synth import (
    map_shard_infos,
    map_topic_word,
    map_write_shards,
    map_write_topic_word,
    plan_shards,
    synth_token,
    tree_merge_frequencies,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class SynthResult:
    """What :func:`synthesize_corpus` wrote.

    Attributes
    ----------
    path : Path or StoragePath
    n_docs, n_shards : int
    n_tokens : dict of str to int
        Tokens per language.
    languages : tuple of str
    params : SynthParams
    """

    path: Path | StoragePath
    n_docs: int
    n_shards: int
    n_tokens: dict[str, int]
    languages: tuple[str, ...]
    params: SynthParams


@dataclass(frozen=True, slots=True)
class Truth:
    """The true model of a synthetic store, as :func:`load_truth` reads it.

    Attributes
    ----------
    path : Path
        The store.
    params : SynthParams
    topic_word : dict of str to ndarray of shape (n_topics, n_terms), float64
        Beta per language; rows sum to 1; column ``j`` is term id ``j`` of the store's vocabulary.
    shard_size : int
        Chunk length of ``doc_topic``.
    """

    path: Path
    params: SynthParams
    topic_word: dict[str, FloatArray]
    shard_size: int

    @property
    def doc_topic_prior(self) -> FloatArray:
        """Alpha, shape (n_topics,)."""
        return np.asarray(self.params.doc_topic_prior, dtype=np.float64)

    @property
    def topic_word_prior(self) -> float:
        """Eta."""
        return self.params.topic_word_prior

    def doc_topic(self) -> Any:
        """Theta as a lazy ``(n_docs, n_topics)`` dask array, one chunk per shard."""
        return da.from_zarr(open_doc_topic(self.path))

    def read_doc_topic(self, start: int = 0, stop: int | None = None) -> FloatArray:
        """Rows ``start:stop`` of theta in memory."""
        return np.asarray(open_doc_topic(self.path)[start:stop], dtype=np.float64)


def synthesize_corpus(
    out: str | os.PathLike[str] | StoragePath,
    *,
    n_docs: int,
    n_topics: int,
    n_terms: int,
    doc_length: float,
    doc_topic_prior: float | str | Sequence[float],
    topic_word_prior: float,
    seed: int = 0,
    n_languages: int = 1,
    labels: bool = False,
    shard_size: int | None = None,
    overwrite: bool = False,
    client: Any = None,
    progress: ProgressReporter = NO_PROGRESS,
) -> SynthResult:
    """Draw a corpus from a true LDA model into a new corpus store at ``out``, with its truth.

    Parameters
    ----------
    out : path
        Store to create; an existing path is replaced only with ``overwrite=True``, and only once
        the new store is complete.
    n_docs, n_topics, n_terms : int
        ``n_terms`` is the vocabulary size of every language.
    doc_length : float
        Poisson mean of each document's length per language (every document has at least 1 token).
    doc_topic_prior : float, comma-separated str or sequence of float
        Doc-topic prior; one value (symmetric) or ``n_topics`` values (asymmetric).
    topic_word_prior : float
        Topic-word prior.
    seed : int
    n_languages : int
        More than 1 draws aligned documents in languages ``l0, l1, ...`` that share theta; each
        language has its own topics, vocabulary and length draw.
    labels : bool
        Store ``topic-<argmax theta>`` as each document's label.
    shard_size : int or None
        Documents per shard; default ``topicflow.shard-size``. It does not change any document.
    client : distributed.Client or None
        Default: the current client, else Dask's threaded scheduler.
    progress : ProgressReporter

    Returns
    -------
    SynthResult

    Raises
    ------
    InvalidParameterError
        A parameter is out of range.
    StoreExistsError
        ``out`` exists and ``overwrite`` is False.

    Examples
    --------
    >>> result = synthesize_corpus("toy.zarr", n_docs=100, n_topics=3, n_terms=50,
    ...                            doc_length=20, doc_topic_prior=0.3, topic_word_prior=0.1, seed=1)  # doctest: +SKIP
    >>> load_truth("toy.zarr").topic_word["default"].shape                    # doctest: +SKIP
    (3, 50)
    """
    params = SynthParams(
        n_docs=n_docs, n_topics=n_topics, n_terms=n_terms, doc_length=doc_length,
        doc_topic_prior=doc_topic_prior, topic_word_prior=topic_word_prior, seed=seed, n_langs=n_languages,  # type: ignore[arg-type]
        labels=labels,
    )
    shard_size = parse_shard_size(config.get("shard-size") if shard_size is None else shard_size)
    if is_url(out):  # built in a local staging directory, then uploaded with the manifest last (as ingest)
        with staged_new_store(str(out), overwrite=overwrite, commit_file=MANIFEST) as local:
            result = synthesize_corpus(local, n_docs=n_docs, n_topics=n_topics, n_terms=n_terms,
                                       doc_length=doc_length, doc_topic_prior=doc_topic_prior,
                                       topic_word_prior=topic_word_prior, seed=seed, n_languages=n_languages,
                                       labels=labels, shard_size=shard_size, client=client, progress=progress)
        return replace(result, path=StoragePath(str(out)))
    final = Path(cast("str | os.PathLike[str]", out))
    check_output_path(final, overwrite=overwrite)
    tmp = temporary_sibling(final)
    try:
        manifest = write_store(tmp, params, shard_size, client=client, progress=progress)
        commit_directory(tmp, final, overwrite=overwrite)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    log.info("synthetic corpus %s: %d documents, %d shards", final, manifest.n_docs, len(manifest.shards))
    return SynthResult(
        path=final,
        n_docs=manifest.n_docs,
        n_shards=len(manifest.shards),
        n_tokens={lang: manifest.n_tokens(lang) for lang in params.languages},
        languages=params.languages,
        params=params,
    )


def parse_shard_size(value: Any) -> int:
    """A positive integer shard size, or InvalidParameterError."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise InvalidParameterError(f"shard_size must be a positive integer, got {value!r}.")
    return int(value)


def write_store(
    tmp: Path, params: SynthParams, shard_size: int, *, client: Any, progress: ProgressReporter
) -> Manifest:
    """Fill the fresh directory ``tmp`` with the corpus, vocabulary, truth and manifest."""
    init_store(tmp)
    create_truth_group(tmp, n_docs=params.n_docs, n_topics=params.n_topics, shard_size=shard_size)
    store, token = str(tmp), synth_token(params, str(tmp), shard_size)
    plans = plan_shards(params.n_docs, shard_size)
    topic_word = map_topic_word(params, token=token)
    outcomes = map_write_shards(store, params, topic_word, plans, token=token)
    infos = map_shard_infos(outcomes, token=token)
    frequencies = tree_merge_frequencies(
        outcomes, token=token, split_every=int(config.get("split-every", 8))
    )
    written = map_write_topic_word(store, topic_word, token=token)
    results = compute_list(
        [*infos, frequencies, *written], client=client, progress=progress, desc="synth", unit="task"
    )
    merged: TermFrequencyStats = results[len(infos)]
    for lang in params.languages:
        vocab = Vocabulary(term_names(params.n_terms, lang), merged.doc_freq[lang], merged.corpus_freq[lang])
        write_vocabulary(tmp / "vocab" / lang, vocab)
    write_truth_json(tmp, truth_payload(params, shard_size))
    manifest = Manifest(
        languages=params.languages,
        tokenizer={"kind": "synthetic", "term_order": "generation"},
        shard_size=shard_size,
        has_labels=params.labels,
    )
    event = {"event": "synth", "when": datetime.now(timezone.utc).isoformat(), **params.to_dict()}
    manifest = with_shards(manifest, results[: len(infos)], event)
    write_manifest(tmp, manifest)
    return manifest


def truth_payload(params: SynthParams, shard_size: int) -> dict[str, Any]:
    """The body of ``truth.json``: parameters plus what a reader needs to interpret the arrays."""
    return {
        "params": params.to_dict(),
        "languages": list(params.languages),
        "shard_size": shard_size,
        "term_order": "generation: term id j of vocab/<lang> is column j of topic_word/<lang>",
        "doc_length_distribution": "max(1, Poisson(doc_length)) per document and language",
        "random_streams": {
            "topic_word": f"doc_generator(seed, {STREAM_TOPIC_INIT}, language_index, topic)",
            "documents": f"doc_generator(seed, {STREAM_SYNTH}, 0, global_doc_index)",
        },
        "arrays": {
            "topic_word/<lang>": "(n_topics, n_terms) float64, rows sum to 1",
            "doc_topic": "(n_docs, n_topics) float64, rows sum to 1, chunked by shard",
        },
    }


def load_truth(store: str | os.PathLike[str]) -> Truth:
    """Read the true model of a store made by :func:`synthesize_corpus`.

    ``topic_word`` is loaded; ``doc_topic`` stays on disk until :meth:`Truth.doc_topic` or
    :meth:`Truth.read_doc_topic` is called.

    Raises
    ------
    StoreNotFoundError
        ``store`` has no ``truth/truth.json`` (not a synthetic store).
    """
    path = Path(store)
    payload = read_truth_json(path)
    params = SynthParams.from_dict(payload["params"])
    topic_word = {lang: read_topic_word(path, lang) for lang in params.languages}
    return Truth(path=path, params=params, topic_word=topic_word, shard_size=int(payload["shard_size"]))
