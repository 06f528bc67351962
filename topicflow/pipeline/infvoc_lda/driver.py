"""Driver of infinite-vocabulary online LDA on Dask over a store's raw tokens (Zhai 2014, Algorithm 4).

The documents stream in the minibatches of online LDA (:func:`topicflow.pipeline.vb.plan_minibatches`
with an :class:`~topicflow.pipeline.infvoc_lda.config.InfVocPlan`), read from the store's ordered-token
layer (``topicflow ingest --keep-order``): in-vocabulary tokens and out-of-vocabulary strings alike
are words, mapped to global ids by an append-only :class:`~.word_index.WordIndex`. Per minibatch i:

1. the minibatch's pieces are sliced once as Dask tasks and each reports its distinct token codes in
   first-seen order (:func:`topicflow.tasks.infvoc.map_codes`); walking the pieces in document order, the
   driver gives new strings the next ids (so the ids do not depend on how the minibatch is split) and
   scores them by log G0 (:func:`~topicflow.models.infvoc_lda.g0.log_g0`; kept per id, 8 bytes a word);
2. the E-step's weights for the minibatch's words are built once on the driver
   (:func:`~topicflow.models.infvoc_lda.prepare_weights`, eqs. 7.3-7.4) and shared;
3. each piece runs the hybrid Gibbs E-step (:func:`~topicflow.models.infvoc_lda.estep_documents`,
   eq. 7.2; random numbers keyed by (seed, i, store position of the document)) and the statistics are
   tree-merged in piece order (integer counts: exact in any order);
4. the driver applies :func:`~topicflow.models.infvoc_lda.update_minibatch` (expansion, eqs. 7.6-7.8,
   reordering and contraction every U minibatches) with D = the store's size unless given.

This is the chapter's order (sample with eq. 7.4 for words outside a TOS, then expand); see
:mod:`topicflow.models.infvoc_lda.update`. The model is the same for any number of workers, pieces or
threads and for the threaded or the distributed scheduler (tested bit for bit).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import dask
import numpy as np

from topicflow import config as tf_config
from topicflow._typing import FloatArray
from topicflow.errors import InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.g0 import default_g0, read_g0
from topicflow.io.models.infvoc import DocTopicWriter
from topicflow.io.storage import StoragePath
from topicflow.models.infvoc_lda import (
    InfVocParams,
    InfVocState,
    empty_state,
    prepare_weights,
    tos_positions,
    update_minibatch,
)
from topicflow.models.infvoc_lda.g0 import CharNgramG0, log_g0
from topicflow.pipeline.cluster import compute, current_client
from topicflow.pipeline.infvoc_lda.config import InfVocPlan
from topicflow.pipeline.infvoc_lda.model import (
    read_infvoc_checkpoint,
    write_infvoc_checkpoint,
)
from topicflow.pipeline.infvoc_lda.word_index import WordIndex
from topicflow.pipeline.policies import CheckpointPolicy
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb import resumed_minibatches, share
from topicflow.tasks.estep import graph_token
from topicflow.tasks.infvoc import map_codes, map_estep, map_pieces

log = logging.getLogger(__name__)

#: What ``g0=`` accepts: ``"default"`` (the shipped English G0), None (rank without G0, the reference
#: code's behaviour), a G0 directory (``topicflow g0 train``) or a trained :class:`CharNgramG0`.
G0Choice = CharNgramG0 | str | Path | None


@dataclass(frozen=True, slots=True)
class InfVocRecord:
    """One line of the trace: minibatch i.

    Attributes
    ----------
    i, epoch, minibatch : int
        The update number, the pass and the minibatch's index in it.
    docs, tokens : int
        |S| and its tokens.
    new_words : int
        Strings first seen in this minibatch (the word index grew by this).
    n_words : int
        Size of the word index afterwards.
    tos_sizes : list of int
        T_k of every topic after the update (after the contraction when i mod U == 0).
    n_scored : int
        Entries of the ranking-score table R afterwards ((topic, word) pairs ever scored; it only grows).
    epsilon : float
        The step epsilon_i.
    docs_seen : int
        Documents processed in all.
    seconds, docs_per_second, tokens_per_second : float
        Wall time of the whole minibatch (both rounds and the update) and the rates.
    word_ranks : dict of str to list of int, optional
        TOS position (0-based, -1 when absent) of each tracked word in every topic, after the update.
    """

    i: int
    epoch: int
    minibatch: int
    docs: int
    tokens: int
    new_words: int
    n_words: int
    tos_sizes: list[int]
    n_scored: int
    epsilon: float
    docs_seen: int
    seconds: float
    docs_per_second: float
    tokens_per_second: float
    word_ranks: dict[str, list[int]] | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-able dict."""
        return asdict(self)


