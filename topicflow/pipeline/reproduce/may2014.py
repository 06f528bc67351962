"""May, Clemmer & Van Durme (2014): is rejuvenation needed once the particle filter starts well?

The paper streams three-newsgroup corpora through the particle filter of Canini et al. (2009) with
rejuvenation drawn from a reservoir, and finds that rejuvenation does not change out-of-sample NMI
while the initialization dominates it. This module runs their arms on a labeled store, side by side
on the cluster (every arm is one :func:`~topicflow.pipeline.streaming.run_stream` of ``runs`` seeds):

- Fig. 1: one fixed initial model for every run (the best of ``init_trials`` Gibbs initializations on
  the first 10% of the stream by in-sample NMI, ``init_sweeps`` sweeps from a random start), then no
  rejuvenation, rejuvenation from a 1000-token reservoir, and rejuvenation from the whole history;
- Fig. 2: initialization samples of 0 (the particles start empty), 30, 100 and 300 documents, one
  Gibbs chain per run, with reservoir rejuvenation, and batch Gibbs over the whole stream;
- the grid that tests the headline (init x rejuvenation): the smallest initializations again without
  rejuvenation, beside the fixed good initialization with and without it.

It writes ``trace.jsonl`` (every run's records, with the arm), ``may2014-fig1.png``,
``may2014-fig2.png`` and ``may2014-grid.png`` (out-of-sample NMI against documents seen, mean and one
sample standard deviation over the runs), and the claims table. The scale ``paper`` is the paper's
configuration (T = number of labels, alpha = beta = 0.1, P = 100, ESS 20 of 100, multinomial
resampling, ``|R| = 30``, 30 runs, 100 candidate initializations, 2000 sweeps for the Fig. 2 chains);
``quick`` keeps every arm but uses fewer particles, runs and candidates.
"""
from __future__ import annotations

import json
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from topicflow.errors import InvalidParameterError
from topicflow.io._atomic import atomic_write_bytes
from topicflow.io.corpus.reader import Corpus
from topicflow.pipeline.reproduce.claims import Claim, Reproduction
from topicflow.pipeline.reproduce.registry import Paper, ReproduceRequest, register
from topicflow.pipeline.reproduce.saved import as_json, read_saved, write_saved
from topicflow.pipeline.streaming import run_stream, stream_config

log = logging.getLogger(__name__)

CITATION = ("May, Clemmer & Van Durme (2014). Particle filter rejuvenation and latent Dirichlet allocation. "
            "ACL 2014 (short papers), 446-451.")
#: Share of the store held out as test documents when no ``--test`` store is given (the paper's 60/40).
TEST_SHARE = 0.4
#: Evaluation points along the stream.
N_EVAL_POINTS = 10
#: Every arm saves its runs' snapshots this often (in evaluation points), so an interrupted
#: reproduction continued with ``--resume`` repeats at most this much of one arm.
CHECKPOINT_EVERY = 1
#: A finished arm's records, read back by ``--resume`` instead of running the arm again.
ARM_RECORDS = "records.json"


@dataclass(frozen=True)
class ScaleSettings:
    """What changes between ``--scale quick`` and ``--scale paper``.

    Attributes
    ----------
    n_particles : int
        P.
    runs : int
        Runs per arm (seeds ``seed, seed + 1, ...``).
    init_trials : int
        Candidate initializations of the fixed initial model (Fig. 1).
    init_sweeps : int
        Gibbs sweeps of each candidate (Fig. 1).
    size_sweeps : int
        Gibbs sweeps of the per-run initializations and of batch Gibbs (Fig. 2).
    init_sizes : tuple of int
        Initialization samples of Fig. 2, in documents.
    """

    n_particles: int
    runs: int
    init_trials: int
    init_sweeps: int
    size_sweeps: int
    init_sizes: tuple[int, ...]


SCALES: dict[str, ScaleSettings] = {
    "paper": ScaleSettings(n_particles=100, runs=30, init_trials=100, init_sweeps=200, size_sweeps=2000,
                           init_sizes=(0, 30, 100, 300)),
    "quick": ScaleSettings(n_particles=20, runs=6, init_trials=10, init_sweeps=100, size_sweeps=200,
                           init_sizes=(0, 30)),
}

