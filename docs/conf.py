"""Sphinx configuration of the sksign documentation."""

# Authors: The sksign developers
# SPDX-License-Identifier: BSD-3-Clause

import os
import re
import sys
from pathlib import Path

os.environ.setdefault("MPLBACKEND", "Agg")
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import sksign

project = "sksign"
author = "The sksign developers"
copyright = "The sksign developers"
version = release = sksign.__version__

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.intersphinx",
    "sphinx.ext.mathjax",
    "numpydoc",
    "sphinx_gallery.gen_gallery",
]

templates_path = ["_templates"]
exclude_patterns = ["_build", "generated/*.inc", "**.ipynb_checkpoints"]
html_static_path = ["_static"]
html_theme = "pydata_sphinx_theme"
html_title = f"sksign {version}"
html_theme_options = {
    "navigation_depth": 2,
    "show_toc_level": 2,
}

autosummary_generate = True
autodoc_default_options = {"members": True, "inherited-members": False}
autodoc_typehints = "none"
numpydoc_show_class_members = False
numpydoc_validation_checks = set()
numpydoc_xref_param_type = False

intersphinx_mapping = {}  # offline build: no inventories are fetched

sphinx_gallery_conf = {
    "examples_dirs": "../examples",
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"/plot_",
    "doc_module": ("sksign",),
    "backreferences_dir": "generated/backreferences",
    "remove_config_comments": True,
    "within_subsection_order": "FileNameSortKey",
    "default_thumb_file": None,
    "show_memory": False,
    "run_stale_examples": False,
}
if os.environ.get("SKSIGN_DOCS_NO_GALLERY"):
    sphinx_gallery_conf["plot_gallery"] = "False"


# -- api.rst: one autosummary block per public module, from sksign/_public.py
def _write_api():
    """Write api.rst from the table of public names (``sksign._public``).

    A name re-exported by a later module is listed once, under the first
    (``pack_bits`` under :mod:`sksign.kernels`). Module-level constants are
    left out (they are described in the pages of the functions that use them).
    """
    import importlib
    import inspect

    from sksign._public import sections

    seen = set()
    lines = [
        ".. _api:",
        "",
        "API reference",
        "=============",
        "",
        "Generated from the table of public names, ``sksign/_public.py``, by",
        "``docs/conf.py``.",
        "",
    ]
    for title, modname, names in sections():
        try:
            mod = importlib.import_module(modname)
        except ImportError:
            continue
        entries = []
        for name in sorted(names):
            if (names[name], name) in seen:
                continue
            seen.add((names[name], name))
            obj = getattr(mod, name)
            if not (inspect.isclass(obj) or callable(obj)):
                continue
            template = "class.rst" if inspect.isclass(obj) else "function.rst"
            entries.append((template, name))
        if not entries:
            continue
        lines += [
            title,
            "-" * len(title),
            "",
            f".. automodule:: {modname}",
            "   :no-members:",
            "   :no-index:",
            "",
            f".. currentmodule:: {modname}",
            "",
        ]
        for template in ("class.rst", "function.rst"):
            names_ = sorted(n for t, n in entries if t == template)
            if names_:
                lines += [
                    ".. autosummary::",
                    "   :toctree: generated/",
                    f"   :template: {template}",
                    "",
                ]
                lines += [f"   {n}" for n in names_] + [""]
    text = "\n".join(lines)
    path = HERE / "api.rst"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")


_write_api()

# Stale autosummary stubs (of names that moved or left __all__) would be
# orphan pages; autosummary regenerates the current ones on every build.
for _stub in (HERE / "generated").glob("sksign.*.rst"):
    _stub.unlink()


# -- docstring fixes applied at build time ----------------------------------
_TRAILING_UNDERSCORE = re.compile(r"(?<![`\w])([A-Za-z][A-Za-z0-9_]*_)(?=[,)\s/])")


def _process_docstring(app, what, name, obj, options, lines):
    """Quote fitted-attribute names in shapes (``(n_samples, n_bits_)``).

    RST reads a bare ``name_`` as a link target; scikit-learn writes these
    shapes with backticks, which numpydoc type lines often lack.
    """
    for i, line in enumerate(lines):
        if "shape" in line and "`" not in line and "_" in line:
            lines[i] = _TRAILING_UNDERSCORE.sub(r"``\1``", line)


def _skip_member(app, what, name, obj, skip, options):
    """Leave out scikit-learn's generated metadata-routing setters."""
    if name.startswith("set_") and name.endswith("_request"):
        return True
    return None


def setup(app):
    app.connect("autodoc-process-docstring", _process_docstring)
    app.connect("autodoc-skip-member", _skip_member)
