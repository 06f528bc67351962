"""Zero-order collapsed variational updates shared by SCVB0 (LDA) and PCSVB0 / PCVB0 (HDP).

SKELETON (issue 19): the coordinator fixed the names below; helper ``hdp-math`` implements them.

The one token update every method uses (Bleier eq. 7; Foulds et al. 2013 eq. 5):

    q_k  proportional to  (n_dk + prior_k) * (n_kw + beta) / (n_k. + V beta)

with ``prior = alpha * pi`` for the HDP and ``alpha`` (symmetric) for SCVB0. Kernels take raw arrays
(the lazy-scaled ``topic_word`` / ``topic_totals`` plus the scale, see
:mod:`topicflow.models.hdp.state`) so the HDP and LDA states share them.

Planned public names (signatures are the contract between helpers):

- ``CVB0Stats``: a minibatch's statistics, mergeable in a fixed order (``zeros``, ``merge``,
  ``merge_all``): ``topic_word`` (the minibatch's sum of count * q per (topic, term), unscaled),
  ``table_sums`` ((T,) sum over documents of E[1(n_dk >= 1)]), ``digamma_sum`` (sum over documents of
  psi(n_d + alpha) - psi(alpha) at the alpha the minibatch ran with), ``n_docs``, ``n_tokens``.
- ``GlobalView``: what workers need from the driver for a minibatch (the (T, V) word factor
  ``(n_kw + beta) / (n_k. + V beta)``, the document prior (T,), alpha), built by ``global_view``.
- ``local_minibatch(view, block, *, doc_step, burn_in, doc_start, clumping, seed, doc_topic=None)``
  -> ``CVB0Stats`` (and the documents' final n_dk when ``doc_topic`` is given): the per-partition
  local step, global statistics fixed.
- word-by-word kernels used by :func:`topicflow.models.hdp.pcsvb0.run_word_by_word` and SCVB0's
  per-token mode.
"""
from __future__ import annotations
