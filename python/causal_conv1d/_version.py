"""Version of the causal_conv1d Python package (single source: pyproject reads it with a regex)."""

__version__ = "0.2.0"
