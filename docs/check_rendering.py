"""Check the built documentation site in headless Chromium: nothing cut, every figure readable.

Usage (after ``python -m sphinx -W -b html docs docs/_build/html``)::

    python docs/check_rendering.py docs/_build/html

The site is served on 127.0.0.1 from a thread (``http.server``) and every page of it (the user
guide, the benchmark pages, the gallery and the API reference; not the search and index pages)
is opened at a desktop width (1280 px) and a narrow one (800 px). A page fails when, at either
width:

1. a code block (``pre``) has content wider than its box (``scrollWidth > clientWidth + 1``):
   the end of its longest line is hidden behind a scroll bar, which a reader of a one-line
   command does not see;
2. an image whose natural width is large (at least ``LARGE_PX``) is drawn at less than
   ``MIN_SCALE`` of it: the benchmark figures are saved at 120 dpi with 9 pt text, which
   at 60 % is about 9 px on screen, the smallest that reads without zoom;
3. an image is drawn wider than its column, or does not load.

It prints a table of the figures (page, image, natural width, drawn width at each viewport
width), then one line per problem naming the page, the element and the widths, and exits with
1 if there was any. Chromium is ``$CHROMIUM``, else ``chromium`` on the ``PATH`` (Debian's
package, driven by Playwright's Python client, which downloads no browser of its own).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import os
import shutil
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

VIEWPORT_WIDTHS = (1280, 800)
VIEWPORT_HEIGHT = 900
LARGE_PX = 600  # natural widths below this are icons and thumbnails, not figures to read
MIN_SCALE = 0.6
SLACK_PX = 1  # sub-pixel rounding of layout widths

# Generated pages with nothing of the authors' in them; _modules holds viewcode's source
# listings, which are meant to scroll.
SKIPPED = ("genindex.html", "search.html", "py-modindex.html")
SKIPPED_DIRS = ("_modules", "_sources", "_static", "_images", "_downloads")

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic",
]

# Measures one page at the current viewport: every visible code block's content and box
# widths, every image's natural and drawn widths against its column (the article's content
# box). Lazily loaded images are loaded first, so that their natural width is known.
_MEASURE = """
async () => {
  const article = document.querySelector("article") || document.body;
  const style = getComputedStyle(article);
  const column = article.clientWidth - parseFloat(style.paddingLeft)
                 - parseFloat(style.paddingRight);
  const visible = (el) => el.getClientRects().length > 0;
  const images = [...article.querySelectorAll("img")].filter(visible);
  await Promise.all(images.map((img) => {
    if (img.complete && img.naturalWidth > 0) return null;
    img.loading = "eager";
    return img.decode().catch(() => null);
  }));
  const pres = [...article.querySelectorAll("pre")].filter(visible).map((pre, i) => {
    const lines = pre.innerText.split("\\n");
    const longest = lines.reduce((a, b) => (b.length > a.length ? b : a), "");
    return {index: i + 1, scroll: pre.scrollWidth, client: pre.clientWidth, line: longest};
  });
  const imgs = images.map((img) => ({
    src: new URL(img.currentSrc || img.src).pathname.split("/").pop(),
    natural: img.naturalWidth,
    drawn: img.getBoundingClientRect().width,
    thumbnail: img.closest(".sphx-glr-thumbcontainer") !== null,
  }));
  return {column, pres, imgs};
}
"""


def pages(root: Path) -> list[str]:
    """The site's pages as paths relative to ``root``, the hand-written ones first."""
    found = []
    for path in sorted(root.rglob("*.html")):
        rel = path.relative_to(root)
        if rel.name in SKIPPED or rel.parts[0] in SKIPPED_DIRS:
            continue
        found.append(rel.as_posix())
    generated = ("api/generated/", "auto_examples/")
    return sorted(found, key=lambda p: (p.startswith(generated), p))


