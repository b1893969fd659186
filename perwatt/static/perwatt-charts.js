// Draws every chart on the page from the Vega-Lite spec the build left beside it.
// Loaded as a deferred classic script after the vendored Vega bundle, which defines
// window.vegaEmbed; classic, because browsers refuse module scripts on pages opened from disk.
// Views are kept on window.perwatt so readers' tools and the browser tests can inspect them.
(function () {
"use strict";
const registry = (window.perwatt = window.perwatt || { embeds: {} });

async function drawChart(specElement) {
  const target = document.getElementById(specElement.dataset.target);
  if (!target) return;
  try {
    const spec = JSON.parse(specElement.textContent);
    const result = await window.vegaEmbed(target, spec, { actions: false, renderer: "svg" });
    registry.embeds[target.id] = result;
    target.dataset.rendered = "true";
  } catch (error) {
    target.dataset.rendered = "error";
    target.textContent = "This chart could not be drawn: " + error.message;
    console.error("perwatt: chart " + target.id + " failed", error);
  }
}

registry.ready = Promise.all(
  Array.from(document.querySelectorAll("script.perwatt-spec"), drawChart)
);
})();
