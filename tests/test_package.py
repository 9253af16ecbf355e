"""The top-level package: public names on first use, a light import."""

import importlib
import inspect
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import sksign
from sksign._public import PUBLIC, TOP_LEVEL, public_names, sections

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize(("name", "home"), sorted(TOP_LEVEL.items()))
def test_public_names_are_the_subpackages_objects(name, home):
    """Check sksign.<name> is the object its subpackage exports."""
    sub = importlib.import_module(home)
    assert getattr(sksign, home.rsplit(".", 1)[1]) is sub
    assert getattr(sksign, name) is getattr(sub, name)
    assert name in sksign.__all__
    assert name in dir(sksign)
    assert name in sub.__all__


def test_unknown_names_and_light_import():
    """Check a clear AttributeError, and that ``import sksign`` loads no torch."""
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        sksign.nope  # noqa: B018
    code = "import sys, sksign; assert 'torch' not in sys.modules, 'torch loaded'"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert sksign.__version__


def test_the_sign_knn_estimators_load_without_torch():
    """Check a search service (the k-NN on codes, fit and predict) never
    loads torch or skorch, and that the estimators' lazy names are complete."""
    code = (
        "import sys, numpy as np\n"
        "from sksign import SignKNNClassifier, SignKNNRegressor\n"
        "X = np.random.RandomState(0).randint(0, 2, (40, 70)).astype(np.uint8)\n"
        "y = np.arange(40) % 3\n"
        "SignKNNClassifier(n_neighbors=3).fit(X, y).predict(X)\n"
        "SignKNNRegressor(n_neighbors=3).fit(X, y * 1.0).predict(X)\n"
        "loaded = {'torch', 'skorch'} & set(sys.modules)\n"
        "assert not loaded, loaded\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    from sksign import estimators

    for name in estimators.__all__:
        assert getattr(estimators, name).__name__ == name
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        estimators.nope  # noqa: B018


@pytest.mark.parametrize("module", sorted(PUBLIC))
def test_the_table_is_each_modules_public_surface(module):
    """Check a package's ``__all__`` is its table entry (a module's holds it),
    and each name is the object its declared defining module holds."""
    mod = importlib.import_module(module)
    if hasattr(mod, "__path__"):
        assert list(mod.__all__) == public_names(module)
    else:
        assert set(PUBLIC[module]) <= set(mod.__all__)
    for name, defining in PUBLIC[module].items():
        obj = getattr(mod, name)
        assert getattr(importlib.import_module(defining), name) is obj
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert obj.__module__ == defining, (name, obj.__module__)


def _public_modules():
    """Every module of sksign whose dotted name has no private part."""
    names = ["sksign"]
    for info in pkgutil.walk_packages(sksign.__path__, "sksign."):
        parts = info.name.split(".")
        if not any(p.startswith("_") for p in parts):
            names.append(info.name)
    return names


def test_no_public_name_escapes_the_table():
    """Check every public module's ``__all__`` lists only declared names."""
    declared = {name for _, _, names in sections() for name in names}
    declared |= {"__version__", *TOP_LEVEL, *sksign._SUBPACKAGES}
    for module in _public_modules():
        extra = set(getattr(importlib.import_module(module), "__all__", ())) - declared
        assert not extra, f"{module}.__all__ lists undeclared names {sorted(extra)}"


@pytest.mark.parametrize(
    ("module", "name"),
    [
        ("sksign.nn", "check_n_concepts"),
        ("sksign.nn", "check_input_shape"),
        ("sksign.nn.hooks", "call_key"),
        ("sksign.nn.hooks", "CodeLayout"),
        ("sksign.kernels", "effective_n_threads"),
        ("sksign.kernels", "auto_batch_size"),
        ("sksign.kernels", "check_n_bits"),
        ("sksign.distributed", "require_dask"),
    ],
)
def test_internal_checkers_are_importable_but_not_public(module, name):
    """Check the internal helpers stay where sksign's modules import them,
    outside every ``__all__``."""
    assert hasattr(importlib.import_module(module), name)
    for _, other, names in sections():
        assert name not in names, f"{name} is declared public in {other}"


def _documented():
    """``(module, name)`` of each autosummary entry of docs/api.rst."""
    entries, module, in_summary = [], None, False
    for line in (ROOT / "docs" / "api.rst").read_text(encoding="utf-8").splitlines():
        if match := re.match(r"\.\. currentmodule:: (\S+)", line):
            module = match.group(1)
        elif line.startswith(".. autosummary::"):
            in_summary = True
        elif in_summary and re.match(r"   [A-Za-z_]\w*$", line):
            entries.append((module, line.strip()))
        elif line and not line.startswith(" "):
            in_summary = False
    return entries


def test_api_reference_documents_exactly_the_table():
    """Check docs/api.rst lists each public class and function of the table
    once, under the first module that declares it (docs/conf.py writes it)."""
    expected, seen = [], set()
    for _, module, names in sections():
        mod = importlib.import_module(module)
        for name in sorted(names):
            if (names[name], name) in seen:
                continue
            seen.add((names[name], name))
            obj = getattr(mod, name)
            if inspect.isclass(obj) or callable(obj):
                expected.append((module, name))
    documented = _documented()
    assert len(documented) == len(set(documented))
    assert sorted(documented) == sorted(expected)
