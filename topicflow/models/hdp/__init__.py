"""The hierarchical Dirichlet process (Teh et al. 2006) with collapsed variational inference.

Pure math, no Dask: the truncated stick-breaking prior and its point-estimate updates
(:mod:`~topicflow.models.hdp.sticks`, Bleier eqs. 1, 3-6, 10-12), the global state
(:mod:`~topicflow.models.hdp.state`), practical collapsed stochastic VB (PCSVB0, Bleier's
Algorithm 1, word by word, clumped and by minibatch: :mod:`~topicflow.models.hdp.pcsvb0`) and
Sato et al.'s batch PCVB0 (:mod:`~topicflow.models.hdp.pcvb0`). The zero-order collapsed token
update they share with SCVB0 for LDA lives once, in :mod:`topicflow.models.common.cvb0`.
"""
