// Draws every chart on the page from the Vega-Lite spec the build left beside it (compressed).
// Loaded as a deferred classic script after the vendored Vega bundle, which defines
// window.vegaEmbed; classic, because browsers refuse module scripts on pages opened from disk.
// Views are kept on window.perwatt so readers' tools and the browser tests can inspect them.
//
// Each chart also gets a toolbar (.perwatt-tools): its data as CSV and its picture as PNG or SVG,
// all made in the page from the drawn view, so they work offline and from disk; and, on a chart
// with controls, a link that reopens the page with those controls where the reader left them:
//   page.html#<figure id>?<control>=<value>&<control>=<value>
// The part before "?" is the figure's element id, so one page can hold several linked figures
// whose controls share names. A link is checked against the spec's own bindings: a value the
// precomputed grid does not hold would draw an empty chart, so it is refused with a warning.
// window.perwatt.ready resolves once every chart is drawn and the page's link has been applied.
//
// A chart is as wide as its column, not the width its figure was designed at: a phone's column
// is narrower than any of them. Its text, legends and labels are fitted to the column as well
// (see Fitter), and refitted whenever the column's width changes.
(function () {
"use strict";
const registry = (window.perwatt = window.perwatt || { embeds: {} });
// Per chart id: what the toolbar and links need (figure id, bound controls, the embed result).
const charts = {};

async function drawChart(specElement) {
  const target = document.getElementById(specElement.dataset.target);
  if (!target) return;
  let spec, result;
  try {
    spec = await readSpec(specElement);
    result = await embedInColumn(target, spec);
    registry.embeds[target.id] = result;
    target.dataset.rendered = "true";
  } catch (error) {
    target.dataset.rendered = "error";
    target.textContent = "This chart could not be drawn: " + error.message;
    console.error("perwatt: chart " + target.id + " failed", error);
    return;
  }
  try {
    addTools(target, spec, result);
  } catch (error) {
    // The chart itself is fine; a reader only loses the extras.
    console.warn("perwatt: no tools for chart " + target.id, error);
  }
}

// The built site packs each spec as gzip in base64 (render.py's pack_specs); a page made
// straight from render.chart_html carries the JSON itself.
async function readSpec(specElement) {
  const text = specElement.textContent.trim();
  if (specElement.type !== "application/gzip") return JSON.parse(text);
  if (typeof DecompressionStream === "undefined") {
    throw new Error("this browser cannot unpack the chart's data (Chrome 80, Firefox 113, Safari 16.4 or newer can)");
  }
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

// Draws a chart at its column's width, fitted to it (see Fitter). As designed, instead: a chart
// whose width is not a number of pixels (one sized by its steps, say), and one out of the layout
// (in a closed box: no width yet).
async function embedInColumn(target, spec) {
  const options = { actions: false, renderer: "svg" };
  const column = columnWidth(target);
  if (column <= 0 || typeof spec.width !== "number") return window.vegaEmbed(target, spec, options);
  let parts = [];
  let legends = [];
  options.patch = (vgSpec) => {
    parts = wrappedParts(vgSpec);
    legends = legendParts(vgSpec);
    return withSignals(vgSpec, column, parts, legends);
  };
  const result = await window.vegaEmbed(target, fitToColumn(spec), options);
  const fitter = new Fitter(target, result.view, parts, legends);
  try {
    await fitter.fit();
  } catch (error) {
    // Drawn, only perhaps a little wider than the column, which then scrolls.
    console.warn("perwatt: chart " + target.id + " not fitted to its column", error);
  }
  fitter.follow();
  return result;
}

// The figures give a width in pixels for the plot; on the page the chart takes its column's width
// instead (Vega-Lite's "container" width: the plot gets what axes, legend and labels leave).
function fitToColumn(spec) {
  // Only the width follows: the figure's height stays as designed, whatever its axes need.
  return Object.assign({}, spec, { width: "container", autosize: { type: "fit-x", contains: "padding" } });
}

// Vega measures its container only when the window resizes; a column can change width without
// that (the side bar opening, a font loading), so a ResizeObserver sets this signal as well.
const COLUMN = "perwatt_column";

function columnWidth(element) {
  const style = getComputedStyle(element);
  return Math.max(0, element.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight));
}

// Splits text into lines no wider than `width` pixels in `font`, at spaces; a single word longer
// than the width keeps its own line rather than being cut.
const measurer = document.createElement("canvas").getContext("2d");
function wrapLines(text, font, width) {
  measurer.font = font;
  const out = [];
  for (const paragraph of [].concat(text)) {
    let line = "";
    for (const word of String(paragraph).split(/\s+/).filter(Boolean)) {
      const longer = line ? line + " " + word : word;
      if (line && measurer.measureText(longer).width > width) {
        out.push(line);
        line = word;
      } else {
        line = longer;
      }
    }
    out.push(line);
  }
  return out;
}

// The font Vega draws a piece of text in: the chart's own config for it, else the style Vega-Lite
// passes the theme's fonts on as, else Vega's default. `names` maps font, fontSize and fontWeight
// to the config's names for them (titleFontSize for an axis title, say).
function fontOf(own, style, names, defaults) {
  const pick = (name) => own[names[name]] ?? style[name] ?? defaults[name];
  return `${pick("fontWeight")} ${pick("fontSize")}px ${pick("font")}`;
}

const prefixed = (prefix) => ({ font: prefix + "Font", fontSize: prefix + "FontSize", fontWeight: prefix + "FontWeight" });

// The text that cannot be wider than the room it has, as a Vega text line cannot wrap by itself:
// the chart's title and subtitle (room: the column) and a horizontal axis's title (room: the plot,
// which it is centred under). Each gets a signal that will carry its lines.
function wrappedParts(vgSpec) {
  const config = vgSpec.config || {};
  const styles = config.style || {};
  const parts = [];
  const title = vgSpec.title;
  if (title && typeof title === "object") {
    const own = config.title || {};
    const heading = { font: "font", fontSize: "fontSize", fontWeight: "fontWeight" };
    const kinds = {
      text: fontOf(own, styles["group-title"] || {}, heading, { font: "sans-serif", fontSize: 13, fontWeight: "bold" }),
      subtitle: fontOf(own, styles["group-subtitle"] || {}, prefixed("subtitle"),
                       { font: "sans-serif", fontSize: 12, fontWeight: "normal" }),
    };
    for (const [key, font] of Object.entries(kinds)) {
      if (typeof title[key] === "string" || Array.isArray(title[key])) {
        parts.push({ signal: "perwatt_title_" + key, text: title[key], font, room: "column", owner: title, key });
      }
    }
  }
  (vgSpec.axes || []).forEach((axis, index) => {
    if (!["top", "bottom"].includes(axis.orient) || typeof axis.title !== "string") return;
    const own = Object.assign({}, config.axis, config.axisX, config[axis.orient === "top" ? "axisTop" : "axisBottom"]);
    const font = fontOf(own, styles["guide-title"] || {}, prefixed("title"),
                        { font: "sans-serif", fontSize: 11, fontWeight: "bold" });
    parts.push({ signal: "perwatt_axis_title_" + index, text: axis.title, font, room: "plot", owner: axis, key: "title" });
  });
  return parts;
}

// The horizontal legends: a row of entries wider than the room would be cut off, so each legend
// takes its number of columns from a signal (0, Vega's default, puts every entry in one row).
function legendParts(vgSpec) {
  return (vgSpec.legends || [])
    .map((legend, index) => ({ legend, index, signal: "perwatt_legend_columns_" + index }))
    .filter(({ legend }) => legend.direction === "horizontal" && typeof (legend.columns ?? 0) === "number");
}

// Patches the compiled chart: each wrapped part and legend drawn from its signal, and the
// container width re-read when the column signal changes as well as when the window resizes.
function withSignals(vgSpec, width, parts, legends) {
  const signals = (vgSpec.signals = vgSpec.signals || []);
  signals.push({ name: COLUMN, value: width });
  const fitted = signals.find((s) => s.name === "width" && s.on && s.on.length);
  if (fitted) fitted.on.push({ events: { signal: COLUMN }, update: fitted.on[0].update });
  for (const part of parts) {
    signals.push({ name: part.signal, value: wrapLines(part.text, part.font, width) });
    part.owner[part.key] = { signal: part.signal };
  }
  for (const entry of legends) {
    signals.push({ name: entry.signal, value: entry.legend.columns ?? 0 });
    entry.legend.columns = { signal: entry.signal };
  }
  return vgSpec;
}

// How many columns of entries fit in `room` pixels, as Vega lays them out: each column as wide as
// its widest entry, columns `gap` apart.
function columnsThatFit(widths, room, gap) {
  for (let columns = widths.length; columns > 1; columns -= 1) {
    let total = -gap;
    for (let c = 0; c < columns; c += 1) {
      let widest = 0;
      for (let i = c; i < widths.length; i += columns) widest = Math.max(widest, widths[i]);
      total += widest + gap;
    }
    if (total <= room) return columns;
  }
  return 1;
}

// Fits one drawn chart to its column, in rounds, since each change moves the others: titles
// wrap to the column and a horizontal axis's title to the plot; a legend wider than the room
// right of its start breaks into rows; and marks drawn past the plot (a label beside a bar,
// which Vega leaves out, as it fits only axes, legends and titles) get padding to sit in, which
// shrinks the plot. A round or two settles it; the rounds are capped all the same.
class Fitter {
  constructor(target, view, parts, legends) {
    Object.assign(this, { target, view, parts, legends, base: view.padding() });
  }

  async fit() {
    const column = columnWidth(this.target);
    if (column <= 0) return; // not laid out (a closed box, say); the observer calls again when it is
    this.set(COLUMN, column);
    const padding = Object.assign({}, this.base);
    let grown = {}; // what each side's padding last grew by: its overflow then
    const settled = new Set();
    for (let round = 0; round < 8; round += 1) {
      // resize(): Vega redoes its fitting only when told to, and new padding alone does not tell it.
      this.view.padding(padding).resize();
      this.wrapText(column);
      await this.view.runAsync();
      const edges = this.edges(column);
      if (!edges || this.wrapLegends(edges)) continue;
      const over = this.overflow(edges);
      let again = false;
      for (const side of ["left", "right"]) {
        if (side in grown && over[side] >= grown[side]) {
          // The overflow did not shrink: those marks move with the plot's edge, and padding
          // cannot make room for them. Take it back.
          padding[side] -= grown[side];
          settled.add(side);
          again = true;
        }
      }
      grown = {};
      for (const side of ["left", "right"]) {
        if (over[side] > 0 && !settled.has(side)) {
          padding[side] += over[side];
          grown[side] = over[side];
          again = true;
        }
      }
      if (!again) return;
    }
  }

  set(signal, value) {
    const same = (a, b) => [].concat(a).join("\n") === [].concat(b).join("\n");
    if (same(this.view.signal(signal), value)) return false;
    this.view.signal(signal, value);
    return true;
  }

  wrapText(column) {
    const titleRoom = column - this.base.left - this.base.right;
    for (const part of this.parts) {
      const room = part.room === "plot" ? this.view.signal("width") : titleRoom;
      this.set(part.signal, wrapLines(part.text, part.font, room));
    }
  }

  // The column's left and right edges on screen, less the chart's own padding: where everything
  // drawn must sit; with the drawing, or null if there is none.
  edges(column) {
    const svg = this.target.querySelector(":scope > svg");
    if (!svg) return null;
    const left = this.target.getBoundingClientRect().left + parseFloat(getComputedStyle(this.target).paddingLeft);
    return { svg, left: left + this.base.left, right: left + column - this.base.right };
  }

  // Gives each legend as many columns of entries as fit; true if any changed.
  wrapLegends(edges) {
    const drawn = edges.svg.querySelectorAll("g.role-legend");
    let changed = false;
    for (const entry of this.legends) {
      const legend = drawn[entry.index];
      const boxes = legend ? Array.from(legend.querySelectorAll("g.role-legend-entry g.role-scope > g"),
                                        (g) => g.getBoundingClientRect()) : [];
      if (!boxes.length) continue;
      const columns = columnsThatFit(boxes.map((b) => b.width), edges.right - boxes[0].left,
                                     entry.legend.columnPadding ?? 10);
      changed = this.set(entry.signal, columns) || changed;
    }
    return changed;
  }

  // How far the drawing reaches past each edge, in whole pixels (0 if it does not).
  overflow(edges) {
    const content = edges.svg.querySelector(":scope > g").getBoundingClientRect();
    return { left: Math.max(0, Math.ceil(edges.left - content.left)),
             right: Math.max(0, Math.ceil(content.right - edges.right)) };
  }

  follow() {
    if (!("ResizeObserver" in window)) return;
    let last = columnWidth(this.target);
    new ResizeObserver(() => {
      const now = columnWidth(this.target);
      if (Math.abs(now - last) < 1) return;
      last = now;
      this.fit().catch((error) => console.warn("perwatt: chart did not refit", error));
    }).observe(this.target);
  }
}

function addTools(target, spec, result) {
  const figure = target.closest("figure[id]");
  const entry = {
    key: figure ? figure.id : target.id,
    holder: figure || target,
    controls: {},
    view: result.view,
    vgSpec: result.vgSpec,
    // A figure the page recomputes from shipped terms names the mark whose rows are its answer.
    csv: ((spec.usermeta || {}).perwatt || {}).csv,
  };
  for (const param of spec.params || []) {
    if (param.bind && param.bind.input) entry.controls[param.name] = param.bind;
  }
  charts[target.id] = entry;

  const tools = document.createElement("div");
  tools.className = "perwatt-tools";
  tools.setAttribute("role", "group");
  tools.setAttribute("aria-label", "Share or download this chart");
  const status = document.createElement("span");
  status.setAttribute("role", "status");
  const button = (text, action) => {
    const b = document.createElement("button");
    b.type = "button";
    b.textContent = text;
    b.addEventListener("click", () => {
      status.textContent = "";
      Promise.resolve().then(action).catch((error) => {
        status.textContent = "That did not work here, sorry.";
        console.warn("perwatt: " + text + " failed", error);
      });
    });
    tools.append(b);
  };
  if (Object.keys(entry.controls).length) {
    button("Copy link to this setting", () => copyLink(entry, tools, status));
  }
  button("Download data (CSV)", () => {
    // A byte-order mark, so spreadsheet programs read names such as "Jalapeño" as UTF-8.
    const blob = new Blob(["\ufeff" + toCsv(shownRows(entry))], { type: "text/csv;charset=utf-8" });
    download(URL.createObjectURL(blob), entry.key + ".csv", true);
  });
  // Twice the screen's pixels, so the picture stays sharp on a slide.
  button("Download picture (PNG)", () =>
    entry.view.toImageURL("png", 2).then((url) => download(url, entry.key + ".png", false)));
  button("Download picture (SVG)", () =>
    entry.view.toImageURL("svg").then((url) => download(url, entry.key + ".svg", url.startsWith("blob:"))));
  tools.append(status);
  target.after(tools);
}

// The rows a CSV holds. On a chart with controls: the grid rows of the current setting, every
// column the page was given (controls, keys, values, labels), that is what the Python model
// computed for this setting, before the drawing's own sorting, stacking or validity filters.
// Other data a chart draws (a reference line, say) is not part of the model's answer and stays
// out. A chart without controls: every data set it was given, one after another.
function shownRows(entry) {
  if (entry.csv) return markRows(entry.view, entry.csv.mark, entry.csv.columns);
  const names = Object.keys(entry.controls);
  const tables = entry.vgSpec.data
    .filter((d) => d.source === undefined && d.values !== undefined)
    .map((d) => entry.view.data(d.name));
  if (!names.length) return [].concat(...tables);
  const grid = tables.find((rows) => rows.length && names.every((n) => n in rows[0]));
  if (!grid) return [].concat(...tables);
  const now = names.map((n) => [n, entry.controls[n], entry.view.signal(n)]);
  return grid.filter((row) => now.every(([n, bind, value]) => sameSetting(bind, row[n], value)));
}

// The rows one named mark draws (its items' data), with the given columns: for a figure whose page
// computes its numbers, these are the model's answer at the current setting, not the terms it ships.
function markRows(view, mark, columns) {
  const rows = [];
  const walk = (node) => {
    if (!node) return;
    if (node.marktype && node.name === mark + "_marks") {
      for (const item of node.items || []) rows.push(Object.fromEntries(columns.map((c) => [c, item.datum[c]])));
    }
    (node.items || []).forEach(walk);
  };
  walk(view.scenegraph().root);
  return rows;
}

// The chart's own filter, in the same terms: slider values with slack (a range input's decimal
// string never lands exactly on a double), choices exactly. Cells may still be text when the
// spec left parsing to a later transform.
function sameSetting(bind, cell, value) {
  if (bind.input === "range") return Math.abs(Number(cell) - value) < bind.step / 1000;
  return typeof value === "number" ? Number(cell) === value : String(cell) === String(value);
}

function toCsv(rows) {
  const columns = [];
  for (const row of rows) for (const c of Object.keys(row)) if (!columns.includes(c)) columns.push(c);
  const cell = (v) => {
    if (v === null || v === undefined || (typeof v === "number" && !Number.isFinite(v))) return "";
    const text = String(v);
    return /[",\r\n]/.test(text) ? '"' + text.replace(/"/g, '""') + '"' : text;
  };
  return [columns, ...rows.map((row) => columns.map((c) => row[c]))]
    .map((line) => line.map(cell).join(","))
    .join("\n") + "\n";
}

function download(url, filename, revoke) {
  const a = document.createElement("a");
  a.href = url;
  a.download = filename;
  document.body.append(a);
  a.click();
  a.remove();
  // Not at once: the browser may still be reading the blob when click() returns.
  if (revoke) setTimeout(() => URL.revokeObjectURL(url), 60000);
}

// Twelve significant digits hide binary noise such as 0.30000000000000004 in a shared link.
const tidy = (x) => Number(x.toPrecision(12));

function linkFor(entry) {
  const query = new URLSearchParams();
  for (const name of Object.keys(entry.controls)) {
    const value = entry.view.signal(name);
    query.set(name, String(typeof value === "number" ? tidy(value) : value));
  }
  return "#" + entry.key + "?" + query.toString();
}

async function copyLink(entry, tools, status) {
  const hash = linkFor(entry);
  const url = location.href.split("#")[0] + hash;
  try {
    history.replaceState(history.state, "", hash);
  } catch (error) {
    // Some browsers refuse history changes on pages opened from disk; the link still works.
    console.warn("perwatt: could not put the link in the address bar", error);
  }
  let copied = false;
  if (navigator.clipboard && navigator.clipboard.writeText) {
    try {
      await navigator.clipboard.writeText(url);
      copied = true;
    } catch (error) {
      // No permission, or a page opened from disk: the field below is the way instead.
    }
  }
  // The link is also shown, selected, so it can be copied by hand where the clipboard is shut.
  let label = tools.querySelector("label");
  if (!label) {
    label = document.createElement("label");
    label.append(document.createElement("span"), document.createElement("input"));
    label.lastChild.type = "text";
    label.lastChild.readOnly = true;
    label.lastChild.className = "perwatt-link";
    tools.append(label);
  }
  label.firstChild.textContent = "Link to this setting: ";
  label.lastChild.value = url;
  status.textContent = copied ? "Link copied." : "Select the link below and copy it.";
  if (!copied) label.lastChild.select();
}

// Checks one value from a link against a control's binding; returns {value} or {problem}.
function accept(bind, text) {
  if (bind.input === "range") {
    const number = Number(text);
    if (text.trim() === "" || !Number.isFinite(number)) return { problem: "is not a number" };
    const steps = (number - bind.min) / bind.step;
    const nearest = Math.round(steps);
    const snapped = tidy(bind.min + nearest * bind.step);
    if (nearest < 0 || snapped > bind.max + bind.step / 1000) {
      return { problem: "is outside " + bind.min + " to " + bind.max };
    }
    // Off the slider's steps: the grid has no rows there, so refuse rather than guess.
    if (Math.abs(steps - nearest) > 1e-3) return { problem: "is not on the slider's steps (nearest " + snapped + ")" };
    return { value: snapped };
  }
  const options = bind.options || [];
  const found = options.find((o) =>
    typeof o === "number" ? text.trim() !== "" && Number(text) === o : String(o) === text);
  return found === undefined ? { problem: "is not one of " + options.join(", ") } : { value: found };
}

// A link never breaks a chart: whatever it gets wrong is skipped with a warning, not an error.
async function applyLink(hash) {
  const at = hash.indexOf("?");
  if (at < 0) return; // a plain anchor, which the browser handles itself
  let key;
  try {
    key = decodeURIComponent(hash.slice(1, at));
  } catch (error) {
    console.warn("perwatt: ignoring a link whose figure name is malformed: " + hash);
    return;
  }
  const entry = Object.values(charts).find((c) => c.key === key);
  if (!entry) {
    console.warn("perwatt: ignoring a link to " + JSON.stringify(key) + ", which is no chart on this page");
    return;
  }
  let changed = false;
  for (const [name, text] of new URLSearchParams(hash.slice(at + 1))) {
    const bind = Object.prototype.hasOwnProperty.call(entry.controls, name) ? entry.controls[name] : null;
    const checked = bind ? accept(bind, text) : { problem: "is not a control of this figure" };
    if ("problem" in checked) {
      console.warn("perwatt: link ignores " + name + "=" + JSON.stringify(text) + ": " +
                   (bind ? "the value " : "the name ") + checked.problem);
      continue;
    }
    entry.view.signal(name, checked.value);
    changed = true;
  }
  try {
    if (changed) await entry.view.runAsync();
  } catch (error) {
    console.warn("perwatt: the chart could not take the link's setting", error);
  }
  entry.holder.scrollIntoView();
}

registry.ready = Promise.all(
  Array.from(document.querySelectorAll("script.perwatt-spec"), drawChart)
).then(() => applyLink(location.hash)).catch((error) => console.warn("perwatt: link not applied", error));
window.addEventListener("hashchange", () => applyLink(location.hash));
})();
