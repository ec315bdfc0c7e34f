"""The book (make book): its sources are complete, and every page it builds works in a browser.

The default tier checks the sources: every lecture notebook and every public name has its
page, every package its API page, and the docstrings' plain text is kept as written.
The full tier builds the site once, as `make book` does, serves it on 127.0.0.1 and opens
every page in headless Chromium (Debian's chromium and chromium-driver, driven by selenium):
no console error, every image loaded, every formula typeset by the MathJax the site serves
itself, every claims cell folded behind its prompt, no request to another host, every
internal link's page and #anchor found; at a 1280 px window no block wider than the text
column (a code cell, an output, a table, an open claims box), no raw math delimiter left in
the text, and every figure shown smaller than it is opening at its natural size on a click;
on each of the 16 lectures' pages at least one formula typeset, and no other lecture named in
the prose without a link to it ("lecture 4", "Lecture 4's", "lectures 2, 4–5" outside a link,
code, a formula, an output or the title; the page's own lecture does not count).
It prints one line of figures and a table of each page's layout figures (with the formulas
typeset and those unlinked mentions), and saves a screenshot of the whole of lecture 6 to
docs/_build/screenshots/06_ppo_cartpole.png.
"""

from __future__ import annotations

import functools
import html.parser
import http.server
import json
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
BOOK_SOURCES = REPO_ROOT / "docs" / "book"
SCREENSHOT = REPO_ROOT / "docs" / "_build" / "screenshots" / "06_ppo_cartpole.png"
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WINDOW_WIDTH = 1280  # a laptop's screen: every page reads without a sideways scroll at this width
sys.path.insert(0, str(BOOK_SOURCES / "_ext"))
import lecture_pages  # noqa: E402
import plain_docstrings  # noqa: E402

LECTURE_NOTEBOOKS = sorted((REPO_ROOT / "lectures").glob(lecture_pages.LECTURE_NOTEBOOKS))


# The sources.


def toctree_entries(page: Path) -> list[str]:
    """The entries of a MyST page's toctrees, in order."""
    entries, inside = [], False
    for line in page.read_text().splitlines():
        if line.startswith("```{toctree}"):
            inside = True
        elif line.startswith("```"):
            inside = False
        elif inside and line.strip() and not line.startswith(":"):
            entries.append(line.strip())
    return entries


def test_the_table_of_contents_has_every_page_in_the_book_order():
    lectures = [f"lectures/{path.stem}" for path in LECTURE_NOTEBOOKS]
    assert len(lectures) == 16
    expected = ["start-here", *lectures, "ppo-in-one-file", "exercises", "glossary", "cheat-sheet", "guide/index", "benchmarks", "api/index"]
    assert toctree_entries(BOOK_SOURCES / "index.md") == expected


def test_every_public_name_is_in_the_api_reference():
    import ppo

    reference = (BOOK_SOURCES / "api" / "index.rst").read_text()
    missing = [name for name in ppo.__all__ if f":: ppo.{name}\n" not in reference]
    assert not missing, f"api/index.rst lacks the public names {missing}"


def test_every_package_has_an_api_page():
    documented = {line.split("::")[1].strip() for page in (BOOK_SOURCES / "api").glob("*.rst")
                  for line in page.read_text().splitlines() if line.startswith(".. package-modules::")}
    packages = {".".join(init.parent.relative_to(REPO_ROOT).parts)
                for top in ("ppo", "envs") for init in (REPO_ROOT / top).rglob("__init__.py")}
    assert packages - documented == set(), "packages without an API page (docs/book/api/)"


def test_an_indented_block_of_a_docstring_becomes_a_literal_block():
    lines = ["GAE:", "", "    δ_t = r_t + γ V(s_{t+1}) − V(s_t)", "    Â_t = δ_t + γλ Â_{t+1}", "", "after"]
    assert plain_docstrings.restructured(lines) == [
        "GAE:", "", "", "::", "", "    δ_t = r_t + γ V(s_{t+1}) − V(s_t)", "    Â_t = δ_t + γλ Â_{t+1}", "", "", "after"]
    hanging = ["The heads:", "    Discrete(n):  logits", "    Box(d):  μ, σ", "Then prose."]
    assert plain_docstrings.restructured(hanging) == [
        "The heads:", "", "::", "", "    Discrete(n):  logits", "    Box(d):  μ, σ", "", "Then prose."]


