"""Dask actors that hold a streaming sampler's state and feed it documents in stream order.

An actor is a plain class: it reads documents from the store itself (so the driver ships no data),
delegates every step to the pure functions of :mod:`topicflow.models.lda.streaming.particle_filter` or
:mod:`topicflow.models.lda.gibbs.sparse`, keeps the bookkeeping of what it has seen (labels and the topic
given to each document, for NMI), and exports :meth:`snapshot` arrays. Actors die with their worker,
so the driver saves snapshots through :mod:`topicflow.io.models.stream_state`. Without a cluster the same
classes run in threads of the driver.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from topicflow._typing import GibbsInit
from topicflow.errors import InvalidParameterError
from topicflow.io.corpus.layout import ShardInfo
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.stream_state import RunState
from topicflow.metrics.clustering import nmi
from topicflow.metrics.heldout import completion_log_likelihood, split_doc_tokens
from topicflow.models.common.blocks import DocBlock, concat_blocks, remap_terms
from topicflow.models.common.dirichlet import posterior_mean
from topicflow.models.lda.gibbs import chain as gibbs_lda
from topicflow.models.lda.gibbs import fold_in as gibbs_lda_fold_in
from topicflow.models.lda.gibbs import scores as gibbs_lda_scores
from topicflow.models.lda.gibbs import state as gibbs_lda_state
from topicflow.models.lda.streaming import particle_filter
from topicflow.models.lda.streaming import samples as stream_samples
from topicflow.models.lda.vb.layout import prepare_topics
from topicflow.models.lda.vb.params import VBParams
from topicflow.pipeline.shard_reader import ShardReader

#: Gibbs sweeps over held-out documents, topics fixed, before their topics are read (May et al. 2014).
FOLD_IN_SWEEPS = 5

#: Sweeps of batch Gibbs before alpha and beta are first optimized.
OPTIMIZE_BURN_IN = 50

#: Terms per topic reported with every trace record.
TOP_TERMS = 10


def top_term_ids(topic_word_counts: np.ndarray, n: int = TOP_TERMS) -> list[list[int]]:
    """Return the ids of each topic's ``n`` most frequent terms, most frequent first (ties: lower id)."""
    order = np.argsort(-topic_word_counts, axis=1, kind="stable")[:, :n]
    return order.tolist()


@dataclass(frozen=True)
class StreamSource:
    """Where an actor reads its documents: one language of a store, in store order.

    Attributes
    ----------
    store : str
        Path of the corpus store.
    shards : tuple of ShardInfo
        The store's shards, in order.
    language : str
    n_terms : int
        Vocabulary size of ``language``.
    """

    store: str
    shards: tuple[ShardInfo, ...]
    language: str
    n_terms: int

    @property
    def n_docs(self) -> int:
        return sum(s.n_docs for s in self.shards)


def stream_source(corpus: Corpus) -> StreamSource:
    """The store's only language as a stream source; every streaming sampler models one language."""
    if corpus.is_multilingual:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} is multilingual ({', '.join(corpus.languages)}); the streaming samplers "
            "model one language. Ingest that language alone, or fit polylingual LDA with `topicflow fit`.",
            path=str(corpus.path),
        )
    language = corpus.languages[0]
    return StreamSource(str(corpus.path), tuple(corpus.shards), language, len(corpus.vocabulary(language)))


class DocumentStream:
    """Reads documents ``[start, stop)`` of a :class:`StreamSource` as one block, across shards."""

    def __init__(self, source: StreamSource) -> None:
        self.source = source
        self._reader = ShardReader(source.store, source.shards, {source.language: source.n_terms}, cache_size=2)
        self._bounds = np.concatenate([[0], np.cumsum([s.n_docs for s in source.shards])]).astype(np.int64)

    @property
    def n_docs(self) -> int:
        return int(self._bounds[-1])

    def read(self, start: int, stop: int) -> DocBlock:
        stop = min(stop, self.n_docs)
        parts = []
        lo = start
        while lo < stop:
            k = int(np.searchsorted(self._bounds, lo, side="right") - 1)
            hi = min(stop, int(self._bounds[k + 1]))
            parts.append(self._reader.rows(k, lo - int(self._bounds[k]), hi - int(self._bounds[k]))[self.source.language])
            lo = hi
        if not parts:
            empty = self._reader.rows(0, 0, 0)[self.source.language]
            return DocBlock(empty.indptr, empty.term_ids, empty.counts, empty.doc_ids, start, empty.n_terms,
                            empty.language, empty.labels, empty.timestamps)
        return concat_blocks(parts)


