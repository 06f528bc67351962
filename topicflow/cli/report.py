"""``topicflow report``: one self-contained HTML page about a saved model."""
from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path

import click

from topicflow._typing import CoherenceMeasure, choices
from topicflow.api.hdp import HDPTopics, hdp_topics
from topicflow.cli._common import (
    LOCATION,
    cluster_options,
    model_location,
    progress_reporter,
    reports_errors,
    storage_options_option,
)
from topicflow.errors import InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel, load_model
from topicflow.io.output_paths import prepare_output, staged_output_file
from topicflow.io.outputs.report import (
    ReportData,
    TopicWords,
    TracePanel,
    render_report,
    write_report,
)
from topicflow.io.outputs.report_figures import figure_size, rank_history_png
from topicflow.io.storage import Location
from topicflow.metrics.confirmation import arithmetic_mean
from topicflow.metrics.topic_coherence import resolve_measure
from topicflow.pipeline.cluster import ClusterConfig, connect
from topicflow.pipeline.evaluation.report import (
    ReportOptions,
    build_report,
    coherence_summary,
    topic_cards,
)
from topicflow.pipeline.infvoc_lda import is_infvoc_model
from topicflow.pipeline.progress import ProgressReporter
from topicflow.pipeline.tree_lda import is_tree_model
from topicflow.pipeline.tree_lda.readout import topic_concept_weights, tree_facts


@click.command()
@click.argument("model_path", metavar="MODEL", type=LOCATION)
@click.option("--corpus", "store", type=click.Path(file_okay=False), default=None,
              help="Store to fold into the model and score it against: topic sizes from its documents, example "
                   "documents per topic, coherence (default: sizes from the model's topic-word mass, no examples, "
                   "no coherence).")
@click.option("--out", required=True, type=LOCATION, help="The HTML file to write (a path, or a URL: docs/storage.md).")
@click.option("--coherence", "measure", type=click.Choice([*choices(CoherenceMeasure), "none"]), default=None,
              help="Coherence measure against --corpus [default: u_mass, which any store supports; c_uci, c_npmi "
                   "and c_v need a store ingested with --keep-order].")
@click.option("--coherence-top-n", default=10, show_default=True, type=click.IntRange(min=1),
              help="Top words per topic the coherence scores.")
@click.option("--window", default=None, type=click.IntRange(min=1),
              help="Sliding-window width of c_uci, c_npmi and c_v (default gensim's: 10, 10, 110).")
@click.option("--top-words", default=12, show_default=True, type=click.IntRange(min=1), help="Words in each topic's chart.")
@click.option("--examples", default=5, show_default=True, type=click.IntRange(min=1),
              help="Example documents per topic (with --corpus).")
@click.option("--snippet-words", default=30, show_default=True, type=click.IntRange(min=1),
              help="Words shown of each example document.")
@click.option("--evolution-threshold", default=0.5, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="Hellinger distance above which topics matched across model versions count as a vanished "
                   "and a new topic.")
@click.option("--max-versions", default=8, show_default=True, type=click.IntRange(min=2),
              help="Compare the newest N versions in the topic evolution.")
@click.option("--all-topics", is_flag=True,
              help="HDP: show all T topics of the truncation, not only those in use (share >= the model's threshold).")