def test_a_docstring_s_markup_characters_are_escaped_outside_code():
    (line,) = plain_docstrings.restructured(["π(a | s) = x * y for r_ and `a_ * |b|`"])
    assert line == "π(a \\| s) = x \\* y for r\\_ and `a_ * |b|`"


def test_a_docstring_s_list_is_set_apart_by_blank_lines():
    lines = ["Two additions:", "- a value head, so a critic", "  can reuse it;", "- a KV cache.", "Done."]
    assert plain_docstrings.restructured(lines) == [
        "Two additions:", "", "- a value head, so a critic", "  can reuse it;", "- a KV cache.", "", "Done."]
    nested = ["* The ball moves, in this order:", "  - side wall: dx flips;", "  - brick: dy flips and the",
              "    brick goes;", "  and the step ends.", "* The paddle moves."]
    assert plain_docstrings.restructured(nested) == [
        "* The ball moves, in this order:", "", "  - side wall: dx flips;", "  - brick: dy flips and the",
        "    brick goes;", "", "  and the step ends.", "* The paddle moves."]
    set_in = ["Generation:", "  1. prefill the cache;", "  2. decode, one token", "     per step.", "A row ends at EOS."]
    assert plain_docstrings.restructured(set_in) == [
        "Generation:", "", "  1. prefill the cache;", "  2. decode, one token", "     per step.", "", "A row ends at EOS."]


def source_pages() -> list[Path]:
    return sorted(page for page in BOOK_SOURCES.rglob("*.md") if "lectures" not in page.relative_to(BOOK_SOURCES).parts)


def test_every_relative_link_of_a_page_resolves_where_its_source_is_read():
    """A page's source reads as it is (on GitHub, say): each relative link names a file of the repository."""
    broken = [f"{page.relative_to(REPO_ROOT)}: {target}" for page in source_pages()
              for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", page.read_text())
              if "://" not in target and not (page.parent / unquote(target)).exists()]
    assert not broken, broken[:10]


def test_a_link_to_a_lecture_is_pointed_at_the_books_copy_while_it_builds():
    assert lecture_pages.book_links("[6](../../lectures/06_ppo_cartpole.ipynb)", 0) == "[6](lectures/06_ppo_cartpole.ipynb)"
    assert lecture_pages.book_links("[6](../../../lectures/06_x.ipynb)", 1) == "[6](../lectures/06_x.ipynb)"
    assert lecture_pages.book_links("[code](../../ppo/config.py)", 0) == "[code](../../ppo/config.py)"


def test_the_lecture_notebooks_are_copied_when_they_change_and_removed_when_gone(tmp_path: Path):
    shipped, book = tmp_path / "lectures", tmp_path / "book"
    shipped.mkdir()
    (shipped / "01_one.ipynb").write_text("{}")
    (shipped / "_common.py").write_text("")
    assert lecture_pages.sync_lectures(shipped, book) == ["01_one.ipynb"]
    (shipped / "01_one.ipynb").write_text('{"cells": []}')
    (book / "02_gone.ipynb").write_text("{}")
    lecture_pages.sync_lectures(shipped, book)
    assert sorted(path.name for path in book.iterdir()) == ["01_one.ipynb"]
    assert (book / "01_one.ipynb").read_text() == '{"cells": []}'


# The site, in a browser.

PAGE_FACTS = """
const done = arguments[arguments.length - 1];
(async () => {
  const formulas = Array.from(document.querySelectorAll(".math"));
  const deadline = Date.now() + 20000;  // MathJax typesets after the page has loaded
  while (formulas.some(f => !f.querySelector("mjx-container")) && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  const images = Array.from(document.images);
  await Promise.all(images.map(image => { image.loading = "eager"; return image.decode().catch(() => null); }));
  return {
    images: images.map(image => ({src: image.currentSrc || image.src, loaded: image.complete && image.naturalWidth > 0})),
    formulas: formulas.length,
    untypeset: formulas.filter(f => !f.querySelector("mjx-container") || f.querySelector("mjx-merror"))
                       .map(f => f.textContent.trim().slice(0, 80)),
    links: Array.from(document.querySelectorAll("a[href]")).map(a => a.href),
    ids: Array.from(document.querySelectorAll("[id]")).map(e => e.id)
           .concat(Array.from(document.querySelectorAll("a[name]")).map(a => a.name)),
    folded: Array.from(document.querySelectorAll("details.hide:not([open]) > summary .collapsed"))
              .map(p => p.textContent.trim()),
  };
})().then(done, error => done({error: String(error)}));
"""


