"""Driver of online adaptor grammars ([Z] Alg. 6) on Dask: minibatches of sentences, parallel E-steps.

Each minibatch of ``batch_size`` sentences is cut into ``n_partitions`` contiguous partitions; each is
parsed by its own task under the G' of the current state and the partitions' integer counts are merged in
a tree (:func:`topicflow.tasks.adaptor_grammar.map_estep`); the driver applies the update
(:func:`topicflow.models.adaptor_grammar.update_minibatch`). Random numbers are keyed by (seed,
minibatch, sentence), so the same seed gives the same model for any number of partitions or workers.

A fit from scratch with ``init="seed"`` (the default) first runs the seed pass (PyAdaGram's start,
docs/adaptor_grammar.md "Seed pass"): every sentence is parsed once (one tree, random numbers keyed by
epoch :data:`~topicflow.models.adaptor_grammar.SEED_EPOCH`) by E-step tasks over all of them
(:func:`seed_blocks`), the integer counts are tree-merged, and the driver applies
:func:`~topicflow.models.adaptor_grammar.seed_update`: the model equals the in-memory
:func:`~topicflow.models.adaptor_grammar.seed_state` for any number of partitions or workers. A
continuation (``state`` given: ``partial_fit``, ``topicflow update``) is never seeded.

Sentences come from a store's ordered-token layer (each document's tokens joined into one character
sequence; the gold segmentation is the token boundaries) or from the caller (strings or sequences of
terminal tokens, :func:`fit_grammar`). A store is streamed (:func:`fit_grammar_store`): one pass over it,
shard by shard, records where each sentence is (:class:`SentenceIndex`: three integers per sentence, no
text) and the alphabet; each minibatch's E-step tasks then read their own sentences from the store
(:func:`topicflow.tasks.adaptor_grammar.map_estep_store`), so the driver never holds the text. Sentence d
of the store (documents without tokens skipped) is the same sentence, with the same random numbers, as
item d of the list :func:`read_sentences` returns: both paths give the same model.
"""
from __future__ import annotations

import logging
import time
import uuid
from dataclasses import asdict, dataclass, field, fields
from importlib import resources
from pathlib import Path
from typing import Any, Callable, Literal, Mapping, Sequence

import numpy as np

from topicflow.errors import InputError, InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus
from topicflow.models.adaptor_grammar import (
    SEED_EPOCH,
    SHIPPED_GRAMMARS,
    AGState,
    AGStats,
    Grammar,
    GrammarSpec,
    OnlineParams,
    initial_state,
    parse_grammar,
    prepare,
    rebind_state,
    seed_update,
    update_minibatch,
)
from topicflow.models.common.rng import STREAM_SHUFFLE, doc_generator
from topicflow.pipeline.cluster import compute
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.tasks.adaptor_grammar import (
    SentenceRef,
    map_estep,
    map_estep_store,
    sentence_tokens,
)

log = logging.getLogger(__name__)

