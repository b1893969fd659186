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
    result = await window.vegaEmbed(target, spec, { actions: false, renderer: "svg" });
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

function addTools(target, spec, result) {
  const figure = target.closest("figure[id]");
  const entry = {
    key: figure ? figure.id : target.id,
    holder: figure || target,
    controls: {},
    view: result.view,
    vgSpec: result.vgSpec,
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
