"""``topicflow reproduce bleier2016``: Bleier's PCSVB0 against SCVB0 and PCVB0 (Fig. 1).

The protocol of the paper's section 4, on one training store (``--corpus``) and its test store
(``--test``; without one, the store's last 20% of documents are held out):

- 80% of the documents train (the whole ``--corpus`` when ``--test`` is given); every held-out
  document is split at random into 70% of its tokens, which estimate its topic proportions, and 30%,
  which are scored (:func:`topicflow.metrics.heldout.split_doc_tokens` with ``fraction=0.7``, seed
  :data:`EVAL_SEED`); perplexity is ``exp(-log likelihood / scored tokens)`` from the common evaluator
  (:func:`topicflow.metrics.heldout.completion_log_likelihood`) given each model's topic-word
  posterior mean ``(n_kw + beta) / (n_k. + V beta)`` and its document prior (``alpha * pi`` for the
  HDP, length T, spec P12; the symmetric alpha for SCVB0);
- PCSVB0 word by word (Algorithm 1) with the paper's constants: rho^c = 10/(1000+t)^0.9,
  rho^d = 1/(10+t)^0.9, rho^h = 5/(100+t)^0.9, beta = 0.01, T = 200;
- SCVB0 (Foulds et al. 2013) with alpha = 0.1, beta = 0.01 and the same schedules at K in
  {50, 100, 200} (the paper does not say which K), one token per global update as PCSVB0, with
  Foulds' one burn-in pass per document;
- PCVB0 (Sato et al. 2012), batch, T = 200: one iteration is one pass;
- at ``paper`` scale, readings of what the paper leaves open (dotted, outside the orderings):
  PCSVB0 with one burn-in pass, PCSVB0 keeping each n_dk between passes (Algorithm 1 initializes n_dk
  once, at line 1), SCVB0 K=100 without burn-in;
- the held-out perplexity after every pass (and at a few points inside the first pass) against the
  number of documents seen, over 30 passes (Fig. 1: "30 iterations").

The word-by-word arms are cluster tasks (in parallel) calling the models' own functions, the ones
``fit_collapsed``'s word-by-word actor calls (same seed, same state: ``benchmarks/bench_hdp.py``
through ``fit_collapsed`` gives the same final perplexities); PCVB0 runs through ``fit_collapsed``.

Writes ``trace.jsonl`` (one record per evaluation point with an ``algorithm`` field),
``fig1-perplexity.png`` and the claims table (through :func:`topicflow.pipeline.reproduce.reproduce`).
The paper's claim is qualitative (sec. 5: PCSVB0 improves "both in terms of the rate of convergence
and the found optimum"); it is checked as two orderings: PCSVB0's perplexity is the lowest of all
arms after the first pass, and at the end.
"""
from __future__ import annotations

import io
import json
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io._atomic import atomic_write_bytes
from topicflow.io.corpus.reader import Corpus
from topicflow.metrics.heldout import completion_log_likelihood, split_doc_tokens
from topicflow.models.common.blocks import DocBlock, remap_terms
from topicflow.models.hdp.params import HDPParams
from topicflow.models.lda.vb.params import VBParams
from topicflow.pipeline.reproduce.claims import Claim, Reproduction
from topicflow.pipeline.reproduce.registry import Paper, ReproduceRequest, register

log = logging.getLogger(__name__)

CITATION = ("Bleier. Practical collapsed stochastic variational inference for the HDP "
            "(PCSVB0, Algorithm 1; compared with SCVB0 and PCVB0 in Fig. 1)")

#: Seed of the 70/30 split of every held-out document's tokens.
EVAL_SEED = 0
#: Share of a held-out document's tokens that estimate its proportions (sec. 4).
OBSERVED_FRACTION = 0.7
#: Share of the store that trains when no --test store is given (sec. 4).
TRAIN_SHARE = 0.8
#: Per-document fold-in limits of the evaluator, for every model and library: ``topicflow evaluate``'s
#: defaults, so a point of the trace equals ``heldout_likelihood(model, test, "completion-random",
#: fraction=0.7, seed=0)`` of that model (and fit_collapsed's held-out scorer).
EVAL_MAX_DOC_ITER, EVAL_DOC_TOL = 100, 1e-3


