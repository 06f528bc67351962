"""Collapsed Gibbs sampling for LDA (Griffiths & Steyvers 2004) with SparseLDA buckets (Yao et al. 2009)."""
