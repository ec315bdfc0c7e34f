"""Point each "[docs]" link of a highlighted source page at the name's page under its own module.

A name the API reference documents twice, once where its module is (`ppo.algorithm.advantages.compute_gae`
on the algorithm page) and once where the package re-exports it (`ppo.compute_gae` on the index), would
have sphinx.ext.viewcode link back to `#ppo.algorithm.advantages.compute_gae` on whichever page it read
last, where no such anchor is. Once every page is read, each back link is pointed at the page that
documents the name under the module that defines it, when there is one.
"""

from __future__ import annotations

from sphinx import addnodes

OWN_PAGES = "viewcode_own_module_pages"  # (module, name) -> the page documenting that module's name


def record_own_module_pages(app, doctree) -> None:
    pages = app.env.__dict__.setdefault(OWN_PAGES, {})
    for signature in doctree.findall(addnodes.desc_signature):
        module, name = signature.get("module"), signature.get("fullname")
        if module and name and signature.parent.get("domain") == "py":
            pages[(module, name)] = app.env.docname


def forget_page(app, env, docname: str) -> None:
    pages = env.__dict__.get(OWN_PAGES, {})
    for key in [key for key, page in pages.items() if page == docname]:
        del pages[key]


def merge_pages(app, env, docnames, other) -> None:
    env.__dict__.setdefault(OWN_PAGES, {}).update(other.__dict__.get(OWN_PAGES, {}))


def point_back_links(app, env) -> None:
    """Each module's back links to the pages documenting its names under the module itself."""
    pages = env.__dict__.get(OWN_PAGES, {})
    modules = getattr(env, "_viewcode_modules", {})
    for module, entry in modules.items():
        if not entry:
            continue
        code, tags, used, _ = entry
        if all((module, name) in pages for name in used):
            used.update({name: pages[(module, name)] for name in used})
            modules[module] = (code, tags, used, module)


def setup(app):
    app.setup_extension("sphinx.ext.viewcode")
    app.connect("doctree-read", record_own_module_pages)
    app.connect("env-purge-doc", forget_page)
    app.connect("env-merge-info", merge_pages)
    app.connect("env-updated", point_back_links)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