@dataclass(frozen=True, slots=True)
class InfVocResult:
    """The state after the stream, its word index and position, and this run's trace.

    Attributes
    ----------
    state : InfVocState
    word_index : WordIndex
    i : int
        Minibatches applied in all (``state.n_updates``).
    docs_seen : int
        Documents processed in all.
    trace : tuple of InfVocRecord
        This run's records (a resumed run: the checkpoint's and the new ones).
    g0 : CharNgramG0 or None
        The G0 the ranking used.
    g0_source : str or None
        ``"default"``, the G0 directory, or ``"given"``.
    log_g0 : ndarray or None
        log G0 of every word id (None without G0).
    """

    state: InfVocState
    word_index: WordIndex
    i: int
    docs_seen: int
    trace: tuple[InfVocRecord, ...]
    g0: CharNgramG0 | None = None
    g0_source: str | None = None
    log_g0: FloatArray | None = None

    def word_ranks(self) -> dict[str, np.ndarray]:
        """The rank history of the tracked words (the chapter's Figure 7.1).

        Returns
        -------
        dict of str to ndarray of shape (n_records, n_topics), int64
            TOS position after each minibatch of the trace (-1: not in the topic's TOS).
        """
        out: dict[str, list[list[int]]] = {}
        for record in self.trace:
            for word, ranks in (record.word_ranks or {}).items():
                out.setdefault(word, []).append(list(ranks))
        return {word: np.array(rows, dtype=np.int64) for word, rows in out.items()}


def resolve_g0(g0: G0Choice) -> tuple[CharNgramG0 | None, str | None]:
    """The G0 object and its recorded source for a ``g0=`` choice (see :data:`G0Choice`).

    Parameters
    ----------
    g0 : CharNgramG0, "default", path or None

    Returns
    -------
    g0 : CharNgramG0 or None
    source : str or None
    """
    if g0 is None:
        return None, None
    if isinstance(g0, CharNgramG0):
        return g0, "given"
    if isinstance(g0, str) and g0 == "default":
        return default_g0(), "default"
    return read_g0(Path(g0))[0], str(g0)


def ordered_language(corpus: Corpus, language: str | None = None) -> str:
    """The language the driver reads; refuses a store without token order or an ambiguous multilingual one.

    Parameters
    ----------
    corpus : Corpus
    language : str, optional
        A language of the store (needed for a multilingual store).

    Returns
    -------
    str

    Raises
    ------
    OrderNotKeptError
        The store was ingested without ``--keep-order``.
    InvalidParameterError
        A multilingual store and no ``language``, or a language the store lacks.
    """
    if not corpus.has_order:
        raise OrderNotKeptError(
            f"store {str(corpus.path)!r} does not keep token order (it was ingested without --keep-order); "
            "infinite-vocabulary LDA reads each document's raw tokens, including out-of-vocabulary words: "
            "re-ingest it with `topicflow ingest --keep-order` (Python: ingest_corpus(..., keep_order=True)).",
            path=str(corpus.path))
    if language is None and corpus.is_multilingual:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} has languages {list(corpus.languages)}; infinite-vocabulary LDA is "
            "monolingual: pick one with language=... (a separate model per language)", path=str(corpus.path))
    try:
        return corpus.resolve_language(language)
    except ValueError as exc:
        raise InvalidParameterError(str(exc), path=str(corpus.path)) from exc


def _digest(state: InfVocState, index: WordIndex, g0: CharNgramG0 | None) -> str:
    arrays, scalars = state.to_arrays()
    parts: list[Any] = [np.ascontiguousarray(arrays[k]).tobytes() for k in sorted(arrays)]
    parts += [sorted(scalars.items()), index.to_arrays()["bytes"].tobytes(), index.to_arrays()["offsets"].tobytes()]
    if g0 is not None:
        parts += [g0.charset, g0.order, g0.smoothing, g0.min_length, g0.max_length, g0.lowercase,
                  np.asarray(g0.counts).tobytes(), np.asarray(g0.log_zeta).tobytes()]
    return graph_token(*parts)


def _persist(graphs: list[Any], client: Any) -> list[Any]:
    """The pieces computed once and kept where they are (on the workers, or in this process)."""
    if client is not None:
        return list(client.persist(graphs))
    return list(dask.persist(*graphs, scheduler="threads"))


