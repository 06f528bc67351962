"""CLI commands for variational models: fit, topics, infer, evaluate, export."""
from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import click
import numpy as np

from topicflow._typing import (
    DocStart,
    EStepKind,
    Executor,
    ExportFormat,
    Family,
    GibbsInit,
    HDPMethod,
    HeldoutProtocol,
    HybridAlphaStats,
    HybridInit,
    LearningMethod,
    OutputFormat,
    choices,
)
from topicflow.cli import LazyDefault
from topicflow.cli._aliases import renamed_options
from topicflow.cli._common import (
    LOCATION,
    apply_preset,
    cluster_options,
    model_location,
    preset_option,
    progress_reporter,
    reports_errors,
    storage_options_option,
)
from topicflow.errors import InvalidParameterError
from topicflow.metrics.classification import DEFAULT_FOLDS, FeatureTransform
from topicflow.metrics.left_to_right import DEFAULT_PARTICLES
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.presets import (
    INFVOC_PRESETS,
    TREE_PRESETS,
    is_infvoc_preset,
    is_tree_preset,
)

if TYPE_CHECKING:
    from topicflow.api.hdp import HDP
    from topicflow.api.lda import LDA
    from topicflow.metrics.classification import ClassificationScores
    from topicflow.pipeline.evaluation.features import FeaturesResult
    from topicflow.pipeline.evaluation.heldout import HeldoutResult
    from topicflow.pipeline.policies import CheckpointPolicy

log = logging.getLogger(__name__)

#: Methods of ``fit`` by family; the collapsed ones run :func:`topicflow.pipeline.collapsed.fit_collapsed`.
LDA_METHODS: tuple[str, ...] = (*choices(LearningMethod), "scvb0", "gibbs")
HDP_METHODS: tuple[str, ...] = choices(HDPMethod)
FIT_METHODS: tuple[str, ...] = (*LDA_METHODS, *HDP_METHODS)
COLLAPSED_METHODS = ("scvb0", *HDP_METHODS)
#: Passes of the collapsed methods when --passes is not given (Bleier's Fig. 1: 30 iterations).
COLLAPSED_PASSES = 30
#: The click parameter of an HDP setting whose API name differs.
HDP_OPTION_OF = {"alpha": "alpha_init", "gamma": "gamma_init", "learn_alpha": "fixed_alpha",
                 "learn_gamma": "fixed_gamma"}

_LDA_VB = ("batch", "online", "svb")
#: The methods each option of ``fit`` applies to, where that is not every method. Typed with another
#: collapsed method, or (an option no LDA VB method uses: the collapsed methods' and Gibbs's) with an LDA
#: VB method, it is refused.
OPTION_METHODS: dict[str, tuple[str, ...]] = {
    "n_topics": LDA_METHODS, "doc_topic_prior": LDA_METHODS,
    "max_iter": _LDA_VB, "tol": _LDA_VB, "max_doc_iter": _LDA_VB, "doc_tol": _LDA_VB, "tau0": ("online",),
    "kappa": ("online",), "executor": ("online", "svb"), "estep": _LDA_VB, "samples": _LDA_VB,
    "hybrid_init": _LDA_VB, "hybrid_alpha_stats": _LDA_VB, "optimize_topic_word_prior": _LDA_VB,
    "seed_words": _LDA_VB, "seed_strength": _LDA_VB, "seed_off_topic": _LDA_VB, "doc_topic_prior_init": _LDA_VB,
    "warm_start": _LDA_VB,
    "passes": ("online", *COLLAPSED_METHODS), "batch_size": ("online", "svb", "scvb0", "pcsvb0"),
    "shuffle_window": ("online", "svb", "scvb0", "pcsvb0"), "burn_in": (*_LDA_VB, "scvb0", "pcsvb0"),
    "truncation": HDP_METHODS, "alpha_init": HDP_METHODS, "gamma_init": HDP_METHODS, "fixed_alpha": HDP_METHODS,
    "fixed_gamma": HDP_METHODS, "alpha_floor": HDP_METHODS, "topics_in_use_share": HDP_METHODS,
    "hyper_step": ("pcsvb0",), "topic_word_step": ("scvb0", "pcsvb0"), "doc_step": ("scvb0", "pcsvb0"),
    "step_power": ("scvb0", "pcsvb0"), "doc_start": ("scvb0", "pcsvb0"), "clumping": HDP_METHODS,
    "keep_doc_state": ("pcsvb0",), "test_store": COLLAPSED_METHODS, "eval_every": COLLAPSED_METHODS,
    "optimize_every": ("gibbs",), "sampler_threads": ("gibbs",), "gibbs_start": ("gibbs",),
}


def read_seed_words(path: str | None) -> tuple[Any, ...]:
    """Read the seed-word file given by ``--seed-words``.

    The file format is described in :func:`topicflow.models.lda.priors.parse_seed_words`.

    Parameters
    ----------
    path : str or None
        The file, or None when the option was not given.

    Returns
    -------
    tuple of SeedTopic
        The seed topics in file order; empty when ``path`` is None.

    Raises
    ------
    InvalidParameterError
        If the file cannot be read or decoded, or a line is malformed.
    """
    from topicflow.models.lda.priors import parse_seed_words

    if path is None:
        return ()
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidParameterError(f"cannot read seed-words file {path!r}: {exc}", path=path) from exc
    return tuple(parse_seed_words(text, source=path))


@click.command(**renamed_options({"--alpha": "--doc-topic-prior", "--eta": "--topic-word-prior",
                                   "--optimize-eta": "--optimize-topic-word-prior", "--iterations": "--max-iter",
                                   "--doc-iterations": "--max-doc-iter"}))
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--model", "model_path", required=True, type=LOCATION, help="Directory to save the model to (a path, or a URL: docs/storage.md).")
@click.option("--topics", "n_topics", default=None, type=click.IntRange(min=1),
              help="Number of topics K (required unless --preset sets it).")
@click.option("--family", type=click.Choice([f for f in choices(Family) if f != "adaptor_grammar"]), default=None,
              help="Model family: lda, or hdp (the hierarchical Dirichlet process, docs/hdp.md), or infvoc (online "
                   "LDA with an infinite vocabulary, docs/infvoc.md) [default: the method's; lda without --method]")
@click.option("--method", type=click.Choice(FIT_METHODS), default=None,
              help="LDA: batch VB (Mr. LDA), online VB over minibatches (Hoffman et al. 2010), streaming VB "
                   "(svb: each minibatch fitted by batch VB with the posterior so far as its prior; "
                   "Broderick et al. 2013), or scvb0 (stochastic collapsed VB, Foulds et al. 2013). HDP: pcsvb0 "
                   "(Bleier's practical collapsed stochastic VB) or pcvb0 (Sato et al.'s batch collapsed VB). "
                   "[default: batch for lda, pcsvb0 for hdp]")
@click.option("--truncation", default=None, type=click.IntRange(min=2),
              help="HDP: truncation T, the number of sticks (not of topics; Bleier: 200)  [default: 200]. infvoc: "
                   "T, the words each topic's TOS keeps at a contraction  [default: 1000]")
@click.option("--clumping", is_flag=True,
              help="HDP: one update per distinct term of a document, scaled by its count (Bleier sec. 5); pcvb0 keeps "
                   "one q per distinct term instead of one per token.")
@click.option("--alpha-init", default=None, type=click.FloatRange(min=0, min_open=True),
              help="HDP: starting document concentration alpha  [default: 1]")
@click.option("--gamma-init", default=None, type=click.FloatRange(min=0, min_open=True),
              help="HDP: starting top-level concentration gamma  [default: 1]")
@click.option("--fixed-alpha", is_flag=True, help="HDP: keep alpha at --alpha-init (no eq. 5/12 update).")
@click.option("--fixed-gamma", is_flag=True, help="HDP: keep gamma at --gamma-init (no eq. 6 update).")
@click.option("--alpha-floor", default=None, type=click.FloatRange(min=0, min_open=True),
              help="HDP: lower bound of alpha after each update  [default: 0.001]")
@click.option("--topic-word-step", default=None, metavar="S,TAU",
              help="pcsvb0, scvb0: step sizes s/(tau+t)^kappa of the topic-word statistics  [default: 10,1000]")
@click.option("--doc-step", default=None, metavar="S,TAU",
              help="pcsvb0, scvb0: step sizes of a document's topic statistics  [default: 1,10]")
@click.option("--hyper-step", default=None, metavar="S,TAU",
              help="pcsvb0: step sizes of the sticks and hyperparameters  [default: 5,100]")
@click.option("--step-power", default=None, type=click.FloatRange(0.5, 1.0, min_open=True),
              help="pcsvb0, scvb0: kappa of the step sizes  [default: 0.9]")
@click.option("--doc-start", type=click.Choice(choices(DocStart)), default=None,
              help="pcsvb0, scvb0: a document's topic statistics at its first visit  [default: random]")
@click.option("--keep-doc-state", is_flag=True,
              help="pcsvb0: keep each document's topic statistics between passes (Algorithm 1) instead of "
                   "starting them afresh at each visit.")
@click.option("--topics-in-use-share", default=None, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="HDP: a topic is in use when it holds at least this share of the tokens  [default: 0.001]")
@click.option("--test", "test_store", default=None, type=click.Path(file_okay=False),
              help="pcsvb0, pcvb0, scvb0: held-out store scored along the fit (70%% of each document's tokens "
                   "fold in, 30%% are scored).")
@click.option("--eval-every", default=None, type=click.IntRange(min=0),
              help="pcsvb0, pcvb0, scvb0 with --test: score every N documents seen (0: at the end)  [default: 0]")
@click.option("--max-iter", default=50, show_default=True, type=click.IntRange(min=1),
              help="Maximum batch VB iterations (svb: per minibatch; tree LDA with --inference gibbs: sweeps, "
                   "200 when not given).")
@click.option("--tol", default=None, type=float,
              help="Batch and svb: stop at this relative ELBO change of one iteration (svb: of the minibatch)  "
                   "[default: batch 1e-3, svb 1e-4]")
@click.option("--batch-size", default=None, type=click.IntRange(min=1),
              help="Online and svb: documents per minibatch S [default: 256]. pcsvb0 and scvb0: documents per "
                   "minibatch [default: none, word by word].")
@click.option("--tau0", default=10.0, show_default=True, type=float, help="Online: delay of the step sizes (tau0 + t)^-kappa (infvoc: 64 when not given).")
@click.option("--kappa", default=0.7, show_default=True, type=float, help="Online: forgetting rate, in [0, 1] (infvoc: 0.8 when not given).")
@click.option("--passes", default=None, type=click.IntRange(min=1),
              help="Online, pcsvb0, pcvb0, scvb0: passes over the corpus  [default: 1 online, 30 otherwise]")
