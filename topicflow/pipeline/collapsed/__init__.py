"""Drivers of the collapsed variational methods: PCSVB0 and PCVB0 for the HDP, SCVB0 for LDA.

SKELETON (issue 19). One package for both families because SCVB0 is PCSVB0's token update with a
fixed prior: the minibatch driver, its tasks and its actor are the same code. Public names the API
and CLI use (helper ``hdp-pipeline`` implements ``fit_collapsed`` for pcsvb0/scvb0, helper
``hdp-batch`` the pcvb0 branch):

- ``CollapsedConfig`` (config.py)
- ``fit_collapsed(corpus, config, *, client=None, progress=NO_PROGRESS, checkpoint=None, resume=False)
  -> CollapsedResult``: runs ``config.method`` and returns the state, the trace and a ``SavedModel``
  ready to commit.
"""
from topicflow.pipeline.collapsed.config import CollapsedConfig, CollapsedMethod

__all__ = ["CollapsedConfig", "CollapsedMethod"]