LAYOUT_FACTS = """
const done = arguments[arguments.length - 1];
(async () => {
  const article = document.querySelector("article[role=main]") || document.body;
  const folded = Array.from(article.querySelectorAll("details:not([open])"));
  folded.forEach(box => { box.open = true; });  // a claims box is measured open, as a reader opens it
  await new Promise(resolve => setTimeout(resolve, 200));  // the page's scripts see the box open
  const style = getComputedStyle(article), box = article.getBoundingClientRect();
  const left = box.left + parseFloat(style.paddingLeft), right = box.right - parseFloat(style.paddingRight);
  const shown = element => element.getClientRects().length > 0;
  // A block that scrolls sideways by a pixel is wide; one that only overhangs the column is wide past
  // half a rem, the theme's own overhang (a table's frame, a signature's link).
  const scrolls = element => ["auto", "scroll"].includes(getComputedStyle(element).overflowX);
  const wide = element => {
    if (!shown(element)) return false;
    const slack = scrolls(element) ? 1 : 8, edges = element.getBoundingClientRect();
    return element.scrollWidth > element.clientWidth + slack || edges.right > right + slack || edges.left < left - slack;
  };
  const blocks = Array.from(article.querySelectorAll(
    "pre, table, .table-wrapper, .cell_input, .cell_output, .output, details, .admonition, img, mjx-container, dl, p, li"));
  const overflowing = blocks.filter(wide);
  const outermost = overflowing.filter(element => !overflowing.some(other => other !== element && other.contains(element)));
  const describe = element => element.tagName.toLowerCase() + "." + Array.from(element.classList).join(".") + " "
    + Math.round(Math.max(element.scrollWidth, element.getBoundingClientRect().width)) + " px: "
    + element.textContent.trim().replace(/\\s+/g, " ").slice(0, 60);
  const wideBlocks = outermost.map(describe);
  if (document.scrollingElement.scrollWidth > window.innerWidth + 1) {
    wideBlocks.push(`the page itself, ${document.scrollingElement.scrollWidth} px wide`);
  }
  const column = Math.round(right - left);
  folded.forEach(box => { box.open = false; });

  // The prose's text, block by block: everything outside code, formulas and scripts. Beside it, each
  // block's text with what a reader cannot follow as a lecture's name put out of reach, character for
  // character: a link (its text is linked), code and formulas, the page's title, a cell's output.
  const prose = new Map(), named = new Map();
  const blockOf = element => element.closest("p, li, dt, dd, td, th, h1, h2, h3, h4, h5, h6, figcaption, caption");
  const walker = document.createTreeWalker(article, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const parent = node.parentElement, text = node.textContent;
    const hidden = parent.closest("pre, code, kbd, samp, script, style, mjx-container, .math, .headerlink");
    const block = blockOf(parent) || (hidden ? null : parent);
    if (!block) continue;
    if (!hidden) prose.set(block, (prose.get(block) || "") + text);
    const masked = hidden || parent.closest("a, h1, .cell_output, .output");
    const entry = named.get(block) || {text: "", masked: ""};
    entry.text += text;
    entry.masked += masked ? "\\u0000".repeat(text.length) : text;
    named.set(block, entry);
  }
  // "lecture 4", "Lecture 4's", "lectures 2, 4–5", "lectures [4](…) and 6": a mention whose number is
  // outside a link. A run of \\0 is a link (or code) in a list of lectures; its number is not counted.
  const lectureName = /\\b(?:[Ll]ecture\\s+\\d+|[Ll]ectures\\s+(?:\\d+|\\u0000+)(?:(?:\\s*(?:[–-]|,|&)\\s*|\\s+(?:to|and|or)\\s+|,\\s*(?:and|or)\\s+)(?:\\d+|\\u0000+))*)(?!\\d)/g;
  const unlinked = [];
  for (const {text, masked} of named.values()) {
    for (const match of masked.matchAll(lectureName)) {
      const start = match.index, end = start + match[0].length;
      if (!/\\d/.test(match[0])) continue;
      unlinked.push({
        mention: text.slice(start, end).replace(/\\s+/g, " "),
        numbers: match[0].replace(/\\u0000+/g, "…").replace(/\\s+/g, " "),
        context: (start > 40 ? "…" : "") + text.slice(Math.max(0, start - 40), end + 40).replace(/\\s+/g, " ").trim()
                 + (end + 40 < text.length ? "…" : ""),
      });
    }
  }
  const raw = [];
  for (const text of prose.values()) {
    const delimiters = (text.match(/\\$\\$|\\\\\\(|\\\\\\[/g) || []);
    const singles = (text.replace(/\\$\\$|\\$[A-Z][A-Z0-9]*_[A-Z0-9_]+/g, "").match(/\\$/g) || []).length;  // not $SHELL_NAMES
    if (delimiters.length || singles % 2) raw.push(text.trim().replace(/\\s+/g, " ").slice(0, 80));
  }

  // A content image shown narrower than it is opens at its natural size on a click.
  const images = Array.from(article.querySelectorAll("img")).filter(shown);
  const zoom = [];
  for (const image of images) {
    const width = image.getBoundingClientRect().width;
    if (image.naturalWidth <= width + 1) continue;
    const clickable = ["zoom-in", "pointer"].includes(getComputedStyle(image).cursor);
    image.click();
    const atNaturalSize = () => Array.from(document.querySelectorAll("img")).find(other => other !== image
      && shown(other) && other.currentSrc === image.currentSrc
      && Math.abs(other.getBoundingClientRect().width - image.naturalWidth) <= 1);
    for (let waited = 0; !atNaturalSize() && waited < 3000; waited += 50) {
      await new Promise(resolve => setTimeout(resolve, 50));
    }
    const full = atNaturalSize();
    document.dispatchEvent(new KeyboardEvent("keydown", {key: "Escape", bubbles: true}));
    await new Promise(resolve => setTimeout(resolve, 50));
    const closed = !Array.from(document.querySelectorAll("img")).some(other => other !== image && shown(other)
      && other.currentSrc === image.currentSrc);
    zoom.push({src: image.currentSrc, width: Math.round(width), natural: image.naturalWidth, clickable,
               opens: Boolean(full), closes: closed});
  }
  return {column, wide: wideBlocks, typeset: article.querySelectorAll("mjx-container").length, raw, unlinked, zoom};
})().then(done, error => done({error: String(error)}));
"""

