"""One anchor fit as a whole script, for bench_speed.py: load the bags, fit, save, print one JSON line.

Run as a subprocess (so that its wall time and the peak memory of its process tree are the whole
script's, imports included)::

    python benchmarks/_speed_anchors.py SYSTEM --bags train.npz --topics K --budget B --out model.npz

``SYSTEM`` is one of :data:`ANCHORS`; ``--budget`` is sweeps (tomotopy, lda), passes (gensim,
scikit-learn online) or iterations (scikit-learn batch). The saved model is the topic-word matrix
(rows in the bags' term order, not necessarily normalized) and the document-topic prior alpha, which
is all the common held-out evaluator needs. The JSON line holds ``fit_seconds`` (the library's
training call only) and ``prepare_seconds`` (converting the bags to the library's input).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any, Callable

import numpy as np
import scipy.sparse as sp

#: (topic-word matrix of shape (n_topics, n_terms), alpha of shape (n_topics,), fit seconds, prepare seconds)
Fitted = tuple[np.ndarray, np.ndarray, float, float]


def _tomotopy(workers: int) -> Callable[[sp.csr_matrix, argparse.Namespace], Fitted]:
    def fit(X: sp.csr_matrix, args: argparse.Namespace) -> Fitted:
        import tomotopy as tp

        started = time.perf_counter()
        model = tp.LDAModel(k=args.topics, alpha=args.alpha, eta=args.eta, seed=args.seed)
        model.optim_interval = 0  # alpha and eta stay fixed, as in every other Gibbs row
        names = [str(t) for t in range(X.shape[1])]
        for d in range(X.shape[0]):
            row = slice(X.indptr[d], X.indptr[d + 1])
            words = [names[t] for t, c in zip(X.indices[row], X.data[row]) for _ in range(int(c))]
            if words:  # tomotopy rejects empty documents
                model.add_doc(words)
        prepared = time.perf_counter()
        model.train(args.budget, workers=workers)
        trained = time.perf_counter()
        columns = np.array([int(v) for v in model.vocabs], dtype=np.int64)
        topic_word = np.full((args.topics, X.shape[1]), 1e-12)
        topic_word[:, columns] = np.array([model.get_topic_word_dist(k) for k in range(args.topics)])
        return topic_word, np.asarray(model.alpha, dtype=np.float64), trained - prepared, prepared - started

    return fit


def _gensim(multicore: bool) -> Callable[[sp.csr_matrix, argparse.Namespace], Fitted]:
    def fit(X: sp.csr_matrix, args: argparse.Namespace) -> Fitted:
        from gensim.matutils import Sparse2Corpus
        from gensim.models import LdaModel, LdaMulticore

        started = time.perf_counter()
        corpus = list(Sparse2Corpus(X, documents_columns=False))
        id2word = {i: str(i) for i in range(X.shape[1])}
        common: dict[str, Any] = dict(num_topics=args.topics, id2word=id2word, passes=args.budget, chunksize=2000,
                                      iterations=50, alpha=args.alpha, eta=args.eta, random_state=args.seed,
                                      eval_every=None)
        prepared = time.perf_counter()
        # 2 cores: LdaMulticore with one worker process plus its master (gensim's advice: workers = cores - 1).
        model = LdaMulticore(corpus, workers=1, **common) if multicore else LdaModel(corpus, **common)
        trained = time.perf_counter()
        return model.get_topics(), np.asarray(model.alpha, dtype=np.float64), trained - prepared, prepared - started

    return fit


def _sklearn(method: str) -> Callable[[sp.csr_matrix, argparse.Namespace], Fitted]:
    def fit(X: sp.csr_matrix, args: argparse.Namespace) -> Fitted:
        from sklearn.decomposition import LatentDirichletAllocation

        options: dict[str, Any] = (dict(n_jobs=2) if method == "batch"
                                   else dict(n_jobs=1, batch_size=256, learning_offset=10.0, learning_decay=0.7))
        model = LatentDirichletAllocation(n_components=args.topics, doc_topic_prior=args.alpha,
                                          topic_word_prior=args.eta, learning_method=method, max_iter=args.budget,
                                          evaluate_every=-1, random_state=args.seed, **options)
        started = time.perf_counter()
        model.fit(X)
        trained = time.perf_counter()
        return model.components_, np.full(args.topics, args.alpha), trained - started, 0.0

    return fit


def _lda(X: sp.csr_matrix, args: argparse.Namespace) -> Fitted:
    import logging

    import lda

    logging.getLogger("lda").setLevel(logging.WARNING)
    started = time.perf_counter()
    X = X.astype(np.int64)
    prepared = time.perf_counter()
    # refresh = budget: its log-likelihood (not needed here) is computed once, not every 10 sweeps.
    model = lda.LDA(n_topics=args.topics, n_iter=args.budget, alpha=args.alpha, eta=args.eta,
                    random_state=args.seed, refresh=args.budget)
    model.fit(X)
    trained = time.perf_counter()
    return model.topic_word_, np.full(args.topics, args.alpha), trained - prepared, prepared - started


#: Anchor name -> fit function.
ANCHORS: dict[str, Callable[[sp.csr_matrix, argparse.Namespace], Fitted]] = {
    "tomotopy-2": _tomotopy(2),
    "tomotopy-1": _tomotopy(1),
    "gensim-multicore": _gensim(multicore=True),
    "gensim": _gensim(multicore=False),
    "sklearn-batch": _sklearn("batch"),
    "sklearn-online": _sklearn("online"),
    "lda": _lda,
}

#: Anchor name -> the module it needs (an anchor whose module is missing is reported "not installed").
MODULES = {"tomotopy-2": "tomotopy", "tomotopy-1": "tomotopy", "gensim-multicore": "gensim", "gensim": "gensim",
           "sklearn-batch": "sklearn", "sklearn-online": "sklearn", "lda": "lda"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("system", choices=sorted(ANCHORS))
    parser.add_argument("--bags", required=True, help="training documents: a scipy.sparse .npz (documents x terms)")
    parser.add_argument("--topics", type=int, required=True)
    parser.add_argument("--budget", type=int, required=True, help="sweeps, passes or iterations")
    parser.add_argument("--alpha", type=float, default=0.1)
    parser.add_argument("--eta", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", required=True, help="where to save topic_word and alpha (.npz)")
    args = parser.parse_args(argv)
    X = sp.load_npz(args.bags).tocsr()
    topic_word, alpha, fit_seconds, prepare_seconds = ANCHORS[args.system](X, args)
    np.savez(args.out, topic_word=np.asarray(topic_word, dtype=np.float64), alpha=alpha)
    print(json.dumps({"system": args.system, "fit_seconds": fit_seconds, "prepare_seconds": prepare_seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
