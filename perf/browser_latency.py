"""Benchmark: browser recompute latency of every bound control in the built site.

For each control of each chart (the grid-precomputed figures and those the page recomputes from
shipped terms, :func:`perwatt.figures.computed_figures`, in the same run), 50 moves (slider steps back and forth, radio and dropdown choices
in turn): the time from dispatching the input event on the real element to the view having rerun
its dataflow and redrawn its SVG (the browser paints that at its next frame). Targets: median ≤ 16 ms (one frame), p95 ≤ 33 ms.
Measured in a full Chromium, as readers run it, not in the tests' headless shell (devtools.find_chromium).

Run after `make book`: .venv/bin/python perf/browser_latency.py (another build: set PERWATT_SITE to
its _build/html). Name figures to measure only those, e.g. `perf/browser_latency.py per-watt-frontier`.
"""

from __future__ import annotations

from _common import CHROMIUM_ARGS, find_chromium, median, percentile, served, site, table, write

SITE = site()
MOVES = 50

# Moves one control MOVES times and returns each move's latency in ms.
MEASURE = """
async ([chartId, name, moves]) => {
  const result = window.perwatt.embeds[chartId];
  const form = document.getElementById(chartId).querySelector('.vega-bindings');
  const inputs = Array.from(form.querySelectorAll(`[name="${name}"]`));
  const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
  const times = [];
  for (let i = 0; i < moves; i++) {
    const el = inputs[0];
    const t0 = performance.now();
    if (el.type === 'range') {
      const step = parseFloat(el.step), lo = parseFloat(el.min), hi = parseFloat(el.max);
      let v = parseFloat(el.value) + (i % 2 === 0 ? step : -step);
      if (v > hi) v = hi - step; if (v < lo) v = lo + step;
      el.value = String(v);
      el.dispatchEvent(new Event('input', { bubbles: true }));
    } else if (el.type === 'radio') {
      const target = inputs[(i + 1) % inputs.length];
      target.checked = true;
      target.dispatchEvent(new Event('change', { bubbles: true }));
    } else {
      el.selectedIndex = (el.selectedIndex + 1) % el.options.length;
      el.dispatchEvent(new Event('change', { bubbles: true }));
    }
    // runAsync resolves once the dataflow has run and the SVG renderer has redrawn the scene.
    await result.view.runAsync();
    times.push(performance.now() - t0);
    await frame();  // let the browser paint before the next move, outside the timed span
  }
  return times;
}
"""


def main(only: tuple[str, ...] = ()) -> dict:
    from playwright.sync_api import sync_playwright

    from perwatt import figures

    # Every figure a page may hold, by its data-figure name.
    known = {f.name: f for f in [*figures.all_figures(), *figures.computed_figures()]}
    unknown = set(only) - set(known)
    if unknown:
        raise SystemExit(f"no figure named {sorted(unknown)}; figures: {sorted(known)}")
    with served(SITE) as base:
        pages = sorted(p.relative_to(SITE).as_posix() for p in (SITE / "chapters").glob("*.html"))
        report: dict = {"controls": {}, "moves_per_control": MOVES, "median_target_ms": 16, "p95_target_ms": 33,
                        "figures_measured": list(only) or "all"}
        rows = []
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=find_chromium(full=True), args=CHROMIUM_ARGS)
            for path in pages:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                page.goto(f"{base}/{path}")
                page.evaluate("() => window.perwatt && window.perwatt.ready")
                charts = page.evaluate("() => Array.from(document.querySelectorAll('.perwatt-chart[data-figure]'),"
                                       " (c) => [c.id, c.dataset.figure])")
                # A chart without a figure name is a static sketch: it has no controls to move.
                for chart_id, name in ((c, n) for c, n in charts if n and (not only or n in only)):
                    for control in known[name].controls:
                        times = page.evaluate(MEASURE, [chart_id, control.name, MOVES])
                        key = f"{name}/{control.name}"
                        marks = page.evaluate("(id) => document.querySelectorAll(`#${id} svg .role-mark > *`).length", chart_id)
                        report["controls"][key] = {"median_ms": median(times), "p95_ms": percentile(times, 95),
                                                   "svg_mark_items": marks}
                        rows.append((f"{key} median", median(times), 16.0, "ms"))
                        rows.append((f"{key} p95", percentile(times, 95), 33.0, "ms"))
                page.close()
            browser.close()
    print(table(rows))
    missed = {k: v for k, v in report["controls"].items() if v["median_ms"] > 16 or v["p95_ms"] > 33}
    typical = median([v["svg_mark_items"] for v in report["controls"].values()])
    for key, v in missed.items():
        line = (f"reason: {key} redraws {v['svg_mark_items']} SVG mark items per move, against a median of "
                f"{typical:.0f} across all controls; the SVG renderer's time grows with the items it redraws")
        report.setdefault("reasons", []).append(line)
        print(line)
    write("browser_latency", report)
    return report


if __name__ == "__main__":
    import sys

    main(tuple(sys.argv[1:]))
