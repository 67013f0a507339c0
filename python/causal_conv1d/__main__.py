"""`python -m causal_conv1d` is the `causal-conv1d` command."""

import sys

from .cli import main

sys.exit(main())
