"""PCSVB0: practical collapsed stochastic variational Bayes for the HDP (Bleier, Algorithm 1).

SKELETON (issue 19): helper ``hdp-math`` implements this module. Contract used by the pipeline:

- ``run_word_by_word(state: HDPState, block: DocBlock, params: HDPParams, *, doc_topic=None) -> PassStats``
  Algorithm 1 over the block's documents in order, word by word (or one update per distinct term with
  ``params.clumping``), mutating ``state`` in place: eqs. 7-9 per token, then eqs. 10-12 and 6 and the
  stick re-order after each document. ``doc_topic`` ((n_docs, T), optional) holds each document's n_dk
  between passes (``params.keep_doc_state``).
- ``local_minibatch(state_view, block, params, *, doc_topic=None) -> CVB0Stats``
  the per-partition local step of the minibatch form (global statistics fixed).
- ``apply_minibatch(state: HDPState, stats: CVB0Stats, params: HDPParams) -> None``
  the driver's global step: n_kw <- (1 - rho^c) n_kw + rho^c (n / |M|) sum q; tables, alpha (eq. 12
  over the minibatch), gamma (eq. 6); counters advance by one minibatch.
"""
from __future__ import annotations
