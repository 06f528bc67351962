"""Out-of-core ingest and append drivers."""