@click.option("--shuffle-window", default=0, show_default=True, type=click.IntRange(min=0),
              help="Online: visit documents in random order within windows of this many documents (0: store order).")
@click.option("--executor", type=click.Choice(list(choices(Executor))), default="auto", show_default=True,
              help="Online: where minibatch E-steps run. threads: a thread pool of this process, no cluster "
                   "(fastest on one machine); servers: one actor per Dask worker.")
@click.option("--estep", type=click.Choice(choices(EStepKind)), default="vb", show_default=True,
              help="Dense VB E-step, or Gibbs sampling within VB (sparse; faster at large K).")
@click.option("--burn-in", default=None, type=click.IntRange(min=0),
              help="Hybrid: discarded sweeps per document [default: 5]. pcsvb0, scvb0: passes over a document's words "
                   "that update only its statistics [default: 0 for pcsvb0, 1 for scvb0 (Foulds et al.)].")
@click.option("--samples", default=5, show_default=True, type=click.IntRange(min=1), help="Hybrid: kept sweeps per document.")
@click.option("--hybrid-init", type=click.Choice(choices(HybridInit)), default="progressive", show_default=True,
              help="Hybrid: start each document's chain by drawing tokens in turn, or from random topics (Zhai 2014).")
@click.option("--hybrid-alpha-stats", type=click.Choice(choices(HybridAlphaStats)), default="mean", show_default=True,
              help="Hybrid: alpha-update statistics from the mean kept counts, or averaged over the kept sweeps.")
@click.option("--doc-topic-prior", default="auto", show_default=True,
              help="Document-topic prior alpha: auto (asymmetric, Newton-Raphson), symmetric (learned), or a fixed value. "
                   "scvb0: a fixed value (auto: Bleier's 0.1).")