LAYOUT_COLUMNS = ["column px", "wide blocks", "formulas typeset", "raw delimiters", "unlinked mentions", "zoomable images"]


def layout_row(layout: dict) -> list[int]:
    """A page's figures of LAYOUT_COLUMNS, from LAYOUT_FACTS' answer (its unlinked mentions those of lecture_mentions)."""
    return [layout["column"], len(layout["wide"]), layout["typeset"], len(layout["raw"]), len(layout["unlinked"]),
            len(layout["zoom"])]


def lecture_number(page: str) -> int | None:
    """The number of the lecture a built page shows (lectures/05_clipped_surrogate.html: 5); None for another page."""
    match = re.fullmatch(r"lectures/(\d\d)_[^/]+\.html", page)
    return int(match[1]) if match else None


def lectures_named(mention: str) -> set[int]:
    """The lectures a mention names by number outside a link: "lectures 2, 4–5" names 2, 4 and 5,
    "lectures …–7" (the first one linked, LAYOUT_FACTS' `numbers`) names 7."""
    named: set[int] = set()
    for first, last in re.findall(r"(\d+)(?:\s*(?:[–-]|to)\s*(\d+))?", mention):
        low, high = sorted((int(first), int(last or first)))
        named.update(range(low, high + 1))
    return named


def lecture_mentions(page: str, unlinked: list[dict]) -> list[dict]:
    """The unlinked mentions of LAYOUT_FACTS that name a lecture other than the page's own ("lecture 5" on lecture 5
    is not a link to miss)."""
    return [mention for mention in unlinked if lectures_named(mention["numbers"]) - {lecture_number(page)}]


