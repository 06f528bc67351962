"""The package version, importable without importing the package's estimators."""

__version__ = "0.1.0"
