"""Drivers of the collapsed variational methods: PCSVB0 and PCVB0 for the HDP, SCVB0 for LDA.

One package for both families because SCVB0 is PCSVB0's token update with a fixed prior: the minibatch
driver, its tasks and its actor are the same code. Importing this package registers the continuation
of hdp (pcsvb0) and scvb0 models with ``topicflow update`` (:mod:`topicflow.pipeline.collapsed.nightly`).

- ``CollapsedConfig`` (config.py): the method and how the corpus is walked.
- ``fit_collapsed(corpus, config, *, client=None, progress=NO_PROGRESS, checkpoint=None, resume=False,
  test=None, on_record=None, split_every=None, n_docs=None, n_tokens=None) -> CollapsedResult``
  (fit.py): runs ``config.method`` and returns the state, the trace, the ``SavedModel`` ready to save
  and the topics in use.
- ``collapsed_model`` / ``saved_state`` / ``saved_config`` (model.py): the saved model of a fit and its
  exact state and settings read back.
- ``continue_collapsed`` (nightly.py): a saved pcsvb0 / scvb0 model continued over more shards.
- ``WordStream`` (word_by_word.py): the word-by-word actor for an unbounded stream.
"""
from topicflow.pipeline.collapsed import nightly as _nightly  # noqa: F401  (registers "hdp" and "scvb0")
from topicflow.pipeline.collapsed.config import CollapsedConfig, CollapsedMethod
from topicflow.pipeline.collapsed.fit import CollapsedResult, fit_collapsed, stream_run
from topicflow.pipeline.collapsed.model import (
    collapsed_model,
    config_from_dict,
    config_to_dict,
    is_collapsed_model,
    saved_config,
    saved_state,
)
from topicflow.pipeline.collapsed.nightly import continue_collapsed
from topicflow.pipeline.collapsed.word_by_word import WordStream

__all__ = ["CollapsedConfig", "CollapsedMethod", "CollapsedResult", "WordStream", "collapsed_model",
           "config_from_dict", "config_to_dict", "continue_collapsed", "fit_collapsed", "is_collapsed_model",
           "saved_config", "saved_state", "stream_run"]
