"""Streaming samplers for LDA: particle filters, o-LDA, incremental Gibbs, streaming Gibbs with decay."""