@contextmanager
def serve(root: Path) -> Iterator[str]:
    """Serve ``root`` on a free port of 127.0.0.1 from a thread; yields the base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def chromium_path() -> str:
    """Chromium's executable: ``$CHROMIUM``, else ``chromium`` or ``chromium-browser``."""
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which(
        "chromium-browser")
    if not path:
        raise SystemExit("Chromium not found: install Debian's `chromium` package or set "
                         "$CHROMIUM to its executable.")
    return path


def _short(text: str, n: int = 50) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[: n - 1] + "…"


def check(root: Path) -> tuple[list[str], dict[tuple[str, str], dict[int, tuple[int, float]]]]:
    """Open every page at every width of ``VIEWPORT_WIDTHS``.

    Returns:
        The problems, one line each, and the figures: ``(page, image)`` to, per viewport width,
        ``(natural width, drawn width)`` (gallery thumbnails left out).
    """
    from playwright.sync_api import sync_playwright

    problems: list[str] = []
    figures: dict[tuple[str, str], dict[int, tuple[int, float]]] = {}
    with serve(root) as base, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": VIEWPORT_WIDTHS[0],
                                          "height": VIEWPORT_HEIGHT})
        # Offline and deterministic: anything not served here (MathJax's CDN) is refused, so
        # no page waits on the network.
        page.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base)
                   else route.abort())
        for name in pages(root):
            page.goto(base + name, wait_until="load")
            for width in VIEWPORT_WIDTHS:
                # A resize lays the page out again without reloading it.
                page.set_viewport_size({"width": width, "height": VIEWPORT_HEIGHT})
                m = page.evaluate(_MEASURE)
                where = f"{name} @{width}px"
                for pre in m["pres"]:
                    if pre["scroll"] > pre["client"] + SLACK_PX:
                        problems.append(
                            f"{where}: code block {pre['index']} ({_short(pre['line'])!r}) is "
                            f"{pre['scroll']} px wide in a {pre['client']} px box; its end is "
                            "hidden")
                for img in m["imgs"]:
                    natural, drawn = img["natural"], img["drawn"]
                    if not img["thumbnail"]:
                        figures.setdefault((name, img["src"]), {})[width] = (natural, drawn)
                    if natural == 0:
                        problems.append(f"{where}: image {img['src']} does not load")
                    elif natural >= LARGE_PX and drawn < MIN_SCALE * natural:
                        problems.append(
                            f"{where}: image {img['src']} is drawn {drawn:.0f} px wide, "
                            f"{drawn / natural:.0%} of its natural {natural} px (at least "
                            f"{MIN_SCALE:.0%} for its text to read)")
                    if drawn > m["column"] + SLACK_PX:
                        problems.append(
                            f"{where}: image {img['src']} is drawn {drawn:.0f} px wide in a "
                            f"{m['column']:.0f} px column")
        browser.close()
    return problems, figures


def figure_table(figures: dict[tuple[str, str], dict[int, tuple[int, float]]]) -> str:
    """The figures as a Markdown table: page, image, natural width, drawn width per viewport."""
    head = ["page", "image", "natural px"] + [f"drawn px @{w}" for w in VIEWPORT_WIDTHS]
    lines = ["| " + " | ".join(head) + " |", "|---|---|" + "---:|" * (len(head) - 2)]
    for (name, src), by_width in figures.items():
        natural = next(iter(by_width.values()))[0]
        drawn = [f"{by_width[w][1]:.0f}" if w in by_width else "-" for w in VIEWPORT_WIDTHS]
        lines.append(f"| {name} | {src} | {natural} | " + " | ".join(drawn) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path, help="the built site (docs/_build/html)")
    args = parser.parse_args()
    if not (args.root / "index.html").is_file():
        parser.error(f"`root` must be a built site with an index.html, but got "
                     f"root={str(args.root)!r}.")
    problems, figures = check(args.root)
    n_pages = len(pages(args.root))
    print(figure_table(figures))
    print()
    for line in problems:
        print(line)
    widths = " and ".join(f"{w} px" for w in VIEWPORT_WIDTHS)
    print(f"{n_pages} pages at {widths}: {len(problems) or 'no'} "
          f"problem{'' if len(problems) == 1 else 's'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