def layout_problems(page: str, layout: dict) -> list[str]:
    """What a reader at 1280 px would trip on: a block wider than the column, raw math, an image that will not open;
    and on a lecture's page, no typeset formula or a lecture named in the prose without a link to it."""
    problems = [f"{page}: wider than the {layout['column']} px column: {block}" for block in layout["wide"]]
    problems += [f"{page}: raw math delimiters in the text: {text!r}" for text in layout["raw"]]
    for image in layout["zoom"]:
        if not (image["clickable"] and image["opens"] and image["closes"]):
            problems.append(f"{page}: the image {image['src'][-60:]} shown {image['width']} of {image['natural']} px "
                            f"does not open at its natural size on a click and close again ({image})")
    if lecture_number(page) is not None:
        if not layout["typeset"]:
            problems.append(f"{page}: no formula typeset (a lecture writes its equations in LaTeX, $...$ or $$...$$)")
        problems += [f"{page}: {mention['mention']!r} names a lecture without linking it: {mention['context']!r}"
                     for mention in layout["unlinked"]]
    return problems


def layout_table(rows: dict[str, list[int]]) -> str:
    """The per-page layout figures as a fixed-width table: one row a lecture page, one for the other pages."""
    others = [row for page, row in rows.items() if not page.startswith("lectures/")]
    table = {page.removeprefix("lectures/").removesuffix(".html"): row for page, row in rows.items()
             if page.startswith("lectures/")}
    table[f"the other {len(others)} pages"] = ["", *(sum(column) for column in list(zip(*others))[1:])] if others else []
    name_width = max(map(len, table))
    lines = [" " * name_width + "".join(f"  {column:>17}" for column in LAYOUT_COLUMNS)]
    lines += [f"{name:<{name_width}}" + "".join(f"  {value:>17}" for value in row) for name, row in table.items()]
    return "\n".join(lines)


def test_a_lecture_page_without_a_formula_or_with_a_lecture_named_but_not_linked_is_a_problem():
    mention = lambda text, numbers=None: {"mention": text, "numbers": numbers or text, "context": f"as {text} showed"}
    unlinked = [mention("lecture 4"), mention("lecture 5"), mention("lectures 4–6"), mention("lectures 3–5", "lectures …–5")]
    assert [found["mention"] for found in lecture_mentions("lectures/05_clipped_surrogate.html", unlinked)] == [
        "lecture 4", "lectures 4–6"]
    assert len(lecture_mentions("glossary.html", unlinked)) == 4
    assert lectures_named("lectures 2, 4–5 and 7") == {2, 4, 5, 7} and lectures_named("lectures … and …") == set()
    layout = {"column": 700, "wide": [], "raw": [], "zoom": [], "typeset": 0, "unlinked": [mention("lecture 4")]}
    assert layout_problems("lectures/05_clipped_surrogate.html", layout) == [
        "lectures/05_clipped_surrogate.html: no formula typeset (a lecture writes its equations in LaTeX, $...$ or $$...$$)",
        "lectures/05_clipped_surrogate.html: 'lecture 4' names a lecture without linking it: 'as lecture 4 showed'"]
    assert layout_problems("glossary.html", layout) == []


PROSE_WITH_LECTURES = """<!doctype html><html><head><meta charset="utf-8"></head><body><article role="main">
<h1>Lecture 5 — the clipped surrogate</h1>
<p>As lecture 4 measured, and Lecture
4's table shows; <em>lecture</em> 6 comes next.</p>
<p>Lectures 2, 4–5 and <a href="#x">lecture 7</a>; lecture <a href="#y">8</a>; lectures <a href="#z">3</a>–9.</p>
<p>This is lecture 5. <code>lecture 10</code> <span class="math">lecture 11</span></p>
<pre>lecture 12</pre>
<div class="cell_output"><table><tr><td>lecture 13</td></tr></table></div>
</article></body></html>"""


@pytest.mark.slow
def test_the_browser_finds_a_lecture_named_outside_a_link(tmp_path: Path):
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip("needs Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver")
    page = tmp_path / "05_page.html"
    page.write_text(PROSE_WITH_LECTURES, encoding="utf-8")
    driver = headless_chromium()
    try:
        driver.get(page.as_uri())
        layout = driver.execute_async_script(LAYOUT_FACTS)
    finally:
        driver.quit()
    assert "error" not in layout, layout["error"]
    found = lecture_mentions("lectures/05_clipped_surrogate.html", layout["unlinked"])
    assert [mention["mention"] for mention in found] == [
        "lecture 4", "Lecture 4", "lecture 6", "Lectures 2, 4–5 and lecture 7", "lectures 3–9"], layout["unlinked"]
    assert [mention["numbers"] for mention in found][3:] == ["Lectures 2, 4–5 and …", "lectures …–9"]
    assert found[0]["context"] == "As lecture 4 measured, and Lecture 4's table shows;…"