@click.option("--overwrite", is_flag=True, help="Replace an existing file at --out.")
@storage_options_option
@cluster_options
@reports_errors
def report(model_path: str | Path, store: str | None, out: str | Path, measure: str | None, coherence_top_n: int,
           window: int | None, top_words: int, examples: int, snippet_words: int, evolution_threshold: float,
           max_versions: int, all_topics: bool, overwrite: bool, cluster: ClusterConfig) -> None:
    """Write an HTML report of MODEL: topics (top words, size, coherence, examples), trace, evolution.

    An HDP model's report shows its topics in use (--all-topics: every topic of the truncation). A tree
    model's report names its prior tree and charts each topic's top concepts beside its words. An infvoc
    model's report shows each top word's rank in its topic's truncation ordered set, the growth of the
    vocabulary along the stream and, for the words tracked at fit time (`fit --track-words`), their rank
    across minibatches (the chapter's Figure 7.1).
    """
    location = prepare_output(out, what="report", option="report --out", overwrite=overwrite, kind="file")
    saved = load_model(model_location(model_path))
    in_use = None if all_topics or saved.info.family != "hdp" else hdp_topics(saved)
    tree = saved if is_tree_model(saved) else None
    infvoc = saved if is_infvoc_model(saved) else None
    options = ReportOptions(top_words=top_words, examples=examples, snippet_words=snippet_words,
                            evolution_threshold=evolution_threshold, max_versions=max_versions)
    progress = progress_reporter()
    started = time.perf_counter()
    if store is None:
        if measure not in (None, "none"):
            raise InvalidParameterError("--coherence needs --corpus STORE: the reference whose word statistics "
                                        "score the topics (usually the training store)")
        data = build_report(model_path, options=options, progress=progress,
                            coherence_note="Coherence was not computed: give a reference store with "
                                           "`topicflow report MODEL --corpus STORE`.")
        cards = _write(data, in_use, location, client=None, progress=progress, tree=tree, infvoc=infvoc)
    else:
        corpus = Corpus.open(store)
        measure = measure or "u_mass"
        if measure != "none":
            found, _ = resolve_measure(measure, window)  # fail before a cluster starts
            if found.uses_windows and not corpus.has_order:
                raise OrderNotKeptError(
                    f"--coherence {measure} counts sliding windows, which need each document's tokens in reading "
                    f"order, but store {store!r} was ingested without them. Re-ingest it with `topicflow ingest "
                    "--keep-order`, or use --coherence u_mass (document co-occurrence, which any store supports).",
                    path=store)
        with connect(cluster) as client:
            scores = None
            if measure != "none":
                progress.message(f"coherence ({measure}) against {store}")
                scores = coherence_summary(model_path, corpus, measure=measure, top_n=coherence_top_n,
                                           window=window, client=client)
            data = build_report(model_path, corpus, coherence=scores, options=options, client=client,
                                progress=progress, coherence_note="Coherence was not computed (--coherence none).")
            cards = _write(data, in_use, location, client=client, progress=progress, tree=tree, infvoc=infvoc)
    shown = f"{cards} topics" if in_use is None else f"{in_use.headline()}"
    click.echo(f"wrote report of {shown} to {out} ({time.perf_counter() - started:.1f} s)", err=True)


def only_topics_in_use(data: ReportData, in_use: HDPTopics) -> ReportData:
    """The report of an HDP model with only its topics in use (and their coherence and its mean).

    Parameters
    ----------
    data : ReportData
        The report of every topic of the truncation.
    in_use : HDPTopics
        The model's topics in use.

    Returns
    -------
    ReportData
        Topics by decreasing stick weight; a fact line says how many are in use of the truncation.
    """
    position = {int(topic.index): i for i, topic in enumerate(data.topics)}
    keep = [position[int(k)] for k in in_use.in_use if int(k) in position]
    coherence = data.coherence
    if coherence is not None:
        per_topic = tuple(coherence.per_topic[i] for i in keep)
        coherence = replace(coherence, per_topic=per_topic, mean=arithmetic_mean(list(per_topic)) if per_topic else
                            float("nan"))
    return replace(data, topics=tuple(data.topics[i] for i in keep), coherence=coherence,
                   facts=(*data.facts, ("topics in use", in_use.headline())))