#: Settings every arm shares (May et al. 2014, section 5 and footnote 3).
PAPER_SETTINGS: dict[str, Any] = {
    "doc_topic_prior": 0.1, "topic_word_prior": 0.1, "ess_threshold": 0.2, "resampling": "multinomial",
    "rejuvenation_steps": 30, "reservoir_size": 1000, "init_start": "random",
}


@dataclass(frozen=True)
class Arm:
    """One curve of the paper's figures: a stream configuration run ``runs`` times.

    Attributes
    ----------
    name : str
        Short name (``fixed/none``, ``init-30/reservoir``).
    figures : tuple of str
        The figures it is drawn in (``fig1``, ``fig2``, ``grid``).
    label : str
        Legend text.
    settings : dict
        Settings over :data:`PAPER_SETTINGS` (``algorithm``, ``rejuvenation_steps``, ``init_docs``, ...).
    fixed_init : bool
        Starts from the shared initial model.
    """

    name: str
    figures: tuple[str, ...]
    label: str
    settings: dict[str, Any] = field(default_factory=dict)
    fixed_init: bool = False


def arms(scale: ScaleSettings) -> list[Arm]:
    """The arms of one scale, the fixed-initialization ones first.

    Parameters
    ----------
    scale : ScaleSettings
        The scale.

    Returns
    -------
    list of Arm

    Examples
    --------
    >>> [arm.name for arm in arms(SCALES["quick"])][:3]
    ['fixed/none', 'fixed/reservoir', 'fixed/history']
    """
    rejuvenation: dict[str, dict[str, Any]] = {"none": {"rejuvenation_steps": 0}, "reservoir": {"rejuvenation_source": "reservoir"},
                    "history": {"rejuvenation_source": "history"}}
    out = [Arm(f"fixed/{kind}", ("fig1", "grid") if kind != "history" else ("fig1",),
               f"fixed 10% init, {'no rejuvenation' if kind == 'none' else kind + ' rejuvenation'}",
               dict(rejuvenation[kind]), fixed_init=True) for kind in ("none", "reservoir", "history")]
    for size in scale.init_sizes:
        sized: dict[str, Any] = {"init_docs": size, "init_sweeps": scale.size_sweeps}
        out.append(Arm(f"init-{size}/reservoir", ("fig2", "grid"), f"init {size} docs, reservoir rejuvenation",
                       {**sized, **rejuvenation["reservoir"]}))
    for size in scale.init_sizes[:2]:
        sized = {"init_docs": size, "init_sweeps": scale.size_sweeps}
        out.append(Arm(f"init-{size}/none", ("grid",), f"init {size} docs, no rejuvenation",
                       {**sized, **rejuvenation["none"]}))
    out.append(Arm("batch-gibbs", ("fig2",), f"batch Gibbs, {scale.size_sweeps} sweeps",
                   {"algorithm": "gibbs", "sweeps": scale.size_sweeps, "eval_every": scale.size_sweeps}))
    return out


# ------------------------------------------------------------------------------------ the stores


def split_stores(corpus: Corpus, test: Corpus | None) -> tuple[Corpus, Corpus, int]:
    """The training stream, the test store and the stream length.

    Without a test store, the last shards holding about :data:`TEST_SHARE` of the documents are the
    test documents, and the training stream is the shards before them.
    """
    if not corpus.has_labels:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} has no labels; may2014 scores out-of-sample NMI against labels. "
            "Ingest with --label-field.", path=str(corpus.path))
    if test is not None:
        if not test.has_labels:
            raise InvalidParameterError(f"test store {str(test.path)!r} has no labels; ingest it with --label-field",
                                        path=str(test.path))
        return corpus, test, len(corpus)
    sizes = np.cumsum([shard.n_docs for shard in corpus.shards])
    n_train = int(np.searchsorted(sizes, (1.0 - TEST_SHARE) * sizes[-1])) + 1 if len(sizes) else 0
    if n_train >= len(sizes):
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} has {len(sizes)} shard(s), too few to hold out test documents; give "
            "--test STORE, or ingest with a smaller --shard-size", path=str(corpus.path))
    train = Corpus(corpus.path, replace(corpus.manifest, shards=corpus.shards[:n_train]))
    held_out = Corpus(corpus.path, replace(corpus.manifest, shards=corpus.shards[n_train:]))
    return train, held_out, int(sizes[n_train - 1])