@dataclass(frozen=True)
class BleierSettings:
    """One scale of the reproduction (the paper's at ``paper``).

    Attributes
    ----------
    passes : int
        Passes over the training documents (Fig. 1: 30).
    truncation : int
        T of PCSVB0 and PCVB0 (sec. 4: 200).
    scvb0_topics : tuple of int
        The K of the SCVB0 arms (the paper does not print K).
    scvb0_alpha, beta : float
        SCVB0's symmetric alpha (0.1) and every arm's beta (0.01).
    scvb0_burn_in : int
        Passes over a document that update only its n_dk before SCVB0's pass that updates the topics
        (Foulds et al. used 1; PCSVB0's Algorithm 1 has none).
    first_pass_points : int
        Extra evaluation points inside the first pass (the rate of convergence is read there).
    pcvb0 : bool
        Run the batch PCVB0 arm.
    readings : bool
        Also run the readings of what the paper leaves open (not part of the claims' orderings):
        PCSVB0 with one burn-in pass per document (as SCVB0), PCSVB0 keeping every document's n_dk
        between passes (Algorithm 1's line 1 read literally) and SCVB0 K=100 without burn-in.
    """

    passes: int = 30
    truncation: int = 200
    scvb0_topics: tuple[int, ...] = (50, 100, 200)
    scvb0_alpha: float = 0.1
    beta: float = 0.01
    scvb0_burn_in: int = 1
    first_pass_points: int = 4
    pcvb0: bool = True
    readings: bool = True


#: ``paper``: sec. 4's settings; ``quick``: a couple of minutes (5 passes, T = 100, SCVB0 at K = 20 and 50).
SCALES: dict[str, BleierSettings] = {
    "paper": BleierSettings(),
    "quick": BleierSettings(passes=5, truncation=100, scvb0_topics=(20, 50), first_pass_points=2, readings=False),
}


# ----------------------------------------------------------------------------- held-out protocol


@dataclass(frozen=True)
class HeldOut:
    """Held-out documents in the training vocabulary, each split into its observed 70% and scored 30%.

    Attributes
    ----------
    pairs : list of (DocBlock, DocBlock)
        (observed, scored) per block of test documents.
    n_docs : int
        Held-out documents.
    n_scored : int
        Scored tokens (in the training vocabulary).
    n_dropped : int
        Test tokens whose term the training set never saw (dropped before the split).
    store : Corpus
        The held-out documents (a store, or a view of some of a store's shards).
    """

    pairs: list[tuple[DocBlock, DocBlock]]
    n_docs: int
    n_scored: int
    n_dropped: int
    store: Corpus

    def perplexity(self, topic_word: np.ndarray, doc_topic_prior: np.ndarray | float) -> float:
        """Held-out perplexity of a model given as its topics and its document prior.

        Parameters
        ----------
        topic_word : ndarray of shape (n_topics, n_terms)
            Topic-word weights (rows are normalized here), in the training vocabulary.
        doc_topic_prior : float or ndarray of shape (n_topics,)
            The model's Dirichlet prior of a document's proportions.

        Returns
        -------
        float
            ``exp(-log likelihood / scored tokens)`` (``inf`` when a scored token is impossible).
        """
        return heldout_perplexity(self.pairs, topic_word, doc_topic_prior)


def term_map(train: Corpus, test: Corpus) -> np.ndarray | None:
    """Test term id -> training term id (-1: unknown); None when the vocabularies are the same."""
    train_vocab, test_vocab = train.vocabulary(), test.vocabulary()
    if len(train_vocab) == len(test_vocab) and np.array_equal(train_vocab.terms, test_vocab.terms):
        return None
    ids = train_vocab.ids_of(str(t) for t in test_vocab.terms)
    return np.array([-1 if i is None else i for i in ids], dtype=np.int64)


