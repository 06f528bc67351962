"""Using a fitted model on a corpus store: fold-in (document topics) and held-out evaluation."""
from __future__ import annotations

import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from topicflow import config as tf_config
from topicflow.errors import VocabularyMismatchError
from topicflow.io.corpus.reader import Corpus
from topicflow.io.models.store import SavedModel
from topicflow.io.outputs import doc_topics as doc_topics_io
from topicflow.io.storage import StoragePath
from topicflow.models.lda.vb.objective import local_elbo_terms
from topicflow.models.lda.vb.params import VBParams
from topicflow.pipeline.cluster import compute, compute_list, current_client
from topicflow.pipeline.progress import NO_PROGRESS, ProgressReporter
from topicflow.pipeline.vb.batch import share
from topicflow.tasks.estep import graph_token, map_estep, tree_merge
from topicflow.tasks.evaluate import map_completion, map_fold_in
from topicflow.tasks.transform import map_remap, map_write_doc_topics

log = logging.getLogger(__name__)


def model_token(model: SavedModel) -> str:
    """Return a token of the model's parameters (not its file), so different models never share task keys."""
    state = model.state
    return graph_token(
        state.doc_topic_prior, [state.topic_word_var[lang] for lang in state.languages],
        [state.topic_word_prior[lang] for lang in state.languages], model.info.settings,
    )


@dataclass(frozen=True, slots=True)
class EvaluationResult:
    """Held-out scores of a model on a corpus.

    Attributes
    ----------
    perplexity : float
        Document completion: exp(-log p(held-out half | observed half) / held-out tokens), the halves a
        random split of each document's tokens (``completion-random``).
    heldout_log_likelihood : float
    n_heldout_tokens : int
    elbo_per_token : float
        Per-word variational bound of the whole documents with the topics fixed (document and
        alpha terms; the topic terms belong to the training corpus and are left out).
    n_docs : int
    oov_tokens : int
        Tokens of the store whose terms the model does not know (ignored by both scores).
    """

    perplexity: float
    heldout_log_likelihood: float
    n_heldout_tokens: int
    elbo_per_token: float
    n_docs: int
    oov_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def term_maps(model: SavedModel, corpus: Corpus) -> dict[str, np.ndarray | None]:
    """Store term id -> model term id per shared language (None where the vocabularies are identical)."""
    shared = [lang for lang in model.state.languages if lang in corpus.languages]
    if not shared:
        raise VocabularyMismatchError(
            f"store {str(corpus.path)!r} has languages {list(corpus.languages)} but the model has "
            f"{list(model.state.languages)}; none is shared."
        )
    maps: dict[str, np.ndarray | None] = {}
    for lang in shared:
        store_vocab, model_vocab = corpus.vocabulary(lang), model.vocabularies[lang]
        if len(store_vocab) == len(model_vocab) and np.array_equal(store_vocab.terms, model_vocab.terms):
            maps[lang] = None
            continue
        ids = model_vocab.ids_of(str(t) for t in store_vocab.terms)
        term_map = np.array([-1 if i is None else i for i in ids], dtype=np.int64)
        maps[lang] = term_map
        log.info("language %r: %d of %d store terms are in the model's vocabulary", lang,
                 int((term_map >= 0).sum()), len(store_vocab))
    return maps


def oov_token_count(corpus: Corpus, maps: dict[str, np.ndarray | None]) -> int:
    """Count the tokens whose terms the model lacks, from the store's corpus frequencies (reads no shard)."""
    total = 0
    for lang, term_map in maps.items():
        if term_map is not None:
            total += int(corpus.vocabulary(lang).corpus_freq[term_map < 0].sum())
    return total


def model_blocks(model: SavedModel, corpus: Corpus, *, token: str) -> tuple[list[Any], dict[str, np.ndarray | None]]:
    """The store's blocks in the model's term ids, lazily."""
    maps = term_maps(model, corpus)
    n_terms = {lang: model.state.n_terms(lang) for lang in maps}
    return map_remap(corpus.to_delayed_multi(), maps, n_terms, token=token), maps


