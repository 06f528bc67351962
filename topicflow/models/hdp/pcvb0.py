"""PCVB0: Sato, Kurihara & Nakagawa (2012)'s practical batch collapsed VB for the HDP (Bleier sec. 2).

SKELETON (issue 19): helper ``hdp-batch`` implements this module (per-token q of a block, the sweep of
eq. 2 with the token's own q excluded, the block's statistics, and the batch hyperparameter step of
eqs. 3-6 built on :mod:`topicflow.models.hdp.sticks`).
"""
from __future__ import annotations
