"""Collection rules for the doctests under sksign/ (pytest's rootdir conftest)."""

import importlib.util

#: Modules whose import needs an optional package that is not installed.
collect_ignore = []
if importlib.util.find_spec("spikingjelly") is None:
    collect_ignore.append("sksign/nn/activations/_spikingjelly.py")
