"""What ICBMClassifier says about its concepts: records, prompts, tables."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from numbers import Integral

import numpy as np

__all__ = ["ConceptRecord", "concept_records", "concept_table"]


@dataclasses.dataclass
class ConceptRecord:
    """What :meth:`ICBMClassifier.explain_concepts` says about one concept.

    Attributes
    ----------
    index : int
        Concept unit j (column j of ``transform(X)``).
    firing_rate : float
        Share of all samples on which the concept fires (bit = 1).
    class_rates : dict
        Class label -> share of that class's samples on which it fires.
    activated : list
        G_act: the labels of the classes with ``class_rate >= threshold``.
    non_activated : list
        G_non: the other classes.
    specificity : float
        Mean firing rate over G_act minus mean firing rate over G_non, in
        [0, 1]; 0 when either group is empty. 1 means the concept is a
        function of the class (fires on every sample of G_act and on none of
        G_non).
    status : {"contrastive", "silent", "constant"}
        "contrastive" when both groups are non-empty; "silent" when no class
        reaches the threshold (G_act empty); "constant" when every class does
        (G_non empty). Only contrastive concepts have a class-level meaning.
    prompt : str
        Contrastive naming prompt built from the class names.
    name : str or None
        The name given by the ``namer``; None without one.

    Examples
    --------
    >>> from sksign.estimators import ConceptRecord
    >>> rec = ConceptRecord(0, 0.5, {"a": 1.0, "b": 0.0}, ["a"], ["b"], 1.0,
    ...                     "contrastive", "What do a share that b lack?")
    >>> rec.status, rec.name
    ('contrastive', None)
    """

    index: int
    firing_rate: float
    class_rates: dict
    activated: list
    non_activated: list
    specificity: float
    status: str
    prompt: str
    name: str | None = None

    def to_dict(self) -> dict:
        """The record as a plain dict.

        Returns
        -------
        record : dict
            The fields by name.

        Examples
        --------
        >>> rec = ConceptRecord(0, 0.5, {"a": 1.0, "b": 0.0}, ["a"], ["b"], 1.0,
        ...                     "contrastive", "What do a share that b lack?")
        >>> rec.to_dict()["activated"]
        ['a']
        """
        return dataclasses.asdict(self)


def _join(names: list[str]) -> str:
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


def _naming_prompt(j: int, act: list[str], non: list[str], rate: float) -> str:
    if act and non:
        return (
            f"Concept {j} of a classifier fires on most samples of the classes "
            f"{_join(act)} and on few samples of the classes {_join(non)}. "
            f"What do {_join(act)} share that {_join(non)} lack? "
            "Answer with a short name for that property (at most five words)."
        )
    where = "every class" if not non else "no class"
    return (
        f"Concept {j} of a classifier fires on {rate:.0%} of all samples and on "
        f"most samples of {where}, so it does not separate the classes "
        f"({_join(act or non)}). Answer with a short name for what the samples "
        "it fires on share (at most five words), or 'none'."
    )


def _class_names(labels, class_names):
    if class_names is None:
        return [str(c) for c in labels]
    if isinstance(class_names, Mapping):
        missing = [c for c in labels if _py(c) not in class_names]
        if missing:
            raise ValueError(f"class_names lacks the labels {missing!r}.")
        return [str(class_names[_py(c)]) for c in labels]
    names = [str(n) for n in class_names]
    if len(names) != len(labels):
        raise ValueError(
            f"class_names has {len(names)} names for {len(labels)} classes "
            f"({list(labels)!r})."
        )
    return names


def check_explain_args(namer, threshold):
    """Check `threshold` (in (0, 1]) and `namer` (callable or None).

    Returns
    -------
    threshold : float

    Examples
    --------
    >>> check_explain_args(None, 0.5)
    0.5
    """
    threshold = float(threshold)
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must lie in (0, 1]; got {threshold!r}.")
    if namer is not None and not callable(namer):
        raise TypeError(f"namer must be a callable or None; got {namer!r}.")
    return threshold


def concept_records(C, y, namer=None, *, class_names=None, threshold=0.5):
    """One :class:`ConceptRecord` per column of the concept matrix `C`.

    See :meth:`ICBMClassifier.explain_concepts
    <sksign.estimators.ICBMClassifier.explain_concepts>`, which calls it on
    ``transform(X)``.

    Parameters
    ----------
    C : ndarray of shape (n_samples, n_concepts)
        0/1 concept bits.
    y : array-like of shape (n_samples,)
        Class labels.
    namer : callable or None, default=None
        Gives each record its ``name``.
    class_names : mapping or sequence of str, default=None
        Names used in the prompts.
    threshold : float, default=0.5
        Firing rate from which a class counts as activated.

    Returns
    -------
    records : list of ConceptRecord

    Examples
    --------
    >>> import numpy as np
    >>> C = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.uint8)
    >>> [r.activated for r in concept_records(C, ["a", "a", "b"])]
    [['a'], ['a', 'b']]
    """
    threshold = check_explain_args(namer, threshold)
    y = np.asarray(y)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y.ravel()
    if y.ndim != 1 or len(y) != len(C):
        raise ValueError(
            f"y must be 1-D with one label per sample of X ({len(C)}); got "
            f"shape {y.shape}."
        )
    if len(C) == 0:
        raise ValueError("explain_concepts needs at least one sample.")
    labels, inverse = np.unique(y, return_inverse=True)
    names = _class_names(labels, class_names)
    counts = np.bincount(inverse, minlength=len(labels)).astype(np.float64)
    fired = np.zeros((len(labels), C.shape[1]), dtype=np.float64)
    np.add.at(fired, inverse, C)
    rates = fired / counts[:, None]
    overall = C.mean(axis=0, dtype=np.float64)
    records = []
    for j in range(C.shape[1]):
        on = rates[:, j] >= threshold
        act = [_py(v) for v in labels[on]]
        non = [_py(v) for v in labels[~on]]
        if on.any() and (~on).any():
            spec = float(rates[on, j].mean() - rates[~on, j].mean())
            status = "contrastive"
        else:
            spec, status = 0.0, "constant" if on.all() else "silent"
        rec = ConceptRecord(
            index=j,
            firing_rate=float(overall[j]),
            class_rates={_py(c): float(r) for c, r in zip(labels, rates[:, j])},
            activated=act,
            non_activated=non,
            specificity=spec,
            status=status,
            prompt=_naming_prompt(
                j,
                [n for n, o in zip(names, on) if o],
                [n for n, o in zip(names, on) if not o],
                float(overall[j]),
            ),
        )
        if namer is not None:
            rec.name = str(namer(rec))
        records.append(rec)
    return records


def check_report_args(sort_by, max_concepts):
    """Check the table options of ``concept_report`` before any work.

    Examples
    --------
    >>> check_report_args("index", 3)
    """
    if sort_by not in ("specificity", "index", "firing_rate"):
        raise ValueError(
            f"sort_by must be 'specificity', 'index' or 'firing_rate'; got {sort_by!r}."
        )
    if max_concepts is not None and (
        not isinstance(max_concepts, Integral) or max_concepts < 1
    ):
        raise ValueError(f"max_concepts must be an int >= 1; got {max_concepts!r}.")


def concept_table(records, *, sort_by="specificity", max_concepts=None, as_frame=False):
    """The records as a readable table (see ``ICBMClassifier.concept_report``).

    Parameters
    ----------
    records : list of ConceptRecord
        As :func:`concept_records` returns them.
    sort_by : {"specificity", "index", "firing_rate"}, default="specificity"
        Row order (decreasing specificity / firing rate, or by index).
    max_concepts : int or None, default=None
        Show only the first rows.
    as_frame : bool, default=False
        Return a pandas DataFrame instead of a string.

    Returns
    -------
    report : str or pandas.DataFrame

    Examples
    --------
    >>> import numpy as np
    >>> C = np.array([[1, 0], [1, 1], [0, 1]], dtype=np.uint8)
    >>> print(concept_table(concept_records(C, [0, 0, 1]), sort_by="index"))
    concept  firing_rate  specificity  status       activated  non_activated  name
    -------  -----------  -----------  -----------  ---------  -------------  ----
    0        0.667        1.0          contrastive  0          1
    1        0.667        0.0          constant     0 1
    """
    check_report_args(sort_by, max_concepts)
    if sort_by != "index":
        records = sorted(records, key=lambda r: -getattr(r, sort_by))
    records = records[:max_concepts]
    rows = [
        {
            "concept": r.index,
            "firing_rate": round(r.firing_rate, 3),
            "specificity": round(r.specificity, 3),
            "status": r.status,
            "activated": " ".join(map(str, r.activated)),
            "non_activated": " ".join(map(str, r.non_activated)),
            "name": "" if r.name is None else r.name,
        }
        for r in records
    ]
    if as_frame:
        import pandas as pd

        return pd.DataFrame(rows, columns=list(_REPORT_COLUMNS))
    return _format_table(rows)


_REPORT_COLUMNS = (
    "concept",
    "firing_rate",
    "specificity",
    "status",
    "activated",
    "non_activated",
    "name",
)


def _py(value):
    """numpy scalar -> Python scalar (readable records, hashable keys)."""
    return value.item() if isinstance(value, np.generic) else value


def _format_table(rows: list[dict], columns: tuple = _REPORT_COLUMNS) -> str:
    header = [str(c) for c in columns]
    body = [[str(r[c]) for c in columns] for r in rows]
    widths = [max([len(h)] + [len(b[i]) for b in body]) for i, h in enumerate(header)]
    line = "  ".join(h.ljust(w) for h, w in zip(header, widths))
    sep = "  ".join("-" * w for w in widths)
    out = [line.rstrip(), sep]
    out += ["  ".join(v.ljust(w) for v, w in zip(b, widths)).rstrip() for b in body]
    return "\n".join(out)
