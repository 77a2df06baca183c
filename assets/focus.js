// The word selected in the shared sentence, lit in every view that shows it (playground/focus.py).
// Views carry the sentence's characters: token spans (data-s, data-e), the head view's tokens, and the
// plotly figures' layout.meta.spans (the attention heatmap's rows and columns, the gradient-flow steps).
(() => {
  "use strict";
  let span = null;  // [start, end) of the selected word, or null

  const overlaps = (s, e) => span && s >= 0 && s < span[1] && e > span[0];

  function markElements() {
    document.querySelectorAll("#tokens-view .tok[data-s], .hv-t[data-s]").forEach((el) => {
      el.classList.toggle("focus", !!overlaps(+el.dataset.s, +el.dataset.e));
    });
  }

  function runs(indices) {  // [[first, last], ...] of consecutive indices
    const out = [];
    indices.forEach((i) => {
      if (out.length && out[out.length - 1][1] === i - 1) out[out.length - 1][1] = i;
      else out.push([i, i]);
    });
    return out;
  }

  function markFigure(gd) {
    const meta = gd.layout && gd.layout.meta;
    if (!window.Plotly || !meta || !Array.isArray(meta.spans)) return;
    const key = JSON.stringify(span) + "|" + meta.spans.length;
    if (gd._focusKey === key && gd._focusData === gd.data) return;
    gd._focusKey = key;
    gd._focusData = gd.data;
    const hit = meta.spans.map(([s, e], i) => (overlaps(s, e) ? i : -1)).filter((i) => i >= 0);
    const style = { fillcolor: "rgba(217, 83, 79, 0.15)", line: { color: "#d9534f", width: 1.5 }, layer: "above",
                    name: "focus" };
    const shapes = [];
    runs(hit).forEach(([a, b]) => {
      if (meta.x0 !== undefined) {  // steps on a numeric x axis
        shapes.push({ type: "rect", xref: "x", yref: "paper", x0: meta.x0 + a - 0.5, x1: meta.x0 + b + 0.5,
                      y0: 0, y1: 1, ...style });
      } else {  // a heatmap: the word's rows (queries) and columns (keys)
        shapes.push({ type: "rect", xref: "paper", yref: "y", x0: 0, x1: 1, y0: a - 0.5, y1: b + 0.5, ...style });
        shapes.push({ type: "rect", xref: "x", yref: "paper", x0: a - 0.5, x1: b + 0.5, y0: 0, y1: 1, ...style });
      }
    });
    const others = (gd.layout.shapes || []).filter((s) => s.name !== "focus");
    window.Plotly.relayout(gd, { shapes: others.concat(shapes) });
  }

  function markAll() {
    markElements();
    document.querySelectorAll(".js-plotly-plot").forEach(markFigure);
  }

  function mark(value) {
    const parts = String(value || "").split(":").map(Number);
    span = parts.length === 2 && parts.every(Number.isInteger) && parts[1] > parts[0] ? parts : null;
    markAll();
  }

  let pending = false;
  new MutationObserver(() => {
    if (pending) return;
    pending = true;
    setTimeout(() => { pending = false; markAll(); }, 150);
  }).observe(document.documentElement, { childList: true, subtree: true });

  window.playgroundFocus = { mark };
})();
