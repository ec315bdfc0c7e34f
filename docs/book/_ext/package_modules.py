"""The directive `package-modules`: a package's docstring, then each of its modules in turn.

    .. package-modules:: ppo.algorithm

documents ppo.algorithm's docstring and, under a heading each, every module directly in
the package (found on disk, in name order), with its members. Subpackages have pages of
their own. A module added to the library appears in the book without editing a page.
"""

from __future__ import annotations

import importlib
import pkgutil

from docutils import nodes
from docutils.parsers.rst import directives
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles


def modules_of(package_name: str) -> list[str]:
    """The full names of the modules directly in a package, subpackages left out, sorted."""
    package = importlib.import_module(package_name)
    return sorted(
        f"{package_name}.{info.name}" for info in pkgutil.iter_modules(package.__path__) if not info.ispkg
    )


def page_text(package_name: str, with_docstring: bool = True) -> list[str]:
    """The reStructuredText of the page: the package's docstring, then a section per module."""
    lines = [f".. automodule:: {package_name}", "   :no-members:", ""] if with_docstring else []
    for module in modules_of(package_name):
        lines += [module, "-" * len(module), "", f".. automodule:: {module}", ""]
    return lines


class PackageModules(SphinxDirective):
    """`.. package-modules:: name`; the flag `:modules-only:` leaves the package's docstring out."""

    required_arguments = 1
    option_spec = {"modules-only": directives.flag}

    def run(self) -> list[nodes.Node]:
        package_name = self.arguments[0]
        for module in [package_name, *modules_of(package_name)]:
            self.env.note_dependency(importlib.import_module(module).__file__)  # an edited docstring rebuilds the page
        text = page_text(package_name, with_docstring="modules-only" not in self.options)
        container = nodes.section()
        container.document = self.state.document
        nested_parse_with_titles(self.state, StringList(text, source=self.get_source_info()[0]), container)
        return container.children


def setup(app):
    app.add_directive("package-modules", PackageModules)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
