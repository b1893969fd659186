"""Benchmark: each page's own bytes, and the bytes of a first visit to the whole book.

Serves the built site on 127.0.0.1 and opens every page in one Chromium context, as a reader
would, summing the bytes of every response once (the browser caches shared files). A page's own
bytes are its HTML, inline chart data included. Targets: ≤ 500 KB per page; ≤ 3 MB for the book.

Run after `make book`: .venv/bin/python perf/page_weight.py
"""

from __future__ import annotations

from _common import CHROMIUM_ARGS, REPO, find_chromium, served, table, write

SITE = REPO / "_build" / "html"
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
            browser = p.chromium.launch(executable_path=find_chromium(), args=CHROMIUM_ARGS)
            context = browser.new_context()
            page = context.new_page()
            page.on("response", lambda r: fetched.setdefault(r.url, _size(r, base)))
            for path in pages:
                page.goto(f"{base}/{path}", wait_until="networkidle")
            browser.close()
    own = {path: (SITE / path).stat().st_size for path in pages}
    total = sum(fetched.values())
    report = {"page_bytes": own, "first_visit_bytes": total, "resources": len(fetched),
              "page_target": PAGE_TARGET, "book_target": BOOK_TARGET}
    rows = [(f"page: {path}", size / 1000, PAGE_TARGET / 1000, "kB") for path, size in own.items()]
    rows.append(("first visit to every page, all resources once", total / 1e6, BOOK_TARGET / 1e6, "MB"))
    print(table(rows))
    largest = sorted(fetched.items(), key=lambda item: -item[1])[:8]
    report["largest_resources"] = dict(largest)
    print("largest resources of the first visit (where the bytes go):")
    for url, size in largest:
        print(f"  {size / 1e6:8.3f} MB  {url.replace(base, '')}")
    shared = {"fontawesome": "the theme's icon font, as JavaScript (pydata-sphinx-theme)",
              "mathjax": "MathJax, served locally so formulas render offline",
              "perwatt-vega": "Vega, Vega-Lite and vega-embed, served locally so charts render offline",
              "pydata-sphinx-theme.css": "the theme's stylesheet"}
    third_party = sum(size for url, size in fetched.items() if any(key in url for key in shared))
    report["shared_library_bytes"] = third_party
    if total > BOOK_TARGET:
        reason = (f"Missed by {total / BOOK_TARGET:.2f}×: {third_party / 1e6:.2f} MB of it is shared libraries, "
                  "loaded once and cached: " + "; ".join(shared.values()) + ". Without them the book's own pages "
                  f"and data come to {(total - third_party) / 1e6:.2f} MB. Cutting further means replacing the "
                  "theme's icon script or pre-rendering math, a larger change than this budget pass.")
        report["reason"] = reason
        print(reason)
    write("page_weight", report)
    return report


if __name__ == "__main__":
    main()
