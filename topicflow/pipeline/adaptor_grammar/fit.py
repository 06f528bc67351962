"""Driver of online adaptor grammars ([Z] Alg. 6) on Dask: minibatches of sentences, parallel E-steps.

Each minibatch of ``batch_size`` sentences is cut into ``n_partitions`` contiguous partitions; each is
parsed by its own task under the G' of the current state and the partitions' integer counts are merged in
a tree (:func:`topicflow.tasks.adaptor_grammar.map_estep`); the driver applies the update
(:func:`topicflow.models.adaptor_grammar.update_minibatch`). Random numbers are keyed by (seed,
minibatch, sentence), so the same seed gives the same model for any number of partitions or workers.

Sentences come from a store's ordered-token layer (:func:`read_sentences`: each document's tokens joined
into one character sequence; the gold segmentation is the token boundaries) or from the caller (strings or
sequences of terminal tokens). All sentences are held in memory (character sequences are small); reading
a store in a stream is not done.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from topicflow.errors import InputError, InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.models.adaptor_grammar import (
    SHIPPED_GRAMMARS,
    AGState,
    AGStats,
    Grammar,
    OnlineParams,
    initial_state,
    parse_grammar,
    prepare,
    update_minibatch,
)
from topicflow.models.common.rng import STREAM_SHUFFLE, doc_generator
from topicflow.pipeline.cluster import compute
from topicflow.tasks.adaptor_grammar import map_estep


@dataclass(frozen=True)
class GrammarFitConfig:
    """Settings of a fit ([Z] section 8.3; footnote 7 for Brent: unigram B=20, tau=128, kappa=0.6, u=50).

    Parameters
    ----------
    grammar : str
        A shipped grammar (``unigram``, ``collocation``, ``infvoc-lda``) or a grammar file.
    grammar_params : mapping of str to int
        Template parameters of the grammar (``D``, ``K`` of ``infvoc-lda``).
    truncations : mapping of str to int
        K per adapted nonterminal, overriding the file's.
    batch_size : int
        B, sentences per minibatch.
    tau, kappa : float
        Step size eps = (tau + l)^-kappa.
    prune_every : int
        The interval u: prune the TNGs every u minibatches.
    n_samples : int
        Trees drawn per sentence.
    passes : int
        Passes over the sentences.
    bias : {"correct", "tau-kappa", "none"}
        Handling of the zero start of f~ and g~ (P3).
    seed : int
        Random seed.
    n_partitions : int
        E-step tasks per minibatch.
    split_every : int
        Fan-in of the merge tree.
    corpus_size : int or None
        |X| of eqs. 8.8-8.9; None: the number of sentences given.
    shuffle : bool
        Visit the sentences in a seeded random order, a new one every pass (as the reference code does);
        default: store order.
    table_labels : bool
        Resample the trees of the cached atoms after every pruning ([Z] section 8.3.1).
    """

    grammar: str = "unigram"
    grammar_params: Mapping[str, int] = field(default_factory=dict)
    truncations: Mapping[str, int] = field(default_factory=dict)
    batch_size: int = 20
    tau: float = 64.0
    kappa: float = 0.8
    prune_every: int = 10
    n_samples: int = 10
    passes: int = 1
    bias: str = "correct"
    seed: int = 0
    n_partitions: int = 1
    split_every: int = 8
    corpus_size: int | None = None
    shuffle: bool = False
    table_labels: bool = False

    def __post_init__(self) -> None:
        """Validate the settings."""
        for name in ("batch_size", "prune_every", "n_samples", "passes", "n_partitions"):
            if int(getattr(self, name)) < 1:
                raise InvalidParameterError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.split_every < 2:
            raise InvalidParameterError(f"split_every must be >= 2, got {self.split_every!r}")


def grammar_text(name_or_path: str) -> tuple[str, str]:
    """Return the text of a shipped grammar or a grammar file, and the name to report it under.

    Parameters
    ----------
    name_or_path : str
        A shipped grammar name or a path.

    Returns
    -------
    text : str
    where : str
    """
    if name_or_path in SHIPPED_GRAMMARS:
        res = resources.files("topicflow") / "data" / "grammars" / f"{name_or_path}.grammar"
        return res.read_text(encoding="utf-8"), f"<shipped {name_or_path}.grammar>"
    path = Path(name_or_path)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise InputError(f"grammar file {name_or_path} not found (shipped grammars: {', '.join(SHIPPED_GRAMMARS)})",
                         path=str(path)) from None


@dataclass(frozen=True)
class Sentences:
    """Sentences read from a store, with their gold segmentation.

    Parameters
    ----------
    texts : list of str
        Each document's tokens joined (no spaces).
    word_lengths : list of list of int
        The length of each token: the gold word boundaries.
    doc_ids : list of str
        Document ids.
    n_skipped : int
        Documents without tokens (not returned).
    """

    texts: list[str]
    word_lengths: list[list[int]]
    doc_ids: list[str]
    n_skipped: int = 0


def read_sentences(corpus: Corpus, language: str | None = None) -> Sentences:
    """Read a store's ordered-token layer as character sequences (one per document).

    Parameters
    ----------
    corpus : Corpus
        A store ingested with ``--keep-order``.
    language : str, optional
        Needed for a multilingual store.

    Returns
    -------
    Sentences

    Raises
    ------
    OrderNotKeptError
        If the store does not keep token order.
    """
    if not corpus.has_order:
        raise OrderNotKeptError(
            f"store {str(corpus.path)!r} does not keep token order (it was ingested without --keep-order); "
            "adaptor grammars read each document's tokens in order: re-ingest it with `topicflow ingest "
            "--keep-order`", path=str(corpus.path))
    lang = corpus.resolve_language(language)
    terms = corpus.vocabulary(lang).terms
    texts: list[str] = []
    lengths: list[list[int]] = []
    ids: list[str] = []
    skipped = 0
    for block in corpus.iter_ordered(lang):
        for row in range(block.n_docs):
            codes = block.doc_tokens(row)
            words = [str(terms[t]) if t >= 0 else str(block.oov_terms[-t - 1]) for t in codes.tolist()]
            if not words:
                skipped += 1
                continue
            texts.append("".join(words))
            lengths.append([len(w) for w in words])
            ids.append(str(block.doc_ids[row]))
    return Sentences(texts, lengths, ids, skipped)


def token_sentences(corpus: Corpus, language: str | None = None) -> tuple[list[list[str]], int]:
    """Read a store as the sentences of the ``infvoc-lda`` grammar ([Z] section 8.4.2): one per token.

    Each token of document j (1-based, documents without tokens skipped and not numbered) becomes the
    sentence ``['_j', c_1, ..., c_n]``: the document's pseudo-word terminal, then the token's characters.

    Parameters
    ----------
    corpus : Corpus
        A store ingested with ``--keep-order``.
    language : str, optional
        Needed for a multilingual store.

    Returns
    -------
    sentences : list of list of str
        In store order.
    n_documents : int
        D, the grammar's template parameter.
    """
    read = read_sentences(corpus, language)
    sentences: list[list[str]] = []
    for j, (text, lengths) in enumerate(zip(read.texts, read.word_lengths), start=1):
        pos = 0
        for n in lengths:
            sentences.append([f"_{j}", *text[pos:pos + n]])
            pos += n
    return sentences, len(read.texts)


@dataclass
class GrammarFitResult:
    """What a fit returns.

    Parameters
    ----------
    state : AGState
        The fitted state.
    params : OnlineParams
        The online settings.
    grammar_text : str
        The grammar file's text.
    log_likelihood : list of float
        Per minibatch, the mean over its sentences of log p(x | G') before the update.
    n_inside_calls : int
        Inside passes run (one per sentence per minibatch; [Z] Fig. 8.2's x axis).
    seconds : float
        Wall-clock time of the fit.
    """

    state: AGState
    params: OnlineParams
    grammar_text: str
    log_likelihood: list[float]
    n_inside_calls: int
    seconds: float


def bind_grammar(config: GrammarFitConfig, sentences: Sequence[Sequence[str]]) -> tuple[Grammar, str]:
    """Parse the configured grammar and bind it to the sentences' alphabet (sorted).

    Parameters
    ----------
    config : GrammarFitConfig
        Gives the grammar, its parameters and truncations.
    sentences : sequence of sequences of str
        The training sentences.

    Returns
    -------
    grammar : Grammar
    text : str
        The grammar file's text.
    """
    text, where = grammar_text(config.grammar)
    spec = parse_grammar(text, path=where, params=dict(config.grammar_params))
    if config.truncations:
        spec = spec.with_adaptors(**dict(config.truncations))
    alphabet = sorted({tok for s in sentences for tok in s})
    return spec.bind(alphabet), text


def fit_grammar(sentences: Sequence[Sequence[str]], config: GrammarFitConfig, *, client: Any = None,
                state: AGState | None = None, grammar_text_: str | None = None,
                on_minibatch: Callable[[AGState, AGStats], None] | None = None) -> GrammarFitResult:
    """Fit an adaptor grammar to sentences by online hybrid inference ([Z] Alg. 6).

    Parameters
    ----------
    sentences : sequence of str or of sequences of str
        Each sentence's terminals (a string is its characters).
    config : GrammarFitConfig
        Settings.
    client : distributed.Client, optional
        Default: the current client, else Dask's threaded scheduler.
    state : AGState, optional
        Continue from this state (its grammar and alphabet are kept).
    grammar_text_ : str, optional
        The grammar text of ``state`` (stored with the result).
    on_minibatch : callable, optional
        Called with the new state and the minibatch's counts after every update.

    Returns
    -------
    GrammarFitResult

    Raises
    ------
    InputError
        If a sentence is empty, has a terminal outside the grammar's alphabet, or has no parse.
    """
    if not sentences:
        raise InputError("no sentences to fit")
    if state is None:
        grammar, text = bind_grammar(config, sentences)
        state = initial_state(grammar, seed=config.seed)
    else:
        grammar, text = state.grammar, grammar_text_ or ""
    encoded = []
    for d, s in enumerate(sentences):
        if len(s) == 0:
            raise InputError(f"sentence {d} is empty")
        encoded.append(grammar.encode(list(s), where=f"sentence {d}"))
    params = OnlineParams(corpus_size=int(config.corpus_size or len(encoded)), tau=config.tau, kappa=config.kappa,
                          prune_every=config.prune_every, n_samples=config.n_samples,
                          bias=config.bias,  # type: ignore[arg-type]
                          seed=config.seed, table_labels=config.table_labels)
    start = time.perf_counter()
    loglik: list[float] = []
    calls = 0
    n = len(encoded)
    for pass_ in range(config.passes):
        order = (doc_generator(config.seed, STREAM_SHUFFLE, state.minibatch, pass_).permutation(n)
                 if config.shuffle else np.arange(n))
        for lo in range(0, n, config.batch_size):
            hi = min(n, lo + config.batch_size)
            ids = order[lo:hi].tolist()
            cuts = np.linspace(0, hi - lo, min(config.n_partitions, hi - lo) + 1).round().astype(int)
            partitions = [([encoded[i] for i in ids[a:b]], ids[a:b]) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]
            epoch = state.minibatch + 1
            graph = map_estep(grammar, prepare(state), [t.keys for t in state.tngs], partitions,
                              n_samples=params.n_samples, seed=params.seed, epoch=epoch,
                              split_every=config.split_every, token=f"{params.seed}-{epoch}")
            try:
                (stats,) = compute(graph, client=client)
            except ValueError as exc:
                raise InputError(f"minibatch {epoch}: {exc}") from exc
            state = update_minibatch(state, stats, params)
            loglik.append(stats.log_likelihood / stats.n_sentences)
            calls += stats.n_sentences
            if on_minibatch is not None:
                on_minibatch(state, stats)
    return GrammarFitResult(state, params, text, loglik, calls, time.perf_counter() - start)
