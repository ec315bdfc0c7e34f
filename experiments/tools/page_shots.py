"""A screenshot of one page of the built book, as headless Chromium shows it at a given window size.

    make book                                               # the site, in docs/_build/html
    python -m experiments.tools.page_shots --html docs/_build/html --page lectures/05_clipped_surrogate \\
        --out lecture-05.png                                # the first screen, 1280 × 900 px
    python -m experiments.tools.page_shots --html docs/_build/html --page lectures/05_clipped_surrogate \\
        --out docs/figures/pages/lecture-05-after.png --width 1280 --height 800 \\
        --scroll-to "One update of K = 10 epochs" --colors 256
                                                            # the first screen, and below it the screen
                                                            # that starts at the surrogate-gain table

The site is served on 127.0.0.1 (as tests/test_book.py serves it) and opened in Debian's
chromium and chromium-driver, driven by selenium (the dev extra); the window is exactly
--width × --height CSS pixels, at one device pixel each. The shot is taken once every formula
is typeset by MathJax and every image has loaded. Each --scroll-to TEXT adds one screen: the
page scrolled so that the first shown text containing TEXT sits near the top of the window.
The screens are stacked top to bottom (a grey rule between two), in one PNG; --colors N
reduces it to N colours, which keeps a page of text a few hundred KB (pillow, the dev extra,
stacks and reduces). A missing folder, page, browser or text is said in one line (exit 2).
"""

from __future__ import annotations

import base64
import functools
import http.server
import io
import shutil
import threading
import time
from pathlib import Path

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
RULE_PX = 4  # the grey rule between two stacked screens
TOP_MARGIN = 0.08  # a scrolled-to text sits this fraction of the window below its top edge


class PageShotError(Exception):
    """A mistake in the command's arguments or its setting, said in one line."""


# MathJax typesets after the page has loaded; lazy images load once asked to.
PAGE_READY = """
const done = arguments[arguments.length - 1];
(async () => {
  const formulas = Array.from(document.querySelectorAll(".math"));
  const deadline = Date.now() + 20000;
  while (formulas.some(f => !f.querySelector("mjx-container")) && Date.now() < deadline) {
    await new Promise(resolve => setTimeout(resolve, 100));
  }
  const images = Array.from(document.images);
  await Promise.all(images.map(image => { image.loading = "eager"; return image.decode().catch(() => null); }));
  await document.fonts.ready;
  return formulas.filter(f => !f.querySelector("mjx-container")).length;
})().then(done, error => done(String(error)));
"""

# Scroll the first shown text that contains arguments[0] to near the top; false if there is none.
SCROLL_TO = """
const [wanted, margin] = arguments;
const root = document.querySelector("article[role=main]") || document.body;
const shown = element => element.getClientRects().length > 0 && !element.closest("details:not([open]) > :not(summary)");
const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
let top = null;
for (let node = walker.nextNode(); node && top === null; node = walker.nextNode()) {
  const at = node.textContent.indexOf(wanted);
  if (at < 0 || !shown(node.parentElement)) continue;
  const range = document.createRange();
  range.setStart(node, at);
  range.setEnd(node, at + wanted.length);
  top = range.getBoundingClientRect().top;
}
if (top === null) {  // the text runs over several elements: the innermost one that holds all of it
  const holders = Array.from(root.querySelectorAll("*")).filter(e => e.textContent.includes(wanted) && shown(e));
  const innermost = holders.find(e => !Array.from(e.children).some(child => child.textContent.includes(wanted)));
  if (innermost) top = innermost.getBoundingClientRect().top;
}
if (top === null) return false;
window.scrollTo({top: window.scrollY + top - margin, behavior: "instant"});  // the theme scrolls smoothly
return true;
"""


def page_file(html: Path, page: str) -> Path:
    """The built file of `page` ("lectures/05_clipped_surrogate", with or without .html) under the site `html`."""
    if not html.is_dir():
        raise PageShotError(f"no built book at {html} (make book builds one in docs/_build/html)")
    name = page.strip("/")
    name = name if name.endswith(".html") else f"{name}.html"
    path = html / name
    if not path.is_file():
        near = sorted(found.relative_to(html).as_posix() for found in html.glob(f"{Path(name).parent}/*.html"))
        hint = f"; pages there: {', '.join(near[:20])}" if near else ""
        raise PageShotError(f"no page {name} in {html}{hint}")
    return path


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def headless_chromium(width: int, height: int):
    """Chromium without a screen, its viewport exactly width × height CSS px at one device pixel each."""
    if not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)):
        raise PageShotError(f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER}): "
                            "apt-get install -y chromium chromium-driver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        raise PageShotError("needs selenium: pip install -e '.[dev]'") from None
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                     f"--window-size={width},{height}", "--hide-scrollbars", "--no-first-run",
                     "--disable-background-networking", "--disable-component-update", "--disable-default-apps",
                     "--disable-sync"):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_script_timeout(60)
    driver.set_page_load_timeout(60)
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})
    return driver