@click.option("--topic-word-prior", default=0.01, show_default=True, type=float, help="Topic-word prior eta.")
@click.option("--optimize-topic-word-prior", is_flag=True, help="Learn a symmetric eta by Newton-Raphson.")
@click.option("--seed-words", type=click.Path(dir_okay=False), default=None, help="Informed priors: seeded topics and their words.")
@click.option("--seed-strength", default=10.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Prior of a seed word in its topic (Mr. LDA: 10, with --topic-word-prior 0.01 elsewhere).")
@click.option("--seed-off-topic", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Push-out: prior of a seed word in every other topic (default: --topic-word-prior, as Mr. LDA).")
@click.option("--doc-topic-prior-init", default=None, type=click.FloatRange(min=0, min_open=True),
              help="Start of a learned alpha (auto/symmetric); default min(1, 20/K) for batch VB, 1/K otherwise "
                   "(Mr. LDA's experiments: 50/K).")
@click.option("--max-doc-iter", default=100, show_default=True, type=click.IntRange(min=1), help="Maximum E-step iterations per document.")
@click.option("--doc-tol", default=1e-3, show_default=True, type=float, help="E-step stops at this mean absolute change of gamma.")
@click.option("--warm-start/--cold-start", default=False, show_default=True,
              help="Batch: after 10 cold iterations, start each document's E-step from its previous gamma.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--init-shape", default=100.0, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Shape s of the Gamma(s, 1/s) entries of the random starting topics; smaller starts them "
                   "further apart.")
@click.option("--checkpoint-every", default=None, type=click.IntRange(min=1),
              help="Write the driver state every N iterations (batch) or minibatches (online).")
@click.option("--checkpoint", "checkpoint_path", default=None, type=LOCATION,
              help="Checkpoint directory (default: MODEL.checkpoint beside the model).")
@click.option("--resume", is_flag=True, help="Continue from the checkpoint of an interrupted run with the same settings.")
@click.option("--doc-topics", type=LOCATION, default=None, help="Also write normalized document topics to this zarr path.")
@click.option("--split-every", default=None, type=click.IntRange(min=2),
              help="Fan-in of the statistics tree reduction (default: topicflow.split-every, or 2 for batch VB "
                   "when 8 x K x V >= 256 MB).")
@click.option("--overwrite", is_flag=True, help="Replace an existing model / doc-topics output.")
@click.option("--prior-tree", default=None, type=click.Path(file_okay=False),
              help="Tree LDA (family tree_lda): the prior tree built by `topicflow tree build` (docs/tree-lda.md).")
@click.option("--inference", type=click.Choice(["vb", "hybrid", "gibbs"]), default="vb", show_default=True,
              help="Tree LDA: variational or hybrid (Gibbs within VB) E-step, or collapsed Gibbs sampling "
                   "(--max-iter sweeps, default 200; a fixed --doc-topic-prior, default 1/K).")
@click.option("--sparse", "sparse_gibbs", is_flag=True,
              help="Tree LDA with --inference gibbs: the sparse bucket sampler (same conditional, other draws; "
                   "pays off only at large K).")
@click.option("--sync-every", default=1, show_default=True, type=click.IntRange(min=1),
              help="Tree LDA with --inference gibbs: sweeps of each shard's chain between synchronizations.")
@click.option("--normalization", type=click.Choice(["node", "node_language"]), default="node",
              show_default=True,
              help="Tree LDA: one Dirichlet per node (the chapter's model), or per node and language (a flat "
                   "tree is then polylingual LDA exactly).")
@click.option("--alpha-beta", default=None, type=click.FloatRange(min=0, min_open=True),
              help="infvoc: stick concentration alpha^beta of every topic's DP (Zhai 2014, ch. 7: 1k-5k)  "
                   "[default: 1000]")
@click.option("--reorder-every", default=None, type=click.IntRange(min=1),
              help="infvoc: U, minibatches between two reorderings and contractions of the TOS  [default: 10]")
@click.option("--new-word-nu", type=click.Choice(["one", "prior"]), default=None,
              help="infvoc: nu2 of a word appended to a TOS: 1 (the chapter) or alpha^beta  [default: one]")
@click.option("--unseen-weight", type=click.Choice(["remaining", "g0"]), default=None,
              help="infvoc: E-step weight of a word outside a topic's TOS: the remaining stick (eq. 7.4) or "
                   "the G0 variant  [default: remaining]")
@click.option("--g0", "g0_path", default=None, type=click.Path(file_okay=False),
              help="infvoc: the G0 of the ranking scores (`topicflow g0 train`)  [default: the shipped English G0]")
@click.option("--no-g0", is_flag=True, help="infvoc: rank without G0 (G0 = 1), as the reference code.")
@click.option("--optimize-every", default=None, type=click.IntRange(min=1),
              help="--method gibbs: sweeps between hyperparameter updates  [default: 10]")
@click.option("--sampler-threads", default=None, type=click.IntRange(min=1),
              help="--method gibbs: blocks of one task sampled at once (default: the cores per task); the model "
                   "does not depend on it")
@click.option("--gibbs-start", type=click.Choice(choices(GibbsInit)), default=None,
              help="--method gibbs: the chain's start, uniform topics or every token drawn given those before it "
                   "(fewer sweeps on real text), or z drawn after one SCVB0 pass (scvb0; see docs/gibbs.md)  "
                   "[default: random]")
@click.option("--track-words", default=None, metavar="W1,W2,...",
              help="infvoc: record these words' TOS ranks after every minibatch (the chapter's Figure 7.1, "
                   "charted by `topicflow report`).")
@click.option("--restate-tail", is_flag=True,
              help="infvoc: after each reordering, recompute nu2 from the new order's tail sums (not the "
                   "chapter's; docs/infvoc.md, \"The sawtooth at a contraction\").")
@storage_options_option
@preset_option("fit")
@cluster_options
@reports_errors
def fit(store: str, model_path: str, n_topics: int | None, family: str | None, method: str | None, truncation: int | None,
        clumping: bool, alpha_init: float | None, gamma_init: float | None, fixed_alpha: bool, fixed_gamma: bool,
        alpha_floor: float | None, topic_word_step: str | None, doc_step: str | None, hyper_step: str | None,
        step_power: float | None, doc_start: str | None, keep_doc_state: bool, topics_in_use_share: float | None,
        test_store: str | None, eval_every: int | None, max_iter: int, tol: float | None, batch_size: int | None,
        tau0: float, kappa: float, passes: int | None, shuffle_window: int, executor: str, estep: str,
        burn_in: int | None, samples: int,
        hybrid_init: str, hybrid_alpha_stats: str,
        doc_topic_prior: str, topic_word_prior: float, optimize_topic_word_prior: bool, seed_words: str | None,
        seed_strength: float, seed_off_topic: float | None, doc_topic_prior_init: float | None,
        max_doc_iter: int, doc_tol: float, warm_start: bool, seed: int, init_shape: float,
        checkpoint_every: int | None,
        checkpoint_path: str | None, resume: bool, doc_topics: str | None, split_every: int | None,
        overwrite: bool, prior_tree: str | None, inference: str, sparse_gibbs: bool, sync_every: int,
        normalization: str, alpha_beta: float | None, reorder_every: int | None, new_word_nu: str | None,
        unseen_weight: str | None, g0_path: str | None, no_g0: bool, optimize_every: int | None,
        sampler_threads: int | None, gibbs_start: str | None, track_words: str | None, restate_tail: bool,
        preset: str | None, cluster: ClusterConfig) -> None:
    """Fit LDA (polylingual LDA for a multilingual STORE) by batch, online or streaming variational Bayes or
    SCVB0, or the HDP (--family hdp) by PCSVB0 or PCVB0, or tree LDA (--prior-tree TREE) by batch VB or
    hybrid inference or collapsed Gibbs sampling, or online LDA with an infinite vocabulary (--family infvoc,
    on a store ingested with --keep-order).

    With --preset, a paper's settings fill every option you do not type.
    """
    if family == "infvoc" or is_infvoc_preset(preset):
        fit_infvoc(store, model_path, click.get_current_context().params, cluster=cluster)
        return
    refuse_infvoc_options()
    if prior_tree is not None or family == "tree_lda" or is_tree_preset(preset):
        fit_tree(store, model_path, prior_tree, click.get_current_context().params, cluster=cluster)
        return
    refuse_tree_options()
    if method == "gibbs":
        fit_gibbs(store, model_path, click.get_current_context().params, cluster=cluster)
        return
    lda_values = dict(
        n_topics=n_topics, doc_topic_prior=doc_topic_prior, topic_word_prior=topic_word_prior, max_iter=max_iter, tol=tol, max_doc_iter=max_doc_iter,
        doc_tol=doc_tol, seed=seed, seed_strength=seed_strength, seed_off_topic=seed_off_topic,
        doc_topic_prior_init=doc_topic_prior_init,
        optimize_topic_word_prior=optimize_topic_word_prior, split_every=split_every, warm_start=warm_start, method=method,
        batch_size=batch_size, tau0=tau0, kappa=kappa, passes=passes, shuffle_window=shuffle_window,
        estep=estep, burn_in=burn_in, samples=samples, executor=executor, init_shape=init_shape,
        hybrid_init=hybrid_init, hybrid_alpha_stats=hybrid_alpha_stats,
    )
    hdp_values = dict(
        family=family, truncation=truncation, clumping=clumping, alpha=alpha_init, gamma=gamma_init,
        learn_alpha=not fixed_alpha, learn_gamma=not fixed_gamma, alpha_floor=alpha_floor,
        topic_word_step=topic_word_step, doc_step=doc_step, hyper_step=hyper_step, step_power=step_power,
        doc_start=doc_start, keep_doc_state=keep_doc_state, topics_in_use_share=topics_in_use_share,
        eval_every=eval_every,
    )
    values, _ = apply_preset(preset, "fit", {**lda_values, **hdp_values}, option_of=HDP_OPTION_OF)
    family, method = resolve_family(values["family"], values["method"])
    values["method"] = method
    refuse_online_only_options(method)
    refuse_options_of_other_methods(family, method)
    if test_store is None and values["eval_every"]:
        raise click.UsageError("--eval-every scores the --test store along the fit; give --test STORE")
    # Only the chosen family's estimator is imported (the others cost start-up time: issue 22.3).
    from topicflow.api.lda import LDA
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.checkpoint import remove_checkpoint

    corpus = Corpus.open(store)
    test_corpus = None if test_store is None else Corpus.open(test_store)
    collapsed = method in COLLAPSED_METHODS
    checkpoint = check_fit_outputs(model_path, doc_topics=doc_topics, checkpoint_path=checkpoint_path,
                                   checkpoint_every=checkpoint_every, resume=resume, overwrite=overwrite)
    estimator: LDA | HDP
    if family == "hdp":
        from topicflow.api.hdp import HDP

        estimator = HDP(**hdp_estimator_values(values))
        estimator.config()  # validate before starting a cluster
        what = f"the HDP (truncation T={estimator.truncation}) by {method}"
    else:
        if values["n_topics"] is None:
            raise click.UsageError("Missing option '--topics' (or a --preset that sets it).")
        lda = {key: values[key] for key in lda_values}
        lda["passes"] = lda["passes"] or (COLLAPSED_PASSES if collapsed else 1)
        if collapsed:
            lda["burn_in"] = 5
            lda["eval_every"] = values["eval_every"] or 0
            lda["doc_burn_in"] = 1 if values["burn_in"] is None else values["burn_in"]
            from topicflow.api._collapsed import PAPER_STEP_POWER, parse_step

            for name in ("topic_word_step", "doc_step"):
                if values[name] is not None:
                    lda[name] = parse_step(values[name], values["step_power"] or PAPER_STEP_POWER)
        else:
            lda["batch_size"] = lda["batch_size"] or 256
            lda["burn_in"] = 5 if lda["burn_in"] is None else lda["burn_in"]
        estimator = LDA(seed_topics=read_seed_words(seed_words), **lda)
        if collapsed:
            estimator._scvb0_config()
        else:
            estimator._config()  # validate before starting a cluster
            if method == "svb":
                estimator._svb_config()
            else:
                estimator._online_config()
        what = f"K={values['n_topics']} by {'streaming (svb) VB' if method == 'svb' else method if collapsed else method + ' VB'}"
    click.echo(f"fitting {what} on {corpus!r}", err=True)
    progress = progress_reporter()
    if family == "lda" and method == "batch":  # task graphs only: threads need no cluster (pipeline.cluster.connect)
        cluster = dataclasses.replace(cluster, threads_without_cluster=True)
    with connect(cluster) as client:
        if client is not None:
            click.echo(f"dashboard: {client.dashboard_link}", err=True)
        started = time.perf_counter()
        if collapsed:
            estimator.fit(corpus, client=client, progress=progress, checkpoint=checkpoint, test=test_corpus)
            lines = collapsed_trace_lines(estimator.trace_)
        else:
            estimator.fit(corpus, client, progress=progress, checkpoint=checkpoint)
            lines = trace_lines(cast(LDA, estimator))
        for line in lines:
            click.echo(line, err=True)
        estimator.save(model_path, overwrite=overwrite)
        if checkpoint is not None:
            remove_checkpoint(checkpoint.path)
        seconds = time.perf_counter() - started
        if family == "hdp":
            from topicflow.api.hdp import HDP, hdp_topics

            hdp = cast(HDP, estimator)
            click.echo(f"saved model to {model_path} ({hdp.n_docs_seen_} documents seen, {seconds:.1f} s): "
                       f"{hdp_topics(hdp.model_).headline()}; alpha {hdp.alpha_:.4g}, "
                       f"gamma {hdp.gamma_:.4g}", err=True)
        else:
            estimator = cast(LDA, estimator)
            done = (f"{estimator.n_iter_} iterations, {'converged' if estimator.converged_ else 'not converged'}"
                    if method == "batch" else f"{estimator.n_docs_seen_} documents" if collapsed
                    else f"{estimator.n_iter_} minibatches, {estimator.n_docs_seen_} documents")
            click.echo(f"saved model to {model_path} ({done}, {seconds:.1f} s)", err=True)
            for name, words in estimator.model_.info.unknown_seed_words.items():
                click.echo(f"warning: seed words of topic {name!r} not in the vocabulary: {', '.join(words)}", err=True)
        if doc_topics:
            from topicflow.pipeline.vb.infer import infer_doc_topics

            written = infer_doc_topics(estimator.model_, corpus, doc_topics, client=client,
                                       overwrite=overwrite, progress=progress)
            click.echo(f"wrote document topics of {written} documents to {doc_topics}", err=True)


#: ``fit`` options collapsed Gibbs reads (every other typed option is refused with --method gibbs).
GIBBS_READS = frozenset({"store", "model_path", "method", "family", "n_topics", "max_iter", "batch_size",
                         "doc_topic_prior", "doc_topic_prior_init", "topic_word_prior", "optimize_topic_word_prior",
                         "burn_in", "optimize_every", "sampler_threads", "gibbs_start", "test_store", "eval_every",
                         "seed", "checkpoint_every", "checkpoint_path", "resume", "split_every", "overwrite", "executor",
                         "doc_topics"})
#: Sweeps between held-out scores of ``fit --method gibbs --test`` when --eval-every is not given.
GIBBS_EVAL_EVERY = 10


def check_fit_outputs(model_path: str | Path, *, doc_topics: str | Path | None, checkpoint_path: str | Path | None,
                      checkpoint_every: int | None, resume: bool, overwrite: bool) -> CheckpointPolicy | None:
    """Check every output of ``fit`` by the output-path rules before any work; return the checkpoint policy.

    The model (``--model``), the document topics (``--doc-topics``) and the checkpoint (``--checkpoint``,
    by default ``MODEL.checkpoint``, which is written over whenever a fit does not ``--resume``) go
    through :func:`topicflow.io.output_paths.prepare_output`, on local disk or object storage alike.

    Parameters
    ----------
    model_path : path or URL
    doc_topics : path or URL, optional
    checkpoint_path : path or URL, optional
    checkpoint_every : int or None
    resume : bool
    overwrite : bool

    Returns
    -------
    CheckpointPolicy or None
        None when the fit keeps no checkpoint (neither ``--checkpoint-every`` nor ``--resume``).
    """
    from topicflow.io.models.checkpoint import (
        CHECKPOINT_MARKERS,
        default_checkpoint_path,
    )
    from topicflow.io.output_paths import MODEL_LEFTOVERS, MODEL_MARKERS, prepare_output
    from topicflow.io.outputs.doc_topics import DOC_TOPICS_LEFTOVERS, DOC_TOPICS_MARKERS
    from topicflow.pipeline.policies import CheckpointPolicy

    prepare_output(model_path, what="model", option="fit --model", overwrite=overwrite, markers=MODEL_MARKERS,
                   leftovers=MODEL_LEFTOVERS)
    if doc_topics:
        prepare_output(doc_topics, what="document-topic output", option="fit --doc-topics", overwrite=overwrite,
                       markers=DOC_TOPICS_MARKERS, leftovers=DOC_TOPICS_LEFTOVERS)
    if not (checkpoint_every or resume):
        return None
    path = checkpoint_path or default_checkpoint_path(model_path)
    location = prepare_output(path, what="checkpoint", option="fit --checkpoint", overwrite=True,
                              markers=CHECKPOINT_MARKERS)
    if resume and (location / "latest.json").exists():
        click.echo(f"resuming from checkpoint {location}", err=True)
    # A StoragePath for a URL: every driver keeps its checkpoint there (docs/storage.md).
    return CheckpointPolicy(location, every=checkpoint_every or 1, resume=resume)


def fit_gibbs(store: str, model_path: str, params: Any, *, cluster: ClusterConfig) -> None:
    """``topicflow fit --method gibbs``: distributed collapsed Gibbs sampling (docs/gibbs.md), then save.

    Parameters
    ----------
    store, model_path : str
        The command's paths.
    params : mapping
        Every parameter of the ``fit`` command (click names).
    cluster : ClusterConfig

    Raises
    ------
    click.UsageError
        No ``--topics``, ``--family hdp``, or options the sampler does not read.
    """
    from topicflow.api.lda import LDA
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.checkpoint import remove_checkpoint
    from topicflow.pipeline.vb.infer import infer_doc_topics

    unread = [name for name in params if name not in GIBBS_READS and name not in _CLUSTER_PARAMS and _typed(name)]
    if unread:
        raise click.UsageError(f"{', '.join(_option(name) for name in unread)} given with --method gibbs, which does "
                               "not use them; drop them (see docs/gibbs.md for the sampler's options)")
    if params["family"] not in (None, "lda"):
        raise click.UsageError(f"--method gibbs fits LDA, not --family {params['family']}")
    if params["n_topics"] is None:
        raise click.UsageError("Missing option '--topics'.")
    if params["executor"] == "servers":
        raise click.UsageError("--executor servers is online VB's; --method gibbs runs as Dask tasks (tasks, auto) "
                               "or on threads of this process (threads)")
    estimator = LDA(
        n_topics=params["n_topics"], method="gibbs", max_iter=params["max_iter"],
        doc_topic_prior=params["doc_topic_prior"], doc_topic_prior_init=params["doc_topic_prior_init"],
        topic_word_prior=params["topic_word_prior"], optimize_topic_word_prior=params["optimize_topic_word_prior"],
        burn_in=5 if params["burn_in"] is None else params["burn_in"], optimize_every=params["optimize_every"] or 10,
        block_size=params["batch_size"], seed=params["seed"],
        eval_every=GIBBS_EVAL_EVERY if params["eval_every"] is None else params["eval_every"],
        threads=params["sampler_threads"], split_every=params["split_every"],
        gibbs_start=params["gibbs_start"] or "random",
    )
    estimator._validate_params()
    try:
        config = estimator._gibbs_config()  # validate before starting a cluster
    except InvalidParameterError as exc:
        raise click.UsageError(str(exc)) from exc
    corpus = Corpus.open(store)
    test_corpus = None if params["test_store"] is None else Corpus.open(params["test_store"])
    overwrite, resume = params["overwrite"], params["resume"]
    checkpoint = check_fit_outputs(model_path, doc_topics=params["doc_topics"], checkpoint_path=params["checkpoint_path"],
                                   checkpoint_every=params["checkpoint_every"], resume=resume, overwrite=overwrite)
    alpha = "learned (Minka)" if config.learn_alpha else "fixed"
    blocks = "default" if config.block_size is None else f"{config.block_size}"
    click.echo(f"fitting K={config.n_topics} by collapsed Gibbs (AD-LDA, blocks of {blocks} documents, "
               f"{config.sweeps} sweeps, alpha {config.doc_topic_prior:g} {alpha}, beta {config.topic_word_prior:g}"
               f"{' learned' if config.learn_beta else ''}) on {corpus!r}", err=True)
    progress = progress_reporter()
    threads_only = params["executor"] == "threads"
    with contextlib.ExitStack() as stack:
        client = None if threads_only else stack.enter_context(connect(cluster))
        if client is None:
            click.echo("executor: threads (a pool of threads in this process; no cluster started)", err=True)
        else:
            click.echo(f"executor: tasks on {len(client.nthreads())} workers; dashboard: {client.dashboard_link}",
                       err=True)
        started = time.perf_counter()
        estimator.fit(corpus, client=client, progress=progress, checkpoint=checkpoint, test=test_corpus)
        for line in gibbs_trace_lines(estimator.trace_):
            click.echo(line, err=True)
        estimator.save(model_path, overwrite=overwrite)
        if checkpoint is not None:
            remove_checkpoint(checkpoint.path)
        click.echo(f"saved model to {model_path} ({estimator.n_iter_} sweeps, {time.perf_counter() - started:.1f} s)",
                   err=True)
        if params["doc_topics"]:
            written = infer_doc_topics(estimator.model_, corpus, params["doc_topics"], client=client,
                                       overwrite=overwrite, progress=progress)
            click.echo(f"wrote document topics of {written} documents to {params['doc_topics']}", err=True)


def gibbs_trace_lines(records: Sequence[Any]) -> list[str]:
    """One line per sweep of a Gibbs fit (about 20 lines for long fits; scored sweeps always shown).

    Parameters
    ----------
    records : sequence of dict
        The estimator's ``trace_``.

    Returns
    -------
    list of str
    """
    every = max(1, len(records) // 20)
    lines = []
    for i, row in enumerate(records):
        scored = row.get("heldout_perplexity") is not None
        if i % every and i != len(records) - 1 and not scored:
            continue
        heldout = f"  heldout {row['heldout_perplexity']:.1f}" if scored else ""
        lines.append(f"sweep {row['sweep']:>4}  {row['seconds']:.3f} s  log p(w,z)/token "
                     f"{row['log_likelihood_per_token']:.4f}  alpha_sum {row['alpha_sum']:.4g}  beta "
                     f"{row['beta']:.4g}{heldout}")
    return lines


#: ``fit`` options tree LDA reads (every other typed option is refused with --prior-tree).
TREE_OPTIONS = frozenset({"store", "model_path", "n_topics", "family", "prior_tree", "inference", "normalization",
                          "doc_topic_prior", "doc_topic_prior_init", "max_iter", "tol", "max_doc_iter", "doc_tol",
                          "burn_in", "samples", "init_shape", "seed", "split_every", "doc_topics", "overwrite",
                          "sync_every", "preset", "method", "batch_size", "tau0", "kappa", "passes",
                          "shuffle_window", "executor", "checkpoint_every", "checkpoint_path", "resume",
                          "sparse_gibbs"})
#: ``fit`` options only tree LDA reads.
TREE_ONLY_OPTIONS = ("inference", "normalization", "sync_every", "sparse_gibbs")
_TREE_ONLINE = ("batch_size", "tau0", "kappa", "passes", "shuffle_window", "executor")
#: Tree options that one scheme (inference, method) does not read (typed with it, they are refused).
TREE_SCHEME_UNUSED: dict[tuple[str, str], tuple[str, ...]] = {
    ("gibbs", "batch"): ("doc_topic_prior_init", "tol", "burn_in", "samples", "init_shape", "split_every",
                         *_TREE_ONLINE),
    ("vb", "batch"): ("sync_every", "sparse_gibbs", *_TREE_ONLINE),
    ("hybrid", "batch"): ("sync_every", "sparse_gibbs", *_TREE_ONLINE),
    ("vb", "online"): ("sync_every", "sparse_gibbs", "max_iter", "tol"),
    ("hybrid", "online"): ("sync_every", "sparse_gibbs", "max_iter", "tol"),
}
_TREE_READS = {
    "gibbs": "the tree Gibbs sampler runs --max-iter sweeps with a fixed --doc-topic-prior, synchronized every "
             "--sync-every sweeps",
    "batch": "batch VB runs --max-iter iterations over the whole store; --method online takes the minibatch "
             "options, --inference gibbs --sync-every",
    "online": "online VB runs --passes over minibatches of --batch-size documents, not --max-iter iterations",
}
#: The click parameter of a TreeLDA setting whose API name differs.
TREE_OPTION_OF = {"alpha": "doc_topic_prior", "alpha_init": "doc_topic_prior_init", "sparse": "sparse_gibbs"}
_CLUSTER_PARAMS = frozenset({"cluster", "scheduler", "local_executor", "workers", "threads_per_worker",
                             "memory_limit", "dashboard_address", "tls_ca_file", "tls_cert", "tls_key"})


def _typed(name: str) -> bool:
    source = click.get_current_context().get_parameter_source(name)
    return source not in (None, click.core.ParameterSource.DEFAULT)


def _refuse_typed(names: Sequence[str], why: str) -> None:
    typed = [name for name in names if _typed(name)]
    if typed:
        raise click.UsageError(f"{', '.join(_option(name) for name in typed)} {why}")


def refuse_tree_options() -> None:
    """Refuse ``--inference``, ``--normalization`` and ``--sync-every`` typed without ``--prior-tree``.

    Raises
    ------
    click.UsageError
        Naming the options.
    """
    _refuse_typed(TREE_ONLY_OPTIONS, "apply to tree LDA only: give --prior-tree TREE (or drop them; LDA's E-step "
                                     "is chosen by --estep)")


def tree_settings(params: Any) -> dict[str, Any]:
    """The :class:`topicflow.TreeLDA` settings of ``fit --prior-tree``: typed options, then the preset's.

    Parameters
    ----------
    params : mapping
        The ``fit`` command's parameters (click names), from the click context.

    Returns
    -------
    dict
        Keyword settings of TreeLDA (without ``prior_tree``). Settings left unset mean the scheme's
        default (``alpha`` and ``max_iter`` None), and the preset's settings that the final scheme does
        not read are dropped.

    Raises
    ------
    click.UsageError
        Options tree LDA, or the chosen scheme, does not use; a preset that is not a tree preset; alpha
        learned with gibbs.
    """
    from topicflow.api.tree_lda import TreeLDA
    from topicflow.pipeline.presets import get_preset

    preset = params.get("preset")
    if preset is not None and not is_tree_preset(preset):
        raise click.UsageError(f"--preset {preset} is an LDA/HDP preset, not a tree-LDA one: drop --prior-tree, or "
                               f"use a tree preset ({', '.join(sorted(n for n, _ in TREE_PRESETS))})")
    refused = [name for name in params if name not in TREE_OPTIONS | _CLUSTER_PARAMS and _typed(name)]
    if refused:
        raise click.UsageError(f"{', '.join(_option(name) for name in refused)} given with --prior-tree: tree LDA "
                               "does not use them; drop them (docs/tree-lda.md lists its options)")
    values: dict[str, Any] = {
        "family": "tree_lda", "n_topics": params["n_topics"], "inference": params["inference"],
        "normalization": params["normalization"],
        "alpha": params["doc_topic_prior"] if _typed("doc_topic_prior") else None,
        "alpha_init": params["doc_topic_prior_init"],
        "max_iter": params["max_iter"] if _typed("max_iter") else None,
        "tol": 1e-4 if params["tol"] is None else params["tol"],
        "max_doc_iter": params["max_doc_iter"], "doc_tol": params["doc_tol"],
        "burn_in": 5 if params["burn_in"] is None else params["burn_in"], "samples": params["samples"],
        "init_shape": params["init_shape"], "seed": params["seed"], "split_every": params["split_every"],
        "sync_every": params["sync_every"], "sparse": params["sparse_gibbs"], "method": params["method"] or "batch",
        "batch_size": params["batch_size"] or 256, "tau0": params["tau0"], "kappa": params["kappa"],
        "passes": params["passes"] or 1, "shuffle_window": params["shuffle_window"],
    }
    settings, _ = apply_preset(preset, "fit", values, option_of=TREE_OPTION_OF)
    inference, method = settings["inference"], settings["method"]
    if method not in ("batch", "online"):
        raise click.UsageError(f"--method {method} given with --prior-tree: tree LDA is fitted by batch or online "
                               "VB (--inference vb or hybrid) or batch Gibbs sampling (--inference gibbs)")
    if method == "online" and inference == "gibbs":
        raise click.UsageError("--method online with --inference gibbs: online tree LDA is variational; use "
                               "--inference vb or hybrid online, or drop --method online for the sampler")
    if params["executor"] not in ("auto", "tasks"):
        raise click.UsageError(f"--executor {params['executor']} with --prior-tree: online tree LDA runs its "
                               "minibatch E-steps as Dask tasks only; drop --executor (or give tasks)")
    unused = TREE_SCHEME_UNUSED[(inference, method)]
    typed = [name for name in unused if _typed(name)]
    if typed:
        scheme = f"--inference {inference}" + (" --method online" if method == "online" else "")
        reads = _TREE_READS["gibbs" if inference == "gibbs" else method]
        raise click.UsageError(f"{', '.join(_option(name) for name in typed)} given with {scheme}, which does "
                               f"not use them ({reads}); drop them")
    defaults = TreeLDA().get_params()
    preset_values = get_preset(preset, "fit").settings if preset is not None else {}
    for name in unused:  # a preset's settings of another scheme (e.g. hybrid sweeps with --inference gibbs)
        key = {v: k for k, v in TREE_OPTION_OF.items()}.get(name, name)
        if key in preset_values and not _typed(TREE_OPTION_OF.get(key, key)):
            settings[key] = defaults[key]
    if inference == "gibbs" and settings["alpha"] in ("auto", "symmetric"):
        raise click.UsageError(f"--doc-topic-prior {settings['alpha']} with --inference gibbs: the tree Gibbs sampler "
                               "keeps alpha fixed; give a number (Zhai 2014, ch. 5: 0.01), or leave it out for 1/K")
    settings.pop("family")
    return settings


def fit_tree(store: str, model_path: str, prior_tree: str | None, params: Any, *, cluster: ClusterConfig) -> None:
    """``topicflow fit --prior-tree``: check the tree against the store, fit :class:`topicflow.TreeLDA`, save.

    Parameters
    ----------
    store, model_path, prior_tree : str
        The command's paths (``prior_tree`` None is refused).
    params : mapping
        Every parameter of the ``fit`` command (click names); see :func:`tree_settings`.
    cluster : ClusterConfig

    Raises
    ------
    click.UsageError
        No tree, no ``--topics``, or options tree LDA (or its scheme) does not use.
    """
    from topicflow.api.tree_lda import TreeLDA
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.trees import check_tree_matches, read_tree_info
    from topicflow.pipeline.vb.infer import infer_doc_topics

    settings = tree_settings(params)
    if prior_tree is None:
        raise click.UsageError("tree LDA (--family tree_lda or a tree --preset) needs --prior-tree TREE (build one "
                               "with `topicflow tree build`)")
    if settings["n_topics"] is None:
        raise click.UsageError("Missing option '--topics' (or a --preset that sets it).")
    doc_topics, overwrite = params["doc_topics"], params["overwrite"]
    corpus = Corpus.open(store)
    check_tree_matches(read_tree_info(prior_tree), corpus)
    checkpoint = check_fit_outputs(model_path, doc_topics=doc_topics, checkpoint_path=params["checkpoint_path"],
                                   checkpoint_every=params["checkpoint_every"], resume=params["resume"],
                                   overwrite=overwrite)
    estimator = TreeLDA(prior_tree=prior_tree, **settings)
    config = estimator.config()  # validate before starting a cluster
    online = estimator.method == "online"
    if online:
        estimator.online_config()
    gibbs = config.estep == "gibbs"
    click.echo(f"fitting tree LDA K={config.n_topics} ({config.estep}{', online' if online else ''}, "
               f"{config.normalization}) with tree {prior_tree} on {corpus!r}", err=True)
    with connect(cluster) as client:
        click.echo(f"dashboard: {client.dashboard_link}", err=True)
        started = time.perf_counter()
        estimator.fit(corpus, client, progress=progress_reporter(), checkpoint=checkpoint)
        for r in estimator.trace_:
            if online:
                click.echo(f"minibatch {r.t:4d}  pass {r.epoch}  rho {r.rho:.4f}  {r.docs} docs  alpha sum "
                           f"{r.alpha_sum:.4f}  {r.seconds:.2f} s", err=True)
            elif gibbs:
                click.echo(f"sweep {r.iteration:4d}  log p(w,z,y) {r.elbo:.6e}  per token {r.elbo_per_token:.4f}  "
                           f"{r.seconds:.2f} s", err=True)
            else:
                click.echo(f"iter {r.iteration:3d}  ELBO {r.elbo:.6e}  per token {r.elbo_per_token:.4f}  "
                           f"alpha sum {r.alpha_sum:.4f}  {r.seconds:.2f} s", err=True)
        estimator.save(model_path, overwrite=overwrite)
        if checkpoint is not None:
            from topicflow.io.models.checkpoint import remove_checkpoint

            remove_checkpoint(checkpoint.path)
        done = (f"{estimator.n_iter_} sweeps in {len(estimator.trace_)} rounds" if gibbs else
                f"{estimator.n_iter_} minibatches, {estimator.n_docs_seen_} documents" if online else
                f"{estimator.n_iter_} iterations, {'converged' if estimator.converged_ else 'not converged'}")
        click.echo(f"saved model to {model_path} ({done}, {time.perf_counter() - started:.1f} s)", err=True)
        if doc_topics:
            written = infer_doc_topics(estimator.model_, corpus, doc_topics, client=client,
                                       overwrite=overwrite, progress=progress_reporter())
            click.echo(f"wrote document topics of {written} documents to {doc_topics}", err=True)


#: ``fit`` options infinite-vocabulary LDA reads (every other typed option is refused with --family infvoc).
INFVOC_OPTIONS = frozenset({"store", "model_path", "n_topics", "family", "alpha_beta", "truncation", "reorder_every",
                            "batch_size", "tau0", "kappa", "passes", "shuffle_window", "burn_in", "samples",
                            "new_word_nu", "unseen_weight", "g0_path", "no_g0", "doc_topic_prior", "seed",
                            "split_every", "track_words", "checkpoint_every", "checkpoint_path", "resume",
                            "doc_topics", "overwrite", "preset", "restate_tail"})
#: ``fit`` options only infvoc reads (refused without --family infvoc).
INFVOC_ONLY_OPTIONS = ("alpha_beta", "reorder_every", "new_word_nu", "unseen_weight", "g0_path", "no_g0",
                       "track_words", "restate_tail")
#: The click parameter of an InfVocLDA setting whose API name differs.
INFVOC_OPTION_OF = {"alpha": "doc_topic_prior", "g0": "g0_path"}


def refuse_infvoc_options() -> None:
    """Refuse the infvoc-only options (``--alpha-beta``, ``--g0``, ...) typed without ``--family infvoc``.

    Raises
    ------
    click.UsageError
        Naming the options.
    """
    _refuse_typed(INFVOC_ONLY_OPTIONS, "apply to infinite-vocabulary LDA only: add --family infvoc (on a store "
                                       "ingested with --keep-order), or drop them")


def infvoc_settings(params: Any) -> dict[str, Any]:
    """The :class:`topicflow.InfVocLDA` settings of ``fit --family infvoc``: typed options, then the preset's.

    Parameters
    ----------
    params : mapping
        The ``fit`` command's parameters (click names), from the click context.

    Returns
    -------
    dict
        Keyword settings of InfVocLDA. Options left untyped keep InfVocLDA's defaults (the chapter's
        tau0 = 64 and kappa = 0.8, not online LDA's 10 and 0.7), unless the preset sets them.

    Raises
    ------
    click.UsageError
        Options infvoc does not read, a preset of another family, --g0 with --no-g0, or a
        --doc-topic-prior that is not a number.
    """
    preset = params.get("preset")
    if preset is not None and not is_infvoc_preset(preset):
        raise click.UsageError(f"--preset {preset} is not an infvoc preset: use one of "
                               f"{', '.join(sorted(n for n, _ in INFVOC_PRESETS))}, or drop --family infvoc")
    refused = [name for name in params if name not in INFVOC_OPTIONS | _CLUSTER_PARAMS and _typed(name)]
    if refused:
        raise click.UsageError(f"{', '.join(_option(name) for name in refused)} given with --family infvoc, which "
                               f"does not use {'it' if len(refused) == 1 else 'them'}: infvoc is online hybrid "
                               "inference over minibatches (--batch-size, --tau0, --kappa, --passes, --burn-in, "
                               "--samples) with the TOS options (--alpha-beta, --truncation, --reorder-every); "
                               "drop them (docs/infvoc.md lists the options)")
    if params["g0_path"] is not None and params["no_g0"]:
        raise click.UsageError("--g0 G0 and --no-g0 contradict each other: give one (neither: the shipped English G0)")
    values: dict[str, Any] = {"family": "infvoc"}
    for name in ("n_topics", "alpha_beta", "truncation", "reorder_every", "batch_size", "tau0", "kappa", "passes",
                 "shuffle_window", "burn_in", "samples", "new_word_nu", "unseen_weight", "seed", "split_every",
                 "restate_tail"):
        if _typed(name) or (name == "n_topics" and params[name] is not None):
            values[name] = params[name]
    if _typed("doc_topic_prior"):
        try:
            values["alpha"] = float(params["doc_topic_prior"])
        except ValueError:
            raise click.UsageError(f"--doc-topic-prior {params['doc_topic_prior']} with --family infvoc: infvoc's "
                                   "alpha^theta is a fixed number (default 1/K, the chapter's)") from None
    if params["no_g0"]:
        values["g0"] = False
    elif params["g0_path"] is not None:
        values["g0"] = params["g0_path"]
    if params["track_words"]:
        values["track_words"] = tuple(w.strip() for w in params["track_words"].split(",") if w.strip())
    settings: dict[str, Any] = {}
    if preset is not None:
        from topicflow.pipeline.presets import get_preset

        settings.update(get_preset(preset, "fit").settings)
    settings.update(values)
    settings.pop("family")
    return settings


def fit_infvoc(store: str, model_path: str, params: Any, *, cluster: ClusterConfig) -> None:
    """``topicflow fit --family infvoc``: stream the store through :class:`topicflow.InfVocLDA` and save it.

    Parameters
    ----------
    store, model_path : str
        The command's paths.
    params : mapping
        Every parameter of the ``fit`` command (click names); see :func:`infvoc_settings`.
    cluster : ClusterConfig

    Raises
    ------
    click.UsageError
        No ``--topics`` (nor a preset), or options infvoc does not read.
    OrderNotKeptError
        The store was ingested without ``--keep-order`` (before a cluster starts).
    """
    from topicflow.api.infvoc import InfVocLDA
    from topicflow.io.corpus.reader import Corpus
    from topicflow.pipeline.infvoc_lda import ordered_language

    settings = infvoc_settings(params)
    if settings.get("n_topics") is None:
        raise click.UsageError("Missing option '--topics' (or a --preset that sets it).")
    doc_topics, overwrite, resume = params["doc_topics"], params["overwrite"], params["resume"]
    estimator = InfVocLDA(**settings)
    infvoc_params = estimator.params()  # validate before starting a cluster
    estimator._check_g0_setting(infvoc_params)
    corpus = Corpus.open(store)
    ordered_language(corpus, estimator.language)
    checkpoint = check_fit_outputs(model_path, doc_topics=None if resume else doc_topics,
                                   checkpoint_path=params["checkpoint_path"], checkpoint_every=params["checkpoint_every"],
                                   resume=resume, overwrite=overwrite)
    g0 = ("none" if estimator.g0 is False else "shipped English G0" if estimator.g0 is None else str(estimator.g0))
    click.echo(f"fitting infvoc K={infvoc_params.n_topics} (alpha^beta {infvoc_params.stick_concentration:g}, "
               f"T={infvoc_params.truncation}, U={infvoc_params.reorder_every}, S={estimator.batch_size}, "
               f"tau0 {infvoc_params.step.tau0:g}, kappa {infvoc_params.step.kappa:g}, G0: {g0}) on {corpus!r}",
               err=True)
    with connect(cluster) as client:
        click.echo(f"dashboard: {client.dashboard_link}", err=True)
        started = time.perf_counter()
        estimator.fit(corpus, client=client, progress=progress_reporter(), checkpoint=checkpoint,
                      doc_topics=doc_topics)
        for line in infvoc_trace_lines(estimator.trace_):
            click.echo(line, err=True)
        estimator.save(model_path, overwrite=overwrite)
        if checkpoint is not None:
            from topicflow.io.models.checkpoint import remove_checkpoint

            remove_checkpoint(checkpoint.path)
        click.echo(f"saved model to {model_path} ({estimator.n_iter_} minibatches, {estimator.n_docs_seen_} documents, "
                   f"{estimator.n_words_:,} words seen, TOS sizes {int(estimator.tos_sizes_.min())}-"
                   f"{int(estimator.tos_sizes_.max())}, {time.perf_counter() - started:.1f} s)", err=True)
        if doc_topics:
            click.echo(f"wrote the online pass's document topics (spec P9) to {doc_topics}; read them with "
                       "topicflow.io.models.infvoc.read_doc_topics", err=True)


def infvoc_trace_lines(records: list[Any]) -> list[str]:
    """About 20 lines of an infvoc fit's trace, and its throughput.

    Parameters
    ----------
    records : list of InfVocRecord

    Returns
    -------
    list of str
    """
    every = max(1, len(records) // 20)
    lines = [f"minibatch {r.i:5d}  docs seen {r.docs_seen:8d}  new words {r.new_words:6d}  words {r.n_words:8d}  "
             f"TOS {min(r.tos_sizes)}-{max(r.tos_sizes)}  epsilon {r.epsilon:.4f}"
             for n, r in enumerate(records) if n % every == 0 or n == len(records) - 1]
    seconds = sum(r.seconds for r in records)
    docs = sum(r.docs for r in records)
    tokens = sum(r.tokens for r in records)
    lines.append(f"{len(records)} minibatches, {docs} documents in {seconds:.1f} s: {docs / max(seconds, 1e-9):,.0f} "
                 f"docs/s, {tokens / max(seconds, 1e-9):,.0f} tokens/s")
    return lines


def resolve_family(family: str | None, method: str | None) -> tuple[str, str]:
    """The family and method of ``fit`` from what was given: a method implies its family.

    Parameters
    ----------
    family : {"lda", "hdp"} or None
        ``--family``.
    method : str or None
        ``--method``.

    Returns
    -------
    family : str
        ``lda`` or ``hdp``.
    method : str
        The method (``batch`` or ``pcsvb0`` when none was given).

    Raises
    ------
    click.UsageError
        A method of the other family.
    """
    if method is None:
        return (family or "lda"), ("pcsvb0" if family == "hdp" else "batch")
    implied = "hdp" if method in HDP_METHODS else "lda"
    if family is not None and family != implied:
        if family == "hdp":
            raise click.UsageError(f"--family hdp is fitted by --method {' or '.join(HDP_METHODS)}; --method "
                                   f"{method} fits LDA (drop --family hdp, or choose an HDP method)")
        raise click.UsageError(f"--method {method} fits the HDP family: use --family hdp (or drop --family)")
    return implied, method


def refuse_options_of_other_methods(family: str, method: str) -> None:
    """Refuse options typed with a family and method they do not apply to (see :data:`OPTION_METHODS`).

    The LDA variational methods keep accepting their own options among themselves (as before the HDP
    family); an option no LDA VB method uses (the collapsed methods' and ``--method gibbs``'s), or any option
    a collapsed method does not use, is refused.

    Parameters
    ----------
    family : {"lda", "hdp"}
    method : str

    Raises
    ------
    click.UsageError
        Naming every such option and the methods it belongs to.
    """
    context = click.get_current_context()
    refused = []
    for name, methods in OPTION_METHODS.items():
        if method in methods or context.get_parameter_source(name) in (None, click.core.ParameterSource.DEFAULT):
            continue
        if method in COLLAPSED_METHODS or set(methods).isdisjoint(_LDA_VB):
            refused.append((name, methods))
    if refused:
        options = ", ".join(_option(name) for name, _ in refused)
        owners = "; ".join(f"{_option(name)}: {', '.join(methods)}" for name, methods in refused)
        raise click.UsageError(f"{options} given with --family {family} --method {method}, which does not use "
                               f"{'it' if len(refused) == 1 else 'them'} (where each applies: {owners}); drop "
                               f"{'it' if len(refused) == 1 else 'them'} or choose a method that has "
                               f"{'it' if len(refused) == 1 else 'them'}")


def _option(name: str) -> str:
    return {"n_topics": "--topics", "test_store": "--test", "seed_words": "--seed-words", "sparse_gibbs": "--sparse",
            "g0_path": "--g0", "local_executor": "--local-cluster"}.get(name, "--" + name.replace("_", "-"))


def hdp_estimator_values(values: dict[str, Any]) -> dict[str, Any]:
    """The ``HDP`` keyword arguments of ``fit``'s merged settings (unset ones keep the estimator's defaults).

    Parameters
    ----------
    values : dict
        The settings of ``fit`` under their API names (after the preset).

    Returns
    -------
    dict
    """
    names = ("truncation", "method", "batch_size", "clumping", "passes", "topic_word_prior", "alpha", "gamma",
             "learn_alpha", "learn_gamma", "alpha_floor", "topic_word_step", "doc_step", "hyper_step", "step_power",
             "burn_in", "doc_start", "keep_doc_state", "shuffle_window", "eval_every", "topics_in_use_share",
             "init_shape", "seed", "split_every")
    return {name: values[name] for name in names if values.get(name) is not None}


#: ``fit`` options that only online VB has: streaming VB refuses them when typed (see docs/variational-lda.md).
ONLINE_ONLY_OPTIONS = ("tau0", "kappa", "passes")


def refuse_online_only_options(method: str) -> None:
    """Refuse ``--tau0``, ``--kappa`` and ``--passes`` typed with ``--method svb``.

    Parameters
    ----------
    method : str
        The ``--method`` given.

    Raises
    ------
    click.UsageError
        One of those options was given on the command line with ``--method svb``.
    """
    if method != "svb":
        return
    context = click.get_current_context()
    typed = [name for name in ONLINE_ONLY_OPTIONS
             if context.get_parameter_source(name) not in (None, click.core.ParameterSource.DEFAULT)]
    if typed:
        options = ", ".join("--" + name.replace("_", "-") for name in typed)
        raise click.UsageError(
            f"{options} given with --method svb: streaming VB has no step sizes and sees each document once "
            "(the posterior of each minibatch is the prior of the next); drop them, or use --method online")


def collapsed_trace_lines(records: list[Any]) -> list[str]:
    """About 20 lines of a collapsed fit's trace (pcsvb0, pcvb0, scvb0): whatever each record holds.

    Parameters
    ----------
    records : list
        The estimator's ``trace_`` (records with ``to_dict``, or dicts).

    Returns
    -------
    list of str
    """
    rows = [r.to_dict() if hasattr(r, "to_dict") else dict(r) for r in records]
    every = max(1, len(rows) // 20)
    lines = []
    for i, row in enumerate(rows):
        if i % every and i != len(rows) - 1:
            continue
        lines.append("  ".join(f"{key} {_short(value)}" for key, value in row.items()))
    return lines


#: ``topicflow topics`` names a word's paths whose share of the word's probability is at least this.
SHOWN_PATH_SHARE = 0.05


def _via_note(term: dict[str, Any], langs: tuple[str, ...]) -> str:
    """``via concept`` (one path), or the paths with at least 5 % of the word's p and how many others."""
    from topicflow.pipeline.tree_lda.readout import short_concept_name

    paths = term["paths"]
    if all(p["concept"] is None for p in paths):
        return ""
    if len(paths) == 1:
        return f"  via {short_concept_name(paths[0]['concept'], langs)}"
    shown = [p for i, p in enumerate(paths) if i == 0 or p["p"] >= SHOWN_PATH_SHARE * term["p"]]
    text = ", ".join(f"{short_concept_name(p['concept'], langs) if p['concept'] else '(root)'} {p['p']:.4f}"
                     for p in shown)
    hidden = len(paths) - len(shown)
    return f"  via {text}" + (f" (+{hidden} other path{'s' if hidden > 1 else ''})" if hidden else "")


def _short(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def trace_lines(estimator: LDA) -> list[str]:
    """One line per batch iteration or svb minibatch, or one per bound estimate of an online run, plus throughput."""
    from topicflow.pipeline.vb.batch import IterationRecord
    from topicflow.pipeline.vb.online import MinibatchRecord
    from topicflow.pipeline.vb.svb import SVBRecord

    records = estimator.trace_
    if records and isinstance(records[0], IterationRecord):
        return [
            f"iter {r.iteration:3d}  ELBO {r.elbo:.6e}  per token {r.elbo_per_token:.4f}  "
            f"alpha sum {r.alpha_sum:.4f}  {r.seconds:.2f} s  {r.tokens_per_second:,.0f} tokens/s"
            for r in records
        ]
    if records and isinstance(records[0], SVBRecord):
        streamed = records
        every = max(1, len(streamed) // 20)  # about 20 lines, and the last minibatch
        lines = [
            f"minibatch {r.t:6d}  docs seen {r.docs_seen:9d}  {r.iterations:3d} iterations"
            f"{'' if r.converged else ' (max)'}  minibatch ELBO per token {r.elbo_per_token:.4f}  "
            f"alpha sum {r.alpha_sum:.4f}"
            for i, r in enumerate(streamed) if i % every == 0 or i == len(streamed) - 1
        ]
        seconds = sum(r.seconds for r in streamed)
        lines.append(f"{len(streamed)} minibatches, {sum(r.docs for r in streamed)} documents in {seconds:.1f} s")
        return lines
    online = cast(list[MinibatchRecord], records)  # not a batch or svb trace, so an online one (or empty)
    lines = [
        f"minibatch {r.t:6d}  docs seen {r.docs_seen:9d}  rho {r.rho:.4f}  bound per token {r.bound_per_token:.4f}  "
        f"alpha sum {r.alpha_sum:.4f}"
        for r in online if np.isfinite(r.bound_per_token)
    ]
    seconds = sum(r.seconds for r in online)
    docs = sum(r.docs for r in online)
    tokens = sum(r.tokens for r in online)
    lines.append(f"{len(records)} minibatches, {docs} documents in {seconds:.1f} s: "
                 f"{docs / max(seconds, 1e-9):,.0f} docs/s, {tokens / max(seconds, 1e-9):,.0f} tokens/s")
    return lines


def format_topics(model_path: str | Path, top: int, *, all_topics: bool = False) -> dict[str, Any]:
    """Return the topics of a saved model with their most probable terms, as JSON-able data.

    Parameters
    ----------
    model_path : str
        Model directory.
    top : int
        Terms listed per topic and language.
    all_topics : bool, default False
        HDP: list all T topics, not only those in use.

    Returns
    -------
    dict of str to Any
        ``languages`` and ``topics``: one entry per topic, by decreasing alpha, with its id, name,
        alpha and, per language, its ``top`` terms with their probabilities. An HDP model lists only
        its topics in use (by decreasing stick weight, which is alpha's order), each with its
        ``stick_weight`` and ``share`` of the tokens, and adds ``family``, ``truncation``,
        ``topics_in_use``, ``min_share`` and ``headline``.
    """
    from topicflow.api.hdp import hdp_topics
    from topicflow.io.models.store import load_model

    model = load_model(model_location(model_path))
    state = model.state
    topic_word = state.topic_word()
    order = np.argsort(-state.doc_topic_prior, kind="stable")
    hdp = hdp_topics(model) if model.info.family == "hdp" else None
    if hdp is not None and not all_topics:
        order = hdp.in_use
    topics = []
    for k in order:
        entry: dict[str, Any] = {"topic": int(k), "name": state.topic_label(int(k)), "alpha": float(state.doc_topic_prior[k])}
        if hdp is not None:
            entry["stick_weight"] = float(hdp.stick_weights[k])
            entry["share"] = float(hdp.shares[k])
        for lang in state.languages:
            row = topic_word[lang][k]
            best = np.argsort(-row, kind="stable")[:top]
            entry[lang] = [{"term": model.vocabularies[lang].term_of(int(w)), "p": float(row[w])} for w in best]
        topics.append(entry)
    listing: dict[str, Any] = {"languages": list(state.languages), "topics": topics}
    if hdp is not None:
        listing.update(family="hdp", truncation=hdp.truncation, topics_in_use=hdp.n_in_use, min_share=hdp.min_share,
                       alpha=hdp.alpha, gamma=hdp.gamma, headline=hdp.headline())
    return listing


@click.command()
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.option("--top", default=10, show_default=True, type=click.IntRange(min=1), help="Terms per topic.")
@click.option("--all-topics", is_flag=True, help="HDP: list all T topics of the truncation, not only those in use.")
@click.option("--paths/--no-paths", default=None,
              help="Tree models: show the concept each top word's probability comes through and each topic's "
                   "top concepts  [default: --paths for a tree model]")
@click.option("--concepts", "n_concepts", default=LazyDefault("topicflow.pipeline.tree_lda.readout", "DEFAULT_CONCEPTS"),
              show_default=True, type=click.IntRange(min=0),
              help="Tree models: concepts listed per topic (with --paths).")
@click.option("--format", "fmt", type=click.Choice(choices(OutputFormat)), default="text", show_default=True)
@storage_options_option
@reports_errors
def topics(model_path: str | Path, top: int, all_topics: bool, paths: bool | None, n_concepts: int, fmt: str) -> None:
    """Print each topic's top terms (side by side per language), by decreasing alpha.

    An HDP model shows its topics in use (by stick weight, with their share of the tokens) and how many
    they are of the truncation. An infvoc model shows each topic's top words by E[beta] with their
    rank in the topic's truncation ordered set (TOS) and the TOS size. A tree model (ptLDA / tLDA) shows, per language, each top word's
    probability and the concepts it comes through, then the topic's top concepts (--no-paths: the
    words alone).
    """
    from topicflow.io.models.store import load_model
    from topicflow.pipeline.infvoc_lda import is_infvoc_model
    from topicflow.pipeline.tree_lda import is_tree_model
    from topicflow.pipeline.tree_lda.readout import add_tree_paths

    model = load_model(model_location(model_path))
    if is_infvoc_model(model):
        if paths:
            raise click.UsageError(f"--paths shows the concept paths of a tree model; {str(model_path)!r} is an infvoc model")
        infvoc = infvoc_listing(model, top)
        click.echo(json.dumps(infvoc, indent=2, ensure_ascii=False) if fmt == "json"
                   else "\n".join(infvoc_topic_lines(infvoc)))
        return
    listing = format_topics(model_path, top, all_topics=all_topics)
    if paths and not is_tree_model(model):
        raise click.UsageError(f"--paths shows the concept paths of a tree model; {str(model_path)!r} is a "
                               f"{model.info.family!r} model")
    if is_tree_model(model) and paths is not False:
        listing = add_tree_paths(model, listing, concepts=n_concepts)
    if fmt == "json":
        click.echo(json.dumps(listing, indent=2, ensure_ascii=False))
        return
    langs = listing["languages"]
    if "tree" in listing:
        click.echo("\n".join(tree_topic_lines(listing)))
        return
    if "headline" in listing:
        click.echo(listing["headline"])
        for entry in listing["topics"]:
            click.echo(f"{entry['name']:>12} (pi {entry['stick_weight']:.3f}, share {entry['share']:.3f}): "
                       + " ".join(t["term"] for t in entry[langs[0]]))
        return
    for entry in listing["topics"]:
        columns = [" ".join(t["term"] for t in entry[lang]) for lang in langs]
        if len(langs) == 1:
            click.echo(f"{entry['name']:>12} ({entry['alpha']:.3f}): {columns[0]}")
        else:
            click.echo(f"{entry['name']} (alpha {entry['alpha']:.3f})")
            for lang, column in zip(langs, columns):
                click.echo(f"    [{lang}] {column}")


def infvoc_listing(model: Any, top: int) -> dict[str, Any]:
    """The topics of an infvoc model as JSON-able data: top words with probability and TOS rank.

    Parameters
    ----------
    model : SavedModel
        A model of the infvoc family.
    top : int
        Words per topic.

    Returns
    -------
    dict
        ``family`` ("infvoc"), ``languages`` (["default"]), ``n_words`` (strings seen), ``minibatches``,
        ``docs_seen``, ``g0`` (where the ranking's G0 came from, or None), ``truncation`` (T),
        ``reorder_every`` (U) and ``topics``: per topic (in topic order) its ``topic``, ``name``,
        ``alpha``, ``tos_size`` and under ``default`` its words as ``term``, ``p`` (E[beta_kt]) and
        ``rank`` (TOS position + 1).
    """
    from topicflow.api.infvoc import topic_words_with_ranks
    from topicflow.pipeline.infvoc_lda import saved_infvoc

    params, state, index, position = saved_infvoc(model)
    sizes = state.tos_sizes()
    topics = []
    for k, words in enumerate(topic_words_with_ranks(state, index, top)):
        topics.append({"topic": k, "name": f"topic-{k}", "alpha": params.alpha, "tos_size": int(sizes[k]),
                       "default": [{"term": w, "p": p, "rank": r} for w, p, r in words]})
    payload = model.info.extra.get("infvoc") or {}
    return {"family": "infvoc", "languages": ["default"], "n_words": len(index), "minibatches": position.i,
            "docs_seen": position.docs_seen, "g0": payload.get("g0_source"), "truncation": params.truncation,
            "reorder_every": params.reorder_every, "topics": topics}


def infvoc_topic_lines(listing: dict[str, Any]) -> list[str]:
    """The text of ``topicflow topics`` for an infvoc model (:func:`infvoc_listing`).

    Parameters
    ----------
    listing : dict

    Returns
    -------
    list of str
        A header (words seen, minibatches, G0), then per topic ``topic-k (TOS n): word p #rank ...``.
    """
    g0 = {None: "none", "default": "the shipped English G0"}.get(listing["g0"], listing["g0"])
    lines = [f"infvoc model: {listing['n_words']:,} words seen in {listing['docs_seen']:,} documents "
             f"({listing['minibatches']} minibatches); T={listing['truncation']}, U={listing['reorder_every']}, "
             f"G0: {g0}. Each word: E[beta] and #rank in the topic's TOS (1 = first)"]
    width = max((len(t["name"]) for t in listing["topics"]), default=0)
    for entry in listing["topics"]:
        words = "  ".join(f"{w['term']} {w['p']:.4f} #{w['rank']}" for w in entry["default"])
        lines.append(f"{entry['name']:>{width}} (TOS {entry['tos_size']:,}): {words}")
    return lines


def tree_topic_lines(listing: dict[str, Any]) -> list[str]:
    """The text of ``topicflow topics`` for a tree model's listing with paths.

    Parameters
    ----------
    listing : dict
        :func:`format_topics` with :func:`~topicflow.pipeline.tree_lda.readout.add_tree_paths`.

    Returns
    -------
    list of str
        A header naming the tree; per topic, per language one line per top word (``word  p  via
        concept [p], ...``; nothing after p for a word straight under the root), then its top concepts
        with their mass per language (and, when a concept has several words in a language, their
        edge means).
    """
    from topicflow.pipeline.tree_lda.readout import (
        describe_tree_method,
        short_concept_name,
    )

    langs = tuple(listing["languages"])
    tree = listing["tree"]
    lines = [f"tree model: {tree['source'] or 'tree object'} ({tree['n_concepts']:,} concepts, normalization "
             f"{tree['normalization']}, {describe_tree_method(tree)}); word p = sum of its paths' p"]
    single = len(langs) == 1  # a monolingual tree (tLDA): no language labels
    for entry in listing["topics"]:
        lines.append(f"{entry['name']} (alpha {entry['alpha']:.3f})")
        for lang in langs:
            width = max((len(t["term"]) for t in entry[lang]), default=0)
            label = "" if single else f"[{lang}] "
            for i, term in enumerate(entry[lang]):
                head = "    " + (label if i == 0 else " " * len(label))
                lines.append(f"{head}{term['term']:<{width}}  {term['p']:.4f}{_via_note(term, langs)}")
        if entry.get("concepts"):
            lines.append("    top concepts (mass)" if single else "    top concepts (mass per language)")
            for concept in entry["concepts"]:
                masses = "  ".join(("" if single else f"{lang} ") + f"{concept['mass'][lang]:.4f}" for lang in langs)
                words = "; ".join(
                    ("" if single else f"{lang}: ")
                    + ", ".join(f"{w['term']} {w['edge_mean']:.2f}" for w in concept["words"][lang])
                    for lang in langs if len(concept["words"][lang]) > 1)
                lines.append(f"      {short_concept_name(concept['name'], langs):<24} {masses}"
                             + (f"   ({words})" if words else ""))
    return lines


@click.command()
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--out", required=True, type=LOCATION,
              help="zarr path for the document topics (a path, or a URL: docs/storage.md).")
@click.option("--overwrite", is_flag=True)
@storage_options_option
@cluster_options
@reports_errors
def infer(model_path: str | Path, store: str, out: str | Path, overwrite: bool, cluster: ClusterConfig) -> None:
    """Fold STORE's documents into MODEL (topics fixed) and write their topic proportions.

    MODEL, STORE and --out may be URLs on object storage (docs/storage.md).
    """
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.store import load_model
    from topicflow.io.output_paths import prepare_output
    from topicflow.io.outputs.doc_topics import DOC_TOPICS_LEFTOVERS, DOC_TOPICS_MARKERS
    from topicflow.pipeline.vb.infer import infer_doc_topics

    location = prepare_output(out, what="document-topic output", option="infer --out", overwrite=overwrite,
                              markers=DOC_TOPICS_MARKERS, leftovers=DOC_TOPICS_LEFTOVERS)
    model = load_model(model_location(model_path))
    corpus = Corpus.open(store)
    with connect(cluster) as client:
        written = infer_doc_topics(model, corpus, location, client=client, overwrite=overwrite, progress=progress_reporter())
    click.echo(f"wrote document topics of {written} documents to {out}", err=True)


@click.command()
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.argument("store", type=click.Path(file_okay=False))
@click.option("--protocol", type=click.Choice(choices(HeldoutProtocol)), default=None,
              help="Held-out likelihood protocol (docs/evaluation.md)  [default: completion-random]")
@click.option("--seed", default=0, show_default=True, type=click.IntRange(min=0),
              help="Seed of the token split, the particles, the folds and the document sample.")
@click.option("--fraction", default=0.5, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="Completion protocols: share of each document's tokens observed.")
@click.option("--particles", default=DEFAULT_PARTICLES, show_default=True, type=click.IntRange(min=1),
              help="left-to-right: particles R.")
@click.option("--labels", "with_labels", is_flag=True,
              help="Topics as features instead: classification accuracy and clustering scores against the "
                   "store's labels.")
@click.option("--folds", default=DEFAULT_FOLDS, show_default=True, type=click.IntRange(min=2),
              help="--labels: folds of the stratified cross-validation.")
@click.option("--max-docs", default=None, type=click.IntRange(min=1),
              help="--labels: score a deterministic sample of N documents (their features, 8 x topics bytes "
                   "each, are held in memory).")
@click.option("--baseline", type=click.Choice(choices(FeatureTransform)), default="tfidf", show_default=True,
              help="--labels: the bag-of-words baseline's features, tf-idf weights or raw counts.")
@click.option("--format", "fmt", type=click.Choice(choices(OutputFormat)), default="text", show_default=True)
@storage_options_option
@cluster_options
@reports_errors
def evaluate(model_path: str, store: str, protocol: str | None, seed: int, fraction: float, particles: int,
             with_labels: bool, folds: int, max_docs: int | None, baseline: str, fmt: str,
             cluster: ClusterConfig) -> None:
    """Held-out likelihood of MODEL on STORE under a named protocol, or (--labels) topics as features."""
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.store import load_model
    from topicflow.pipeline.evaluation.features import topic_features_scores
    from topicflow.pipeline.evaluation.heldout import (
        DEFAULT_PROTOCOL,
        heldout_likelihood,
    )

    if with_labels and protocol is not None:
        raise click.UsageError("--labels scores topics as features, --protocol held-out likelihood: run "
                               "`topicflow evaluate` once for each.")
    model = load_model(model_location(model_path))
    corpus = Corpus.open(store)
    with connect(cluster) as client:
        if with_labels:
            scores = topic_features_scores(model, corpus, client=client, n_folds=folds, seed=seed, max_docs=max_docs,
                                           baseline=cast(FeatureTransform, baseline), progress=progress_reporter())
            lines, payload = features_lines(scores), scores.to_dict()
        else:
            result = heldout_likelihood(model, corpus, protocol or DEFAULT_PROTOCOL, client=client, seed=seed,
                                        fraction=fraction, n_particles=particles)
            lines, payload = heldout_lines(result), result.to_dict()
    click.echo(json.dumps(payload, indent=2) if fmt == "json" else "\n".join(lines))


def heldout_lines(result: HeldoutResult) -> list[str]:
    """The text report of :func:`evaluate` for a held-out likelihood.

    Parameters
    ----------
    result : HeldoutResult

    Returns
    -------
    list of str
    """
    settings = " ".join(f"{name}={value}" for name, value in result.settings.items())
    lines = [
        f"protocol             {result.protocol}",
        f"                     {result.description}",
        f"documents            {result.n_docs}",
        f"evaluated tokens     {result.n_tokens}",
        (f"log likelihood       {result.log_lik_per_token:.4f} nats per token "
         f"(total {result.log_likelihood:.2f} nats)"),
        f"perplexity           {result.perplexity:.2f}   (exp of minus the log likelihood per token)",
        f"settings             {settings}",
    ]
    if result.token_order is not None:
        order = "reading order" if result.token_order == "reading" else "bag order (terms ascending, by count)"
        lines.append(f"token order          {order}")
    if result.oov_tokens:
        lines.append(f"out-of-vocabulary    {result.oov_tokens} tokens (not evaluated)")
    return lines


def features_lines(scores: FeaturesResult) -> list[str]:
    """The text report of :func:`evaluate` with ``--labels``.

    Parameters
    ----------
    scores : FeaturesResult

    Returns
    -------
    list of str
    """
    def accuracy(name: str, result: ClassificationScores) -> str:
        return (f"  {name:<19}accuracy {result.mean_accuracy:.4f} +- {result.std_accuracy:.4f} "
                f"({result.features}, {result.n_features} features)")

    clustering = scores.clustering
    return [
        f"documents            {scores.n_docs} (of {scores.n_docs_store} in the store)",
        f"classification       {scores.settings['classifier']}; mean +- std over folds",
        accuracy("topics", scores.classification),
        accuracy("bag of words", scores.baseline),
        (f"clustering           most probable topic vs label ({clustering.n_classes} classes, "
         f"{clustering.n_clusters} clusters)"),
        f"  NMI (arithmetic)   {clustering.nmi_arithmetic:.4f}",
        f"  NMI (geometric)    {clustering.nmi_geometric:.4f}",
        f"  ARI                {clustering.ari:.4f}",
        f"  purity             {clustering.purity:.4f}",
    ]


@click.command()
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.option("--out", required=True, type=LOCATION,
              help="Output file (.npz, or .json for pyldavis); a path, or a URL (docs/storage.md).")
@click.option("--format", "fmt", type=click.Choice(choices(ExportFormat)), default="npz", show_default=True,
              help="npz: the model's arrays; pyldavis: the arguments of pyLDAvis.prepare as JSON (needs --corpus; "
                   "pass sort_topics=False to keep the topic order).")
@click.option("--corpus", "store", type=click.Path(file_okay=False), default=None,
              help="pyldavis: the store whose documents and term frequencies are shown.")
@click.option("--language", default=None, help="pyldavis: the language shown (required for a polylingual model).")
@click.option("--overwrite", is_flag=True, help="Replace an existing file at --out.")
@storage_options_option
@cluster_options
@reports_errors
def export(model_path: str | Path, out: str | Path, fmt: str, store: str | None, language: str | None,
           overwrite: bool, cluster: ClusterConfig) -> None:
    """Export topic_word (rows normalized), alpha and vocab (per language) to .npz, or pyLDAvis's input to JSON.

    A tree model's npz adds its edge parameters, the tree's structure and the path read-out
    (docs/tree-lda.md, "Reading a tree model").
    """
    from topicflow.io.corpus.reader import Corpus
    from topicflow.io.models.store import export_npz, load_model
    from topicflow.io.output_paths import prepare_output, staged_output_file
    from topicflow.pipeline.tree_lda import is_tree_model
    from topicflow.pipeline.tree_lda.readout import export_tree_npz

    if fmt == "npz":
        if store is not None or language is not None:
            raise InvalidParameterError("--corpus and --language belong to --format pyldavis; the npz export "
                                        "holds the model alone")
        location = prepare_output(out, what="export", option="export --out", overwrite=overwrite, kind="file")
        saved = load_model(model_location(model_path))
        with staged_output_file(location) as local:
            shapes = export_tree_npz(local, saved) if is_tree_model(saved) else export_npz(local, saved)
        for name, shape in shapes.items():
            click.echo(f"{name:>20} {shape}", err=True)
        click.echo(f"wrote {out}", err=True)
        return
    if store is None:
        raise InvalidParameterError("--format pyldavis needs --corpus STORE: the documents whose topics, lengths "
                                    "and term frequencies pyLDAvis shows (usually the training store)")
    from topicflow.pipeline.evaluation.pyldavis import export_pyldavis, shown_language

    location = prepare_output(out, what="export", option="export --out", overwrite=overwrite, kind="file")
    model = load_model(model_location(model_path))
    corpus = Corpus.open(store)
    shown_language(model, corpus, language)  # refuse before starting a cluster
    with connect(cluster) as client, staged_output_file(location) as local:
        data = export_pyldavis(model, corpus, local, client=client, language=language, progress=progress_reporter())
    n_docs, n_topics = data["doc_topic_dists"].shape
    click.echo(f"wrote {out}: {n_topics} topics, {len(data['vocab'])} terms, {n_docs} documents; load it with "
               "pyLDAvis.prepare(**json.load(f), sort_topics=False)", err=True)


COMMANDS = [fit, topics, infer, evaluate, export]
