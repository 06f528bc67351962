"""Outputs beside models: document topics, scratch gamma."""