@dataclass(frozen=True)
class HeldOutSet:
    """Test documents scored at every evaluation point (out-of-sample NMI and perplexity).

    Attributes
    ----------
    source : StreamSource
        The test store.
    n_terms : int
        Vocabulary size of the training store.
    term_map : ndarray of shape (source.n_terms,), int64, or None
        Test term id -> training term id (-1: not in the training vocabulary); None when the two
        vocabularies are the same.
    seed : int
        Seed of the fold-in sweeps and of the observed/held-out token split.
    as_next_documents : bool
        Also cluster the test documents by observing them as the next documents of the stream, then
        restoring the sampler (``nmi_out_next``, Canini et al. 2009; particle-filter family only).
    """

    source: StreamSource
    n_terms: int
    term_map: np.ndarray | None = None
    seed: int = 0
    as_next_documents: bool = False


class LabelBook:
    """Labels of the documents seen and the topic each was given, for in-sample NMI."""

    def __init__(self, codes: dict[str, int] | None = None, labels: np.ndarray | None = None,
                 topics: np.ndarray | None = None) -> None:
        self.codes = dict(codes or {})
        self.labels = [] if labels is None else labels.tolist()
        self.topics = [] if topics is None else topics.tolist()

    def add(self, labels: np.ndarray | None, topics: np.ndarray) -> None:
        if labels is None:
            return
        for label, topic in zip(labels, topics):
            self.labels.append(self.codes.setdefault(str(label), len(self.codes)))
            self.topics.append(int(topic))

    def nmi(self) -> float | None:
        return nmi(np.asarray(self.labels), np.asarray(self.topics)) if self.labels else None

    def arrays(self) -> dict[str, np.ndarray]:
        return {"book_labels": np.asarray(self.labels, dtype=np.int32),
                "book_topics": np.asarray(self.topics, dtype=np.int32)}

    @classmethod
    def from_state(cls, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> LabelBook:
        return cls(meta.get("label_codes", {}), arrays.get("book_labels"), arrays.get("book_topics"))


def read_held_out(spec: HeldOutSet) -> DocBlock:
    """Every test document, its term ids in the training vocabulary."""
    block = DocumentStream(spec.source).read(0, spec.source.n_docs)
    return block if spec.term_map is None else remap_terms(block, spec.term_map, spec.n_terms)


def evaluate_topics(topic_word: np.ndarray, doc_topic_prior: np.ndarray, held_out: DocBlock,
                    seed: int) -> dict[str, float]:
    """Out-of-sample NMI (topics of held-out documents after fold-in Gibbs sweeps) and perplexity."""
    record: dict[str, float] = {}
    if held_out.labels is not None:
        counts = gibbs_lda_fold_in.fold_in(held_out, topic_word, doc_topic_prior, n_sweeps=FOLD_IN_SWEEPS, seed=seed)
        record["nmi_out"] = nmi(held_out.labels, np.argmax(counts, axis=1))
    observed, scored = split_doc_tokens(held_out, seed=seed)
    log_lik, n_tokens = completion_log_likelihood(
        observed, scored, prepare_topics({held_out.language: topic_word}), doc_topic_prior, VBParams(len(doc_topic_prior)))
    record["perplexity_out"] = float(np.exp(-log_lik / max(n_tokens, 1)))
    return record


class SamplerActor:
    """What every streaming sampler actor shares: its documents, its clock and its evaluation."""

    def __init__(self, source: StreamSource, held_out: HeldOutSet | None) -> None:
        self._stream = DocumentStream(source)
        self._held_out = held_out
        self._held_out_block: DocBlock | None = None
        self.seconds = 0.0

    def _held_out_docs(self) -> DocBlock | None:
        if self._held_out is not None and self._held_out_block is None:
            self._held_out_block = read_held_out(self._held_out)
        return self._held_out_block

    def _evaluate(self, topic_word: np.ndarray, doc_topic_prior: np.ndarray) -> dict[str, float]:
        block = self._held_out_docs()
        if block is None or self._held_out is None:
            return {}
        return evaluate_topics(topic_word, doc_topic_prior, block, self._held_out.seed)


class ParticleFilterActor(SamplerActor):
    """One run of o-LDA, incremental Gibbs or the particle filter (Canini et al. 2009).

    Parameters
    ----------
    source : StreamSource
    params : PFParams
    state : (arrays, meta)
        A snapshot: from :func:`initial_run_state` or from :meth:`snapshot`.
    held_out : HeldOutSet or None
    """

    def __init__(self, source: StreamSource, params: particle_filter.PFParams, state: RunState,
                 held_out: HeldOutSet | None = None) -> None:
        super().__init__(source, held_out)
        arrays, meta = state
        self.params = params
        cloud_arrays = {k[len("cloud/"):]: v for k, v in arrays.items() if k.startswith("cloud/")}
        self.cloud = particle_filter.cloud_from_arrays(cloud_arrays, meta["cloud"])
        self.position = int(meta["position"])
        self.tokens_seen = int(meta.get("tokens_seen", 0))
        self.seconds = float(meta.get("seconds", 0.0))
        self.log_evidence = float(meta.get("log_evidence", 0.0))
        self.evidence_tokens = int(meta.get("evidence_tokens", 0))
        self.resamples = int(meta.get("resamples", 0))
        self.rejuvenation_steps = int(meta.get("rejuvenation_steps", 0))
        self.book = LabelBook.from_state(arrays, meta)
        self.initialization: dict[str, Any] = {k: meta[k] for k in ("init_seed", "init_score") if k in meta}

    def advance(self, stop: int, evaluate: bool = False) -> dict[str, Any]:
        """Observe documents ``[position, stop)`` and report where the run stands."""
        stop = min(stop, self._stream.n_docs)
        ess_min = float(self.params.n_particles)
        if stop > self.position:
            block = self._stream.read(self.position, stop)
            started = time.perf_counter()
            self.cloud, diagnostics = particle_filter.observe(self.cloud, block, self.params)
            self.seconds += time.perf_counter() - started
            self.position = stop
            self.tokens_seen += diagnostics.n_tokens
            self.log_evidence += diagnostics.log_evidence
            self.evidence_tokens += diagnostics.n_tokens
            self.resamples += len(diagnostics.resample_positions)
            self.rejuvenation_steps += diagnostics.rejuvenation_steps_done
            ess_min = float(diagnostics.ess_min)
            self.book.add(block.labels, diagnostics.doc_topics)
        record: dict[str, Any] = {
            "docs_seen": self.position, "tokens_seen": self.tokens_seen, "seconds": self.seconds,
            "rejuvenation_steps": self.rejuvenation_steps,
            "nmi_in": self.book.nmi(), "resamples": self.resamples, "ess_min": ess_min,
            "log_evidence_per_token": self.log_evidence / max(self.evidence_tokens, 1),
            **{k: v for k, v in particle_filter.memory_stats(self.cloud).items()},
            "top_terms": top_term_ids(self._counts()),
        }
        record.update(self._best_sample_scores(evaluate))
        if evaluate:
            record.update(self._evaluate(self.topic_word(), self._alpha()))
        return record

    def _independent(self) -> bool:
        """Independent samples (o-LDA or incremental Gibbs, best of P): a cloud that never resamples."""
        return self.params.n_particles > 1 and self.params.ess_threshold == 0.0

    def _best_sample_scores(self, evaluate: bool) -> dict[str, Any]:
        """Canini et al.'s scores (sec. 5.2): ``nmi_train_best`` (every document seen, clustered by the
        sample of highest posterior probability now) and, at evaluation points, ``nmi_out_next`` (the
        test documents observed as the next ones, then the sampler restored). Needs the history source."""
        if self.params.rejuvenation_source != "history":
            return {}
        clusters, best = stream_samples.training_clusters(self.cloud, np.arange(self.position))
        record: dict[str, Any] = {"best_sample": best,
                                  "nmi_train_best": nmi(np.asarray(self.book.labels), clusters)
                                  if self.book.labels else None}
        block = self._held_out_docs() if evaluate else None
        if block is not None and block.labels is not None and self._held_out is not None \
                and self._held_out.as_next_documents:
            test_clusters, _ = stream_samples.observe_as_next(self.cloud, block, self.params)
            record["nmi_out_next"] = nmi(block.labels, test_clusters)
        return record

    def _counts(self) -> np.ndarray:
        """n_kw of the model: the weight average of the particles, or the best of independent samples."""
        if not self._independent():
            return particle_filter.topic_word_counts(self.cloud)
        if self.params.rejuvenation_source == "history":
            best = stream_samples.best_sample(stream_samples.sample_log_joints(self.cloud))
        else:
            best = int(np.argmax(self.cloud.weights))
        return particle_filter.particle_topic_word_counts(self.cloud, best).astype(np.float64)

    def _alpha(self) -> np.ndarray:
        return np.full(self.params.n_topics, self.params.doc_topic_prior)

    def topic_word(self) -> np.ndarray:
        if not self._independent():
            return particle_filter.topic_word_distribution(self.cloud)
        return posterior_mean(self._counts(), self.params.topic_word_prior)

    def model_parameters(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(topic-word counts averaged over particles by weight, or of the best independent sample, alpha, beta)."""
        return self._counts(), self._alpha(), self.params.topic_word_prior

    def snapshot(self) -> RunState:
        arrays, cloud_meta = particle_filter.cloud_to_arrays(self.cloud)
        out = {f"cloud/{k}": v for k, v in arrays.items()}
        out.update(self.book.arrays())
        meta = {"kind": "particle_filter", "position": self.position, "tokens_seen": self.tokens_seen,
                "seconds": self.seconds, "log_evidence": self.log_evidence,
                "evidence_tokens": self.evidence_tokens, "resamples": self.resamples,
                "rejuvenation_steps": self.rejuvenation_steps,
                "label_codes": self.book.codes, "cloud": cloud_meta, **self.initialization}
        return out, meta


#: Namespace of the Gibbs state's arrays in a run's snapshot (the run's other arrays sit beside them).
GIBBS_PREFIX = "gibbs/"


class GibbsActor(SamplerActor):
    """One run of batch collapsed Gibbs over the whole stream (the reference the online samplers chase).

    ``advance(stop)`` runs sweeps until ``stop`` sweeps are done; the corpus is held in memory.
    """

    def __init__(self, source: StreamSource, params: gibbs_lda_state.GibbsParams, state: RunState,
                 held_out: HeldOutSet | None = None, optimize_every: int = 0, start: GibbsInit = "random",
                 partitions: int = 1, threads: int = 1) -> None:
        super().__init__(source, held_out)
        arrays, meta = state
        self.params = params
        self.optimize_every = optimize_every
        self.partitions, self.threads = partitions, threads
        self.seconds = float(meta.get("seconds", 0.0))
        self.corpus = self._stream.read(0, self._stream.n_docs)
        if f"{GIBBS_PREFIX}topics" in arrays:
            own = {name[len(GIBBS_PREFIX):]: value for name, value in arrays.items() if name.startswith(GIBBS_PREFIX)}
            self.state = gibbs_lda_state.from_arrays(own, meta["gibbs"])
        else:
            started = time.perf_counter()
            self.state = gibbs_lda.initial_state(self.corpus, params, init=start, threads=threads)
            self.seconds += time.perf_counter() - started

    def advance(self, stop: int, evaluate: bool = False) -> dict[str, Any]:
        todo = stop - self.state.sweeps_done
        if todo > 0:
            started = time.perf_counter()
            self.state = gibbs_lda.run_sweeps(self.state, self.params, todo, optimize_every=self.optimize_every,
                                              burn_in=OPTIMIZE_BURN_IN if self.optimize_every else 0,
                                              partitions=self.partitions, threads=self.threads)
            self.seconds += time.perf_counter() - started
        n_tokens = int(self.state.token_terms.shape[0])
        labels = self.corpus.labels
        record: dict[str, Any] = {
            "sweeps": self.state.sweeps_done, "docs_seen": self.corpus.n_docs,
            "tokens_seen": n_tokens * self.state.sweeps_done, "seconds": self.seconds,
            "nmi_in": None if labels is None else nmi(labels, np.argmax(self.state.doc_topic_counts, axis=1)),
            "log_likelihood_per_token": gibbs_lda_scores.joint_log_likelihood(self.state) / max(n_tokens, 1),
            "top_terms": top_term_ids(self.state.term_topic_counts.T),
        }
        if evaluate:
            record.update(self._evaluate(self.topic_word(), self.state.doc_topic_prior))
        return record

    def topic_word(self) -> np.ndarray:
        return gibbs_lda_scores.topic_word_distribution(self.state)

    def model_parameters(self) -> tuple[np.ndarray, np.ndarray, float]:
        """(topic-word counts, alpha, beta) of the saved model."""
        return (self.state.term_topic_counts.T.astype(np.float64), np.asarray(self.state.doc_topic_prior),
                float(self.state.topic_word_prior))

    def snapshot(self) -> RunState:
        arrays, meta = gibbs_lda_state.to_arrays(self.state)
        return ({f"{GIBBS_PREFIX}{k}": v for k, v in arrays.items()},
                {"kind": "gibbs", "seconds": self.seconds, "gibbs": meta})