def screen(driver) -> bytes:
    """A PNG of what the window shows now."""
    return base64.b64decode(driver.execute_cdp_cmd("Page.captureScreenshot", {"format": "png"})["data"])


def stacked(screens: list[bytes], colors: int) -> bytes:
    """The screens top to bottom, a grey rule between two, as one PNG (reduced to `colors` colours unless 0)."""
    if len(screens) == 1 and not colors:
        return screens[0]
    try:
        from PIL import Image
    except ImportError:
        raise PageShotError("stacking screens or --colors needs pillow: pip install -e '.[dev]'") from None
    images = [Image.open(io.BytesIO(data)).convert("RGB") for data in screens]
    width = max(image.width for image in images)
    sheet = Image.new("RGB", (width, sum(image.height for image in images) + RULE_PX * (len(images) - 1)), (160, 160, 160))
    top = 0
    for image in images:
        sheet.paste(image, (0, top))
        top += image.height + RULE_PX
    if colors:
        sheet = sheet.quantize(colors=colors, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    out = io.BytesIO()
    sheet.save(out, format="PNG", optimize=True)
    return out.getvalue()


def shoot(html: Path, page: str, out: Path, width: int = 1280, height: int = 900, scroll_to: list[str] = (),
          first_screen: bool = True, colors: int = 0) -> Path:
    """Write to `out` the PNG of `page` of the site `html`: its first screen (unless not first_screen), then one
    screen for each text of scroll_to; return out."""
    path = page_file(html, page)
    if not scroll_to and not first_screen:
        raise PageShotError("--no-first-screen leaves nothing to shoot without a --scroll-to TEXT")
    if width < 100 or height < 100:
        raise PageShotError(f"a window of {width} × {height} px is too small; give --width and --height of 100 or more")
    if not 0 <= colors <= 256:
        raise PageShotError(f"--colors {colors}: a PNG palette holds 1 to 256 colours (0: all colours)")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(QuietHandler, directory=str(html)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    driver = headless_chromium(width, height)
    try:
        driver.get(f"http://127.0.0.1:{server.server_address[1]}/{path.relative_to(html).as_posix()}")
        untypeset = driver.execute_async_script(PAGE_READY)
        if untypeset != 0:  # a count, or the script's error
            print(f"page_shots: warning: {untypeset} formulas not typeset on {page}"
                  if isinstance(untypeset, int) else f"page_shots: warning: waiting for the page failed ({untypeset})")
        screens = [screen(driver)] if first_screen else []
        for text in scroll_to:
            if not driver.execute_script(SCROLL_TO, text, round(height * TOP_MARGIN)):
                raise PageShotError(f"no shown text {text!r} on {path.relative_to(html).as_posix()}")
            time.sleep(0.3)  # an image the scroll brought into view is drawn
            screens.append(screen(driver))
    finally:
        driver.quit()
        server.shutdown()
    data = stacked(screens, colors)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(data)
    return out


def main(argv: list[str] | None = None) -> int:
    from experiments.commands.cli import OneLineArgumentParser, run_with_user_errors

    parser = OneLineArgumentParser(prog="page_shots", description=__doc__.splitlines()[0])
    parser.add_argument("--html", type=Path, required=True, help="the built site (make book: docs/_build/html)")
    parser.add_argument("--page", required=True, help="the page, relative to --html, with or without .html "
                                                      "(lectures/05_clipped_surrogate)")
    parser.add_argument("--out", type=Path, required=True, help="the PNG to write")
    parser.add_argument("--width", type=int, default=1280, help="the window's width in CSS px (default 1280)")
    parser.add_argument("--height", type=int, default=900, help="the window's height in CSS px (default 900)")
    parser.add_argument("--scroll-to", action="append", default=[], metavar="TEXT",
                        help="add the screen that starts at the first shown text containing TEXT (repeatable)")
    parser.add_argument("--no-first-screen", action="store_true", help="leave out the page's first screen")
    parser.add_argument("--colors", type=int, default=0, help="reduce the PNG to this many colours, 1-256 "
                                                                "(default 0: all)")
    args = parser.parse_args(argv)

    def body() -> None:
        out = shoot(args.html, args.page, args.out, args.width, args.height, args.scroll_to,
                    not args.no_first_screen, args.colors)
        print(f"wrote: {out} ({out.stat().st_size / 1024:.0f} KB)")

    return run_with_user_errors("page_shots", body, errors=(PageShotError,))


if __name__ == "__main__":
    raise SystemExit(main())
