"""Shared docstring pieces, substituted into docstrings at import time.

A docstring names a shared piece as ``{name}``; :class:`Substitution` fills it
in, so every estimator documents a shared parameter with the same words while
its source keeps a complete docstring for readers and tools.
"""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import textwrap

__all__ = ["Substitution"]


class Substitution:
    """Decorate a function or class to fill ``{name}`` fields of its docstring.

    Each value is dedented and re-indented to the column of its field, so a
    multi-line piece (a parameter entry) slots into a numpydoc section.
    Literal braces in the docstring are written ``{{`` and ``}}``.

    Parameters
    ----------
    **pieces : str
        The text for each field.

    Examples
    --------
    >>> @Substitution(seed="random_state : int, default=None\\n    The seed.")
    ... def f():
    ...     '''Do it.
    ...
    ...     Parameters
    ...     ----------
    ...     {seed}
    ...     '''
    >>> print(f.__doc__.splitlines()[4])
        random_state : int, default=None
    """

    def __init__(self, **pieces: str) -> None:
        self.pieces = {k: textwrap.dedent(v).strip("\n") for k, v in pieces.items()}

    def __call__(self, obj):
        doc = obj.__doc__
        if doc:
            obj.__doc__ = doc.format_map(_Indented(doc, self.pieces))
        return obj


class _Indented(dict):
    """Pieces re-indented to the column where their field stands in `doc`."""

    def __init__(self, doc: str, pieces: dict[str, str]) -> None:
        super().__init__()
        for key, text in pieces.items():
            indent = ""
            for line in doc.splitlines():
                stripped = line.lstrip()
                if stripped.startswith("{" + key + "}"):
                    indent = line[: len(line) - len(stripped)]
                    break
            lines = text.splitlines()
            self[key] = "\n".join(
                [lines[0], *[(indent + ln) if ln else ln for ln in lines[1:]]]
                if lines
                else []
            )
