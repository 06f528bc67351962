"""Unsupervised word segmentation (Zhai 2014, section 8.4.1, Figure 8.2 and Table 8.2) on text we have.

Data: KJV verses (``~/.cache/topicflow-dev-corpora/bible_kjv.jsonl``) or any text/JSONL given with
``--input``, turned into unsegmented character sequences by
:func:`topicflow.io.sources.segmentation.read_segmentation_corpus` (lowercase, letters only, punctuation
and line ends as hard boundaries, spaces removed, the original words kept as gold). The first
``--sentences`` sentences (of at most ``--max-chars`` letters) are split 70/30 by ``--split-seed`` into
train and test.

``--gold FILE`` reads a published gold-segmented corpus instead (one utterance per line, words separated
by spaces, every character a terminal as written), for the chapter's own data: the phonemic Brent corpus
of Fig. 8.2, ``brent-phone/truth.dat`` in PyAdaGram's repository (``github.com/kzhai/PyAdaGram``,
``brent-phone.tar.gz``; 9,790 utterances; the same as Johnson and Goldwater's ``br-phono``).

Arms (``--arms``):

- ``pycfg``: Mark Johnson's py-cfg, the chapter's MCMC baseline (adaptor-grammar Gibbs sampler,
  incremental initialization, table-label resampling every iteration, PY hyperparameters sampled as in
  Johnson & Goldwater 2009), built from source by ``benchmarks/anchors/pycfg.py`` into ``build/pycfg``.
  Inside calls: one per training sentence at initialization and one per sentence per iteration (each
  resampling parses the sentence once with the proposal PCFG). One sample per sentence (the chain's state).
- ``dpseg``: the DP-unigram Gibbs segmenter of Goldwater, Griffiths & Johnson (2009)
  (:mod:`topicflow.models.adaptor_grammar.mcmc`), an independent MCMC check; unigram grammar only.
  "Inside-call equivalents": one per sentence resampled (all of its boundaries once), i.e. one per
  training sentence per sweep. Its held-out protocol is the chapter's: ten independent segmentations
  per test sentence from the state's frozen predictive unigram, NLL of the max-probability sample.
- ``online`` / ``variational``: the online adaptor grammar of ``topicflow.models.adaptor_grammar`` (ONLINE
  with the chapter's B, tau, kappa, u, K; VARIATIONAL = B = D, kappa = 0); one inside call per sentence
  parsed in training (evaluation parses not counted). ``--online-init seed`` (default) first parses every
  training sentence once (``online.seed_state``, PyAdaGram's seed pass; those inside calls count, scored as
  iteration 0); ``--online-init empty`` is [Z]'s printed start, which over-segments real text. Recorded as ``not available`` with the reason when
  that package is absent or its interface differs from what :func:`run_online` expects.

Every arm records, against the number of inside calls: training token F1 (sample-averaged and of the
max-probability sample: identical for one-sample arms), boundary and lexicon F1, and at the same points
the test-set token F1 and (where the arm gives it) held-out negative log-likelihood. Prints one JSON
object per arm and a table; ``--out`` writes the JSON list, ``--plot`` a PNG of F1 vs inside calls.

Example (the RESULTS.md runs; numbers taken on a contended 2-core machine)::

    nice .venv/bin/python benchmarks/bench_adaptor_grammar.py --sentences 5000 --arms pycfg \
        --iterations 300 --eval-every 10 --out benchmarks/out/ag_seg_pycfg.json
    nice .venv/bin/python benchmarks/bench_adaptor_grammar.py --sentences 5000 --arms dpseg \
        --iterations 2000 --eval-every 50 --out benchmarks/out/ag_seg_dpseg.json
    .venv/bin/python benchmarks/bench_adaptor_grammar.py --combine benchmarks/out/ag_seg_*.json \
        --plot benchmarks/plots/ag-seg-unigram.png
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent))

from anchors import pycfg  # noqa: E402

from topicflow.io.sources.segmentation import (  # noqa: E402
    SegmentationCorpus,
    read_segmentation_corpus,
    read_segmented_lines,
)
from topicflow.metrics.segmentation import sampled_scores  # noqa: E402

KJV = Path.home() / ".cache" / "topicflow-dev-corpora" / "bible_kjv.jsonl"
ROOT = Path(__file__).resolve().parents[1]

#: Zhai (2014) footnote 7: ONLINE settings per grammar (B, tau, kappa, u, truncation per adaptor).
CHAPTER_SETTINGS: dict[str, dict[str, Any]] = {
    "unigram": {"batch_size": 20, "tau": 128.0, "kappa": 0.6, "prune_every": 50, "truncation": {"Word": 1500}},
    "collocation": {"batch_size": 5, "tau": 256.0, "kappa": 0.8, "prune_every": 50,
                    "truncation": {"Word": 1500, "Colloc": 3000}},
}


def point(inside_calls: int, seconds: float, train: SegmentationCorpus, train_samples: Sequence[Sequence[Sequence[str]]],
          train_log_probs: Sequence[Sequence[float]], test: SegmentationCorpus | None = None,
          test_samples: Sequence[Sequence[Sequence[str]]] | None = None,
          test_log_probs: Sequence[Sequence[float]] | None = None, **extra: Any) -> dict[str, Any]:
    """One point of a curve: scores of the samples after ``inside_calls`` inside calls."""
    scores = sampled_scores(train.gold, train_samples, train_log_probs)
    record: dict[str, Any] = {
        "inside_calls": inside_calls, "seconds": seconds,
        "token_f1": scores.sample_averaged.token.f1, "token_f1_max": scores.max_probability.token.f1,
        "boundary_f1": scores.sample_averaged.boundary.f1, "lexicon_f1": scores.sample_averaged.type.f1,
        "token_precision": scores.sample_averaged.token.precision, "token_recall": scores.sample_averaged.token.recall,
    }
    if test is not None and test_samples is not None and test_log_probs is not None:
        held = sampled_scores(test.gold, test_samples, test_log_probs)
        record.update(test_token_f1=held.sample_averaged.token.f1, test_token_f1_max=held.max_probability.token.f1)
    record.update(extra)
    return record


def unavailable(arm: str, grammar: str, reason: str) -> dict[str, Any]:
    """The record of an arm that cannot run here (never a number)."""
    return {"arm": arm, "grammar": grammar, "status": "not available", "reason": reason, "curve": []}


def run_pycfg(args: argparse.Namespace, train: SegmentationCorpus, test: SegmentationCorpus) -> dict[str, Any]:
    """The py-cfg arm: build (once), run, score every evaluation block."""
    try:
        binary = pycfg.build(src=args.pycfg_src, git=args.pycfg_git)
    except (OSError, subprocess.CalledProcessError) as exc:  # a failed clone or make: say so, never a number
        return unavailable("pycfg", args.grammar, f"py-cfg could not be built: {exc!r}")
    alphabet = sorted(set("".join(train.sentences + test.sentences)))
    result = pycfg.run(binary, train.sentences, test.sentences, alphabet, workdir=args.workdir / "pycfg",
                       iterations=args.iterations, eval_every=args.eval_every, seed=args.seed + 1,
                       grammar=args.grammar, nice=0)
    seconds = {int(row["iteration"]): row["seconds"] for row in result.trace}
    curve = []
    n = len(train)
    for k, block in enumerate(result.train_blocks):
        iteration = min(k * args.eval_every, args.iterations)
        one = [[words] for words in block]
        test_one = [[words] for words in result.test_blocks[k]] if k < len(result.test_blocks) else None
        curve.append(point(n * (1 + iteration), seconds.get(iteration, float("nan")), train, one, [[0.0]] * n,
                           test if test_one else None, test_one, [[0.0]] * len(test), iteration=iteration,
                           test_neg_log_lik=None))
    return {"arm": "pycfg", "grammar": args.grammar, "status": "ok", "curve": curve,
            "wall_seconds": result.wall_seconds, "n_samples": 1,
            "note": "one sample per sentence (the chain's state); py-cfg prints no held-out likelihood",
            "flags": list(pycfg.DEFAULT_FLAGS), "source": f"{pycfg.REPO_URL}@{pycfg.COMMIT}:{pycfg.SUBDIR}"}


def run_dpseg(args: argparse.Namespace, train: SegmentationCorpus, test: SegmentationCorpus) -> dict[str, Any]:
    """The DP-unigram Gibbs arm (Goldwater et al. 2009), scored every ``--eval-every`` sweeps."""
    if args.grammar != "unigram":
        return unavailable("dpseg", args.grammar, "the DP segmenter is the unigram model only")
    from topicflow.models.adaptor_grammar import mcmc

    alphabet = sorted(set("".join(train.sentences + test.sentences)))
    params = mcmc.DPSegParams(concentration=args.dp_concentration, stop_prob=args.dp_stop_prob,
                              n_symbols=len(alphabet), anneal_sweeps=args.anneal_sweeps)
    mcmc.run_sweeps(mcmc.init_state(["ab"], seed=0), params, seed=0, n_sweeps=1)  # compile
    state = mcmc.init_state(train.sentences, seed=args.seed)
    curve = []
    elapsed = 0.0
    n = len(train)
    sweeps = 0
    while True:
        test_samples, test_log_probs, marginal = mcmc.sample_heldout(state, params, test.sentences,
                                                                     n_samples=10, seed=args.seed)
        best = [max(lp) for lp in test_log_probs]
        curve.append(point(n * sweeps, elapsed, train, [[w] for w in mcmc.segmentations(state)], [[0.0]] * n,
                           test, test_samples, test_log_probs, iteration=sweeps,
                           test_neg_log_lik=-float(sum(best)), test_neg_log_marginal=-float(sum(marginal))))
        if sweeps >= args.iterations:
            break
        step = min(args.eval_every, args.iterations - sweeps)
        started = time.perf_counter()
        state = mcmc.run_sweeps(state, params, seed=args.seed, n_sweeps=step)
        elapsed += time.perf_counter() - started
        sweeps += step
    return {"arm": "dpseg", "grammar": "unigram", "status": "ok", "curve": curve, "n_samples": 1,
            "params": {"concentration": params.concentration, "stop_prob": params.stop_prob,
                       "utterance_prior": params.utterance_prior, "anneal_sweeps": params.anneal_sweeps},
            "note": "training: one sample per sentence (the chain's state); test: 10 samples from the frozen "
                    "predictive unigram, NLL of the max-probability sample (nats)"}


def run_online(args: argparse.Namespace, train: SegmentationCorpus, test: SegmentationCorpus,
               *, variational: bool) -> dict[str, Any]:
    """ONLINE (or VARIATIONAL: B = D, kappa = 0) through the adaptor-grammar package's functional API.

    Written against the interface of ``topicflow.models.adaptor_grammar`` as it stood while being
    built (not run here): ``load_grammar(name).with_adaptors(...).bind(alphabet)``, ``grammar.encode``,
    ``online.OnlineParams``, ``online.initial_state``, ``online.fit_minibatch`` (one inside chart per
    sentence), ``online.prepare`` and ``online.sample_segmentations`` (ten draws from one chart, with
    their G' log weights). Any missing name makes the arm "not available", never a number.
    """
    arm = "variational" if variational else "online"
    try:
        from topicflow.models.adaptor_grammar import online as ag
        from topicflow.models.adaptor_grammar.grammar import load_grammar
        api = {name: getattr(ag, name) for name in
               ("OnlineParams", "initial_state", "fit_minibatch", "prepare", "sample_segmentations")}
    except (ImportError, AttributeError) as exc:
        return unavailable(arm, args.grammar, f"the online adaptor grammar is not available here: {exc}")
    settings = dict(CHAPTER_SETTINGS[args.grammar])
    if variational:
        settings.update(batch_size=len(train), kappa=0.0, prune_every=1)  # one minibatch per iteration: prune each
    spec = load_grammar(args.grammar)
    truncation = {ad.symbol: (1500 if ad.symbol == "Word" else 3000) for ad in spec.adaptors}
    grammar = spec.with_adaptors(**truncation).bind(sorted(set("".join(train.sentences + test.sentences))))
    params = api["OnlineParams"](corpus_size=len(train), tau=settings["tau"], kappa=settings["kappa"],
                                 prune_every=settings["prune_every"], seed=args.seed,
                                 **({} if args.optimize_hyper is None else {"optimize_hyper": args.optimize_hyper}))
    state = api["initial_state"](grammar, seed=args.seed)
    word = list(grammar.nonterminals).index("Word")
    encoded = [grammar.encode(list(s)) for s in train.sentences]
    held_encoded = [grammar.encode(list(s)) for s in test.sentences]

    def draws(sentences: Sequence[str], codes: Sequence[Any]) -> tuple[list[list[list[str]]], list[list[float]]]:
        pcfg = api["prepare"](state)
        keys = [t.keys for t in state.tngs]
        samples, log_probs = [], []
        for d, (text, x) in enumerate(zip(sentences, codes)):
            drawn = api["sample_segmentations"](pcfg, grammar, keys, x, word, n_samples=10, seed=args.seed,
                                                sentence=d)
            samples.append([[text[a:b] for a, b in spans] for _, spans in drawn])
            log_probs.append([weight for weight, _ in drawn])
        return samples, log_probs

    curve = []
    elapsed = 0.0
    inside_calls = 0
    if args.online_init == "seed":  # one parse of every training sentence first (PyAdaGram's seed pass)
        seed_state = getattr(ag, "seed_state", None)
        if seed_state is None:
            return unavailable(arm, args.grammar, "this adaptor-grammar package has no seed_state")
        began = time.perf_counter()
        # (since session 22 seed_state also re-estimates the PY a, b unless optimize_hyper is "none")
        state, _stats = seed_state(state, encoded, list(range(len(train))), params)
        elapsed += time.perf_counter() - began
        inside_calls += len(train)
        samples, log_probs = draws(train.sentences, encoded)
        held, held_lp = draws(test.sentences, held_encoded)
        curve.append(point(inside_calls, elapsed, train, samples, log_probs, test, held, held_lp,
                           iteration=0, test_neg_log_lik=-float(sum(max(lp) for lp in held_lp))))
    batch = int(settings["batch_size"])
    passes = args.variational_iterations if variational else args.online_passes
    n_batches = 0
    for _ in range(passes):
        for start in range(0, len(train), batch):
            began = time.perf_counter()
            state, _stats = api["fit_minibatch"](state, encoded[start:start + batch],
                                                 list(range(start, min(start + batch, len(train)))), params)
            elapsed += time.perf_counter() - began
            inside_calls += len(encoded[start:start + batch])
            n_batches += 1
            if variational or n_batches % args.online_eval_every == 0:
                samples, log_probs = draws(train.sentences, encoded)
                held, held_lp = draws(test.sentences, held_encoded)
                curve.append(point(inside_calls, elapsed, train, samples, log_probs, test, held, held_lp,
                                   iteration=n_batches, test_neg_log_lik=-float(sum(max(lp) for lp in held_lp))))
    return {"arm": arm, "grammar": args.grammar, "status": "ok", "curve": curve, "n_samples": 10,
            "settings": {**settings, "truncation": truncation, "init": args.online_init,
                         "optimize_hyper": getattr(params, "optimize_hyper", "none"),
                         "optimize_after_seed": getattr(params, "optimize_hyper", "none") != "none"},
            "hyper": {grammar.nonterminals[int(c)]: {"a": float(a), "b": float(b)} for c, a, b in
                      zip(state.grammar.adapted, state.grammar.pitman_yor_a, state.grammar.pitman_yor_b)},
            "note": "test NLL: minus the summed G' log weight of each test sentence's max-weight sample"}


def load_data(args: argparse.Namespace) -> tuple[SegmentationCorpus, SegmentationCorpus]:
    if args.gold is not None:  # a published segmented corpus, symbols as written (Brent's phonemes)
        corpus = read_segmented_lines(args.gold, max_chars=args.max_chars)
    else:
        corpus = read_segmentation_corpus(args.input, text_field=args.text_field, max_chars=args.max_chars)
    corpus = corpus.subset(range(min(args.sentences, len(corpus))))
    return corpus.split(test_fraction=0.3, seed=args.split_seed)


def print_table(results: list[dict[str, Any]]) -> None:
    """Each arm's curve: inside calls, F1s, held-out scores, seconds."""
    print("| arm | grammar | inside calls | iter | token F1 (avg / max) | boundary F1 | lexicon F1 | test token F1 "
          "(avg / max) | test NLL | seconds |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        if result["status"] != "ok":
            print(f"| {result['arm']} | {result['grammar']} | arm not available: {result['reason']} |")
            continue
        for row in result["curve"]:
            nll = row.get("test_neg_log_lik")
            print(f"| {label(result)} | {result['grammar']} | {row['inside_calls']:,} | {row.get('iteration', '')} | "
                  f"{row['token_f1']:.3f} / {row['token_f1_max']:.3f} | {row['boundary_f1']:.3f} | "
                  f"{row['lexicon_f1']:.3f} | {row.get('test_token_f1', float('nan')):.3f} / "
                  f"{row.get('test_token_f1_max', float('nan')):.3f} | "
                  f"{'' if nll is None else f'{nll:,.0f}'} | {row['seconds']:.1f} |")


def label(result: dict[str, Any]) -> str:
    """The arm's name, with its annealing when it has one."""
    anneal = result.get("params", {}).get("anneal_sweeps", 0)
    return f"{result['arm']} (annealed over {anneal} sweeps)" if anneal else str(result["arm"])


def plot(results: list[dict[str, Any]], path: Path) -> None:
    """Token F1 (sample-averaged) against inside calls, one line per arm (Figure 8.2's axes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for result in results:
        rows = [row for row in result["curve"] if row["inside_calls"] > 0]
        if result["status"] == "ok" and rows:
            ax.plot([row["inside_calls"] for row in rows], [row["token_f1"] for row in rows], marker=".",
                    label=label(result))
    ax.set_xscale("log")
    ax.set_xlabel("inside calls (py-cfg: parses; dpseg: sentences resampled)")
    ax.set_ylabel("training word-token F1")
    ax.set_title(f"word segmentation, {results[0]['grammar'] if results else ''} grammar")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--input", type=Path, default=KJV)
    parser.add_argument("--text-field", default="text")
    parser.add_argument("--gold", type=Path, default=None,
                        help="instead of --input: a gold-segmented file, one utterance per line, words separated by "
                             "spaces, every character a terminal as written (the Brent corpus: PyAdaGram's "
                             "brent-phone/truth.dat)")
    parser.add_argument("--sentences", type=int, default=3000, help="first N sentences (before the split)")
    parser.add_argument("--max-chars", type=int, default=60)
    parser.add_argument("--split-seed", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--grammar", choices=["unigram", "collocation"], default="unigram")
    parser.add_argument("--arms", nargs="+", default=["pycfg", "dpseg", "online", "variational"],
                        choices=["pycfg", "dpseg", "online", "variational"])
    parser.add_argument("--iterations", type=int, default=200, help="MCMC iterations (sweeps)")
    parser.add_argument("--eval-every", type=int, default=10, help="MCMC iterations between scores")
    parser.add_argument("--anneal-sweeps", type=int, default=0, help="dpseg: anneal over this many first sweeps")
    parser.add_argument("--dp-concentration", type=float, default=20.0)
    parser.add_argument("--dp-stop-prob", type=float, default=0.5)
    parser.add_argument("--online-passes", type=int, default=2)
    parser.add_argument("--online-eval-every", type=int, default=10, help="ONLINE minibatches between scores")
    parser.add_argument("--variational-iterations", type=int, default=20)
    parser.add_argument("--online-init", choices=["seed", "empty"], default="seed",
                        help="ONLINE/VARIATIONAL start: 'seed' parses every training sentence once first "
                             "(PyAdaGram's seed pass; counted as inside calls, scored as iteration 0); 'empty' is "
                             "[Z]'s printed start (empty TNGs), which over-segments (docs/adaptor_grammar.md)")
    parser.add_argument("--optimize-hyper", choices=["ab", "a", "none"], default=None,
                        help="online/variational: which PY hyperparameters are re-estimated after every pruning "
                             "(default: the package's, OnlineParams.optimize_hyper)")
    parser.add_argument("--pycfg-src", type=Path, default=None)
    parser.add_argument("--pycfg-git", default=os.environ.get("PYCFG_GIT"))
    parser.add_argument("--workdir", type=Path, default=ROOT / "build" / "bench_adaptor_grammar")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--plot", type=Path, default=None)
    parser.add_argument("--combine", type=Path, nargs="+", default=None,
                        help="only print the table (and --plot) of saved --out files, run nothing")
    args = parser.parse_args(argv)
    if args.combine:
        saved = [result for path in args.combine for result in json.loads(path.read_text())]
        print_table(saved)
        if args.plot is not None:
            plot(saved, args.plot)
        return 0
    train, test = load_data(args)
    print(json.dumps({"data": str(args.gold or args.input), "train_sentences": len(train), "test_sentences": len(test),
                      "train_chars": train.n_chars, "train_words": sum(len(g) for g in train.gold),
                      "alphabet": len(set("".join(train.sentences)))}), flush=True)
    runners: dict[str, Callable[[], dict[str, Any]]] = {
        "pycfg": lambda: run_pycfg(args, train, test),
        "dpseg": lambda: run_dpseg(args, train, test),
        "online": lambda: run_online(args, train, test, variational=False),
        "variational": lambda: run_online(args, train, test, variational=True),
    }
    results = []
    for arm in args.arms:
        result = runners[arm]()
        results.append(result)
        print(json.dumps(result), flush=True)
    print_table(results)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=1))
    if args.plot is not None:
        plot(results, args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