def label_count(corpus: Corpus, n_docs: int) -> int:
    """Distinct labels among the first ``n_docs`` documents (the paper's T: one topic per newsgroup)."""
    labels: set[str] = set()
    seen = 0
    for block in corpus.iter_blocks():
        take = min(block.n_docs, n_docs - seen)
        if block.labels is not None:
            labels.update(str(label) for label in block.labels[:take])
        seen += take
        if seen >= n_docs:
            break
    return max(len(labels), 1)


# ------------------------------------------------------------------------------------ running


def run_arm(arm: Arm, base: dict[str, Any], train: Corpus, test: Corpus, out: Path,
            request: ReproduceRequest) -> list[dict[str, Any]]:
    """Run one arm's seeds side by side; its records, each tagged with the arm's name.

    The arm's stream checkpoints every :data:`CHECKPOINT_EVERY` evaluation points and its records
    are saved in ``ARM/records.json`` when it ends. With ``request.resume`` a finished arm is read
    back (its settings must be the ones asked for) and an interrupted one continues from its
    last checkpoint, bit for bit the stream it would have been.
    """
    config = stream_config(**{**base, **arm.settings})
    arm_out = out / "arms" / arm.name.replace("/", "-")
    finished = arm_out / ARM_RECORDS
    settings = as_json(config.fingerprint())
    if request.resume and (saved := read_saved(finished, settings, "records", "may2014 arm")) is not None:
        log.info("may2014: arm %s finished earlier; its %d records are read back", arm.name, len(saved))
        return list(saved)
    finished.unlink(missing_ok=True)  # a finished arm of an earlier run is not this run's
    resume = request.resume and (arm_out / "state" / "stream.json").is_file()
    log.info("may2014: arm %s (%d runs)%s", arm.name, config.run.runs, ", resumed" if resume else "")
    result = run_stream(train, config, client=request.client, test_corpus=test, out=arm_out, resume=resume,
                        checkpoint_every=CHECKPOINT_EVERY, progress=request.progress)
    records = [{**record, "arm": arm.name} for record in result.records]
    write_saved(finished, {"settings": settings, "records": records})
    return records


def final_values(records: Sequence[dict[str, Any]], arm: str, metric: str = "nmi_out") -> np.ndarray:
    """Each run's last value of ``metric`` in one arm, in run order."""
    last: dict[int, tuple[int, float]] = {}
    for record in records:
        if record["arm"] == arm and record.get(metric) is not None:
            point = int(record["point"])
            if int(record["run"]) not in last or point >= last[int(record["run"])][0]:
                last[int(record["run"])] = (point, float(record[metric]))
    return np.array([last[run][1] for run in sorted(last)], dtype=np.float64)


def mean_sd(values: np.ndarray) -> tuple[float, float]:
    """Mean and sample standard deviation (ddof=1; 0 for one value), as May et al. plot them.

    Examples
    --------
    >>> mean_sd(np.array([0.2, 0.4]))
    (0.30000000000000004, 0.14142135623730953)
    """
    if values.size == 0:
        return math.nan, math.nan
    return float(values.mean()), float(values.std(ddof=1)) if values.size > 1 else 0.0


def _fmt(values: np.ndarray) -> str:
    mean, sd = mean_sd(values)
    return f"{mean:.3f} ± {sd:.3f} (n={values.size})"


def matches(a: np.ndarray, b: np.ndarray) -> bool:
    """Two arms match when their means differ by less than the larger one-sd band (0.01 at least)."""
    (mean_a, sd_a), (mean_b, sd_b) = mean_sd(a), mean_sd(b)
    return abs(mean_a - mean_b) <= max(sd_a, sd_b, 0.01)


def better(a: np.ndarray, b: np.ndarray) -> bool:
    """``a`` beats ``b`` when its mean is higher by more than the larger one-sd band (0.01 at least)."""
    (mean_a, sd_a), (mean_b, sd_b) = mean_sd(a), mean_sd(b)
    return mean_a - mean_b > max(sd_a, sd_b, 0.01)


# ------------------------------------------------------------------------------------ claims


