"""Held-out likelihood of any saved model on a corpus store, under a named protocol.

Every protocol scores a model from what every LDA-family model saves: its topics (lambda, whose
posterior mean is the point estimate Phi) and its document-topic prior alpha. So batch, online and
hybrid VB, polylingual, Gibbs and every streamed model are scored by the same code. The protocols
(docs/evaluation.md, "Held-out likelihood"):

- ``completion-random``: fold theta in on a random half of each document's tokens, score the rest;
- ``completion-first-half``: the same with the first half in reading order observed (stores kept in
  order only);
- ``left-to-right``: Wallach et al. (2009)'s Algorithm 3 on whole documents;
- ``bound``: the per-word variational bound of whole documents.

Dispatch is the :data:`PROTOCOLS` registry. The per-shard graphs are in :mod:`topicflow.tasks.evaluate`
and the math in :mod:`topicflow.metrics`; this module only builds, computes and reports.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from topicflow import config as tf_config
from topicflow._typing import DEFAULT_PROTOCOL as DEFAULT_PROTOCOL
from topicflow.errors import InvalidParameterError, OrderNotKeptError
from topicflow.io.corpus.reader import Corpus, as_corpus
from topicflow.io.models.store import SavedModel
from topicflow.metrics.heldout import HeldoutStats
from topicflow.metrics.left_to_right import DEFAULT_PARTICLES, parse_particles
from topicflow.models.lda.vb.objective import local_elbo_terms
from topicflow.models.lda.vb.params import VBParams
from topicflow.pipeline.cluster import compute, current_client
from topicflow.pipeline.vb import (
    fold_in_params,
    model_blocks,
    model_token,
    oov_token_count,
    share,
)
from topicflow.tasks.estep import graph_token, map_estep, tree_merge
from topicflow.tasks.evaluate import (
    map_completion,
    map_first_half_completion,
    map_left_to_right,
)

#: Units of the numbers of a :class:`HeldoutResult`.
UNITS = {
    "log_likelihood": "nats",
    "log_lik_per_token": "nats per evaluated token",
    "perplexity": "exp(-log_lik_per_token)",
}


@dataclass(frozen=True, slots=True)
class HeldoutOptions:
    """Settings of the held-out protocols (each protocol reads the ones it needs).

    Attributes
    ----------
    seed : int
        Seed of the random token split (``completion-random``) and of the particles (``left-to-right``).
    fraction : float
        Share of each document's tokens observed by the completion protocols, in (0, 1).
    n_particles : int
        Particles R of ``left-to-right``.
    max_doc_iter, doc_tol : int or None, float or None
        Fold-in (VB E-step) settings; None takes the model's saved ones.
    split_every : int or None
        Fan-in of the reductions; None takes ``topicflow.split-every``.
    """

    seed: int = 0
    fraction: float = 0.5
    n_particles: int = DEFAULT_PARTICLES
    max_doc_iter: int | None = None
    doc_tol: float | None = None
    split_every: int | None = None

    def __post_init__(self) -> None:
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)) or not 0 <= self.seed < 2**63:
            raise InvalidParameterError(f"seed must be an integer in [0, 2**63), got {self.seed!r}")
        if not (0.0 < float(self.fraction) < 1.0):
            raise InvalidParameterError(f"fraction must be in (0, 1), got {self.fraction!r}")
        object.__setattr__(self, "n_particles", parse_particles(self.n_particles))
        if self.split_every is not None and self.split_every < 2:
            raise InvalidParameterError(f"split_every must be at least 2, got {self.split_every!r}")


@dataclass(frozen=True, slots=True)
class HeldoutResult:
    """Held-out likelihood of a model on a store under one protocol.

    Attributes
    ----------
    protocol : str
        One of :data:`PROTOCOLS`.
    description : str
        What the protocol scores, in words.
    log_likelihood : float
        Sum over the evaluated tokens, in nats (for ``bound``: the bound itself).
    log_lik_per_token : float
        ``log_likelihood / n_tokens``, nats per token.
    perplexity : float
        ``exp(-log_lik_per_token)``.
    n_docs : int
        Documents read.
    n_tokens : int
        Tokens evaluated (the held-out part for the completion protocols, all for the others).
    oov_tokens : int
        Tokens of the store whose terms the model lacks (never evaluated).
    token_order : str or None
        ``"reading"`` or ``"bag"`` (CSR order: terms ascending, repeated by count) for protocols
        that depend on token order, None for the others.
    settings : dict
        The protocol's settings (seed, fraction, particles, fold-in settings).
    units : dict
        :data:`UNITS`.
    """

    protocol: str
    description: str
    log_likelihood: float
    log_lik_per_token: float
    perplexity: float
    n_docs: int
    n_tokens: int
    oov_tokens: int
    token_order: str | None
    settings: dict[str, Any]
    units: dict[str, str] = field(default_factory=lambda: dict(UNITS))

    def to_dict(self) -> dict[str, Any]:
        """Return the result as a JSON-able dict (the ``--format json`` output of ``evaluate``).

        Returns
        -------
        dict
        """
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True)
class _Run:
    """What every protocol reads: the model, the store, the lazily remapped shards, the cluster."""

    model: SavedModel
    corpus: Corpus
    options: HeldoutOptions
    client: Any
    token: str
    blocks: list[Any]
    maps: dict[str, np.ndarray | None]
    split_every: int

    def params(self) -> VBParams:
        return fold_in_params(self.model, max_doc_iter=self.options.max_doc_iter, doc_tol=self.options.doc_tol)

    def point_topics(self) -> Any:
        """The posterior mean topics of the shared languages, shipped once."""
        topic_word = self.model.state.prepared_topic_word(list(self.maps))
        return share(topic_word, self.client, name=f"topic-word-{self.token}")

    def fold_in_settings(self) -> dict[str, Any]:
        params = self.params()
        return {"max_doc_iter": params.max_doc_iter, "doc_tol": params.doc_tol}


#: What one protocol returns: its statistics, the token order it used and its settings.
_Outcome = tuple[HeldoutStats, str | None, dict[str, Any]]


@dataclass(frozen=True)
class ProtocolSpec:
    """One held-out protocol: its name, what it scores, and how to compute it.

    Attributes
    ----------
    name : str
    description : str
    run : callable
        ``run(context) -> (HeldoutStats, token_order, settings)``.
    """

    name: str
    description: str
    run: Callable[[_Run], _Outcome]


def _completion_random(run: _Run) -> _Outcome:
    graph = map_completion(run.blocks, run.point_topics(), run.model.state.doc_topic_prior, run.params(),
                           seed=run.options.seed, fraction=run.options.fraction, split_every=run.split_every,
                           token=run.token)
    (stats,) = compute(graph, client=run.client)
    settings = {"seed": run.options.seed, "fraction": run.options.fraction, **run.fold_in_settings()}
    return stats, None, settings


def _ordered_layers(run: _Run) -> list[dict[str, Any]]:
    """Per shard, the ordered-token layer of every shared language (lazy)."""
    if not run.corpus.has_order:
        raise OrderNotKeptError(
            f"store {str(run.corpus.path)!r} does not keep its documents' tokens in order, which this protocol "
            "needs; re-ingest it with `topicflow ingest --keep-order`, or use --protocol completion-random.",
            path=str(run.corpus.path),
        )
    per_language = {lang: run.corpus.to_delayed_ordered(lang) for lang in run.maps}
    return [{lang: layers[i] for lang, layers in per_language.items()} for i in range(run.corpus.n_shards)]


def _completion_first_half(run: _Run) -> _Outcome:
    layers = _ordered_layers(run)
    maps = share(run.maps, run.client, name=f"term-maps-{run.token}")
    graph = map_first_half_completion(run.blocks, layers, maps, run.point_topics(), run.model.state.doc_topic_prior,
                                      run.params(), fraction=run.options.fraction, split_every=run.split_every,
                                      token=run.token)
    (stats,) = compute(graph, client=run.client)
    return stats, "reading", {"fraction": run.options.fraction, **run.fold_in_settings()}


def _left_to_right(run: _Run) -> _Outcome:
    ordered = run.corpus.has_order
    layers = _ordered_layers(run) if ordered else None
    maps = share(run.maps, run.client, name=f"term-maps-{run.token}") if ordered else None
    graph = map_left_to_right(run.blocks, run.point_topics(), run.model.state.doc_topic_prior,
                              n_particles=run.options.n_particles, seed=run.options.seed,
                              split_every=run.split_every, token=run.token, ordered=layers, term_maps=maps)
    (stats,) = compute(graph, client=run.client)
    return stats, "reading" if ordered else "bag", {"seed": run.options.seed, "particles": run.options.n_particles}


def _bound(run: _Run) -> _Outcome:
    state = run.model.state
    topics = share(state.prepared_topics(list(run.maps)), run.client, name=f"topics-{run.token}")
    graph = tree_merge(map_estep(run.blocks, topics, state.doc_topic_prior, run.params(), token=run.token),
                       split_every=run.split_every, token=run.token)
    (estep,) = compute(graph, client=run.client)
    bound = local_elbo_terms(estep, state.doc_topic_prior)
    stats = HeldoutStats((bound,) if bound else (), int(estep.n_docs), int(estep.n_tokens))
    return stats, None, run.fold_in_settings()


#: The protocols of ``topicflow evaluate --protocol``, by name.
PROTOCOLS: dict[str, ProtocolSpec] = {
    spec.name: spec for spec in (
        ProtocolSpec("completion-random", "document completion: theta folded in (VB, topics fixed at their "
                     "posterior mean) on a random part of each document's tokens, the other tokens scored",
                     _completion_random),
        ProtocolSpec("completion-first-half", "document completion: theta folded in on the first part of each "
                     "document in reading order, the rest scored", _completion_first_half),
        ProtocolSpec("left-to-right", "left-to-right estimate of log p(w | Phi, alpha) of whole documents "
                     "(Wallach et al. 2009, Algorithm 3), Phi the topics' posterior mean", _left_to_right),
        ProtocolSpec("bound", "per-word variational bound (ELBO) of whole documents with the topics fixed at "
                     "q(beta): a lower bound of their log likelihood, so its perplexity is an upper bound",
                     _bound),
    )
}


def parse_protocol(protocol: str) -> ProtocolSpec:
    """Return the registered protocol named ``protocol``.

    Parameters
    ----------
    protocol : str

    Returns
    -------
    ProtocolSpec

    Raises
    ------
    InvalidParameterError
        An unknown name; the message lists the known ones.

    Examples
    --------
    >>> parse_protocol("bound").name
    'bound'
    """
    if protocol not in PROTOCOLS:
        raise InvalidParameterError(f"unknown held-out protocol {protocol!r}; choose one of {list(PROTOCOLS)}")
    return PROTOCOLS[protocol]


def heldout_likelihood(
    model: SavedModel, store: Any, protocol: str = DEFAULT_PROTOCOL, *, client: Any = None,
    options: HeldoutOptions | None = None, **settings: Any,
) -> HeldoutResult:
    """Score a model's held-out likelihood on a corpus store under a named protocol.

    Parameters
    ----------
    model : SavedModel
        Any saved LDA-family model (``topicflow.io.models.store.load_model``).
    store : str, os.PathLike or Corpus
        The documents to score; terms the model does not know are left out (counted in ``oov_tokens``).
    protocol : {"completion-random", "completion-first-half", "left-to-right", "bound"}
        See :data:`PROTOCOLS` and docs/evaluation.md.
    client : distributed.Client, optional
        Cluster to run on; by default the current client, else local threads.
    options : HeldoutOptions, optional
        The protocol's settings; or give them as keywords (``seed``, ``fraction``, ``n_particles``,
        ``max_doc_iter``, ``doc_tol``, ``split_every``).
    **settings
        Fields of :class:`HeldoutOptions` (not with ``options``).

    Returns
    -------
    HeldoutResult

    Raises
    ------
    InvalidParameterError
        An unknown protocol or setting, or a bad value.
    OrderNotKeptError
        ``completion-first-half`` on a store without the ordered-token layer.
    VocabularyMismatchError
        The store shares no language with the model.

    Notes
    -----
    Every protocol sums per-document values exactly (:class:`~topicflow.metrics.heldout.HeldoutStats`)
    and draws its random numbers per global document position, so the result is the same for any
    number of workers or shards; ``bound`` sums floating-point E-step statistics in a fixed tree,
    the same for any number of workers, equal to rounding for another sharding.

    Examples
    --------
    >>> from topicflow.io.models.store import load_model          # doctest: +SKIP
    >>> heldout_likelihood(load_model("m"), "test.zarr", "left-to-right", n_particles=20).perplexity  # doctest: +SKIP
    """
    spec = parse_protocol(protocol)
    if options is not None and settings:
        raise InvalidParameterError("give the protocol's settings either as options or as keywords, not both")
    try:
        options = options or HeldoutOptions(**settings)
    except TypeError as exc:
        raise InvalidParameterError(
            f"unknown held-out setting in {sorted(settings)}; allowed: {list(HeldoutOptions.__slots__)}"
        ) from exc
    corpus = as_corpus(store)
    client = current_client(client)
    token = graph_token(corpus.token(), model_token(model), "heldout", spec.name, options)
    blocks, maps = model_blocks(model, corpus, token=token)
    split_every = options.split_every or int(tf_config.get("split-every", 8))
    run = _Run(model, corpus, options, client, token, blocks, maps, split_every)
    stats, token_order, used = spec.run(run)
    if stats.n_tokens == 0:
        raise InvalidParameterError(
            f"store {str(corpus.path)!r} has no token to evaluate under protocol {spec.name!r} (documents too "
            "short, or no term in the model's vocabulary)", path=str(corpus.path),
        )
    return HeldoutResult(
        protocol=spec.name, description=spec.description, log_likelihood=stats.log_lik,
        log_lik_per_token=stats.log_lik_per_token, perplexity=stats.perplexity,
        n_docs=stats.n_docs, n_tokens=stats.n_tokens, oov_tokens=oov_token_count(corpus, maps),
        token_order=token_order, settings=used,
    )
