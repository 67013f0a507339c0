"""Versions. `__version__` here is this package's own version (the single source: CMake and
pyproject read it with a regex; it is the installed distribution's metadata version). The
module `causal_conv1d` reports `upstream_api_version` as its `__version__` instead: real clients
compare causal_conv1d.__version__ against upstream releases, and this package implements
upstream causal-conv1d 1.6.1's API. causal_conv1d.package_version is the value below."""

__version__ = "0.2.0"

upstream_api_version = "1.6.1"
