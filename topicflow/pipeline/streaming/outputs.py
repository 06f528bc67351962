"""Outputs of a streaming run: trace, summary, saved state, model, resume checks."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.io.models.stream_state import RunState, write_stream_state
from topicflow.io.output_paths import write_output_bytes, write_output_json
from topicflow.io.storage import StoragePath
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.streaming.actors import (
    HeldOutSet,
    StreamSource,
    stream_source,
)
from topicflow.pipeline.streaming.config import StreamConfig

#: Trace fields averaged over runs in the summary.
SUMMARY_FIELDS = ("nmi_in", "nmi_train_best", "nmi_out", "nmi_out_next", "perplexity_out", "log_evidence_per_token", "log_likelihood_per_token",
                  "perplexity_train",
                  "seconds", "ess_min", "resamples", "depth_max", "n_nodes", "nbytes")


def summarize(records: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Mean and sample standard deviation (ddof=1) over runs of every metric, per evaluation point."""
    by_point: dict[int, list[Mapping[str, Any]]] = {}
    for record in records:
        by_point.setdefault(int(record["point"]), []).append(record)
    summary = []
    for point in sorted(by_point):
        group = by_point[point]
        row: dict[str, Any] = {"point": point, "docs_seen": group[0]["docs_seen"], "runs": len(group)}
        for name in SUMMARY_FIELDS:
            values = [float(r[name]) for r in group if r.get(name) is not None]
            if values:
                row[f"{name}_mean"] = float(np.mean(values))
                # Sample standard deviation over the runs (ddof=1, as May et al. 2014 plot); 0 for one run.
                row[f"{name}_std"] = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        summary.append(row)
    return summary


def held_out_set(test_corpus: Corpus | None, source: StreamSource, config: StreamConfig) -> HeldOutSet | None:
    """The test store, with its term ids translated to the training vocabulary (by term string)."""
    if test_corpus is None:
        return None
    test = stream_source(test_corpus)
    train_vocab = Corpus.open(source.store).vocabulary(source.language)
    test_vocab = test_corpus.vocabulary(test.language)
    term_map = None
    if len(test_vocab) != len(train_vocab) or not np.array_equal(test_vocab.terms, train_vocab.terms):
        ids = train_vocab.ids_of(str(t) for t in test_vocab.terms)
        term_map = np.array([-1 if i is None else i for i in ids], dtype=np.int64)
    as_next = config.algorithm in ("olda", "incgibbs", "pf") and config.particles.heldout_mode == "next_docs"
    return HeldOutSet(test, source.n_terms, term_map, seed=config.run.seed, as_next_documents=as_next)


def check_resumable(info: Mapping[str, Any], config: StreamConfig, out: Path | StoragePath) -> None:
    """Check that a saved stream was run with the settings of ``config``, so it can be resumed.

    Parameters
    ----------
    info : mapping of str to Any
        The saved stream's ``info`` (its ``config`` entry is compared).
    config : StreamConfig
        Settings of the run that would resume it.
    out : Path or StoragePath
        The stream's output directory, named in the error message.

    Raises
    ------
    InvalidParameterError
        If the settings differ; the message lists which.
    """
    saved = StreamConfig.from_dict(info.get("config", {})).fingerprint()
    if saved != config.fingerprint():
        differ = sorted(k for k in saved if saved[k] != config.fingerprint().get(k))
        raise InvalidParameterError(
            f"the stream saved in {str(out)!r} used other settings ({', '.join(differ)} differ); resume it with "
            "the same settings, or start a new stream in another directory",
            path=str(out),
        )


def check_same_stream(info: Mapping[str, Any], corpus: Corpus, out: Path | StoragePath) -> None:
    """The shards a saved stream has read must still open the store, unchanged (it may have grown)."""
    saved = [(entry["id"], entry["checksum"]) for entry in info.get("corpus", {}).get("shards", [])]
    current = [(s.shard_id, s.checksum) for s in corpus.shards[: len(saved)]]
    if saved != current:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} is not the store the stream in {str(out)!r} was reading: its first "
            f"{len(saved)} shards differ (rebuilt, or another store). Resume only on the same store, grown with "
            "`topicflow append`, or start a new stream.",
            path=str(corpus.path),
        )


def save_outputs(out: Path | StoragePath, corpus: Corpus, config: StreamConfig, records: list[dict[str, Any]],
          snapshots: Sequence[RunState]) -> None:
    """Write a stream's state, trace and summary under ``out``, each file atomically.

    Parameters
    ----------
    out : Path or StoragePath
        The stream's output directory (a URL on object storage); gets ``state/``, ``trace.jsonl`` and
        ``summary.json``, each replaced atomically (one PUT per file on object storage).
    corpus : Corpus
        The store read, recorded with every shard's checksum.
    config : StreamConfig
        The stream's settings.
    records : list of dict
        One evaluation record per run and evaluation point.
    snapshots : sequence of RunState
        Each run's sampler state, as its actor exported it.
    """
    info = {"config": config.to_dict(), "records": records,
            "corpus": corpus_provenance(corpus, range(corpus.n_shards))}
    write_stream_state(out / "state", info, snapshots)
    lines = "".join(_json_line(r) for r in records)
    write_output_bytes(out / "trace.jsonl", lines.encode("utf-8"))
    write_output_json(out / "summary.json", {"config": config.to_dict(), "summary": summarize(records)})


def _json_line(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True) + "\n"


def stream_model(corpus: Corpus, *, algorithm: str, topic_word_counts: np.ndarray, doc_topic_prior: np.ndarray,
                 topic_word_prior: float, info: Mapping[str, Any]) -> SavedModel:
    """A streaming sampler's topic-word counts as an LDA model: lambda = counts + beta, alpha, eta = beta.

    Every streaming sampler saves its model this way, so ``topics``, ``infer``, ``evaluate`` and
    ``export`` treat it like a variational one. ``info`` adds to the description (settings, summary).
    """
    language = corpus.languages[0]
    state = LDAState(topic_word_var={language: np.asarray(topic_word_counts, dtype=np.float64) + topic_word_prior},
                     doc_topic_prior=np.asarray(doc_topic_prior, dtype=np.float64),
                     topic_word_prior={language: float(topic_word_prior)})
    description = ModelInfo.from_json({"kind": "stream", "algorithm": algorithm, **info,
                                       "corpus": corpus_provenance(corpus, range(corpus.n_shards))})
    return SavedModel(state, {language: corpus.vocabulary(language)}, description)
