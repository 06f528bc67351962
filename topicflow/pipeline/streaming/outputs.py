"""Outputs of a streaming run: trace, summary, saved state, model, resume checks."""
from __future__ import annotations

import gzip
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.info import ModelInfo, corpus_provenance
from topicflow.io.models.store import SavedModel
from topicflow.io.models.stream_state import (
    RunState,
    damaged_stream_state,
    write_stream_state,
)
from topicflow.io.output_paths import (
    output_location,
    remove_output,
    write_output_bytes,
    write_output_json,
)
from topicflow.io.storage import StoragePath
from topicflow.models.lda.state import LDAState
from topicflow.pipeline.streaming.actors import (
    HeldOutSet,
    StreamSource,
    stream_source,
)
from topicflow.pipeline.streaming.config import StreamConfig

log = logging.getLogger(__name__)

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


#: The current trace segment; rotated segments are ``trace-<NNNNNN>.jsonl.gz`` beside it.
TRACE_FILE = "trace.jsonl"
#: ``state/stream.json`` of the bounded format (format version 2) keeps its trace position here.
TRACE_KEY = "trace"


@dataclass(frozen=True, slots=True)
class TraceRotation:
    """How much of a stream's history its output directory keeps (issue 26.6: bounded nightly output).

    Attributes
    ----------
    max_bytes : int
        ``trace.jsonl`` is rotated when a save would make it larger than this: the records already
        in it become the compressed segment ``trace-<NNNNNN>.jsonl.gz`` and ``trace.jsonl`` starts
        again with the new records. (One save's own records are never split, so a single save of
        more than ``max_bytes`` makes a larger segment.)
    keep : int
        Rotated segments kept; older ones are deleted (0: none kept, the rotated records are dropped).
    summary_points : int
        ``summary.json`` (and the model's ``summary``) keeps the rows of the last this many
        evaluation points.
    """

    max_bytes: int = 16 * 2**20
    keep: int = 4
    summary_points: int = 1000

    def __post_init__(self) -> None:
        if self.max_bytes < 1 or self.keep < 0 or self.summary_points < 1:
            raise InvalidParameterError(
                f"trace rotation needs max_bytes >= 1, keep >= 0 and summary_points >= 1; got max_bytes="
                f"{self.max_bytes!r}, keep={self.keep!r}, summary_points={self.summary_points!r}")


def bounded_provenance(corpus: Corpus) -> dict[str, Any]:
    """The store a stream reads, in constant size: its shard count and a digest of their ids and checksums."""
    return {"path": str(corpus.path), "n_docs": len(corpus), "n_tokens": corpus.n_tokens,
            "n_shards": corpus.n_shards, "shards_sha256": _shards_digest(corpus, corpus.n_shards)}


def _shards_digest(corpus: Corpus, n_shards: int) -> str:
    digest = hashlib.sha256()
    for shard in corpus.shards[:n_shards]:
        digest.update(f"{shard.shard_id}\t{shard.checksum}\n".encode("utf-8"))
    return digest.hexdigest()


def last_point(info: Mapping[str, Any]) -> int | None:
    """The evaluation point of the last trace record the saved state covers (None: no record yet).

    Reads both formats: version 2 keeps ``trace.last_point``; version 1 kept every record.
    """
    trace = info.get(TRACE_KEY)
    if isinstance(trace, Mapping):
        point = trace.get("last_point")
        return None if point is None else int(point)
    points = [int(r["point"]) for r in info.get("records", []) if isinstance(r, Mapping) and "point" in r]
    return max(points) if points else None