def heldout_set(train: Corpus, test: Corpus, *, seed: int = EVAL_SEED,
                fraction: float = OBSERVED_FRACTION) -> HeldOut:
    """Every document of ``test``, in the training vocabulary, split 70/30.

    Parameters
    ----------
    train : Corpus
        The training store (its vocabulary is the models').
    test : Corpus
        The held-out documents.
    seed : int
        Seed of the token split.
    fraction : float
        Share of each document's tokens that is observed.

    Returns
    -------
    HeldOut
    """
    mapping = term_map(train, test)
    n_terms = len(train.vocabulary())
    pairs, dropped, n_docs = [], 0, 0
    for block in test.iter_blocks():
        mapped = block if mapping is None else remap_terms(block, mapping, n_terms)
        dropped += block.n_tokens - mapped.n_tokens
        n_docs += mapped.n_docs
        pairs.append(split_doc_tokens(mapped, seed=seed, fraction=fraction))
    n_scored = sum(scored.n_tokens for _, scored in pairs)
    if n_docs == 0 or n_scored == 0:
        raise InvalidParameterError(f"no held-out token to score in {str(test.path)!r}", path=str(test.path))
    return HeldOut(pairs, n_docs, n_scored, dropped, test)


def heldout_perplexity(pairs: Sequence[tuple[DocBlock, DocBlock]], topic_word: np.ndarray,
                       doc_topic_prior: np.ndarray | float) -> float:
    """Return exp(-log likelihood per scored token) of the common document-completion evaluator.

    Parameters
    ----------
    pairs : sequence of (DocBlock, DocBlock)
        (observed, scored) blocks from :func:`heldout_set`.
    topic_word : ndarray of shape (n_topics, n_terms)
        Topic-word weights; each row is normalized to probabilities.
    doc_topic_prior : float or ndarray of shape (n_topics,)
        The model's document prior.

    Returns
    -------
    float
    """
    phi = np.asarray(topic_word, dtype=np.float64)
    phi = phi / phi.sum(axis=1, keepdims=True)
    n_topics = phi.shape[0]
    prior = np.broadcast_to(np.asarray(doc_topic_prior, dtype=np.float64), (n_topics,)).copy()
    params = VBParams(n_topics=n_topics, max_doc_iter=EVAL_MAX_DOC_ITER, doc_tol=EVAL_DOC_TOL)
    language = pairs[0][0].language
    log_lik, n_tokens = 0.0, 0
    for observed, scored in pairs:
        ll, n = completion_log_likelihood(observed, scored, {language: phi}, prior, params)
        log_lik, n_tokens = log_lik + ll, n_tokens + n
    return float(math.exp(-log_lik / max(n_tokens, 1))) if math.isfinite(log_lik) else float("inf")


# ----------------------------------------------------------------------------- arms


