"""Benchmark: browser recompute latency of every bound control in the built site.

For each control of each chart (the grid-precomputed figures and those the page recomputes from
shipped terms, :func:`perwatt.figures.computed_figures`, in the same run), 50 moves (slider steps back and forth, radio and dropdown choices
in turn): the time from dispatching the input event on the real element to the view having rerun
its dataflow and redrawn its SVG (the browser paints that at its next frame). Targets: median ≤ 16 ms (one frame), p95 ≤ 33 ms.
Measured in a full Chromium, as readers run it, not in the tests' headless shell (devtools.find_chromium).

A control that misses a target is measured twice more on the same page, after every control of
its chart has been moved: once as before, and once with each of Vega's dataflow operators timed,
which gives their average time a move, by operator type, beside that pass's median move (an average
beside a median: not an exact split; the input event, Vega's scheduling and drawing the SVG are
not timed on their own). Its reason line gives those figures, and whether it was the first control
moved on its chart (the page's code for that chart had not run before it).

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

# MEASURE again, with the time each of the chart's dataflow operators takes to evaluate summed by
# operator type (a transform's name, such as Window or Formula). An operator evaluated while another
# is (a facet's subflow) counts in the outer one only. Reads Vega's runtime, which is not public API:
# null where it is missing.
SPLIT = """
async ([chartId, name, moves]) => {
  const nodes = window.perwatt.embeds[chartId].view._runtime?.nodes;
  if (!nodes) return null;
  const spent = {};
  const wrapped = [];
  let depth = 0;
  for (const id in nodes) {
    const op = nodes[id];
    const type = op.constructor?.Definition?.type || 'other';
    const own = Object.prototype.hasOwnProperty.call(op, 'evaluate') ? op.evaluate : undefined;
    const original = op.evaluate;
    op.evaluate = function (...args) {
      const t0 = performance.now();
      depth += 1;
      try { return original.apply(this, args); } finally {
        depth -= 1;
        if (depth === 0) spent[type] = (spent[type] || 0) + performance.now() - t0;
      }
    };
    wrapped.push([op, own]);
  }
  try {
    const times = await (""" + MEASURE + """)([chartId, name, moves]);
    return { times, spent };
  } finally {
    for (const [op, own] of wrapped) { if (own === undefined) delete op.evaluate; else op.evaluate = own; }
  }
}
"""


def _explain(page, chart_id: str, key: str, control: str, first: bool, measured: dict) -> dict:
    """Where a missed control's time goes: the same moves again on the warm chart, and a pass with
    the dataflow's operators timed."""
    again = page.evaluate(MEASURE, [chart_id, control, MOVES])
    split = page.evaluate(SPLIT, [chart_id, control, MOVES])
    out = {"first_on_its_chart": first, "again_median_ms": median(again), "again_p95_ms": percentile(again, 95)}
    when = ("the first control moved on its chart" if first else "moved after others on its chart")
    line = (f"reason: {key}, {when}: median {measured['median_ms']:.1f} ms and p95 {measured['p95_ms']:.1f} ms "
            f"in the timed pass; moved again after every control of the chart, {out['again_median_ms']:.1f} ms "
            f"and {out['again_p95_ms']:.1f} ms")
    if split:
        per_move = {k: v / MOVES for k, v in split["spent"].items()}
        out.update({"split_median_ms": median(split["times"]), "operators_ms_per_move": sum(per_move.values()),
                    "by_operator_ms_per_move": dict(sorted(per_move.items(), key=lambda kv: -kv[1]))})
        top = ", ".join(f"{k} {v:.1f}" for k, v in list(out["by_operator_ms_per_move"].items())[:4])
        line += (f"; with Vega's operators timed (a pass whose median was {out['split_median_ms']:.1f} ms), "
                 f"they took {out['operators_ms_per_move']:.1f} ms a move on average ({top}); the input event, Vega's "
                 f"scheduling and drawing the SVG are not timed on their own")
    out["line"] = line
    return out


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
                    controls = known[name].controls
                    for control in controls:
                        times = page.evaluate(MEASURE, [chart_id, control.name, MOVES])
                        key = f"{name}/{control.name}"
                        marks = page.evaluate("(id) => document.querySelectorAll(`#${id} svg .role-mark > *`).length", chart_id)
                        report["controls"][key] = {"median_ms": median(times), "p95_ms": percentile(times, 95),
                                                   "svg_mark_items": marks}
                        rows.append((f"{key} median", median(times), 16.0, "ms"))
                        rows.append((f"{key} p95", percentile(times, 95), 33.0, "ms"))
                    for i, control in enumerate(controls):
                        key = f"{name}/{control.name}"
                        measured = report["controls"][key]
                        if measured["median_ms"] > 16 or measured["p95_ms"] > 33:
                            measured["explained"] = _explain(page, chart_id, key, control.name, i == 0, measured)
                page.close()
            browser.close()
    print(table(rows))
    for v in report["controls"].values():
        if "explained" in v:
            report.setdefault("reasons", []).append(v["explained"]["line"])
            print(v["explained"]["line"])
    write("browser_latency", report)
    return report


if __name__ == "__main__":
    import sys

    main(tuple(sys.argv[1:]))