class StreamOutputs:
    """Writes a stream's ``state/``, ``trace.jsonl`` (rotated) and ``summary.json``, bounded in size.

    The saved state keeps what a resume needs (settings, the store's shard digest, each run's sampler
    state, the position of the trace) and no trace. Each save adds the records since the previous
    one to ``trace.jsonl`` (rewritten under a temporary name and renamed, as every writer here), and
    the state is written last: it is the commit. Records on disk beyond the point the state covers
    come from a save that did not finish; a resumed stream drops them before adding its own, so the
    trace of a stream stopped and resumed is that of one uninterrupted run.

    Parameters
    ----------
    out : Path or StoragePath
        The stream's output directory.
    rotation : TraceRotation
    info : mapping, optional
        The saved state's ``stream.json`` when resuming (either format version).
    """

    def __init__(self, out: Path | StoragePath, rotation: TraceRotation,
                 info: Mapping[str, Any] | None = None) -> None:
        self.out = out
        self.rotation = rotation
        self.written = 0  # records of this invocation already saved
        trace = info.get(TRACE_KEY) if info is not None else None
        try:
            self.committed = None if info is None else last_point(info)
            self.n_records = int(trace.get("n_records", 0)) if isinstance(trace, Mapping) else 0
        except (TypeError, ValueError, KeyError) as exc:
            raise damaged_stream_state(output_location(out / "state"), "stream.json",
                                       f"stream.json gives a trace position that is not a number ({exc})") from exc
        if info is not None and not isinstance(trace, Mapping):  # format version 1: every record in the state
            self.segment = [dict(r) for r in info.get("records", [])]
            self.n_records = len(self.segment)
            self.summary = summarize(self.segment)
        elif info is not None:
            self.segment = [r for r in self._read_segment() if self._committed(r)]
            self.summary = [row for row in self._read_summary() if self._committed(row)]
        else:
            self.segment, self.summary = [], []
        # A new stream written over an old one (--overwrite) drops the old one's rotated segments.
        self.stale_segments = info is None
        self.summary = self.summary[-rotation.summary_points:]

    def _committed(self, row: Mapping[str, Any]) -> bool:
        return self.committed is not None and int(row["point"]) <= self.committed

    def _read_segment(self) -> list[dict[str, Any]]:
        path = self.out / TRACE_FILE
        if not path.is_file():
            return []
        try:
            rows = [json.loads(line) for line in path.read_bytes().decode("utf-8").splitlines() if line.strip()]
            for row in rows:
                int(row["point"])
            return rows
        except (UnicodeDecodeError, ValueError, TypeError, KeyError) as exc:
            raise InvalidParameterError(
                f"{str(path)!r} is damaged ({exc}); move it away and resume again: the saved state is intact and "
                "the trace starts a new segment", path=str(path)) from exc

    def _read_summary(self) -> list[dict[str, Any]]:
        path = self.out / "summary.json"
        if not path.is_file():
            return summarize(self.segment)
        try:
            rows = json.loads(path.read_bytes().decode("utf-8")).get("summary", [])
            return [dict(row, point=int(row["point"])) for row in rows if isinstance(row, dict) and "point" in row]
        except (UnicodeDecodeError, ValueError, AttributeError, TypeError):
            log.warning("%s is damaged; it is rebuilt from %s", path, TRACE_FILE)
            return summarize(self.segment)

    @property
    def records(self) -> list[dict[str, Any]]:
        """The records of the current trace segment (those of the stream so far, unless rotated away)."""
        return list(self.segment)

    def save(self, corpus: Corpus, config: StreamConfig, records: Sequence[dict[str, Any]],
             snapshots: Sequence[RunState]) -> None:
        """Add ``records[self.written:]`` to the trace and summary, then commit the runs' state.

        Parameters
        ----------
        corpus : Corpus
            The store read (its shard digest is saved).
        config : StreamConfig
        records : sequence of dict
            Every record of this invocation so far, in (point, run) order; the ones not saved yet are added.
        snapshots : sequence of RunState
            Each run's sampler state.
        """
        new = [dict(r) for r in records[self.written:]]
        if self.stale_segments:
            self._remove(self.segments())
            self.stale_segments = False
        encoded = "".join(_json_line(r) for r in new).encode("utf-8")
        current = "".join(_json_line(r) for r in self.segment).encode("utf-8")
        if self.segment and len(current) + len(encoded) > self.rotation.max_bytes:
            location = output_location(self.out)
            if isinstance(location, Path):
                location.mkdir(parents=True, exist_ok=True)
            self._rotate(current)
            self.segment, current = [], b""
        self.segment.extend(new)
        self.summary = (self.summary + summarize(new))[-self.rotation.summary_points:]
        self.n_records += len(new)
        last = max((int(r["point"]) for r in new), default=self.committed)
        location = output_location(self.out)
        if isinstance(location, Path):
            location.mkdir(parents=True, exist_ok=True)
        write_output_bytes(self.out / TRACE_FILE, current + encoded)
        write_output_json(self.out / "summary.json", {"config": config.to_dict(), "summary": self.summary,
                                                      "summary_points": self.rotation.summary_points})
        tail = [r for r in new if int(r["point"]) == last] if new else []
        info = {"config": config.to_dict(), "corpus": bounded_provenance(corpus),
                TRACE_KEY: {"last_point": last, "n_records": self.n_records, "last_records": tail}}
        write_stream_state(self.out / "state", info, snapshots)
        self.written, self.committed = len(records), last

    def _rotate(self, current: bytes) -> None:
        """Move ``trace.jsonl``'s records into the next compressed segment; keep ``rotation.keep`` segments."""
        segments = self.segments()
        number = 1 + max((int(p.name[6:12]) for p in segments), default=0)
        if self.rotation.keep > 0:
            name = f"trace-{number:06d}.jsonl.gz"
            write_output_bytes(self.out / name, gzip.compress(current, mtime=0))
            segments.append(self.out / name)
        self._remove(segments[: max(0, len(segments) - self.rotation.keep)])

    @staticmethod
    def _remove(paths: Sequence[Path | StoragePath]) -> None:
        for path in paths:
            if isinstance(path, StoragePath):
                remove_output(path)
            else:
                path.unlink(missing_ok=True)

    def segments(self) -> list[Path | StoragePath]:
        """The rotated trace segments on disk, oldest first."""
        location = output_location(self.out)
        if not location.is_dir():
            return []
        found: list[Path | StoragePath] = [p for p in location.iterdir() if SEGMENT_NAME.fullmatch(p.name)]
        return sorted(found, key=lambda p: p.name)


#: A rotated trace segment's name.
SEGMENT_NAME = re.compile(r"trace-\d{6}\.jsonl\.gz")


def check_same_stream(info: Mapping[str, Any], corpus: Corpus, out: Path | StoragePath) -> None:
    """The shards a saved stream has read must still open the store, unchanged (it may have grown).

    Reads both formats: a digest of the first ``n_shards`` shards (version 2) or their list (version 1).
    """
    provenance = info.get("corpus", {})
    try:
        if "shards_sha256" in provenance:
            n_saved = int(provenance.get("n_shards", 0))
            same = 0 <= n_saved <= corpus.n_shards and _shards_digest(corpus, n_saved) == provenance["shards_sha256"]
        else:
            saved = [(entry["id"], entry["checksum"]) for entry in provenance.get("shards", [])]
            n_saved = len(saved)
            same = saved == [(s.shard_id, s.checksum) for s in corpus.shards[:n_saved]]
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise damaged_stream_state(output_location(out / "state"), "stream.json",
                                   f"stream.json records the store read in an unreadable form ({exc!r})") from exc
    if not same:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} is not the store the stream in {str(out)!r} was reading: its first "
            f"{n_saved} shards differ (rebuilt, or another store). Resume only on the same store, grown with "
            "`topicflow append`, or start a new stream.",
            path=str(corpus.path),
        )


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