@dataclass(frozen=True)
class Arm:
    """One curve of Fig. 1.

    Attributes
    ----------
    name : str
        Its label ("PCSVB0", "SCVB0 K=100", "PCVB0"; a reading of an open choice starts with "reading: ").
    method : {"pcsvb0", "scvb0", "pcvb0"}
        The collapsed method.
    params : HDPParams
        Its settings (for SCVB0, ``truncation`` is K and ``alpha_init`` the fixed alpha).
    batch_size : int or None
        None: word by word (Algorithm 1); else documents per minibatch.
    """

    name: str
    method: str
    params: HDPParams
    batch_size: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-able settings."""
        return {"name": self.name, "method": self.method, "batch_size": self.batch_size,
                "params": self.params.to_dict()}


#: Prefix of the arms that read an open choice differently (drawn dotted, left out of the orderings).
READING = "reading: "


def paper_arms(settings: BleierSettings, seed: int) -> list[Arm]:
    """PCSVB0, SCVB0 at each K and PCVB0 with sec. 4's constants (the ``bleier2016`` presets).

    Parameters
    ----------
    settings : BleierSettings
        The scale.
    seed : int
        Seed of every arm's initialization.

    Returns
    -------
    list of Arm
    """
    hdp = HDPParams(truncation=settings.truncation, topic_word_prior=settings.beta, seed=seed)
    arms = [Arm("PCSVB0", "pcsvb0", hdp)]
    for k in settings.scvb0_topics:
        arms.append(Arm(f"SCVB0 K={k}", "scvb0", replace(hdp, truncation=k, alpha_init=settings.scvb0_alpha,
                                                         learn_alpha=False, learn_gamma=False,
                                                         burn_in=settings.scvb0_burn_in)))
    if settings.pcvb0:
        arms.append(Arm("PCVB0", "pcvb0", hdp))
    if settings.readings:
        arms += [Arm(f"{READING}PCSVB0, burn-in 1", "pcsvb0", replace(hdp, burn_in=1)),
                 Arm(f"{READING}PCSVB0, n_dk kept", "pcsvb0", replace(hdp, keep_doc_state=True))]
        if 100 in settings.scvb0_topics:
            scvb0 = next(arm for arm in arms if arm.name == "SCVB0 K=100")
            arms.append(Arm(f"{READING}SCVB0 K=100, no burn-in", "scvb0", replace(scvb0.params, burn_in=0)))
    return arms


# ----------------------------------------------------------------------------- statistics and claims


def curves(records: Sequence[Mapping[str, Any]]) -> dict[str, list[tuple[int, float]]]:
    """``{arm: [(documents seen, perplexity), ...]}`` in order of documents seen."""
    out: dict[str, list[tuple[int, float]]] = {}
    for record in records:
        out.setdefault(str(record["algorithm"]), []).append((int(record["docs_seen"]), float(record["perplexity"])))
    return {name: sorted(points) for name, points in out.items()}


def value_at(points: Sequence[tuple[int, float]], docs: int) -> float:
    """The perplexity at the last evaluation point at or before ``docs`` documents seen (nan if none)."""
    before = [value for seen, value in points if seen <= docs]
    return before[-1] if before else float("nan")


def _listing(values: Mapping[str, float]) -> str:
    return "; ".join(f"{name} {value:,.1f}" for name, value in values.items())


def fig1_claims(records: Sequence[Mapping[str, Any]], n_train: int, passes: int) -> list[Claim]:
    """Sec. 5's claim, as two orderings read off our Fig. 1, plus what the paper does not report.

    Parameters
    ----------
    records : sequence of mapping
        The trace (``algorithm``, ``docs_seen``, ``perplexity``, ``topics_in_use`` per point).
    n_train : int
        Training documents (one pass).
    passes : int
        Passes run.

    Returns
    -------
    list of Claim
    """
    everything = curves(records)
    lines = {name: points for name, points in everything.items() if not name.startswith(READING)}
    others = [name for name in lines if name != "PCSVB0"]
    claims = []
    if "PCSVB0" not in lines or not others:
        return [Claim("PCSVB0 converges faster and to a better optimum than SCVB0 and PCVB0", "Fig. 1, sec. 5",
                      "n/a", None, note="PCSVB0 or every baseline is missing from the run")]
    first = {name: value_at(points, n_train) for name, points in lines.items()}
    best_other = min(first[name] for name in others)
    claims.append(Claim(
        "PCSVB0 converges faster than SCVB0 and PCVB0 (rate of convergence)",
        "Fig. 1 and sec. 5: PCSVB0's curve lies below the others early on (no numbers printed)",
        f"after one pass ({n_train:,} documents): " + _listing(first),
        bool(first["PCSVB0"] < best_other),
        note="criterion: PCSVB0's held-out perplexity after the first pass is the lowest of all arms"))
    final = {name: points[-1][1] for name, points in lines.items()}
    claims.append(Claim(
        "PCSVB0 converges to a better optimum than SCVB0 and PCVB0",
        f"Fig. 1 and sec. 5: PCSVB0 ends lowest after {passes} iterations (no numbers printed)",
        f"after {passes} passes: " + _listing(final),
        bool(final["PCSVB0"] < min(final[name] for name in others)),
        note="criterion: PCSVB0's final held-out perplexity is the lowest of all arms"))
    for name in others:
        claims.append(Claim(
            f"PCSVB0 ends below {name}", "Fig. 1 (the curves' order)",
            f"PCSVB0 {final['PCSVB0']:,.1f} vs {final[name]:,.1f} "
            f"(PCSVB0 {100 * (final['PCSVB0'] - final[name]) / final[name]:+.1f}%)",
            bool(final["PCSVB0"] < final[name])))
    readings = {name: points for name, points in everything.items() if name.startswith(READING)}
    if readings:
        best_first = min(first[name] for name in others)
        best_final = min(final[name] for name in others)
        claims.append(Claim(
            "Readings of the open choices: does another reading change the verdicts?", "not in the paper",
            "; ".join(f"{name[len(READING):]}: after one pass {value_at(points, n_train):,.1f}, at the end "
                      f"{points[-1][1]:,.1f}" for name, points in readings.items())
            + f" (best baseline: {best_first:,.1f} after one pass, {best_final:,.1f} at the end)", None,
            note="readings are not part of the orderings above; each changes one choice the paper leaves open"))
    in_use = {str(r["algorithm"]): int(r["topics_in_use"]) for r in records if r.get("topics_in_use") is not None}
    claims.append(Claim(
        "Topics in use at the end (not reported by the paper)", "not reported",
        "; ".join(f"{name} {count}" for name, count in in_use.items()) + " (topics with >= 0.1% of the expected "
        "tokens; SCVB0: of its K)", None, note="the paper reports only perplexity"))
    return claims


# ----------------------------------------------------------------------------- figure


def fig1_png(records: Sequence[Mapping[str, Any]], *, title: str) -> bytes:
    """Held-out perplexity against documents seen, one line per arm (matplotlib's object API, Agg)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(6.4, 4.0))
    FigureCanvasAgg(figure)
    axes = figure.add_subplot(1, 1, 1)
    styles = {"PCSVB0": ("C3", "-", "o"), "PCVB0": ("C0", "-", "s")}
    others = iter(["C2", "C1", "C4", "C5", "C6", "C8", "C9", "C7"] * 4)
    for name, points in curves(records).items():
        color, line, marker = styles.get(name) or (next(others), ":" if name.startswith(READING) else "--", "^")
        x = [p[0] for p in points]
        y = [p[1] for p in points]
        axes.plot(x, y, color=color, linestyle=line, marker=marker, markersize=3, label=name)
    axes.set_xscale("log")
    axes.set_xlabel("documents seen")
    axes.set_ylabel("held-out perplexity")
    axes.set_title(title, fontsize=9)
    axes.legend(fontsize=8)
    axes.grid(True, color="#dddddd")
    finite = [p[1] for r in curves(records).values() for p in r if math.isfinite(p[1])]
    if finite:
        low, high = min(finite), float(np.percentile(finite, 90))
        axes.set_ylim(low * 0.95, max(high, low) * 1.1)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    return buffer.getvalue()


# ----------------------------------------------------------------------------- runs


def evaluation_points(n_train: int, passes: int, first_pass_points: int) -> list[int]:
    """List the documents seen at which the held-out set is scored: inside the first pass, then after each.

    Parameters
    ----------
    n_train : int
        Training documents D.
    passes : int
        Passes.
    first_pass_points : int
        Points inside the first pass, at D/2, D/4, ... (halving).

    Returns
    -------
    list of int
        Increasing, ending at ``passes * D``.
    """
    inside = sorted({max(1, n_train >> j) for j in range(1, first_pass_points + 1)} - {n_train})
    return inside + [n_train * p for p in range(1, passes + 1)]


def _record(arm: Arm, held: HeldOut, state: Any, docs_seen: int, n_train: int, fit_seconds: float) -> dict[str, Any]:
    """One point of the trace: the state's held-out perplexity and read-outs."""
    started = time.perf_counter()
    if arm.method == "scvb0":
        prior: np.ndarray | float = float(arm.params.alpha_init)
    else:
        prior = state.doc_topic_prior()
    perplexity = held.perplexity(state.topic_word_counts() + state.beta, prior)
    return {"algorithm": arm.name, "method": arm.method, "docs_seen": int(docs_seen),
            "passes": docs_seen / n_train, "perplexity": perplexity,
            "topics_in_use": int(state.topics_in_use()), "alpha": float(state.alpha),
            "gamma": None if arm.method == "scvb0" else float(state.gamma),
            "fit_seconds": fit_seconds, "eval_seconds": time.perf_counter() - started}


def _word_by_word_model(arm: Arm, corpus: Corpus, n_train: int,
                        n_tokens: int) -> tuple[Any, Callable[[Any, DocBlock, np.ndarray | None], object]]:
    """The arm's initial state and its word-by-word step over one block (the models' own code)."""
    n_terms = len(corpus.vocabulary())
    if arm.method == "scvb0":
        from topicflow.models.lda import scvb0

        scvb0_params = scvb0.as_scvb0_params(arm.params)
        lda_state = scvb0.SCVB0State.initial(scvb0_params, n_terms=n_terms, n_tokens=n_tokens, n_docs=n_train)
        return lda_state, lambda s, block, rows: scvb0.run_word_by_word(s, block, scvb0_params, doc_topic=rows)
    from topicflow.models.hdp import pcsvb0
    from topicflow.models.hdp.state import HDPState

    hdp_state = HDPState.initial(arm.params, n_terms=n_terms, n_tokens=n_tokens, n_docs=n_train)
    return hdp_state, lambda s, block, rows: pcsvb0.run_word_by_word(s, block, arm.params, doc_topic=rows)


def word_by_word_arm(train: Corpus, arm: Arm, held: HeldOut, points: Sequence[int], n_train: int,
                     n_tokens: int) -> list[dict[str, Any]]:
    """Task body: one word-by-word arm (PCSVB0 or SCVB0) over the training store, scored at ``points``.

    The store is read one shard at a time in store order, pass after pass; a shard is cut where an
    evaluation point falls inside it. The model code is the one ``fit_collapsed`` runs word by word
    (:func:`topicflow.models.hdp.pcsvb0.run_word_by_word`, :func:`topicflow.models.lda.scvb0.run_word_by_word`).

    Parameters
    ----------
    train : Corpus
        The training store (or its training shards).
    arm : Arm
        What to run.
    held : HeldOut
        The held-out documents.
    points : sequence of int
        Documents seen at which to score (see :func:`evaluation_points`).
    n_train, n_tokens : int
        D and n of the training store.

    Returns
    -------
    list of dict
        One record per point (see :func:`_record`).
    """
    corpus = train
    state, step = _word_by_word_model(arm, corpus, n_train, n_tokens)
    records: list[dict[str, Any]] = []
    fit_seconds, seen = 0.0, 0
    todo = list(points)
    kept: dict[int, np.ndarray] = {}  # each shard's n_dk rows between passes (keep_doc_state)
    while todo:
        for index in range(corpus.n_shards):
            block = corpus.read_block(index)
            if arm.params.keep_doc_state and index not in kept:
                from topicflow.models.common.cvb0 import start_doc_topic

                kept[index] = start_doc_topic(block, arm.params.truncation, doc_start=arm.params.doc_start,
                                              seed=arm.params.seed)
            lo = 0
            while lo < block.n_docs and todo:
                hi = min(block.n_docs, lo + todo[0] - seen)
                started = time.perf_counter()
                part = block.slice(lo, hi) if (lo, hi) != (0, block.n_docs) else block
                step(state, part, kept[index][lo:hi] if index in kept else None)
                fit_seconds += time.perf_counter() - started
                seen += hi - lo
                lo = hi
                if seen == todo[0]:
                    todo.pop(0)
                    records.append(_record(arm, held, state, seen, n_train, fit_seconds))
                    log.info("bleier2016 %s: %d documents seen, perplexity %.1f", arm.name, seen,
                             records[-1]["perplexity"])
            if not todo:
                break
    return records


def pcvb0_arm(train: Corpus, arm: Arm, held: HeldOut, passes: int, client: Any) -> list[dict[str, Any]]:
    """The batch PCVB0 arm (``fit_collapsed`` on the cluster, one iteration = one pass), scored after each.

    Parameters
    ----------
    train : Corpus
        The training documents.
    arm : Arm
        Its settings.
    held : HeldOut
        The held-out documents (scored by ``fit_collapsed``'s held-out scorer, the same evaluator).
    passes : int
        Iterations.
    client : distributed.Client or None
        Where the partition graph runs.

    Returns
    -------
    list of dict
    """
    from topicflow.pipeline.collapsed import CollapsedConfig, fit_collapsed

    records: list[dict[str, Any]] = []

    def on_record(record: dict[str, Any]) -> None:
        if record.get("heldout_perplexity") is None:
            return
        docs = int(record["docs_seen"])
        records.append({"algorithm": arm.name, "method": arm.method, "docs_seen": docs, "passes": docs / len(train),
                        "perplexity": float(record["heldout_perplexity"]),
                        "topics_in_use": int(record["topics_in_use"]), "alpha": float(record["alpha"]),
                        "gamma": float(record["gamma"]), "fit_seconds": float(record["seconds"]),
                        "eval_seconds": None})
        log.info("bleier2016 PCVB0: %d documents seen, perplexity %.1f", docs, records[-1]["perplexity"])

    config = CollapsedConfig(method="pcvb0", params=arm.params, passes=passes, eval_every=len(train),
                             extra={"heldout_seed": EVAL_SEED})
    fit_collapsed(train, config, client=client, test=held.store, on_record=on_record)
    return records


def split_train_test(corpus: Corpus, test: Corpus | None) -> tuple[Corpus, HeldOut, str]:
    """The training documents and the held-out set (sec. 4: 80% of the documents train).

    Without a test store, the store's last shards holding about 20% of its documents are held out
    (the store should list its documents in a random order; ``benchmarks/hdp_corpora.py`` does).

    Parameters
    ----------
    corpus : Corpus
        ``--corpus``.
    test : Corpus or None
        ``--test``.

    Returns
    -------
    train : Corpus
    held : HeldOut
    how : str
        The split in words.

    Raises
    ------
    InvalidParameterError
        A multilingual store, or one too small to hold documents out.
    """
    if corpus.is_multilingual:
        raise InvalidParameterError(f"bleier2016 needs a monolingual store; {str(corpus.path)!r} has "
                                    f"{', '.join(corpus.languages)}", path=str(corpus.path))
    if test is not None:
        held = heldout_set(corpus, test)
        return corpus, held, f"every document of {str(corpus.path)!r} trains; {held.n_docs} of {str(test.path)!r} test"
    sizes = np.cumsum([shard.n_docs for shard in corpus.shards])
    n_shards = int(np.searchsorted(sizes, TRAIN_SHARE * sizes[-1])) + 1 if len(sizes) else 0
    if n_shards >= len(sizes):
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} has {len(sizes)} shard(s), too few to hold out 20% of its documents; give "
            "--test STORE, or ingest with a smaller --shard-size", path=str(corpus.path))
    train = Corpus(corpus.path, replace(corpus.manifest, shards=corpus.shards[:n_shards]))
    held = heldout_set(train, Corpus(corpus.path, replace(corpus.manifest, shards=corpus.shards[n_shards:])))
    return train, held, (f"the first {len(train)} of {len(corpus)} documents of {str(corpus.path)!r} train; "
                         f"{held.n_docs} of the rest test")


