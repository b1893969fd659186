"""Benchmark: each page's own bytes, and the bytes of a first visit to the whole book.

Serves the built site on 127.0.0.1 and opens every page in one Chromium context, as a reader
would, summing the bytes of every response once (the browser caches shared files). A page's own
bytes are its HTML, inline chart data included (compressed, as the site ships it). Targets: ≤ 500 KB
per page; ≤ 3 MB for the book. Every resource's bytes go to the JSON report, the largest are printed.

Run after `make book`: .venv/bin/python perf/page_weight.py (another build: set PERWATT_SITE to its
_build/html).
"""

from __future__ import annotations

from _common import CHROMIUM_ARGS, find_chromium, served, site, table, write

SITE = site()
PAGE_TARGET, BOOK_TARGET = 500_000, 3_000_000


def _size(response, base: str) -> int:
    """Bytes of a response; from the file on disk when the page moved on before its body was read
    (the root page redirects at once)."""
    if not response.ok:
        return 0
    try:
        return len(response.body())
    except Exception:  # noqa: BLE001 - Playwright drops bodies of pages navigated away from
        path = SITE / response.url.removeprefix(base + "/").split("?", 1)[0]
        return path.stat().st_size if path.is_file() else 0


def main() -> dict:
    from playwright.sync_api import sync_playwright

    pages = sorted(p.relative_to(SITE).as_posix() for p in SITE.rglob("*.html") if "_static" not in p.parts)
    with served(SITE) as base:
        fetched: dict[str, int] = {}
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_chromium(full=True), args=CHROMIUM_ARGS)
            context = browser.new_context()
            page = context.new_page()
            page.on("response", lambda r: fetched.setdefault(r.url, _size(r, base)))
            for path in pages:
                page.goto(f"{base}/{path}", wait_until="networkidle")
            browser.close()
    own = {path: (SITE / path).stat().st_size for path in pages}
    total = sum(fetched.values())
    report = {"page_bytes": own, "first_visit_bytes": total, "resources": len(fetched),
              "resource_bytes": {url.replace(base, ""): size for url, size in sorted(fetched.items())},
              "page_target": PAGE_TARGET, "book_target": BOOK_TARGET}
    rows = [(f"page: {path}", size / 1000, PAGE_TARGET / 1000, "kB") for path, size in own.items()]
    rows.append(("first visit to every page, all resources once", total / 1e6, BOOK_TARGET / 1e6, "MB"))
    print(table(rows))
    largest = sorted(fetched.items(), key=lambda item: -item[1])[:8]
    report["largest_resources"] = dict(largest)
    print("largest resources of the first visit (where the bytes go):")
    for url, size in largest:
        print(f"  {size / 1e6:8.3f} MB  {url.replace(base, '')}")
    shared = {"perwatt-vega": "Vega, Vega-Lite and vega-embed, served locally so charts render offline",
              "pydata-sphinx-theme.css": "the theme's stylesheet",
              "fontawesome/webfonts": "the theme's icon font, cut to the glyphs the book shows (its stylesheet "
                                      "draws the icons; no icon script)"}
    third_party = sum(size for url, size in fetched.items() if any(key in url for key in shared))
    report["shared_library_bytes"] = third_party
    print(f"of which shared libraries, loaded once and cached: {third_party / 1e6:.2f} MB ("
          + "; ".join(shared.values()) + f"); the book's own pages and data: {(total - third_party) / 1e6:.2f} MB "
          "(chart data ships gzip-compressed; formulas are MathML, drawn by the browser)")
    if total > BOOK_TARGET or max(own.values()) > PAGE_TARGET:
        report["reason"] = f"Missed: first visit {total / BOOK_TARGET:.2f}× its target, largest page " \
                           f"{max(own.values()) / PAGE_TARGET:.2f}× its target."
        print(report["reason"])
    write("page_weight", report)
    return report


if __name__ == "__main__":
    main()