def claims(records: Sequence[dict[str, Any]], scale: ScaleSettings) -> list[Claim]:
    """The paper's claims beside our final out-of-sample NMI."""
    final = {name: final_values(records, name) for name in {r["arm"] for r in records}}
    rule = "match: means within the larger one-sd band (min 0.01); better: ahead by more than it"
    none_, reservoir, history = final["fixed/none"], final["fixed/reservoir"], final["fixed/history"]
    zero, small = f"init-{scale.init_sizes[0]}", f"init-{scale.init_sizes[1]}"
    largest = f"init-{scale.init_sizes[-1]}"
    steps = [int(r.get("rejuvenation_steps", 0)) for r in records
             if r["arm"] in ("fixed/none", f"{zero}/none", f"{small}/none")]
    out = [
        Claim("From a fixed good initial model, no rejuvenation matches reservoir rejuvenation (out-of-sample NMI)",
              "Fig. 1: the no-rejuvenation and reservoir-1000 bands overlap on diff3, rel3 and sim3 (no numbers "
              "printed)", f"none {_fmt(none_)}; reservoir {_fmt(reservoir)}", matches(none_, reservoir), rule),
        Claim("Rejuvenating from a 1000-token reservoir matches rejuvenating from the whole history",
              "Fig. 1: the reservoir and history bands overlap", f"reservoir {_fmt(reservoir)}; history {_fmt(history)}",
              matches(reservoir, history), rule),
        Claim("A larger initialization sample raises mean NMI and lowers its variance",
              "Fig. 2: mean NMI grows and the band narrows from 0 to 300 documents of initialization",
              "; ".join(f"{size} docs {_fmt(final[f'init-{size}/reservoir'])}" for size in scale.init_sizes)
              + f"; fixed 10% {_fmt(reservoir)}",
              better(reservoir, final[f"{zero}/reservoir"])
              and mean_sd(reservoir)[1] < mean_sd(final[f"{zero}/reservoir"])[1],
              f"held = the fixed 10% initialization beats the {scale.init_sizes[0]}-document one by the rule "
              f"({rule}) and has the smaller sd; {largest} is the largest per-run sample at this scale"),
        Claim("Without a good initialization, rejuvenation is what helps (zero-document init)",
              "not run in the paper: its Fig. 2 arms all rejuvenate; implied by the headline that rejuvenation "
              "can be dropped once initialization is good",
              f"reservoir {_fmt(final[f'{zero}/reservoir'])}; none {_fmt(final[f'{zero}/none'])}",
              better(final[f"{zero}/reservoir"], final[f"{zero}/none"]), rule),
        Claim("The good initialization matters more than rejuvenation",
              "abstract and section 6: performance is dominated by the initialization, not by rejuvenation",
              f"fixed 10% + none {_fmt(none_)}; {zero} docs + reservoir {_fmt(final[f'{zero}/reservoir'])}",
              mean_sd(none_)[0] >= mean_sd(final[f"{zero}/reservoir"])[0],
              "held = the fixed initialization without rejuvenation has at least the mean NMI of the "
              "zero-document initialization with it"),
        Claim("Batch Gibbs over the whole stream is the ceiling",
              "Fig. 2: batch Gibbs (2000 sweeps) above every particle filter",
              f"batch Gibbs {_fmt(final['batch-gibbs'])}; best PF arm "
              f"{max((mean_sd(v)[0], k) for k, v in final.items() if k != 'batch-gibbs')[1]}",
              all(mean_sd(final["batch-gibbs"])[0] >= mean_sd(v)[0] for k, v in final.items() if k != "batch-gibbs"),
              "held = batch Gibbs's mean is at least every particle-filter arm's"),
        Claim("--rejuv 0 runs the particle filter with no rejuvenation at all",
              "section 5: rejuvenation disabled", f"rejuvenation steps counted in the no-rejuvenation arms: "
              f"max {max(steps) if steps else 'none'} over {len(steps)} records",
              bool(steps) and max(steps) == 0, "a count of the MCMC steps the kernels made"),
    ]
    return out


# ------------------------------------------------------------------------------------ figures


def band(records: Sequence[dict[str, Any]], arm: str, metric: str = "nmi_out") -> tuple[np.ndarray, ...]:
    """(x, mean, sd) of one arm: x the documents seen (sweeps for batch Gibbs), sd with ddof=1."""
    by_point: dict[int, list[float]] = {}
    x_of: dict[int, float] = {}
    for record in records:
        if record["arm"] == arm and record.get(metric) is not None:
            by_point.setdefault(int(record["point"]), []).append(float(record[metric]))
            x_of[int(record["point"])] = float(record["docs_seen"] if "sweeps" not in record else record["point"])
    points = sorted(by_point)
    stats = np.array([mean_sd(np.array(by_point[p])) for p in points]).reshape(-1, 2)
    return np.array([x_of[p] for p in points]), stats[:, 0], stats[:, 1]