def track_ranks(state: InfVocState, word_index: WordIndex, words: Sequence[str]) -> dict[str, list[int]]:
    """TOS position of each of ``words`` in every topic (-1: absent or never seen).

    Parameters
    ----------
    state : InfVocState
    word_index : WordIndex
    words : sequence of str

    Returns
    -------
    dict of str to list of int
    """
    ids = word_index.ids(words)
    known = ids >= 0
    positions = np.full((state.n_topics, len(words)), -1, dtype=np.int64)
    if np.any(known):
        positions[:, known] = tos_positions(state, ids[known])
    return {word: positions[:, j].tolist() for j, word in enumerate(words)}


def fit_infvoc(
    corpus: Corpus,
    params: InfVocParams,
    plan: InfVocPlan = InfVocPlan(),
    *,
    state: InfVocState | None = None,
    word_index: WordIndex | None = None,
    i: int | None = None,
    docs_seen: int = 0,
    shards: Sequence[int] | None = None,
    client: Any = None,
    split_every: int | None = None,
    progress: ProgressReporter = NO_PROGRESS,
    on_minibatch: Callable[[InfVocRecord, InfVocState], None] | None = None,
    checkpoint: CheckpointPolicy | None = None,
    g0: G0Choice = "default",
    track_words: Sequence[str] = (),
    doc_topics: str | Path | StoragePath | None = None,
    language: str | None = None,
) -> InfVocResult:
    """Stream ``shards`` of ``corpus`` through infinite-vocabulary online LDA (module docstring).

    Parameters
    ----------
    corpus : Corpus
        A store with the ordered-token layer (``--keep-order``).
    params : InfVocParams
        K, alpha^theta, alpha^beta, T, U, the step schedule, B, M, the seed.
    plan : InfVocPlan
        Minibatch size |S|, passes, shuffle window, pieces, D (``total_docs``, default the store's size).
    state : InfVocState, optional
        State to continue (a saved model's during ``topicflow update``); default the empty state.
    word_index : WordIndex, optional
        The word index of ``state`` (copied, not modified); required with ``state``.
    i : int, optional
        Minibatches ``state`` has applied; must equal ``state.n_updates`` (the default).
    docs_seen : int
        Documents ``state`` has processed.
    shards : sequence of int, optional
        Store indices of the shards to stream, in store order (default all).
    client : distributed.Client, optional
        Default: the current client, else Dask's threaded scheduler.
    split_every : int, optional
        Fan-in of the statistics' tree merge (config ``split-every``, default 8).
    progress : ProgressReporter
    on_minibatch : callable, optional
        ``on_minibatch(record, state)`` after every update (an exception stops the fit; with a checkpoint,
        resume continues from the last one written).
    checkpoint : CheckpointPolicy, optional
        Write the driver state every ``every`` minibatches; with ``resume``, continue from it (the result
        is the uninterrupted run's, bit for bit).
    g0 : "default", None, path or CharNgramG0, default "default"
        The base distribution G0 of the ranking scores (eq. 7.8): the shipped English G0, none (G0 = 1, the
        reference code), a G0 directory or a trained G0.
    track_words : sequence of str
        Words whose TOS positions every record keeps (Figure 7.1; :meth:`InfVocResult.word_ranks`).
    doc_topics : path, optional
        Write the online pass's document topic vectors (alpha^theta + n_dk of the last sweep, spec P9) to
        this zarr group, one minibatch at a time (:class:`~topicflow.io.models.infvoc.DocTopicWriter`).
    language : str, optional
        The language to read (required for a multilingual store).

    Returns
    -------
    InfVocResult

    Raises
    ------
    OrderNotKeptError
        The store has no ordered-token layer.
    InvalidParameterError
        A multilingual store without ``language``, a state without its word index, an ``i`` that is not
        the state's, a state of another K, or a checkpoint written by another fit.
    """
    lang = ordered_language(corpus, language)
    if state is None:
        if word_index is not None and len(word_index):
            raise InvalidParameterError("a word index was given without its state; pass both or neither")
        state, index = empty_state(params.n_topics), WordIndex()
    else:
        if word_index is None:
            raise InvalidParameterError("a starting state needs its word index (word_index=...)")
        if state.n_topics != params.n_topics:
            raise InvalidParameterError(f"the starting state has {state.n_topics} topics, params.n_topics is "
                                        f"{params.n_topics}")
        index = word_index.copy()
    if i is not None and i != state.n_updates:
        raise InvalidParameterError(f"i = {i} but the state has applied {state.n_updates} minibatches")
    the_g0, g0_source = resolve_g0(g0)
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    shards = list(range(corpus.n_shards)) if shards is None else [int(s) for s in shards]
    total_docs = plan.total_docs or len(corpus)
    shard_sizes = [s.n_docs for s in corpus.shards]
    shard_first = np.concatenate([[0], np.cumsum(shard_sizes)]).astype(np.int64)
    start_digest = _digest(state, index, the_g0)
    fingerprint = {
        "method": "infvoc_online", "settings": params.to_dict(), "plan": plan.to_dict(), "corpus": corpus.token(),
        "language": lang, "shards": shards, "i0": state.n_updates, "docs_seen0": docs_seen, "start": start_digest,
    }
    run_token = graph_token(fingerprint)
    docs_seen0 = docs_seen
    trace: list[InfVocRecord] = []
    done = (0, -1)
    if checkpoint is not None and checkpoint.resume:
        found = read_infvoc_checkpoint(checkpoint.path, fingerprint)
        if found is not None:
            state, index, position, saved_trace = found
            docs_seen = int(position["docs_seen"])
            done = (int(position["epoch"]), int(position["minibatch"]))
            trace = [InfVocRecord(**record) for record in saved_trace]
            log.info("resuming from %s at pass %d after minibatch %d", checkpoint.path, *done)
    word_g0 = None if the_g0 is None else log_g0(the_g0, list(index.words))
    terms = corpus.vocabulary(lang).terms
    blocks = corpus.to_delayed_ordered(lang)
    n_docs = sum(shard_sizes[s] for s in shards)
    writer = None if doc_topics is None else DocTopicWriter(doc_topics, plan.passes * n_docs, params.n_topics)
    minibatches, remaining = resumed_minibatches(shard_sizes, shards, plan, seed=params.seed, passes=plan.passes,
                                                 done=done)
    for minibatch in progress.track(minibatches, total=remaining, desc="infvoc", unit="batch"):
        started = time.perf_counter()
        number = state.n_updates + 1
        token = f"{run_token}-{minibatch.epoch}-{minibatch.index}"
        pieces = _persist(map_pieces({s: blocks[s] for s in minibatch.shards}, minibatch.pieces, token=token), client)
        found_codes = compute(*map_codes(pieces, token=token), client=client)
        n_before = len(index)
        code_ids = []
        for codes, oov in found_codes:
            strings = iter(oov)
            code_ids.append(index.add([str(terms[c]) if c >= 0 else next(strings) for c in codes.tolist()]))
        if the_g0 is not None and word_g0 is not None and len(index) > n_before:
            word_g0 = np.concatenate([word_g0, log_g0(the_g0, index.strings(np.arange(n_before, len(index))))])
        present = np.unique(np.concatenate(code_ids)) if code_ids else np.zeros(0, np.int64)
        weights = share(prepare_weights(state, present, params, log_g0=word_g0), client,
                        name=f"infvoc-weights-{token}")
        merged, gammas = map_estep(pieces, [c for c, _ in found_codes], code_ids, weights, params, minibatch=number,
                                   token=token, split_every=split_every, doc_topics=writer is not None)
        results = compute(merged, *gammas, client=client)
        stats = results[0]
        epsilon = params.step.rho(number)
        state = update_minibatch(state, stats, params, n_docs_total=total_docs, log_g0=word_g0)
        if writer is not None:
            docs = np.concatenate([np.arange(shard_first[s] + a, shard_first[s] + b) for s, a, b in minibatch.pieces])
            writer.write(docs_seen - docs_seen0, np.concatenate(results[1:]), docs, number)
        docs_seen += stats.n_docs
        seconds = time.perf_counter() - started
        record = InfVocRecord(
            i=number, epoch=minibatch.epoch, minibatch=minibatch.index, docs=stats.n_docs, tokens=stats.n_tokens,
            new_words=len(index) - n_before, n_words=len(index), tos_sizes=state.tos_sizes().tolist(),
            n_scored=int(state.rank_words.shape[0]), epsilon=epsilon, docs_seen=docs_seen, seconds=seconds, docs_per_second=stats.n_docs / max(seconds, 1e-9),
            tokens_per_second=stats.n_tokens / max(seconds, 1e-9),
            word_ranks=track_ranks(state, index, list(track_words)) if track_words else None,
        )
        trace.append(record)
        del pieces, weights
        log.debug("infvoc minibatch %d: %d docs, %d new words, %.3f s", number, stats.n_docs, record.new_words, seconds)
        if on_minibatch is not None:
            on_minibatch(record, state)
        if checkpoint is not None and checkpoint.due(len(trace)):
            write_infvoc_checkpoint(
                checkpoint.path, state, index, params, the_g0,
                {"epoch": minibatch.epoch, "minibatch": minibatch.index, "i": state.n_updates,
                 "docs_seen": docs_seen}, [r.to_dict() for r in trace], fingerprint)
    return InfVocResult(state=state, word_index=index, i=state.n_updates, docs_seen=docs_seen, trace=tuple(trace),
                        g0=the_g0, g0_source=g0_source, log_g0=word_g0)