def with_tree_readout(data: ReportData, model: SavedModel) -> ReportData:
    """The report of a tree model: its tree named in the facts, a concepts panel per topic, a note.

    Parameters
    ----------
    data : ReportData
        The report as for any model (the tree model read through its LDA view).
    model : SavedModel
        The tree model.

    Returns
    -------
    ReportData
        The method line names the tree fit's scheme, and the model family and the prior tree
        (source, concepts, paths) follow it; each topic's words gain a ``concepts`` panel of its top concepts (as many as words
        shown) with their mass; a note says how both are computed.
    """
    facts = list(data.facts)
    method, *tree = tree_facts(model)
    at = next((i for i, (name, _) in enumerate(facts) if name == "method"), len(facts))
    facts[at:at + 1] = [method, *tree]  # the generic method line would call a Gibbs fit variational
    n_words = max((len(w.terms) for topic in data.topics for w in topic.words), default=10)
    concepts = topic_concept_weights(model, n_words)
    topics = tuple(replace(topic, words=(*topic.words, TopicWords("concepts", *concepts[topic.index])))
                   if concepts[topic.index][0] else topic for topic in data.topics)
    langs = ", ".join(model.state.languages)
    note = ("Prior tree", (
        "A tree model's word probabilities are the posterior means of the tree: the sum, over each word's paths "
        "(one per concept it is in, or one from the root), of the product of the edge means along the path, per "
        f"language. The concepts panel shows the concepts with the most mass in the topic: the share of the "
        f"topic's probability that passes through the concept, averaged over the languages ({langs}). "
        "`topicflow topics MODEL` lists each word's paths and `topicflow export` writes the edge parameters."))
    return replace(data, facts=tuple(facts), topics=topics, notes=(*data.notes, note))


def with_infvoc_readout(data: ReportData, model: SavedModel, *, n_words: int) -> ReportData:
    """The report of an infvoc model: its settings in the facts, ranked words, the stream's trace, a note.

    Parameters
    ----------
    data : ReportData
        The report as for any model (the infvoc model read through its LDA view).
    model : SavedModel
        The infvoc model.
    n_words : int
        Words shown per topic.

    Returns
    -------
    ReportData
        The method line names infinite-vocabulary online LDA and the facts add alpha^beta, T, U, the G0
        and the words seen; each topic's words are its top words by E[beta] (the model's own, not the
        view's) labelled with their TOS rank; the trace charts the words seen, the new words and the
        mean TOS size per minibatch; a note says how to read them.
    """
    from topicflow.api.infvoc import topic_words_with_ranks
    from topicflow.pipeline.infvoc_lda import saved_infvoc

    params, state, index, position = saved_infvoc(model)
    source = (model.info.extra.get("infvoc") or {}).get("g0_source")
    g0 = {None: "none (G0 = 1, as the reference code)", "default": "the shipped English G0"}.get(source, str(source))
    facts = [(name, value) for name, value in data.facts if name not in ("sum of alpha", "topic-word prior eta")]
    at = next((i for i, (name, _) in enumerate(facts) if name == "method"), len(facts))
    facts[at:at + 1] = [
        ("method", "online LDA with an infinite vocabulary (infvoc; Zhai 2014, ch. 7), hybrid E-step"),
        ("stream", f"{position.i} minibatches of {position.plan.batch_size} documents, {position.docs_seen:,} "
                   f"documents; epsilon_i = ({params.step.tau0:g} + i)^-{params.step.kappa:g}"),
        ("truncation", f"alpha^beta {params.stick_concentration:g}, T = {params.truncation}, U = "
                       f"{params.reorder_every}; TOS sizes {int(state.tos_sizes().min()):,}-"
                       f"{int(state.tos_sizes().max()):,}"),
        ("words seen", f"{len(index):,} strings (the LDA view holds {len(model.vocabularies['default']):,})"),
        ("G0", g0), ("alpha^theta", f"{params.alpha:g}"),
    ]
    ranked = topic_words_with_ranks(state, index, n_words)
    topics = tuple(replace(topic, words=(TopicWords(
        "E[beta]", tuple(f"{w} #{r}" for w, _, r in ranked[topic.index]),
        tuple(p for _, p, _ in ranked[topic.index])),)) for topic in data.topics)
    records = list(model.info.trace)
    x = tuple(float(r["i"]) for r in records)
    trace = (
        TracePanel("minibatch", "words seen", x, tuple(float(r["n_words"]) for r in records)),
        TracePanel("minibatch", "new words in the minibatch", x, tuple(float(r["new_words"]) for r in records)),
        TracePanel("minibatch", "mean TOS size", x,
                   tuple(float(sum(r["tos_sizes"]) / max(len(r["tos_sizes"]), 1)) for r in records)),
    ) if records else ()
    tracked = sorted({w for r in records for w in (r.get("word_ranks") or {})})
    note = ("Infinite vocabulary", (
        "Each topic is a Dirichlet process over all strings, truncated to an ordered set of words (TOS) that grows "
        "with every minibatch and is re-sorted by the ranking score R and cut to T words every U minibatches. A "
        "topic's words are its most probable by E[beta] (the stick expectations), each with its rank in the TOS "
        "(#1 = first). " + (
            f"The rank charts follow the words tracked at fit time ({', '.join(tracked)}) across minibatches, as the "
            "chapter's Figure 7.1: each word is charted in the topic where it ends best ranked; a gap means the word "
            "was not in the TOS (not seen yet, or dropped at a contraction)." if tracked else
            "No words were tracked at fit time: `topicflow fit --family infvoc --track-words w1,w2` records their "
            "ranks after every minibatch, and this report then charts them (the chapter's Figure 7.1).")
        + " Sizes, examples and coherence read the model's LDA view (docs/infvoc.md)."))
    return replace(data, facts=tuple(facts), topics=topics, trace=trace,
                   trace_note="Per minibatch: the strings seen so far, the new ones, and the mean TOS size.",
                   notes=(*data.notes, note))


