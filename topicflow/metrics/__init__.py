"""Evaluation math shared by every model family: held-out likelihood, clustering scores."""
