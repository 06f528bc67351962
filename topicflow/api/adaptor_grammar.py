"""``topicflow.AdaptorGrammar``: online adaptor grammars (Zhai 2014, ch. 8) with scikit-learn's conventions."""
from __future__ import annotations

import os
from numbers import Integral, Real
from typing import Any, ClassVar, Mapping, Sequence

from topicflow.api._base import Constraint, Interval, Options, TopicModelEstimator
from topicflow.errors import InputError, InvalidParameterError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.adaptor_grammar import grammar_from_saved, grammar_saved_model
from topicflow.io.models.store import SavedModel, load_model, save_model
from topicflow.models.adaptor_grammar import (
    BIAS_CHOICES,
    HYPER_CHOICES,
    RANKINGS,
    AGState,
    OnlineParams,
    prepare,
    segment,
    topic_words,
)
from topicflow.pipeline.adaptor_grammar import (
    INIT_CHOICES,
    GrammarFitConfig,
    GrammarFitResult,
    fit_grammar,
    fit_grammar_store,
    grammar_store_model,
)
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter

_POSITIVE_INT = Interval(Integral, 1, None, closed="left")
_NONNEGATIVE = Interval(Real, 0, None, closed="left")


class AdaptorGrammar(TopicModelEstimator):
    """Adaptor grammar fitted by online hybrid inference (Zhai et al. 2014; Zhai 2014, ch. 8).

    Parameters
    ----------
    grammar : str, default "unigram"
        A shipped grammar (``"unigram"``, ``"collocation"``, ``"infvoc-lda"``) or a grammar file
        (format: docs/adaptor_grammar.md).
    batch_size : int, default 20
        Sentences per minibatch (B).
    tau : float, default 64.0
        Decay inertia of eps = (tau + l)^-kappa.
    kappa : float, default 0.8
        Decay rate (0 with ``batch_size`` = all sentences: the batch VARIATIONAL variant).
    prune_every : int, default 10
        Prune the TNGs every ``prune_every`` minibatches (u).
    truncation : mapping of str to int, optional
        K per adapted nonterminal, e.g. ``{"Word": 1500}`` (default: the grammar file's).
    grammar_params : mapping of str to int, optional
        Template parameters of the grammar (``{"D": 100, "K": 5}`` for ``infvoc-lda``).
    n_samples : int, default 10
        Trees drawn per sentence.
    passes : int, default 1
        Passes over the sentences.
    shuffle : bool, default False
        Visit the sentences in a seeded random order, a new one every pass (default: store order).
    table_labels : bool, default False
        Resample the trees of the cached atoms after every pruning ([Z] section 8.3.1).
    bias : {"correct", "tau-kappa", "none"}, default "correct"
        Handling of the zero start of the running counts (docs/adaptor_grammar.md, P3).
    seed : int, default 0
        Random seed; the same seed gives the same model for any number of partitions.
    n_partitions : int, default 1
        E-step tasks per minibatch.
    word : str, default "Word"
        The nonterminal whose spans :meth:`segment` returns.
    language : str, optional
        Language of a multilingual store.
    corpus_size : int, optional
        ``|X|`` of eqs. 8.8-8.9 (default: the number of sentences fitted); give the final size to fit a
        stream in parts (``topicflow update``).
    alphabet : str, optional
        Characters the grammar gets as terminals besides those of the training sentences (so later
        updates may bring them).
    init : {"seed", "empty"}, default "seed"
        How :meth:`fit` starts: ``"seed"`` parses every sentence once under the initial grammar and seeds
        the cached-subtree sets and counts with it (PyAdaGram's start, a deviation from [Z] for ONLINE:
        docs/adaptor_grammar.md, "Seed pass"); ``"empty"`` is [Z] section 8.3.1's empty TNGs. A
        continuation (:meth:`partial_fit` on a fitted model, ``topicflow update``) is never seeded.
    optimize_hyper : {"ab", "a", "none"}, default "ab"
        Re-estimate the Pitman-Yor a and b ("ab", [Z]), only a (PyAdaGram) or neither after every pruning.

    Examples
    --------
    >>> model = AdaptorGrammar("unigram", batch_size=10, truncation={"Word": 50})
    >>> model.fit(["thedog", "thecat", "adogsaw"]).segment(["thecat"])          # doctest: +SKIP
    [['the', 'cat']]
    """

    _parameter_constraints: ClassVar[dict[str, list[Constraint]]] = {
        "batch_size": [_POSITIVE_INT],
        "tau": [_NONNEGATIVE],
        "kappa": [_NONNEGATIVE],
        "prune_every": [_POSITIVE_INT],
        "n_samples": [_POSITIVE_INT],
        "passes": [_POSITIVE_INT],
        "bias": [Options(BIAS_CHOICES)],
        "optimize_hyper": [Options(HYPER_CHOICES)],
        "seed": [Interval(Integral, 0, 2**63, closed="left")],
        "n_partitions": [_POSITIVE_INT],
        "init": [Options(INIT_CHOICES)],
    }
    _fit_hint: ClassVar[str] = "call fit(sentences) or AdaptorGrammar.load(path) first"

    def __init__(self, grammar: str = "unigram", *, batch_size: int = 20, tau: float = 64.0, kappa: float = 0.8,
                 prune_every: int = 10, truncation: Mapping[str, int] | None = None,
                 grammar_params: Mapping[str, int] | None = None, n_samples: int = 10, passes: int = 1,
                 shuffle: bool = False, table_labels: bool = False, bias: str = "correct", seed: int = 0,
                 n_partitions: int = 1, word: str = "Word",
                 language: str | None = None, corpus_size: int | None = None, alphabet: str | None = None,
                 init: str = "seed", optimize_hyper: str = "ab") -> None:
        self.grammar = grammar
        self.batch_size = batch_size
        self.tau = tau
        self.kappa = kappa
        self.prune_every = prune_every
        self.truncation = truncation
        self.grammar_params = grammar_params
        self.n_samples = n_samples
        self.passes = passes
        self.shuffle = shuffle
        self.table_labels = table_labels
        self.bias = bias
        self.seed = seed
        self.n_partitions = n_partitions
        self.word = word
        self.language = language
        self.corpus_size = corpus_size
        self.alphabet = alphabet
        self.init = init
        self.optimize_hyper = optimize_hyper

    def config(self, **grammar_params: int) -> GrammarFitConfig:
        """Return the fit settings (validated).

        Parameters
        ----------
        **grammar_params : int
            Template parameters to add to ``grammar_params`` (the number of documents D of a store).

        Returns
        -------
        GrammarFitConfig
        """
        self._validate_params()
        return GrammarFitConfig(
            grammar=str(self.grammar), grammar_params={**grammar_params, **dict(self.grammar_params or {})},
            truncations=dict(self.truncation or {}), batch_size=int(self.batch_size), tau=float(self.tau),
            kappa=float(self.kappa), prune_every=int(self.prune_every), n_samples=int(self.n_samples),
            passes=int(self.passes), shuffle=bool(self.shuffle),
            table_labels=bool(self.table_labels), bias=str(self.bias), seed=int(self.seed),
            n_partitions=int(self.n_partitions),
            corpus_size=None if self.corpus_size is None else int(self.corpus_size),
            alphabet=None if self.alphabet is None else str(self.alphabet), init=str(self.init),
            optimize_hyper=str(self.optimize_hyper))

    def _sentences(self, X: Any) -> list[Any] | None:
        """The sentences of an in-memory list, or None for a store (streamed)."""
        if isinstance(X, (str, os.PathLike, Corpus)):
            return None
        if isinstance(X, Sequence):
            return list(X)
        raise InvalidParameterError(f"AdaptorGrammar reads a store (path or Corpus) or a list of sentences "
                                    f"(strings or token lists), not {type(X).__name__}")

    def _run(self, X: Any, *, client: Any, state: AGState | None, progress: ProgressReporter) -> Any:
        sentences = self._sentences(X)
        # A continuation re-binds the grammar when new terminals come: with the fitted template parameters (D).
        config = self.config(**(dict(self.grammar_params_) if state is not None else {}))
        result: GrammarFitResult
        if sentences is None:
            corpus = as_corpus(X)
            seen = int(getattr(self, "sentences_seen_", 0)) if state is not None else 0
            streamed = fit_grammar_store(corpus, config, client=client, state=state,
                                         grammar_text_=getattr(self, "grammar_text_", None), first_sentence=seen,
                                         language=self.language, progress=progress)
            result = streamed
            self._saved_: SavedModel | None = grammar_store_model(
                corpus, streamed, config, sentences_seen=seen, language=self.language,
                earlier_trace=getattr(self, "trace_", []) if state is not None else (), estimator=self.get_params())
            self.sentences_seen_ = seen + streamed.n_sentences
            grammar_params = dict(streamed.grammar_params)  # D grows when the store has more documents
        else:
            result = fit_grammar(sentences, config, client=client, state=state,
                                 grammar_text_=getattr(self, "grammar_text_", None))
            self._saved_ = None
            grammar_params = dict(config.grammar_params) if state is None else self.grammar_params_
        first = result.state.minibatch - len(result.log_likelihood) + 1
        records = [{"minibatch": first + i, "log_likelihood": float(v)} for i, v in enumerate(result.log_likelihood)]
        self.trace_ = (list(getattr(self, "trace_", [])) if state is not None else []) + records
        self._set_result(result.state, result.params, result.grammar_text, grammar_params)
        return result

    def fit(self, X: Any, y: Any = None, *, client: Any = None,
            progress: ProgressReporter = NO_PROGRESS) -> AdaptorGrammar:
        """Fit from scratch: random Dirichlets, then the seed pass (``init="seed"``) or empty TNGs.

        Parameters
        ----------
        X : store path, Corpus, or list of str or of token lists
            A store ingested with ``--keep-order``, streamed (each document's tokens joined into one
            character sequence; for ``grammar="infvoc-lda"`` one sentence ``['_j', characters...]`` per
            token of document j, with D set to the number of documents), or the sentences themselves.
        y : None
            Ignored.
        client : distributed.Client, optional
            Default: the current client, else Dask's threaded scheduler.
        progress : ProgressReporter, optional
            Shows the minibatches.

        Returns
        -------
        AdaptorGrammar
            This estimator, fitted (``state_``, ``params_``, ``log_likelihood_``, ``n_inside_calls_`` with
            the seed pass's, ``seed_log_likelihood_``: the seed parse's mean log p(x | G'), None without it).
        """
        result = self._run(X, client=client, state=None, progress=progress)
        self.log_likelihood_ = result.log_likelihood
        self.n_inside_calls_ = result.n_inside_calls
        self.seed_log_likelihood_ = result.seed_log_likelihood
        return self

    def partial_fit(self, X: Any, y: Any = None, *, client: Any = None,
                    progress: ProgressReporter = NO_PROGRESS) -> AdaptorGrammar:
        """Continue the fit with more sentences (same grammar; their new characters join its terminals).

        For a store saved as a versioned model, ``topicflow update`` (:func:`topicflow.pipeline.update.update_model`)
        continues it with the store's new shards only.

        Parameters
        ----------
        X : store path, Corpus, or list of str or of token lists
            More sentences (all of a store's are read).
        y : None
            Ignored.
        client : distributed.Client, optional
            Default: the current client, else Dask's threaded scheduler.
        progress : ProgressReporter, optional
            Shows the minibatches.

        Returns
        -------
        AdaptorGrammar
            This estimator.
        """
        if getattr(self, "state_", None) is None:
            return self.fit(X, client=client, progress=progress)
        result = self._run(X, client=client, state=self.state_, progress=progress)
        self.log_likelihood_ = list(getattr(self, "log_likelihood_", [])) + result.log_likelihood
        self.n_inside_calls_ = int(getattr(self, "n_inside_calls_", 0)) + result.n_inside_calls
        return self

    def _set_result(self, state: AGState, params: OnlineParams, text: str, grammar_params: dict[str, int]) -> None:
        self.grammar_params_ = grammar_params
        self.state_ = state
        self.params_ = params
        self.grammar_text_ = text
        self.model_ = state

    def segment(self, sentences: Sequence[str], *, n_samples: int | None = None) -> list[list[str]]:
        """Segment sentences: the spans of ``word`` in the highest-weight of ``n_samples`` sampled parses.

        Parameters
        ----------
        sentences : sequence of str
            Character sequences (no spaces).
        n_samples : int, optional
            Trees drawn per sentence (default: the estimator's ``n_samples``).

        Returns
        -------
        list of list of str
            The words of each sentence.

        Raises
        ------
        InputError
            If a sentence has a character the model was not trained on, or ``word`` is not a nonterminal.
        """
        state: AGState = self._check_fitted()
        grammar = state.grammar
        if self.word not in grammar.nonterminals:
            raise InputError(f"word={self.word!r} is not a nonterminal of the grammar "
                             f"({', '.join(grammar.nonterminals)})")
        word = grammar.nonterminals.index(self.word)
        pcfg = prepare(state)
        keys = [t.keys for t in state.tngs]
        out: list[list[str]] = []
        for d, text in enumerate(sentences):
            if not text:
                out.append([])
                continue
            x = grammar.encode(list(text), where=f"sentence {d}")
            spans = segment(pcfg, grammar, keys, x, word, n_samples=int(n_samples or self.n_samples),
                            seed=int(self.seed),
                            sentence=d)
            out.append([text[i:j] for i, j in spans])
        return out

    def top_atoms(self, n: int = 20, nonterminal: str | None = None) -> list[tuple[str, float]]:
        """Return the yields of the cached subtrees with the largest running counts f~.

        Parameters
        ----------
        n : int, default 20
            How many.
        nonterminal : str, optional
            The adapted nonterminal (default: the most specific one, e.g. Word).

        Returns
        -------
        list of (str, float)
            Yield (terminals joined) and f~.
        """
        state: AGState = self._check_fitted()
        grammar = state.grammar
        names = [grammar.nonterminals[c] for c in grammar.adapted]
        m = 0 if nonterminal is None else names.index(nonterminal)
        tng = state.tngs[m]
        order = sorted(range(len(tng)), key=lambda i: -tng.f_tilde[i])[:n]
        return [("".join(grammar.terminals[t] for t in tng.atoms[i].yield_ids), float(tng.f_tilde[i]))
                for i in order]

    def topics(self, n: int = 10, *, nonterminals: Sequence[str] | None = None, by: str = "stick",
               weights: bool = False) -> list[list[str]] | list[list[tuple[str, float]]]:
        """Return each adapted nonterminal's top words: the topics of the ``infvoc-lda`` grammar.

        One list per adapted nonterminal (``Topic1 .. TopicK`` for ``infvoc-lda``, in that order), its
        cached yields ranked by the expected stick weight E_q[pi_i] (``by="stick"``) or the running count
        f~ (``by="count"``); see :mod:`topicflow.models.adaptor_grammar.readout`. The word lists go straight
        into :func:`topicflow.metrics.topic_coherence.coherence`.

        Parameters
        ----------
        n : int, default 10
            Words per topic.
        nonterminals : sequence of str, optional
            Which adapted nonterminals (default: all, in the grammar's order).
        by : {"stick", "count"}, default "stick"
            The ranking.
        weights : bool, default False
            Return (word, weight) pairs instead of words.

        Returns
        -------
        list of list of str, or of (str, float)

        Raises
        ------
        InvalidParameterError
            Unknown ``by``, ``n`` < 1, or a name that is not an adapted nonterminal.
        """
        state: AGState = self._check_fitted()
        if by not in RANKINGS:
            raise InvalidParameterError(f"by must be one of {', '.join(RANKINGS)}, got {by!r}")
        if isinstance(n, bool) or not isinstance(n, Integral) or n < 1:
            raise InvalidParameterError(f"n must be a positive integer, got {n!r}")
        try:
            found = topic_words(state, int(n), nonterminals, by)
        except ValueError as exc:
            raise InvalidParameterError(str(exc)) from None
        if weights:
            return [list(pairs) for pairs in found.values()]
        return [[word for word, _ in pairs] for pairs in found.values()]

    def topic_names(self) -> list[str]:
        """Return the adapted nonterminals in the order :meth:`topics` lists them.

        Returns
        -------
        list of str
        """
        state: AGState = self._check_fitted()
        return list(topic_words(state, 1))

    def to_saved_model(self) -> SavedModel:
        """Return the fitted model in the form the model store keeps (family ``adaptor_grammar``).

        Returns
        -------
        SavedModel
            With the store's provenance when fitted on a store (so ``topicflow update`` continues it).
        """
        state: AGState = self._check_fitted()
        saved = getattr(self, "_saved_", None)
        if saved is not None and saved.info.extra["adaptor_grammar"]["minibatch"] == state.minibatch:
            return saved
        return grammar_saved_model(state, self.params_, grammar_text=self.grammar_text_,
                                   grammar_params=self.grammar_params_, truncations=dict(self.truncation or {}),
                                   settings={**self.config().to_dict(), "grammar_params": dict(self.grammar_params_),
                                             "estimator": self.get_params()},
                                   trace=list(getattr(self, "trace_", [])))

    def save(self, path: str | os.PathLike[str], *, overwrite: bool = False) -> None:
        """Write the fitted model as a versioned model (version 1; never pickle).

        Parameters
        ----------
        path : path or URL
            The model directory.
        overwrite : bool, default False
            Replace an existing model.
        """
        save_model(path, self.to_saved_model(), overwrite=overwrite)

    @classmethod
    def load(cls, path: str | os.PathLike[str], *, version: int | None = None) -> AdaptorGrammar:
        """Read a model written by :meth:`save`, ``topicflow grammar fit`` or ``topicflow update``.

        Parameters
        ----------
        path : path or URL
            The model directory.
        version : int, optional
            Default: the current version.

        Returns
        -------
        AdaptorGrammar
            A fitted estimator.
        """
        saved = load_model(path, version)
        state, params, payload = grammar_from_saved(saved, where=str(path))
        # a model saved before ``init`` existed was fitted from empty TNGs
        settings = {"init": "empty", **dict(saved.info.settings.get("estimator") or {})}
        model = cls(**{k: v for k, v in settings.items() if k in cls._get_param_names()})
        model._set_result(state, params, payload["grammar"]["text"], dict(payload["grammar"].get("params", {})))
        model.trace_ = list(saved.info.trace)
        model.sentences_seen_ = int(payload.get("sentences_seen", 0))
        model._saved_ = saved
        return model