def draw_figure(records: Sequence[dict[str, Any]], chosen: Sequence[Arm], path: Path, title: str,
                stream_docs: int) -> None:
    """Out-of-sample NMI along the stream, one mean ± sd band per arm, as a PNG (Agg canvas, no pyplot)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7.0, 4.2), dpi=120)
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    for i, arm in enumerate(chosen):
        x, mean, sd = band(records, arm.name)
        if not x.size:
            continue
        color = f"C{i}"
        if arm.settings.get("algorithm") == "gibbs":  # sweeps, not documents: its final value as a line
            axes.axhline(mean[-1], color=color, linestyle="--", label=arm.label)
            axes.axhspan(mean[-1] - sd[-1], mean[-1] + sd[-1], color=color, alpha=0.12)
            continue
        axes.plot(x, mean, color=color, label=arm.label)
        axes.fill_between(x, mean - sd, mean + sd, color=color, alpha=0.2)
    axes.set_xlim(0, stream_docs)
    axes.set_xlabel("documents seen")
    axes.set_ylabel("out-of-sample NMI")
    axes.set_title(title, fontsize=10)
    axes.legend(fontsize=7, loc="lower right")
    figure.tight_layout()
    import io

    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    atomic_write_bytes(path, buffer.getvalue())


# ------------------------------------------------------------------------------------ the paper


def run(request: ReproduceRequest) -> Reproduction:
    """Run every arm of May et al. (2014) at ``request.scale`` and check their claims.

    Parameters
    ----------
    request : ReproduceRequest
        One labeled store (``--corpus``), optionally a labeled test store (``--test``).

    Returns
    -------
    Reproduction
    """
    if len(request.corpora) != 1:
        raise InvalidParameterError(f"may2014 takes one labeled store (--corpus); got {len(request.corpora)}")
    scale = SCALES[request.scale]
    train, test, n_stream = split_stores(request.corpora[0], request.test)
    n_topics = label_count(train, n_stream)
    base = {**PAPER_SETTINGS, "algorithm": "pf", "n_topics": n_topics, "n_particles": scale.n_particles,
            "runs": scale.runs, "seed": request.seed, "init_select": "nmi",
            "eval_every": max(1, n_stream // N_EVAL_POINTS)}
    shared = {"init_docs": 0.1, "init_sweeps": scale.init_sweeps, "init_trials": scale.init_trials,
              "init_shared": True}
    records: list[dict[str, Any]] = []
    init_model: str | None = None
    for arm in arms(scale):
        settings = dict(base)
        if arm.fixed_init:
            settings.update(shared if init_model is None else {"init_docs": 0.1, "init_model": init_model})
        records += run_arm(arm, settings, train, test, request.out, request)
        if arm.fixed_init and init_model is None:
            init_model = str(request.out / "arms" / arm.name.replace("/", "-") / "init")
    trace = request.out / "trace.jsonl"
    atomic_write_bytes(trace, "".join(json.dumps(r, sort_keys=True, default=str) + "\n" for r in records).encode())
    figures = {"fig1": "Fig. 1: one fixed initial model, rejuvenation or not",
               "fig2": "Fig. 2: initialization sample size (reservoir rejuvenation)",
               "grid": "initialization x rejuvenation"}
    names = []
    for key, title in figures.items():
        name = f"may2014-{key}.png"
        draw_figure(records, [a for a in arms(scale) if key in a.figures], request.out / name,
                    f"{title}; T={n_topics}, P={scale.n_particles}, {scale.runs} runs", n_stream)
        names.append(name)
    return Reproduction(
        paper="may2014", citation=CITATION, corpora=[str(c.path) for c in request.corpora], scale=request.scale,
        claims=claims(records, scale), figures=names, trace=trace.name,
        settings={"base": base, "fixed_init": shared, "scale": scale.__dict__, "stream_docs": n_stream,
                  "test": str(test.path) + ("" if request.test is not None else " (last shards of --corpus)"),
                  "test_docs": len(test), "arms": {a.name: a.settings for a in arms(scale)}},
    )


PAPER = register(Paper(
    name="may2014", citation=CITATION,
    corpora="one labeled store (the stream; --test: a labeled test store, else its last shards are held out)",
    run=run, resumable=True,
))
