"""SCVB0: stochastic collapsed variational Bayes for LDA (Foulds, Boyles, DuBois, Smyth & Welling 2013).

SKELETON (issue 19): helper ``hdp-math`` implements this module on the shared kernels of
:mod:`topicflow.models.common.cvb0` (the baseline of Bleier's Fig. 1, alpha = 0.1, beta = 0.01).
"""
from __future__ import annotations
