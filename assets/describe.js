// Text alternatives of the plotly figures (WCAG 1.1.1), computed in the browser from the figure's own data, the
// data the server sent for this figure (nothing canned, nothing more sent; docs/accessibility.md):
// - a heatmap (attention, alignments): for each row, the two columns with the largest values and those values
//   (for attention: which tokens each query attends to most, and how much);
// - lines (gradient flow through time): each line's first and last value and its mean factor per step;
// - labelled points (embeddings, 2D or 3D): each point's nearest neighbour on the plot, in any of its groups;
// - bars (distributions): the largest bars and their values.
// The text sits under the figure in a "Describe this figure" disclosure (shown on request) and is the figure's
// aria-describedby (read by screen readers without opening it). Redone after each drawing whose data changed.
(() => {
  const ROWS = 40;   // rows, lines, points or bars described at most (the rest counted)
  const num = (v) => {
    if (typeof v !== "number" || !isFinite(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a < 1e-3 || a >= 1e5) ? v.toExponential(1) : String(+v.toPrecision(3));
  };
  const text = (t) => (t && typeof t === "object" ? t.text : t) || "";
  const list = (a) => (a == null ? [] : Array.from(a));
  const more = (n) => (n > ROWS ? [`… and ${n - ROWS} more.`] : []);

  function heatmap(trace) {
    const z = list(trace.z).map(list), x = list(trace.x), y = list(trace.y), lines = [];
    z.slice(0, ROWS).forEach((row, i) => {
      const top = row.map((v, j) => [v, j]).filter(([v]) => typeof v === "number" && isFinite(v))
        .sort((a, b) => b[0] - a[0]).slice(0, 2);
      if (top.length) {
        lines.push(`${y[i] ?? i}: ` + top.map(([v, j]) => `${x[j] ?? j} ${num(v)}`).join(", then "));
      }
    });
    return ["Largest value in each row:", ...lines, ...more(z.length)];
  }

  function line(trace, i) {
    const x = list(trace.x), y = list(trace.y).map(Number), n = y.length, name = trace.name || `line ${i + 1}`;
    if (!n) return [];
    const start = y.findIndex(isFinite), end = n - 1 - [...y].reverse().findIndex(isFinite);
    if (start < 0) return [`${name}: no finite value.`];
    let out = `${name}: ${num(y[start])} at ${x[start] ?? start} to ${num(y[end])} at ${x[end] ?? end}`;
    const steps = end - start;
    if (steps > 0 && y[start] > 0 && y[end] > 0) out += `, × ${num(Math.pow(y[end] / y[start], 1 / steps))} per step`;
    return [out + "."];
  }

  // labelled points: a 2D or 3D scatter (SVG or WebGL) whose markers carry words; one trace per group
  const labelled = (trace) => /^scatter(gl|3d)?$/.test(trace.type) && /markers/.test(trace.mode || "")
    && list(trace.text).length;

  function points(traces) {  // every labelled point of the figure, whichever trace (group) it is drawn in
    const all = [];
    traces.forEach((trace) => {
      const x = list(trace.x), y = list(trace.y), z = trace.type === "scatter3d" ? list(trace.z) : [];
      const labels = list(trace.text);
      for (let i = 0; i < Math.min(x.length, y.length); i++) {
        all.push([+x[i], +y[i], z.length ? +z[i] : 0, labels[i] ?? i]);
      }
    });
    const lines = [];
    for (let i = 0; i < Math.min(all.length, ROWS); i++) {
      let best = -1, dist = Infinity;
      for (let j = 0; j < all.length; j++) {
        const d = (all[i][0] - all[j][0]) ** 2 + (all[i][1] - all[j][1]) ** 2 + (all[i][2] - all[j][2]) ** 2;
        if (j !== i && d < dist) { best = j; dist = d; }
      }
      if (best >= 0) lines.push(`${all[i][3]} is nearest to ${all[best][3]} on the plot.`);
    }
    return [...lines, ...more(all.length)];
  }

  function bars(trace) {
    const h = trace.orientation === "h", values = list(h ? trace.x : trace.y).map(Number);
    const labels = list(h ? trace.y : trace.x);
    const order = values.map((v, i) => [v, i]).filter(([v]) => isFinite(v)).sort((a, b) => b[0] - a[0]);
    return [`${trace.name ? trace.name + ": " : ""}largest first: ` +
      order.slice(0, ROWS).map(([v, i]) => `${labels[i] ?? i} ${num(v)}`).join(", ") + "."];
  }

  function describe(gd) {
    const layout = gd.layout || {}, traces = gd._fullData || gd.data || [];
    const axes = [text((layout.xaxis || {}).title), text((layout.yaxis || {}).title)].filter(Boolean);
    const out = [`Figure: ${text(layout.title) || "untitled"}` + (axes.length ? ` (axes: ${axes.join(", ")})` : "") + "."];
    const drawn = (trace) => trace.visible !== false && trace.visible !== "legendonly";  // legendonly: hidden
    const shown = traces.filter(drawn);
    traces.forEach((trace, i) => {
      // labelled points are described together, below: a point's nearest may be in another group's trace
      if (!drawn(trace) || labelled(trace)) return;
      if (trace.type === "heatmap") out.push(...heatmap(trace));
      else if (trace.type === "bar") out.push(...bars(trace));
      else if (trace.type === "scatter") out.push(...line(trace, i));
      else out.push(`${trace.name || trace.type}: ${list(trace.x).length} points.`);
    });
    if (shown.some(labelled)) out.push(...points(shown.filter(labelled)));
    return out.join("\n");
  }

  let counter = 0;
  function attach(gd) {
    const host = gd.parentElement;
    if (!host || !gd._fullLayout) return;
    let box = host.querySelector(":scope > details.fig-describe");
    if (!box) {
      box = document.createElement("details");
      box.className = "fig-describe";
      box.innerHTML = "<summary>Describe this figure</summary><p></p>";
      box.querySelector("p").id = `fig-describe-${++counter}`;
      host.appendChild(box);
    }
    const p = box.querySelector("p");
    if (gd._describedData !== gd.data || gd._describedLayout !== gd.layout || !p.textContent) {
      gd._describedData = gd.data;
      gd._describedLayout = gd.layout;
      p.textContent = describe(gd);
    }
    gd.setAttribute("role", "figure");
    gd.setAttribute("aria-label", text((gd.layout || {}).title) || "figure");
    gd.setAttribute("aria-describedby", p.id);
    if (!gd._describing && typeof gd.on === "function") {  // the next drawings of this figure (new data)
      gd._describing = true;
      gd.on("plotly_afterplot", () => attach(gd));
    }
  }

  let pending = false;
  new MutationObserver(() => {
    if (pending) return;
    pending = true;
    setTimeout(() => { pending = false; document.querySelectorAll(".js-plotly-plot").forEach(attach); }, 300);
  }).observe(document.documentElement, { childList: true, subtree: true });

  window.playgroundDescribe = { describe };
})();
