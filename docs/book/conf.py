"""Sphinx configuration of the book: the lectures' notebooks, the learner pages, the guide, the API.

Built offline from pip packages (`make book`, the `book` extra): MyST-NB reads the Markdown
pages and the shipped notebooks without executing them, furo is the theme, and MathJax is
served from the site itself (sphinx-mathjax-offline), so a page makes no outside request.
"""

import sys
from pathlib import Path

BOOK_DIR = Path(__file__).resolve().parent
REPO_ROOT = BOOK_DIR.parents[1]
sys.path[:0] = [str(REPO_ROOT), str(BOOK_DIR / "_ext")]

project = "PPO from scratch"
author = "the PPO from scratch authors"
copyright = "the PPO from scratch authors, MIT licence"

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.viewcode",  # every documented name links to its module's highlighted source
    "viewcode_backlinks",  # a source page's "[docs]" links find the name under its own module
    "sphinx-mathjax-offline",  # MathJax 3 copied into _static/mathjax: no CDN
    "plain_docstrings",  # the docstrings' indented blocks kept line for line
    "package_modules",  # an API page lists every module of its package
    "metrics_columns_table",  # the run folder's page: every metrics.csv column, from ppo.runs.metrics_columns
    "lecture_pages",  # lectures/NN_name.ipynb copied into lectures/ of the book's sources
]

exclude_patterns = ["_build"]
include_patterns = ["*.md", "api/**", "guide/**", "lectures/[0-9][0-9]_*.ipynb"]

# The notebooks ship executed, with the full runs' outputs: the book shows them as they are.
nb_execution_mode = "off"
nb_merge_streams = True  # a cell's consecutive prints show as one block, not one box a print
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3

# The docstrings are plain text: `name` is code, an indented block keeps its lines.
default_role = "literal"
autodoc_member_order = "bysource"
autodoc_inherit_docstrings = False  # a forward() without a docstring would show torch.nn.Module's
autodoc_typehints = "signature"
autodoc_default_options = {"members": True, "show-inheritance": True}

html_theme = "furo"
html_title = "PPO from scratch"
html_static_path = ["_static"]
html_css_files = ["book.css"]  # the text column at a laptop's width, the claims boxes, full-size figures
html_js_files = ["book.js"]  # wide blocks fitted to the column; a figure opens at its natural size on a click
html_favicon = "_static/favicon.svg"  # without one, the browser asks for /favicon.ico and logs a 404
html_show_sourcelink = False
html_copy_source = False
