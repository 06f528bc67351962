"""Estimators with the scikit-learn conventions, one per model family."""