def test_a_page_shot_names_a_missing_folder_or_page_in_one_line(tmp_path: Path):
    from experiments.tools.page_shots import PageShotError, page_file

    (tmp_path / "lectures").mkdir()
    (tmp_path / "lectures" / "05_clipped_surrogate.html").write_text("<p>5</p>")
    assert page_file(tmp_path, "lectures/05_clipped_surrogate") == page_file(tmp_path, "lectures/05_clipped_surrogate.html")
    with pytest.raises(PageShotError, match="no built book at"):
        page_file(tmp_path / "missing", "lectures/05_clipped_surrogate")
    with pytest.raises(PageShotError, match=r"no page lectures/05_clip\.html .*pages there: lectures/05_clipped_surrogate"):
        page_file(tmp_path, "lectures/05_clip")


def claims_prompts(notebook: Path) -> list[str]:
    """The prompts of a notebook's folded cells (metadata mystnb.code_prompt_show), in order."""
    cells = json.loads(notebook.read_text())["cells"]
    return [cell["metadata"]["mystnb"]["code_prompt_show"] for cell in cells
            if "hide-cell" in cell["metadata"].get("tags", []) and "code_prompt_show" in cell["metadata"].get("mystnb", {})]


def build_book(out: Path) -> float:
    """Build the site as `make book` does (warnings are errors); return the seconds it took."""
    started = time.perf_counter()
    build = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-q",
                            str(BOOK_SOURCES), str(out)], cwd=REPO_ROOT, capture_output=True, text=True)
    assert build.returncode == 0, f"the book's build failed:\n{build.stderr[-6000:]}"
    return time.perf_counter() - started


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def serve(folder: Path) -> tuple[http.server.ThreadingHTTPServer, str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(folder)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def headless_chromium():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={WINDOW_WIDTH},1000", "--no-first-run", "--disable-background-networking",
                     "--disable-component-update", "--disable-default-apps", "--disable-sync"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(60)
    driver.set_page_load_timeout(60)
    return driver


def requested_urls(performance_log: list[dict]) -> list[str]:
    messages = (json.loads(entry["message"])["message"] for entry in performance_log)
    return [message["params"]["request"]["url"] for message in messages if message["method"] == "Network.requestWillBeSent"]


def link_problem(link: str, site: Path, base: str, ids: dict[str, set[str]]) -> str | None:
    """Why an internal link is broken (its file, or its #anchor, is missing), None if it is not."""
    parts = urlsplit(link)
    path = unquote(parts.path).lstrip("/")
    target = site / path / "index.html" if path.endswith("/") or not path else site / path
    if not target.is_file():
        return "no such file"
    page = target.relative_to(site).as_posix()
    if parts.fragment and page in ids and unquote(parts.fragment) not in ids[page]:
        return f"no anchor #{parts.fragment}"
    return None


class PageFile(html.parser.HTMLParser):
    """What a built page holds before any script runs: its ids and anchor names, and its images."""

    def __init__(self, path: Path):
        super().__init__()
        self.ids: set[str] = set()
        self.images = 0
        self.feed(path.read_text(encoding="utf-8"))

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        self.ids.update(value for name, value in attributes.items() if name == "id" or (tag == "a" and name == "name"))
        self.images += tag == "img"


def save_full_page(driver, screenshot: Path) -> None:
    """A PNG of the whole page at the window's width, top to bottom."""
    import base64

    screenshot.parent.mkdir(parents=True, exist_ok=True)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png", "captureBeyondViewport": True})
    screenshot.write_bytes(base64.b64decode(shot["data"]))


def check_site(site: Path, sources: Path = BOOK_SOURCES, screenshot: Path | None = None,
               layout: dict[str, list[int]] | None = None) -> tuple[dict[str, int], list[str]]:
    """Open every page of a site built from sources in headless Chromium; return the figures and the problems found.
    `layout`, when given, receives each page's LAYOUT_COLUMNS figures."""
    pages = sorted(path.relative_to(site).as_posix() for path in site.rglob("*.html"))
    server, base = serve(site)
    driver = headless_chromium()
    problems: list[str] = []
    figures = dict.fromkeys(["pages", "images", "formulas", "claims boxes", "internal links", "console errors",
                             "outside requests"], 0)
    links: dict[str, list[str]] = {}
    ids: dict[str, set[str]] = {}
    try:
        for page in pages:
            written = PageFile(site / page)
            for _ in range(3):  # a page read before the browser had all of it (a loaded machine) is read again
                driver.get(base + page)
                facts = driver.execute_async_script(PAGE_FACTS)
                assert "error" not in facts, f"{page}: {facts['error']}"
                if len(facts["images"]) >= written.images and written.ids <= set(facts["ids"]):
                    break
            else:
                problems.append(f"{page}: the browser never showed the whole page ({len(facts['images'])} of "
                                f"{written.images} images, {len(written.ids - set(facts['ids']))} ids missing)")
            figures["pages"] += 1
            for image in facts["images"]:
                figures["images"] += 1
                if not image["loaded"]:
                    problems.append(f"{page}: the image {image['src'][:120]} did not load")
            figures["formulas"] += facts["formulas"]
            problems += [f"{page}: the formula {text!r} was not typeset" for text in facts["untypeset"]]
            if page.startswith("lectures/"):
                notebook = sources / Path(page).with_suffix(".ipynb")
                expected = claims_prompts(notebook)
                figures["claims boxes"] += len(facts["folded"])
                if facts["folded"] != expected:
                    problems.append(f"{page}: folded claims boxes {facts['folded']}, the notebook's prompts {expected}")
            for entry in driver.get_log("browser"):
                if entry["level"] == "SEVERE":
                    figures["console errors"] += 1
                    problems.append(f"{page}: console error {entry['message'][:300]}")
            for url in requested_urls(driver.get_log("performance")):
                if urlsplit(url).scheme in ("http", "https", "ws", "wss") and urlsplit(url).hostname != "127.0.0.1":
                    figures["outside requests"] += 1
                    problems.append(f"{page}: a request to another host, {url[:200]}")
            links[page], ids[page] = facts["links"], set(facts["ids"]) | written.ids
            page_layout = driver.execute_async_script(LAYOUT_FACTS)
            assert "error" not in page_layout, f"{page}: {page_layout['error']}"
            page_layout["unlinked"] = lecture_mentions(page, page_layout["unlinked"])
            problems += layout_problems(page, page_layout)
            if layout is not None:
                layout[page] = layout_row(page_layout)
            if screenshot and page == "lectures/06_ppo_cartpole.html":
                save_full_page(driver, screenshot)
    finally:
        driver.quit()
        server.shutdown()
    for page, hrefs in links.items():
        for link in hrefs:
            if not link.startswith(base):
                continue
            figures["internal links"] += 1
            problem = link_problem(link, site, base, ids)
            if problem:
                problems.append(f"{page}: the link {link[len(base):]} is broken ({problem})")
    return figures, problems


@pytest.mark.slow
def test_every_page_of_the_book_works_in_a_browser(tmp_path: Path):
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        pytest.skip("needs Debian's chromium and chromium-driver: apt-get install -y chromium chromium-driver")
    site = tmp_path / "html"
    build_seconds = build_book(site)
    started = time.perf_counter()
    layout: dict[str, list[int]] = {}
    figures, problems = check_site(site, screenshot=SCREENSHOT, layout=layout)
    summary = ", ".join(f"{count} {name}" for name, count in figures.items())
    print(f"book: built in {build_seconds:.0f} s, checked in {time.perf_counter() - started:.0f} s: {summary}")
    print(f"at a {WINDOW_WIDTH} px window:\n{layout_table(layout)}")
    assert figures["pages"] > 16 and SCREENSHOT.is_file()
    assert [page for page in layout if lecture_number(page) is not None] == [
        f"lectures/{notebook.stem}.html" for notebook in LECTURE_NOTEBOOKS]
    assert not problems, "\n".join(problems[:50]) + (f"\n... {len(problems) - 50} more" if len(problems) > 50 else "")
