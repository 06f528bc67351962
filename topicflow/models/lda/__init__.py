"""Latent Dirichlet allocation: one state, three kinds of inference (vb, gibbs, streaming)."""
