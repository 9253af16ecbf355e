"""The ops of the packed nets, one unit per op, registered by discovery.

Each public module of this package is one op, named after it: it declares
``SPEC``, an :class:`~sksign.deploy._format.OpSpec` (what a layer of the op
reads, writes and must declare, how to check it) whose ``prepare(layer,
context)`` derives what the layer needs once, at load, and returns
``run(inputs, n_samples, n_threads)``. :data:`OPS` maps every op name to its
spec; adding an op is adding a module here (see docs/deploy.rst, "How to add
an op"). Modules whose names start with ``_`` hold what several ops share.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import importlib
import pkgutil

__all__ = ["OPS"]


def _discover():
    ops = {}
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("_"):
            continue
        spec = importlib.import_module(f"{__name__}.{info.name}").SPEC
        if spec.prepare is None:  # pragma: no cover - a unit without a run
            raise TypeError(f"op {info.name!r} declares no prepare().")
        ops[info.name] = spec
    return ops


#: Op name -> :class:`~sksign.deploy._format.OpSpec`, in name order.
OPS = _discover()