#: How a store's documents become sentences: ``chars`` (a document's tokens joined; the unigram and
#: collocation grammars) or ``tokens`` (one sentence ``['_j', characters...]`` per token; ``infvoc-lda``).
SentenceMode = Literal["chars", "tokens"]
#: How a fit starts (docs/adaptor_grammar.md, "Seed pass"): ``seed`` parses every sentence once first
#: (PyAdaGram's start, the default), ``empty`` starts from empty TNGs as [Z] section 8.3.1 prints it.
INIT_CHOICES: tuple[str, ...] = ("seed", "empty")


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
    alphabet : str or None
        Characters to make terminals besides those of the sentences.
    init : {"seed", "empty"}
        ``seed`` (default): before the first minibatch, parse every sentence once under the initial G' and
        seed the TNGs and counts with it (PyAdaGram's start; a deviation from [Z] for ONLINE); ``empty``:
        [Z] section 8.3.1's empty TNGs. Only a fit from scratch is seeded, never a continuation.
    optimize_hyper : {"ab", "a", "none"}
        Which Pitman-Yor hyperparameters are re-estimated after every pruning (``OnlineParams``).
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
    alphabet: str | None = None
    init: str = "seed"
    optimize_hyper: str = "ab"

    def __post_init__(self) -> None:
        """Validate the settings."""
        for name in ("batch_size", "prune_every", "n_samples", "passes", "n_partitions"):
            if int(getattr(self, name)) < 1:
                raise InvalidParameterError(f"{name} must be >= 1, got {getattr(self, name)!r}")
        if self.split_every < 2:
            raise InvalidParameterError(f"split_every must be >= 2, got {self.split_every!r}")
        if self.init not in INIT_CHOICES:
            raise InvalidParameterError(f"init must be one of {', '.join(INIT_CHOICES)}, got {self.init!r}")

    def to_dict(self) -> dict[str, Any]:
        """Return the settings as JSON-able values.

        Returns
        -------
        dict
        """
        out = asdict(self)
        out["grammar_params"] = dict(self.grammar_params)
        out["truncations"] = dict(self.truncations)
        return out

    @classmethod
    def from_dict(cls, payload: Mapping[str, Any]) -> GrammarFitConfig:
        """Rebuild settings written by :meth:`to_dict` (unknown keys are ignored).

        Settings saved before ``init`` existed read as ``init="empty"``: those fits started from empty TNGs.

        Parameters
        ----------
        payload : mapping

        Returns
        -------
        GrammarFitConfig
        """
        known = {f.name for f in fields(cls)}
        return cls(**{"init": "empty", **{k: v for k, v in payload.items() if k in known}})

    @property
    def mode(self) -> SentenceMode:
        """How a store's documents become sentences (``tokens`` for the ``infvoc-lda`` grammar)."""
        return "tokens" if self.grammar == "infvoc-lda" else "chars"


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
    seed_log_likelihood : float or None
        With the seed pass, the mean over all sentences of log p(x | G') under the initial G' (its inside
        calls are in ``n_inside_calls``); None without it.
    """

    state: AGState
    params: OnlineParams
    grammar_text: str
    log_likelihood: list[float]
    n_inside_calls: int
    seconds: float
    seed_log_likelihood: float | None = None


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
    return bind_alphabet(config, {tok for s in sentences for tok in s})


def bind_alphabet(config: GrammarFitConfig, alphabet: set[str]) -> tuple[Grammar, str]:
    """Parse the configured grammar and bind it to ``alphabet`` (sorted) or the configured one.

    Parameters
    ----------
    config : GrammarFitConfig
        Gives the grammar, its parameters and truncations, and optionally a fixed alphabet (whose
        characters, with ``alphabet``'s, become the terminals).
    alphabet : set of str
        The terminals of the training sentences.

    Returns
    -------
    grammar : Grammar
    text : str
        The grammar file's text.
    """
    text, where = grammar_text(config.grammar)
    terminals = set(alphabet) | set(config.alphabet or "")
    return configured_spec(config, text, where).bind(sorted(terminals)), text


def configured_spec(config: GrammarFitConfig, text: str, where: str) -> GrammarSpec:
    """Parse grammar-file text with the configured template parameters and truncations.

    Parameters
    ----------
    config : GrammarFitConfig
        Gives ``grammar_params`` and ``truncations``.
    text : str
        The grammar file's text.
    where : str
        Its name in error messages.

    Returns
    -------
    GrammarSpec
    """
    spec = parse_grammar(text, path=where, params=dict(config.grammar_params))
    return spec.with_adaptors(**dict(config.truncations)) if config.truncations else spec


def grow_terminals(state: AGState, config: GrammarFitConfig, text: str | None, alphabet: set[str],
                   params: OnlineParams, *, where: str) -> AGState:
    """Re-bind a continued state's grammar to the terminals of new data it lacks (sorted, after its own).

    New characters gain rules under ``<any>``/``<unquoted>``; with the ``infvoc-lda`` grammar, ``config``
    carries the grown D, so the new documents' ``'_j'`` terminals come with their ``Doc_j`` rules.

    Parameters
    ----------
    state : AGState
        The state being continued.
    config : GrammarFitConfig
        Its settings (the grammar's parameters and truncations).
    text : str or None
        The grammar file's text, re-parsed to bind the larger alphabet.
    alphabet : set of str
        The terminals of the new sentences.
    params : OnlineParams
        Settings of the continued fit.
    where : str
        The data, as named in errors.

    Returns
    -------
    AGState
        ``state`` itself, or the state over the grown grammar (:func:`rebind_state`).

    Raises
    ------
    InputError
        If a new terminal is derived by no rule of the grammar (it spells its terminals out instead of
        ``<any>``), or the grammar's text is not known.
    """
    missing = sorted(set(alphabet) - {str(t) for t in state.grammar.terminals})
    if not missing:
        return state
    shown = f"{', '.join(repr(m) for m in missing[:10])}{' ...' if len(missing) > 10 else ''}"
    if not text:
        raise InputError(f"terminals the model's grammar lacks in {where}: {shown}; continuing with new terminals "
                         "re-binds the grammar, whose text was not given (pass grammar_text_)", path=where)
    old = [str(t) for t in state.grammar.terminals]
    grown = configured_spec(config, text, state.grammar.path).bind([*old, *missing])
    derived = set(int(c) for c in grown.rule_rhs.ravel()) - {-1}
    code = {t: grown.n_nonterminals + i for i, t in enumerate(grown.terminals)}
    lacking = [t for t in missing if code[t] not in derived]
    if lacking:
        raise InputError(f"terminals in {where} that no rule of the model's grammar derives: "
                         f"{', '.join(repr(m) for m in lacking[:10])}{' ...' if len(lacking) > 10 else ''}; "
                         "the grammar spells its terminals out instead of using <any>, or a template parameter "
                         "is too small for them (D of infvoc-lda, given in grammar_params): fit a new model that "
                         "derives them",
                         path=where)
    log.info("the grammar's terminals grow by %d for %s: %s", len(missing), where, shown)
    return rebind_state(state, grown, params)


def _step(graph: Any, state: AGState, params: OnlineParams, epoch: int, client: Any,
          on_minibatch: Callable[[AGState, AGStats], None] | None) -> tuple[AGState, AGStats]:
    """Compute one minibatch's merged E-step ``graph`` and apply the driver's update (eqs. 8.8-8.12)."""
    try:
        (stats,) = compute(graph, client=client)
    except ValueError as exc:
        raise InputError(f"minibatch {epoch}: {exc}") from exc
    state = update_minibatch(state, stats, params)
    if on_minibatch is not None:
        on_minibatch(state, stats)
    return state, stats


def _seed(graph: Any, state: AGState, params: OnlineParams, client: Any) -> tuple[AGState, AGStats]:
    """Compute the seed pass's merged E-step ``graph`` (one tree per sentence) and apply the seed update."""
    try:
        (stats,) = compute(graph, client=client)
    except ValueError as exc:
        raise InputError(f"seed pass: {exc}") from exc
    return seed_update(state, stats, params), stats


def _cuts(m: int, n_partitions: int) -> list[tuple[int, int]]:
    """Cut ``m`` sentences into at most ``n_partitions`` contiguous non-empty runs."""
    cuts = np.linspace(0, m, min(n_partitions, m) + 1).round().astype(int)
    return [(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:]) if b > a]


def seed_blocks(n: int, config: GrammarFitConfig) -> list[tuple[int, int]]:
    """Cut the ``n`` sentences of the seed pass into E-step tasks: minibatch-sized runs, each in partitions.

    The seed pass parses every sentence in one graph, with the tasks of a pass in store order (so a task
    is no larger than a minibatch's); the counts are integers, so the cut does not change the model.

    Parameters
    ----------
    n : int
        Sentences.
    config : GrammarFitConfig
        Gives ``batch_size`` and ``n_partitions``.

    Returns
    -------
    list of (int, int)
        Half-open position ranges, in order, covering 0..n.
    """
    return [(lo + a, lo + b) for lo in range(0, n, config.batch_size)
            for a, b in _cuts(min(n, lo + config.batch_size) - lo, config.n_partitions)]


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
        Continue from this state (its grammar is kept; terminals it lacks are added,
        :func:`grow_terminals`).
    grammar_text_ : str, optional
        The grammar text of ``state`` (stored with the result; needed to add terminals).
    on_minibatch : callable, optional
        Called with the new state and the minibatch's counts after every update.

    Returns
    -------
    GrammarFitResult

    Raises
    ------
    InputError
        If a sentence is empty or has no parse, or a new terminal no rule derives.
    """
    if not sentences:
        raise InputError("no sentences to fit")
    fresh = state is None
    if state is None:
        grammar, text = bind_grammar(config, sentences)
        state = initial_state(grammar, seed=config.seed)
    else:
        grammar, text = state.grammar, grammar_text_ or ""
    params = OnlineParams(corpus_size=int(config.corpus_size or len(sentences)), tau=config.tau, kappa=config.kappa,
                          prune_every=config.prune_every, n_samples=config.n_samples,
                          bias=config.bias,  # type: ignore[arg-type]
                          seed=config.seed, table_labels=config.table_labels,
                          optimize_hyper=config.optimize_hyper)  # type: ignore[arg-type]
    if not fresh:
        state = grow_terminals(state, config, text, {str(tok) for s in sentences for tok in s}, params,
                               where="the sentences")
        grammar = state.grammar
    encoded = []
    for d, s in enumerate(sentences):
        if len(s) == 0:
            raise InputError(f"sentence {d} is empty")
        encoded.append(grammar.encode(list(s), where=f"sentence {d}"))
    start = time.perf_counter()
    loglik: list[float] = []
    calls = 0
    n = len(encoded)
    seed_loglik = None
    if fresh and config.init == "seed":
        graph = map_estep(grammar, prepare(state), [t.keys for t in state.tngs],
                          [(encoded[a:b], list(range(a, b))) for a, b in seed_blocks(n, config)],
                          n_samples=1, seed=params.seed, epoch=SEED_EPOCH, split_every=config.split_every,
                          token=f"{params.seed}-seed")
        state, stats = _seed(graph, state, params, client)
        seed_loglik = stats.log_likelihood / stats.n_sentences
        calls += stats.n_sentences
    for pass_ in range(config.passes):
        order = (doc_generator(config.seed, STREAM_SHUFFLE, state.minibatch, pass_).permutation(n)
                 if config.shuffle else np.arange(n))
        for lo in range(0, n, config.batch_size):
            hi = min(n, lo + config.batch_size)
            ids = order[lo:hi].tolist()
            partitions = [([encoded[i] for i in ids[a:b]], ids[a:b]) for a, b in _cuts(hi - lo, config.n_partitions)]
            epoch = state.minibatch + 1
            graph = map_estep(grammar, prepare(state), [t.keys for t in state.tngs], partitions,
                              n_samples=params.n_samples, seed=params.seed, epoch=epoch,
                              split_every=config.split_every, token=f"{params.seed}-{epoch}")
            state, stats = _step(graph, state, params, epoch, client, on_minibatch)
            loglik.append(stats.log_likelihood / stats.n_sentences)
            calls += stats.n_sentences
    return GrammarFitResult(state, params, text, loglik, calls, time.perf_counter() - start, seed_loglik)


@dataclass(frozen=True)
class SentenceIndex:
    """Where the sentences of (some shards of) a store are: integers only, no text.

    Parameters
    ----------
    store : str
        The store's location.
    language : str
        The language read.
    mode : {"chars", "tokens"}
        How documents become sentences (:data:`SentenceMode`).
    shard : ndarray of int32
        Per sentence, the store position of its shard.
    row : ndarray of int32
        Per sentence, its document's row in the shard.
    token : ndarray of int32
        Per sentence, the token's position in the document (``tokens`` mode), else -1.
    document : ndarray of int64
        Per sentence, its document's number among the documents with tokens read (from 1; the ``_j`` of
        ``tokens`` mode).
    alphabet : set of str
        Every terminal of the sentences.
    n_documents : int
        Documents with tokens.
    n_skipped : int
        Documents without tokens (not sentences).
    """

    store: str
    language: str
    mode: SentenceMode
    shard: np.ndarray
    row: np.ndarray
    token: np.ndarray
    document: np.ndarray
    alphabet: set[str]
    n_documents: int
    n_skipped: int

    def __len__(self) -> int:
        """Return the number of sentences."""
        return int(self.shard.shape[0])

    def refs(self, positions: Sequence[int]) -> list[SentenceRef]:
        """Return the references of the sentences at ``positions`` (what an E-step task reads).

        Parameters
        ----------
        positions : sequence of int

        Returns
        -------
        list of SentenceRef
        """
        return [SentenceRef(int(self.shard[i]), int(self.row[i]), int(self.token[i]), int(self.document[i]))
                for i in positions]


def require_order(corpus: Corpus) -> None:
    """Refuse a store without the ordered-token layer.

    Parameters
    ----------
    corpus : Corpus

    Raises
    ------
    OrderNotKeptError
        With what to do (re-ingest with ``--keep-order``).
    """
    if not corpus.has_order:
        raise OrderNotKeptError(
            f"store {str(corpus.path)!r} does not keep token order (it was ingested without --keep-order); "
            "adaptor grammars read each document's tokens in order: re-ingest it with `topicflow ingest "
            "--keep-order`", path=str(corpus.path))


def scan_store(corpus: Corpus, *, mode: SentenceMode = "chars", language: str | None = None,
               shards: Sequence[int] | None = None, first_document: int = 1) -> SentenceIndex:
    """Read the store's ordered layer once, shard by shard, and record where each sentence is.

    Only one shard is in memory at a time; what is kept is O(number of sentences) integers and the
    alphabet.

    Parameters
    ----------
    corpus : Corpus
        A store ingested with ``--keep-order``.
    mode : {"chars", "tokens"}
        How documents become sentences.
    language : str, optional
        Needed for a multilingual store.
    shards : sequence of int, optional
        Store positions of the shards to read (default all, in store order).
    first_document : int
        The number of the first document with tokens (``tokens`` mode's ``_j``).

    Returns
    -------
    SentenceIndex

    Raises
    ------
    OrderNotKeptError
        If the store does not keep token order.
    """
    require_order(corpus)
    lang = corpus.resolve_language(language)
    terms = corpus.vocabulary(lang).terms
    positions = range(corpus.n_shards) if shards is None else list(shards)
    shard_of: list[np.ndarray] = []
    row_of: list[np.ndarray] = []
    token_of: list[np.ndarray] = []
    doc_of: list[np.ndarray] = []
    alphabet: set[str] = set()
    document = first_document
    skipped = 0
    for position in positions:
        block = corpus.read_ordered(position, lang)
        seen_terms: set[int] = set()
        rows: list[int] = []
        toks: list[int] = []
        docs: list[int] = []
        for row in range(block.n_docs):
            codes = block.doc_tokens(row)
            if codes.shape[0] == 0:
                skipped += 1
                continue
            seen_terms.update(codes.tolist())
            if mode == "tokens":
                rows.extend([row] * codes.shape[0])
                toks.extend(range(codes.shape[0]))
                docs.extend([document] * codes.shape[0])
                alphabet.add(f"_{document}")
            else:
                rows.append(row)
                toks.append(-1)
                docs.append(document)
            document += 1
        for t in seen_terms:
            alphabet.update(str(terms[t]) if t >= 0 else str(block.oov_terms[-t - 1]))
        shard_of.append(np.full(len(rows), position, dtype=np.int32))
        row_of.append(np.asarray(rows, dtype=np.int32))
        token_of.append(np.asarray(toks, dtype=np.int32))
        doc_of.append(np.asarray(docs, dtype=np.int64))

    def cat(parts: list[np.ndarray], dtype: Any) -> np.ndarray:
        return np.concatenate(parts) if parts else np.zeros(0, dtype=dtype)

    return SentenceIndex(str(corpus.path), lang, mode, cat(shard_of, np.int32), cat(row_of, np.int32),
                         cat(token_of, np.int32), cat(doc_of, np.int64), alphabet,
                         document - first_document, skipped)


@dataclass
class GrammarStoreResult(GrammarFitResult):
    """What a fit on a store returns: :class:`GrammarFitResult` plus where the sentences came from.

    Parameters
    ----------
    grammar_params : dict of str to int
        The grammar's template parameters (``D`` set for ``tokens`` mode).
    n_sentences : int
        Sentences read from the store in this run (one pass).
    n_documents : int
        Documents with tokens read in this run.
    """

    grammar_params: dict[str, int] = field(default_factory=dict)
    n_sentences: int = 0
    n_documents: int = 0


def fit_grammar_store(corpus: Corpus, config: GrammarFitConfig, *, client: Any = None, state: AGState | None = None,
                      grammar_text_: str | None = None, shards: Sequence[int] | None = None,
                      first_sentence: int = 0, first_document: int = 1, corpus_size: int | None = None,
                      language: str | None = None,
                      index: SentenceIndex | None = None, progress: ProgressReporter = NO_PROGRESS,
                      on_minibatch: Callable[[AGState, AGStats], None] | None = None) -> GrammarStoreResult:
    """Fit (or continue) an adaptor grammar on a store, streamed (module docstring).

    Minibatches are formed from sentence positions in store order (with ``shuffle``, a counter-based
    permutation of the positions per pass); each partition of a minibatch is a task that reads its
    sentences from the store. With the same seed, minibatch boundaries and |X|, the model equals
    :func:`fit_grammar` on the sentences of :func:`read_sentences` (``chars`` mode) or
    :func:`token_sentences` (``tokens`` mode).

    Parameters
    ----------
    corpus : Corpus
        A store ingested with ``--keep-order``.
    config : GrammarFitConfig
        Settings (``config.mode`` says how documents become sentences).
    client : distributed.Client, optional
        Default: the current client, else Dask's threaded scheduler.
    state : AGState, optional
        Continue from this state (its grammar is kept; terminals it lacks are added,
        :func:`grow_terminals`).
    grammar_text_ : str, optional
        The grammar text of ``state``.
    shards : sequence of int, optional
        Store positions of the shards to read (default all).
    first_sentence : int
        The global number of the first sentence read (a continuation passes the sentences seen
        before), which keys its random numbers.
    first_document : int
        ``tokens`` mode: the number j of the first document read (its sentences start with ``'_j'``).
        1 reads the store's documents as documents 1, 2, ... (a fit, or another pass over the same
        documents); ``topicflow update`` passes D + 1, so that new documents are new ``Doc_j``. A
        continuation whose documents go past the grammar's D grows D to them.
    corpus_size : int, optional
        |X| (default ``config.corpus_size``, else the number of sentences read).
    language : str, optional
        Needed for a multilingual store.
    index : SentenceIndex, optional
        The result of :func:`scan_store` for these shards, when the caller has it (saves the scan).
    progress : ProgressReporter
        Shows the minibatches.
    on_minibatch : callable, optional
        Called with the new state and the minibatch's counts after every update.

    Returns
    -------
    GrammarStoreResult

    Raises
    ------
    InputError
        No sentence, or a new terminal no rule derives, or a sentence without a parse.
    OrderNotKeptError
        The store does not keep token order.
    """
    mode = config.mode
    if index is None:
        index = scan_store(corpus, mode=mode, language=language, shards=shards, first_document=first_document)
    elif len(index) and int(index.document[0]) != first_document:
        raise InvalidParameterError(f"the sentence index numbers its documents from {int(index.document[0])}, but the "
                                    f"continued model's next document is {first_document} (scan_store(..., "
                                    f"first_document={first_document}))")
    if len(index) == 0:
        raise InputError(f"store {str(corpus.path)!r} has no document with tokens to fit"
                         + (" among its new shards" if shards is not None else ""), path=str(corpus.path))
    grammar_params = dict(config.grammar_params)
    fresh = state is None
    if state is None:
        if mode == "tokens":
            grammar_params = {"D": index.n_documents, **grammar_params}
            config = GrammarFitConfig(**{**config.__dict__, "grammar_params": grammar_params})
        grammar, text = bind_alphabet(config, index.alphabet)
        state = initial_state(grammar, seed=config.seed)
    else:
        grammar, text = state.grammar, grammar_text_ or ""
        reach = first_document - 1 + index.n_documents
        if mode == "tokens" and reach > int(grammar_params.get("D", 0)):  # new documents: Doc_j rules, '_j'
            grammar_params = {**grammar_params, "D": reach}
            config = GrammarFitConfig(**{**config.__dict__, "grammar_params": grammar_params})
    n = len(index)
    params = OnlineParams(corpus_size=int(corpus_size or config.corpus_size or n), tau=config.tau, kappa=config.kappa,
                          prune_every=config.prune_every, n_samples=config.n_samples,
                          bias=config.bias,  # type: ignore[arg-type]
                          seed=config.seed, table_labels=config.table_labels,
                          optimize_hyper=config.optimize_hyper)  # type: ignore[arg-type]
    if not fresh:
        state = grow_terminals(state, config, text, index.alphabet, params, where=f"store {str(corpus.path)!r}")
        grammar = state.grammar
    start = time.perf_counter()
    loglik: list[float] = []
    calls = 0
    run = uuid.uuid4().hex[:8]
    per_pass = -(-n // config.batch_size)
    seed_loglik = None
    if fresh and config.init == "seed":
        graph = map_estep_store(grammar, prepare(state), [t.keys for t in state.tngs],
                                [(index.refs(range(a, b)), list(range(a + first_sentence, b + first_sentence)))
                                 for a, b in seed_blocks(n, config)],
                                store=index.store, language=index.language, mode=mode, n_samples=1,
                                seed=params.seed, epoch=SEED_EPOCH, split_every=config.split_every,
                                token=f"{run}-{params.seed}-seed")
        state, stats = _seed(graph, state, params, client)
        seed_loglik = stats.log_likelihood / stats.n_sentences
        calls += stats.n_sentences

    def minibatches() -> Any:
        for pass_ in range(config.passes):
            assert state is not None
            order = (doc_generator(config.seed, STREAM_SHUFFLE, state.minibatch, pass_).permutation(n)
                     if config.shuffle else np.arange(n))
            for lo in range(0, n, config.batch_size):
                yield order[lo:min(n, lo + config.batch_size)]

    for positions in progress.track(minibatches(), total=per_pass * config.passes, desc="grammar minibatches",
                                    unit="minibatch"):
        m = positions.shape[0]
        partitions = [(index.refs(positions[a:b].tolist()), (positions[a:b] + first_sentence).tolist())
                      for a, b in _cuts(m, config.n_partitions)]
        epoch = state.minibatch + 1
        graph = map_estep_store(grammar, prepare(state), [t.keys for t in state.tngs], partitions,
                                store=index.store, language=index.language, mode=mode,
                                n_samples=params.n_samples, seed=params.seed, epoch=epoch,
                                split_every=config.split_every, token=f"{run}-{params.seed}-{epoch}")
        state, stats = _step(graph, state, params, epoch, client, on_minibatch)
        loglik.append(stats.log_likelihood / stats.n_sentences)
        calls += stats.n_sentences
    return GrammarStoreResult(state, params, text, loglik, calls, time.perf_counter() - start, seed_loglik,
                              grammar_params=grammar_params, n_sentences=n, n_documents=index.n_documents)


def store_sentences(corpus: Corpus, *, mode: SentenceMode = "chars", language: str | None = None) -> list[list[str]]:
    """Read every sentence of a store into memory, in store order (what :func:`fit_grammar_store` streams).

    Parameters
    ----------
    corpus : Corpus
        A store ingested with ``--keep-order``.
    mode : {"chars", "tokens"}
    language : str, optional

    Returns
    -------
    list of list of str
    """
    index = scan_store(corpus, mode=mode, language=language)
    return sentence_tokens(index.store, index.language, mode, index.refs(range(len(index))))
