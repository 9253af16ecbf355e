"""Every public class and function is documented in its source, with Examples."""

import ast
import importlib
import inspect
import re

import pytest

from sksign._public import sections


def _public_objects():
    """The public classes and functions of the table (sksign/_public.py)."""
    seen = {}
    for _, modname, names in sections():
        mod = importlib.import_module(modname)
        for name in names:
            obj = getattr(mod, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                seen.setdefault(id(obj), (f"{modname}.{name}", obj))
    return sorted(seen.values(), key=lambda item: item[0])


PUBLIC = _public_objects()


def test_public_objects_are_found():
    """Check the walk over the public modules finds the main names."""
    names = {name.rsplit(".", 1)[1] for name, _ in PUBLIC}
    assert {"HTAFNetClassifier", "SignCodeTransformer", "htaf", "pack_bits"} <= names


@pytest.mark.parametrize(("name", "obj"), PUBLIC, ids=[n for n, _ in PUBLIC])
def test_public_object_has_examples(name, obj):
    """Check the docstring has a numpydoc Examples section with a doctest."""
    doc = inspect.getdoc(obj) or ""
    assert "\nExamples\n--------\n" in doc, f"{name} has no Examples section"
    examples = doc.split("\nExamples\n--------\n", 1)[1]
    assert ">>> " in examples, f"{name}'s Examples section has no doctest"


def _source_docstring(obj):
    """The docstring as written in the source file (None when there is none)."""
    source = inspect.getsource(inspect.getmodule(obj))
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.ClassDef | ast.FunctionDef)
            and node.name == obj.__name__
        ):
            return ast.get_docstring(node)
    return None


@pytest.mark.parametrize(("name", "obj"), PUBLIC, ids=[n for n, _ in PUBLIC])
def test_docstring_is_static(name, obj):
    """Check the source holds the docstring's sections (tools read the source).

    Shared pieces may be filled in at import (``{field}`` placeholders), but
    the section headers and the examples stand in the source.
    """
    written = _source_docstring(obj)
    assert written, f"{name} has no docstring in its source"
    for header in ("Examples",):
        assert header in written, f"{name}'s source docstring lacks {header}"


_DEFAULT_LINE = re.compile(r"^(\w+) : .*?, default=(.+)$", re.M)


def _documented_defaults(obj):
    """``{parameter: the literal its docstring states as default}``."""
    doc = inspect.getdoc(obj) or ""
    section = doc.split("\nParameters\n----------\n", 1)[-1]
    for end in ("\nAttributes\n", "\nReturns\n", "\nSee Also\n", "\nNotes\n"):
        section = section.split(end, 1)[0]
    found = {}
    for name, value in _DEFAULT_LINE.findall(section):
        try:
            found[name] = ast.literal_eval(value.strip())
        except (ValueError, SyntaxError):
            continue  # a class or an expression: not compared
    return found


@pytest.mark.parametrize(("name", "obj"), PUBLIC, ids=[n for n, _ in PUBLIC])
def test_documented_defaults_are_the_signatures(name, obj):
    """Check every literal ``default=`` of a docstring is the signature's
    default (a shared docstring piece can drift from one estimator)."""
    try:
        params = inspect.signature(obj).parameters
    except (TypeError, ValueError):
        pytest.skip("no signature")
    wrong = {
        p: (doc, params[p].default)
        for p, doc in _documented_defaults(obj).items()
        if p in params
        and params[p].default is not inspect.Parameter.empty
        and doc != params[p].default
    }
    assert not wrong, f"{name}: docstring default vs signature: {wrong}"
