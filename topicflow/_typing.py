"""Shared type aliases and the Literal names of algorithm choices.

The Literal spellings are the ones used in CLI flags, config keys and model JSON.
"""
from __future__ import annotations

from typing import Any, Literal, get_args

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
Float32Array = NDArray[np.float32]
IntArray = NDArray[np.int64]
Int32Array = NDArray[np.int32]
#: Term or topic ids of either width: int32 as stored in blocks, int64 after remapping.
IndexArray = NDArray[np.signedinteger[Any]]

OnError = Literal["raise", "skip"]
AlphaMode = Literal["auto", "symmetric", "fixed"]
#: How variational LDA learns: batch, online (Hoffman et al. 2010) or streaming VB (Broderick et al. 2013).
LearningMethod = Literal["batch", "online", "svb"]
EStepKind = Literal["vb", "hybrid"]
#: How the hybrid E-step starts each document's chain, and how it builds the alpha statistics.
HybridInit = Literal["progressive", "random"]
HybridAlphaStats = Literal["mean", "samples"]
StreamAlgorithm = Literal["gibbs", "olda", "incgibbs", "pf", "sgs", "dsgs"]
ResamplingScheme = Literal["multinomial", "residual", "stratified", "systematic"]
RejuvenationSource = Literal["history", "window", "reservoir"]
InitSelection = Literal["nmi", "perplexity"]
#: How a stream scores its test documents: topics fixed and folded in, or observed as the next documents
#: of the stream and then forgotten (Canini et al. 2009, sec. 5.2).
HeldOutMode = Literal["fold_in", "next_docs"]
#: Where the E-steps of online VB run (see :class:`topicflow.pipeline.vb.online.OnlineConfig`).
Executor = Literal["auto", "servers", "threads", "tasks"]
#: Streaming algorithms that run minibatches (Gao et al. 2016) rather than token by token.
MinibatchAlgorithm = Literal["sgs", "dsgs"]
#: Start of each minibatch's assignments in streaming Gibbs with decay.
SGSInit = Literal["posterior-token", "posterior-document", "random"]
#: Why a streaming-Gibbs minibatch stopped sweeping.
SGSStopReason = Literal["no_improvement", "max_iter", "empty"]
#: When a particle filter rejuvenates: after a resampling, or after every token (incremental Gibbs).
RejuvenateAfter = Literal["resample", "token"]
#: Start of a collapsed Gibbs chain.
GibbsInit = Literal["random", "sequential", "scvb0"]
#: Input formats of ingest and append.
InputKind = Literal["text", "jsonl", "parquet"]
#: How a record's position is named in messages: a line of a file, a row of a table, or a whole file.
LocationUnit = Literal["line", "row", "file"]
#: How a model version was made: a full fit, or an incremental update of the previous current version.
VersionKind = Literal["fit", "update"]
#: Model families; a saved model records its own.
Family = Literal["lda", "hdp", "tree_lda", "infvoc", "adaptor_grammar"]
#: Inference of the HDP family: Bleier's stochastic PCSVB0 or Sato et al.'s batch PCVB0.
HDPMethod = Literal["pcsvb0", "pcvb0"]
#: A collapsed stochastic method's start of a document's n_dk: a flat-Dirichlet draw times n_d, or zero.
DocStart = Literal["random", "zero"]
#: How a prior tree's node normalizes its children: one Dirichlet over all of them (Zhai ch. 5), or one per
#: language (so that a flat tree is polylingual LDA).
TreeNormalization = Literal["node", "node_language"]
#: Output formats of the reporting commands.
OutputFormat = Literal["text", "json"]
#: Held-out likelihood protocols of ``topicflow evaluate --protocol`` (docs/evaluation.md).
HeldoutProtocol = Literal["completion-random", "completion-first-half", "left-to-right", "bound"]
#: The protocol ``topicflow evaluate`` and ``heldout_likelihood`` use unless told otherwise (here, not in
#: :mod:`topicflow.pipeline.evaluation.heldout`, so an estimator's signature does not import the evaluation package).
DEFAULT_PROTOCOL: HeldoutProtocol = "completion-random"
#: Formats of ``topicflow export``: the model's arrays, or the arguments of ``pyLDAvis.prepare``.
ExportFormat = Literal["npz", "pyldavis"]
#: Topic coherence measures, named as gensim's CoherenceModel names them.
CoherenceMeasure = Literal["c_v", "u_mass", "c_uci", "c_npmi"]
#: Which words a sliding window holds: gensim's incremental set (its default) or the exact set.
WindowSets = Literal["gensim", "exact"]


def choices(literal: Any) -> tuple[str, ...]:
    """The allowed values of a ``Literal`` alias, in order: the one list CLI choices and checks use.

    Parameters
    ----------
    literal : typing.Literal alias
        For example :data:`StreamAlgorithm`.

    Returns
    -------
    tuple of str
        ``typing.get_args(literal)``.

    Examples
    --------
    >>> choices(LearningMethod)
    ('batch', 'online', 'svb')
    """
    return tuple(get_args(literal))
