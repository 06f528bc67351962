"""Saved models: model directories, versions, checkpoints, streaming state."""
