"""Variational Bayes for LDA: batch (Mr. LDA), online (Hoffman et al. 2010) and hybrid E-steps."""
