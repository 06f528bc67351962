"""CLI command ``topicflow stream``: the streaming samplers, many runs side by side on the cluster."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import click

from topicflow._typing import (
    GibbsInit,
    HeldOutMode,
    InitSelection,
    OutputFormat,
    RejuvenationSource,
    ResamplingScheme,
    SGSInit,
    choices,
)
from topicflow.cli._aliases import renamed_options
from topicflow.cli._common import (
    LOCATION,
    apply_preset,
    cluster_options,
    preset_option,
    progress_reporter,
    reports_errors,
    storage_options_option,
)
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import save_model
from topicflow.io.storage import Location
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.streaming import TraceRotation, run_stream
from topicflow.pipeline.streaming.config import (
    STREAM_ALGORITHMS,
    StreamConfig,
    StreamResult,
)


@click.command(**renamed_options({"--alpha": "--doc-topic-prior", "--beta": "--topic-word-prior",
                                   "--max-iters": "--max-iter"}))
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--out", required=True, type=LOCATION,
              help="Directory for the trace, the summary, the saved state and the model (OUT/model); a path, or a "
              "URL (docs/storage.md).")
@click.option("--algo", "algorithm", type=click.Choice(list(STREAM_ALGORITHMS)), default="pf", show_default=True,
              help="Batch collapsed Gibbs, o-LDA, incremental Gibbs, the particle filter (Canini et al. 2009), "
              "streaming Gibbs with decay or its parameter-server form (Gao et al. 2016).")
@click.option("--topics", "n_topics", default=None, type=click.IntRange(min=1),
              help="Number of topics K (required unless --preset sets it).")
@click.option("--doc-topic-prior", default=0.1, show_default=True, type=float,
              help="Document-topic prior alpha (symmetric).")
@click.option("--topic-word-prior", default=0.01, show_default=True, type=float,
              help="Topic-word prior beta (symmetric).")
@click.option("--particles", default=100, show_default=True, type=click.IntRange(min=1), help="pf: particles P.")
@click.option("--ess", default=0.5, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="pf: resample when the effective sample size falls below this share of P.")
@click.option("--resampling", type=click.Choice(choices(ResamplingScheme)),
              default="systematic", show_default=True, help="pf: resampling scheme.")
@click.option("--rejuv", default=30, show_default=True, type=click.IntRange(min=0),
              help="Tokens resampled per rejuvenation (pf: after resampling; incgibbs: after each token).")
@click.option("--rejuv-source", type=click.Choice(choices(RejuvenationSource)), default="reservoir",
              show_default=True, help="Where rejuvenation tokens are drawn from.")
@click.option("--reservoir", "reservoir_size", default=1000, show_default=True, type=click.IntRange(min=1),
              help="Tokens in the reservoir (or the window).")
@click.option("--init-docs", default="100", show_default=True, callback=lambda _c, _p, v: parse_init_docs(v),
              help="Prefix fitted by batch Gibbs to initialize: documents (0: none, the particles start empty), "
              "or a share of the stream such as 10% or 0.1 (May et al. 2014).")
@click.option("--init-start", type=click.Choice(choices(GibbsInit)), default="sequential", show_default=True,
              help="Start of each initialization's Gibbs chain: sequential draws, or uniform topics (May et al.).")
@click.option("--init-shared", is_flag=True,
              help="One initialization for every run, the best of --init-trials; saved as OUT/init (May et al.).")
@click.option("--init-model", default=None, type=LOCATION,
              help="Start every run from a saved initial model (the OUT/init of an --init-shared stream; a path "
                   "or a URL).")
@click.option("--init-sweeps", default=100, show_default=True, type=click.IntRange(min=1),
              help="Gibbs sweeps of each initialization.")
@click.option("--init-trials", default=1, show_default=True, type=click.IntRange(min=1),
              help="Independent initializations per run; the best is kept (May et al. 2014).")
@click.option("--init-select", type=click.Choice(choices(InitSelection)), default=None,
              help="How to pick the best initialization [default: nmi if the store has labels, else perplexity].")
@click.option("--samples", "independent_samples", default=1, show_default=True, type=click.IntRange(min=1),
              help="olda/incgibbs: independent samples per run; evaluations read the one of highest posterior "
              "probability (Canini et al. 2009: 100).")
@click.option("--heldout", "heldout_mode", type=click.Choice(choices(HeldOutMode)), default="fold_in",
              show_default=True, help="olda/incgibbs/pf with --test: also score test documents observed as the next "
              "documents, then restore the sampler (next_docs; needs --rejuv-source history).")
@click.option("--runs", default=1, show_default=True, type=click.IntRange(min=1),
              help="Independent runs (seeds SEED, SEED+1, ...), side by side on the cluster.")
@click.option("--eval-every", default=100, show_default=True, type=click.IntRange(min=1),
              help="Documents between trace records (sweeps for gibbs).")
@click.option("--sweeps", default=200, show_default=True, type=click.IntRange(min=1), help="gibbs: sweeps.")
@click.option("--optimize-every", default=0, show_default=True, type=click.IntRange(min=0),
              help="gibbs: learn asymmetric alpha and beta every N sweeps after 50 burn-in sweeps (0: fixed).")
@click.option("--gibbs-start", type=click.Choice(choices(GibbsInit)), default="random", show_default=True,
              help="gibbs: first assignments: uniform topics, each token drawn from its conditional given the "
                   "tokens before it (fewer sweeps to a given perplexity), or that draw after one SCVB0 pass "
                   "(scvb0: the fastest to the early targets on large corpora; docs/gibbs.md).")
@click.option("--gibbs-partitions", default=1, show_default=True, type=click.IntRange(min=1),
              help="gibbs: partitioned sweeps over P parts of the documents and of the words, P tasks at a time "
                   "(n_k up to 1/P sweep stale; 1: the sequential sampler). The chain depends on P.")
@click.option("--gibbs-threads", default=1, show_default=True, type=click.IntRange(min=1),
              help="gibbs: threads running a partitioned sweep's tasks (give the worker the cores: "
                   "--threads-per-worker); the chain does not depend on it.")
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(min=1),
              help="sgs/dsgs: documents per minibatch.")
@click.option("--decay", default=1.0, show_default=True, type=click.FloatRange(0, 1, min_open=True),
              help="sgs/dsgs: factor lambda applied to the topic-word counts after each minibatch.")
@click.option("--max-iter", default=100, show_default=True, type=click.IntRange(min=1),
              help="sgs/dsgs: sweeps of a minibatch at most.")
@click.option("--patience", default=10, show_default=True, type=click.IntRange(min=1),
              help="sgs/dsgs: stop a minibatch after this many sweeps without a better training perplexity.")
@click.option("--sgs-init", type=click.Choice(choices(SGSInit)), default="posterior-token", show_default=True,
              help="sgs/dsgs: start of each minibatch's assignments: posterior-token (each token drawn given the "
                   "tokens before it), posterior-document (each document drawn given the documents before it: a "
                   "sequential pass and --sgs-init-sweeps sweeps over it), random.")
@click.option("--sgs-init-sweeps", default=5, show_default=True, type=click.IntRange(min=0),
              help="sgs/dsgs with --sgs-init posterior-document: sweeps over each document alone.")
@click.option("--decay-beta/--no-decay-beta", default=False, show_default=True,
              help="sgs/dsgs: decay the prior beta with the counts (beta * decay**t + N, Gao et al.'s recurrence) "
                   "instead of the counts only (beta + N, their Algorithm 4).")
@click.option("--staleness", default=None, type=click.IntRange(min=0),
              help="dsgs: a minibatch may miss at most this many earlier ones (default: fully asynchronous).")
@click.option("--sync-first", default=0, show_default=True, type=click.IntRange(min=0),
              help="dsgs: minibatches run in order before the sampler loops go asynchronous.")
@click.option("--max-docs", default=None, type=click.IntRange(min=1), help="Stop after this many documents.")
@click.option("--test", "test_store", default=None, type=click.Path(file_okay=False),
              help="Test store scored at every record: out-of-sample NMI (with labels) and perplexity.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--resume", is_flag=True, help="Continue the stream saved in OUT (the store may have grown).")
@click.option("--checkpoint-every", default=0, show_default=True, type=click.IntRange(min=0),
              help="Save the runs' state every N records (0: at the end only).")
@click.option("--trace-max-bytes", default=16 * 2**20, show_default=True, type=click.IntRange(min=1),
              help="Rotate OUT/trace.jsonl into a compressed trace-NNNNNN.jsonl.gz segment beyond this size.")
@click.option("--trace-keep", default=4, show_default=True, type=click.IntRange(min=0),
              help="Rotated trace segments kept (older ones are deleted; 0: none).")
@click.option("--summary-points", default=1000, show_default=True, type=click.IntRange(min=1),
              help="OUT/summary.json keeps the last this many evaluation points.")
@click.option("--overwrite", is_flag=True, help="Replace an existing OUT.")
@click.option("--format", "output_format", type=click.Choice(choices(OutputFormat)), default="text", show_default=True)
@preset_option("stream")
@storage_options_option
@cluster_options
@reports_errors
def stream(store: str, out: str | Path, algorithm: str, n_topics: int | None, doc_topic_prior: float, topic_word_prior: float,
           particles: int,
           ess: float, resampling: str, rejuv: int, rejuv_source: str, reservoir_size: int, init_docs: int,
           init_sweeps: int, init_trials: int, init_select: str | None, runs: int, eval_every: int, sweeps: int,
           optimize_every: int, gibbs_start: str, gibbs_partitions: int, gibbs_threads: int, batch_size: int,
           decay: float, max_iter: int, patience: int, sgs_init: str,
           sgs_init_sweeps: int, decay_beta: bool,
           staleness: int | None, sync_first: int, independent_samples: int, heldout_mode: str,
           max_docs: int | None, test_store: str | None, seed: int, resume: bool, checkpoint_every: int,
           trace_max_bytes: int, trace_keep: int, summary_points: int, overwrite: bool, output_format: str, preset: str | None, cluster: ClusterConfig,
           init_start: str = "sequential", init_shared: bool = False, init_model: str | Path | None = None) -> None:
    """Run a streaming sampler over STORE in store order; write OUT/trace.jsonl, summary.json and model.

    With --algo dsgs, --workers is the number of sampler loops (one per local worker process).
    With --preset, a paper's settings fill every option you do not type.
    """
    from topicflow.io.output_paths import (
        STREAM_MARKERS,
        exclusive_output,
        prepare_output,
    )

    # With --resume OUT is read and written over; without, it must be new (or --overwrite).
    location = prepare_output(out, what="stream output", option="stream --out", overwrite=overwrite or resume,
                              markers=STREAM_MARKERS)
    corpus = Corpus.open(store)
    test_corpus = Corpus.open(test_store) if test_store else None
    settings: dict[str, Any] = dict(
        n_particles=particles, ess_threshold=ess, resampling=resampling, rejuvenation_steps=rejuv,
        rejuvenation_source=rejuv_source, reservoir_size=reservoir_size, init_docs=init_docs,
        init_sweeps=init_sweeps, init_trials=init_trials,
        init_select=init_select or ("nmi" if corpus.has_labels else "perplexity"),
        runs=runs, eval_every=eval_every, sweeps=sweeps, optimize_every=optimize_every, gibbs_start=gibbs_start,
        gibbs_partitions=gibbs_partitions, gibbs_threads=gibbs_threads, batch_size=batch_size,
        decay=decay, max_iter=max_iter, patience=patience, sgs_init=sgs_init, sgs_init_sweeps=sgs_init_sweeps,
        decay_beta=decay_beta, staleness=staleness,
        sync_first=sync_first, n_workers=None, max_docs=max_docs, seed=seed,
        init_start=init_start, init_shared=init_shared, init_model=None if init_model is None else str(init_model),
        independent_samples=independent_samples, heldout_mode=heldout_mode,
    )
    values, chosen = apply_preset(preset, "stream", dict(
        algorithm=algorithm, n_topics=n_topics, doc_topic_prior=doc_topic_prior, topic_word_prior=topic_word_prior,
        **settings), OPTION_OF)
    algorithm, n_topics = values.pop("algorithm"), values.pop("n_topics")
    if n_topics is None:
        raise click.UsageError("Missing option '--topics' (or a --preset that sets it).")
    if algorithm == "dsgs" and "n_workers" not in chosen:
        values["n_workers"] = cluster.workers
    runs = values["runs"]
    config = StreamConfig.create(algorithm=algorithm, n_topics=n_topics,  # type: ignore[arg-type]
                                 doc_topic_prior=values.pop("doc_topic_prior"),
                                 topic_word_prior=values.pop("topic_word_prior"),
                                 **applicable_settings(algorithm, values, chosen))
    click.echo(f"{'resuming' if resume else 'running'} {runs} run(s) of {algorithm} with K={n_topics} on {corpus!r}",
               err=True)
    # Of two streams given the same OUT at once, the second is refused (a local OUT only).
    with exclusive_output(location, what="stream output", option="stream --out", markers=STREAM_MARKERS,
                          overwrite=overwrite or resume):
        with connect(cluster) as client:
            click.echo(f"dashboard: {client.dashboard_link}", err=True)
            if config.algorithm == "gibbs" and config.gibbs.gibbs_partitions > 1:
                slots = min(client.nthreads().values(), default=1)
                if slots < config.gibbs.gibbs_threads:
                    click.echo(f"note: each run's sampler uses {config.gibbs.gibbs_threads} threads in a worker of "
                               f"{slots} thread(s); give the workers the cores (--threads-per-worker "
                               f"{config.gibbs.gibbs_threads}), or the threads share them", err=True)
            started = time.perf_counter()
            result = run_stream(corpus, config, client=client, test_corpus=test_corpus, out=location, resume=resume,
                                checkpoint_every=checkpoint_every, progress=progress_reporter(),
                                trace=TraceRotation(trace_max_bytes, trace_keep, summary_points))
        save_model(location / "model", result.model, overwrite=True)
        plot = write_plots(result, location)
    final = result.summary[-1]
    if output_format == "json":
        click.echo(json.dumps({"final": final, "model": str(location / "model"), "plot": plot}, indent=2,
                              sort_keys=True))
    else:
        for line in summary_lines(result):
            click.echo(line)
    click.echo(f"wrote {location / 'trace.jsonl'}, {location / 'summary.json'} and the model {location / 'model'} "
               f"({time.perf_counter() - started:.1f} s)", err=True)


def summary_lines(result: StreamResult) -> list[str]:
    """A table of the evaluation points: documents seen and the mean (std) of the main metrics."""
    names = [n for n in ("nmi_in", "nmi_train_best", "nmi_out", "nmi_out_next", "perplexity_out", "log_evidence_per_token", "log_likelihood_per_token",
                         "perplexity_train")
             if any(f"{n}_mean" in row for row in result.summary)]
    header = "point      docs  " + "  ".join(f"{n:>22s}" for n in names)
    lines = [header]
    for row in result.summary:
        cells = []
        for n in names:
            mean, std = row.get(f"{n}_mean"), row.get(f"{n}_std")
            cells.append(f"{'':>22s}" if mean is None else f"{mean:>13.4f} ({std:6.4f})")
        lines.append(f"{row['point']:5d} {row['docs_seen']:9d}  " + "  ".join(cells))
    return lines


def write_plots(result: StreamResult, out: Location) -> str | None:
    """NMI against documents seen (sweeps for gibbs), mean and one standard deviation over runs, if labeled."""
    from topicflow.cli.plots import plot_metric_band
    from topicflow.io.output_paths import staged_output_file

    traces = _traces(result.records)
    if not traces:
        return None
    path = out / "nmi.png"
    with staged_output_file(path) as local:
        plot_metric_band(traces, ylabel="NMI", out=local,
                         title=f"{result.config.algorithm}, {result.config.run.runs} run(s)")
    return str(path)


def _traces(records: list[dict[str, Any]]) -> dict[str, list[list[tuple[int, float]]]]:
    traces: dict[str, list[list[tuple[int, float]]]] = {}
    for name in ("nmi_in", "nmi_train_best", "nmi_out", "nmi_out_next"):
        runs: dict[int, list[tuple[int, float]]] = {}
        for record in records:
            if record.get(name) is not None:
                runs.setdefault(int(record["run"]), []).append((int(record["point"]), float(record[name])))
        if runs:
            traces[name] = [runs[r] for r in sorted(runs)]
    return traces


COMMANDS = [stream]


def parse_init_docs(value: str | float) -> int | float:
    """``--init-docs``: a number of documents (``100``, ``0``) or a share of the stream (``10%``, ``0.1``).

    Parameters
    ----------
    value : str, int or float
        What was typed.

    Returns
    -------
    int or float
        Documents as an int, a share in (0, 1) as a float.

    Raises
    ------
    click.BadParameter
        Neither.

    Examples
    --------
    >>> parse_init_docs("10%"), parse_init_docs("0.1"), parse_init_docs("300")
    (0.1, 0.1, 300)
    """
    text = str(value).strip()
    try:
        if text.endswith("%"):
            share = float(text[:-1]) / 100.0
        elif text.isdigit():
            return int(text)
        else:
            share = float(text)
    except ValueError:
        share = -1.0
    if not 0.0 < share < 1.0:
        raise click.BadParameter(f"{value!r} is neither a number of documents (0, 100, ...) nor a share of the "
                                 "stream in (0, 1) such as 10% or 0.1")
    return share


#: Command-line option of each setting, where the names differ.
OPTION_OF = {"n_particles": "particles", "ess_threshold": "ess", "rejuvenation_steps": "rejuv",
             "rejuvenation_source": "rejuv_source"}


def applicable_settings(algorithm: str, settings: dict[str, Any], chosen: set[str]) -> dict[str, Any]:
    """The settings of ``algorithm`` and of every run, plus any option of another algorithm the user chose.

    An option the user typed (or a preset set) that ``algorithm`` does not take is passed on, so that
    :meth:`StreamConfig.create` refuses it by name; the defaults of other algorithms' options are not.
    """
    own = StreamConfig.setting_names(algorithm)
    return {name: value for name, value in settings.items() if name in own or name in chosen}