def fold_in_params(model: SavedModel, *, max_doc_iter: int | None = None, doc_tol: float | None = None) -> VBParams:
    """Return the E-step settings for folding documents into ``model`` (lambda fixed).

    Parameters
    ----------
    model : SavedModel
        The model; its saved settings give the defaults.
    max_doc_iter : int, optional
        Per-document iteration cap; default the model's ``max_doc_iter`` (100 if not saved).
    doc_tol : float, optional
        Per-document convergence tolerance; default the model's ``doc_tol`` (1e-3 if not saved).

    Returns
    -------
    VBParams
        Settings with the model's number of topics.
    """
    settings = model.info.settings
    return VBParams(
        n_topics=model.state.n_topics,
        max_doc_iter=max_doc_iter or int(settings.get("max_doc_iter", settings.get("doc_max_iter", 100))),
        doc_tol=doc_tol if doc_tol is not None else float(settings.get("doc_tol", 1e-3)),
    )


def infer_doc_topics(
    model: SavedModel, corpus: Corpus, out: Path | str | StoragePath, *, client: Any = None, overwrite: bool = False,
    progress: ProgressReporter = NO_PROGRESS,
) -> int:
    """Fold every document of ``corpus`` into the model (lambda fixed) and write normalized gamma.

    The output (see :mod:`topicflow.io.outputs.doc_topics`) is written part by part on the workers and moved
    into place only when complete. Returns the number of documents written.
    """
    client = current_client(client)
    token = graph_token(corpus.token(), model_token(model), "infer")
    blocks, maps = model_blocks(model, corpus, token=token)
    state = model.state
    names = [state.topic_label(k) for k in range(state.n_topics)]
    shard_ids = [s.shard_id for s in corpus.shards]
    writer = uuid.uuid4().hex  # tells this run's unfinished output on object storage from another writer's
    tmp = doc_topics_io.create_doc_topics(out, n_topics=state.n_topics, topic_names=names, shard_ids=shard_ids,
                                          overwrite=overwrite, writer=writer)
    try:
        topics = share(state.prepared_topics(list(maps)), client, name=f"topics-{token}")
        thetas = map_fold_in(blocks, topics, state.doc_topic_prior, fold_in_params(model), token=token)
        writes = map_write_doc_topics(blocks, thetas, str(tmp), shard_ids, token=token)
        # compute_list raises a failure only once no part is still being written (a full disk, say),
        # so the discard below is final.
        written = sum(compute_list(writes, client=client, progress=progress, desc="infer", unit="shard"))
        doc_topics_io.commit_doc_topics(tmp, out, overwrite=overwrite, n_topics=state.n_topics, topic_names=names,
                                        shard_ids=shard_ids, writer=writer)
    except BaseException:
        doc_topics_io.discard(tmp, writer=writer)
        raise
    return int(written)


def evaluate_model(
    model: SavedModel, corpus: Corpus, *, client: Any = None, seed: int = 0, split_every: int | None = None,
) -> EvaluationResult:
    """Held-out perplexity by random-half document completion and the per-word ELBO bound on ``corpus``.

    The two numbers are those of the ``completion-random`` (seed ``seed``, fraction 0.5) and ``bound``
    protocols of :func:`topicflow.pipeline.evaluation.heldout.heldout_likelihood`, computed in one graph.
    """
    client = current_client(client)
    split_every = split_every or int(tf_config.get("split-every", 8))
    token = graph_token(corpus.token(), model_token(model), "evaluate", seed)
    blocks, maps = model_blocks(model, corpus, token=token)
    state = model.state
    params = fold_in_params(model)
    topics = share(state.prepared_topics(list(maps)), client, name=f"topics-{token}")
    shared_topic_word = share(state.prepared_topic_word(list(maps)), client, name=f"topic-word-{token}")
    completion = map_completion(blocks, shared_topic_word, state.doc_topic_prior, params,
                                seed=seed, split_every=split_every, token=token)
    stats = tree_merge(map_estep(blocks, topics, state.doc_topic_prior, params, token=token),
                       split_every=split_every, token=token)
    heldout, stats = compute(completion, stats, client=client)
    bound = local_elbo_terms(stats, state.doc_topic_prior)
    return EvaluationResult(
        perplexity=heldout.perplexity,
        heldout_log_likelihood=heldout.log_lik,
        n_heldout_tokens=heldout.n_tokens,
        elbo_per_token=float(bound / max(stats.n_tokens, 1)),
        n_docs=int(stats.n_docs),
        oov_tokens=oov_token_count(corpus, maps),
    )
