"""Sphinx configuration of fairtune's documentation.

Build it from the repository's root (``pip install -e ".[docs]"`` first)::

    python -m sphinx -W -b html docs docs/_build/html

The API reference is generated from the docstrings (autosummary, Google style through napoleon),
the gallery runs ``examples/*.py`` with small budgets (sphinx-gallery), and the user guide and
benchmark pages are Markdown (MyST), so that they read the same on a repository browser.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(DOCS / "_ext"))

# The examples train models while the page is built: one thread each, as in the test suite,
# and a non-interactive matplotlib.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import fairtune  # noqa: E402

project = "fairtune"
author = "fairtune developers"
copyright = "fairtune developers"
release = fairtune.__version__
version = release

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "myst_parser",
    "sphinx_gallery.gen_gallery",
    "fairtune_docs",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store", "**.ipynb_checkpoints"]
templates_path = ["_templates"]
html_static_path = ["_static"]
html_css_files = ["fairtune.css"]

html_theme = "furo"
html_title = f"fairtune {release}"
html_show_sourcelink = False

# Markdown: GitHub-style heading anchors, so that links like page.md#a-heading work both here
# and on a repository browser.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

# API reference.
autosummary_generate = True
autosummary_imported_members = True
# Base classes are not shown: a sampler's is a private helper, an estimator's scikit-learn's.
autodoc_default_options = {"members": True}
autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_typehints_description_target = "documented"
# Methods that override Optuna's without a docstring of their own are Optuna's contract, which
# Optuna documents; showing its docstrings here would only repeat them.
autodoc_inherit_docstrings = False
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_attr_annotations = True

# Examples gallery: every script of examples/, run at build time with small budgets
# (_ext/fairtune_docs.py gives each its arguments).
sphinx_gallery_conf = {
    "examples_dirs": str(ROOT / "examples"),
    "gallery_dirs": "auto_examples",
    "filename_pattern": r"\.py$",
    "reset_argv": "fairtune_docs.gallery_args",
    "within_subsection_order": "FileNameSortKey",
    "download_all_examples": False,
    "remove_config_comments": True,
    "show_memory": False,
    "plot_gallery": "True",
    "abort_on_example_error": True,
    "capture_repr": (),
    "write_computation_times": False,
}