def rank_charts(model: SavedModel) -> dict[int, str]:
    """Figure 7.1 per topic: the tracked words' TOS ranks across minibatches, as ``<figure>`` HTML.

    Parameters
    ----------
    model : SavedModel
        An infvoc model whose trace recorded tracked words.

    Returns
    -------
    dict of int to str
        Topic index -> a figure with one line per tracked word whose final rank is best in that topic
        (the words tracked in no TOS at the end are charted in the topic where they were best ranked last).
    """
    import base64
    import html

    import numpy as np

    from topicflow.api.infvoc import word_rank_history
    from topicflow.pipeline.infvoc_lda import InfVocRecord

    records = [InfVocRecord(**r) for r in model.info.trace]
    history = word_rank_history(records)
    x = [float(r.i) for r in records if r.word_ranks]
    by_topic: dict[int, list[tuple[str, list[float]]]] = {}
    for word, ranks in history.items():
        present = [row for row in ranks if np.any(row > 0)]
        last = present[-1] if present else ranks[-1]
        k = int(np.argmin(np.where(last > 0, last, np.iinfo(np.int64).max)))
        by_topic.setdefault(k, []).append((f"{word} (#{int(ranks[-1, k]) or '-'})", ranks[:, k].astype(float).tolist()))
    charts = {}
    for k, series in by_topic.items():
        png = rank_history_png(x, series, title=f"topic-{k}: rank of tracked words")
        width, height = figure_size(png)
        alt = html.escape(f"rank of {', '.join(label for label, _ in series)} in topic-{k} across minibatches")
        charts[k] = (f'<h4>Rank across minibatches (Fig. 7.1)</h4><figure><img class="rank-chart" '
                     f'src="data:image/png;base64,{base64.b64encode(png).decode("ascii")}" width="{width}" '
                     f'height="{height}" alt="{alt}"></figure>')
    return charts


def _write(data: ReportData, in_use: HDPTopics | None, out: Location, *, client: object, progress: ProgressReporter,
           tree: SavedModel | None = None, infvoc: SavedModel | None = None) -> int:
    """Render and write the report (only the topics in use of an HDP model; the tree read-out of a tree
    model; the ranks of an infvoc model); return the topics shown."""
    if tree is not None:
        data = with_tree_readout(data, tree)
    if infvoc is not None:
        data = with_infvoc_readout(data, infvoc, n_words=max((len(w.terms) for t in data.topics for w in t.words),
                                                              default=12))
    if in_use is not None:
        data = only_topics_in_use(data, in_use)
    cards = topic_cards(data, client=client, progress=progress)
    if infvoc is not None:
        charts = rank_charts(infvoc)
        cards = [card.replace("</article>", charts[topic.index] + "</article>") if topic.index in charts else card
                 for card, topic in zip(cards, data.topics)]
    page = render_report(data, topic_cards=cards)
    with staged_output_file(out) as local:
        write_report(local, page)
    return len(data.topics)


COMMANDS = [report]