def run_bleier2016(request: ReproduceRequest) -> Reproduction:
    """Fig. 1 of Bleier: PCSVB0, SCVB0 and PCVB0's held-out perplexity against documents seen.

    Parameters
    ----------
    request : ReproduceRequest
        One ``--corpus`` and optionally a ``--test`` store.

    Returns
    -------
    Reproduction

    Raises
    ------
    InvalidParameterError
        Not exactly one corpus, or a store that cannot be split.
    """
    if len(request.corpora) != 1:
        raise InvalidParameterError(f"bleier2016 takes one --corpus store (and optionally --test); got "
                                    f"{len(request.corpora)}")
    settings = SCALES[request.scale]
    train, held, how = split_train_test(request.corpora[0], request.test)
    n_train, n_tokens = len(train), train.n_tokens
    arms = paper_arms(settings, request.seed)
    points = evaluation_points(n_train, settings.passes, settings.first_pass_points)
    started = time.perf_counter()
    from topicflow.pipeline.cluster import current_client

    client = current_client(request.client)
    futures = {arm.name: client.submit(word_by_word_arm, train, arm, held, points, n_train, n_tokens,
                                       key=f"bleier2016-{arm.name.replace(' ', '-')}-{request.seed}", pure=False)
               for arm in arms if arm.method != "pcvb0"}
    records: list[dict[str, Any]] = []
    for arm in arms:
        if arm.method == "pcvb0":
            records += pcvb0_arm(train, arm, held, settings.passes, client)
    for name, future in futures.items():
        records += future.result()
        log.info("bleier2016: %s done", name)
    order = {arm.name: i for i, arm in enumerate(arms)}
    records.sort(key=lambda r: (order[r["algorithm"]], r["docs_seen"]))
    trace = request.out / "trace.jsonl"
    atomic_write_bytes(trace, "".join(json.dumps(r, sort_keys=True) + "\n" for r in records).encode("utf-8"))
    corpus_name = "/".join(str(request.corpora[0].path).rstrip("/").split("/")[-2:])
    title = (f"{corpus_name}: held-out perplexity (70/30 completion)\nD = {n_train:,} documents, n = {n_tokens:,} "
             f"tokens, {settings.passes} passes, T = {settings.truncation}")
    atomic_write_bytes(request.out / "fig1-perplexity.png", fig1_png(records, title=title))
    claims = fig1_claims(records, n_train, settings.passes)
    used = {"scale": request.scale, **asdict(settings), "split": how, "train_docs": n_train,
            "train_tokens": n_tokens, "terms": len(train.vocabulary()), "test_docs": held.n_docs,
            "scored_tokens": held.n_scored, "dropped_test_tokens": held.n_dropped,
            "observed_fraction": OBSERVED_FRACTION, "eval_seed": EVAL_SEED,
            "evaluator": {"max_doc_iter": EVAL_MAX_DOC_ITER, "doc_tol": EVAL_DOC_TOL},
            "arms": [arm.to_dict() for arm in arms], "evaluation_points": points,
            "run_seconds": time.perf_counter() - started}
    return Reproduction(paper="bleier2016", citation=CITATION, corpora=[str(request.corpora[0].path)],
                        scale=request.scale, claims=claims, figures=["fig1-perplexity.png"], trace=trace.name,
                        settings=used)


PAPER = register(Paper(
    name="bleier2016", citation=CITATION,
    corpora="one store (80% of its documents train unless --test gives the held-out store)",
    run=run_bleier2016,
))
