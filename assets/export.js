// Export: every figure as PNG and SVG, every data download also as CSV. All in the browser, offline.
//
// - Plotly figures: two buttons under each one call Plotly.downloadImage (plotly.js is the copy Gradio's
//   plot component loads; it sets window.Plotly). PNG at twice the size on screen, for slides.
// - SVG views (the attention head view): the <svg> serialised with the styles it uses inlined, so the file
//   renders on its own; PNG by drawing that SVG on a canvas.
// - HTML views (coloured tokens, the model view, the gradient strip...: gr.HTML with the class
//   "figure-view"): the view copied with its computed styles inlined into an SVG <foreignObject>, which
//   is the SVG file and, drawn on a canvas, the PNG.
// - Data: next to each "Download JSON" button, a CSV button fetches the same JSON file and writes its main
//   table (the longest list of records in it) as CSV, one row per record, nested values as JSON text.
//   Under each JSON panel that has no such button, JSON and CSV buttons: the panel's value is what its own
//   copy button would put on the clipboard (caught on the way, the clipboard untouched).
(() => {
  "use strict";

  const slug = (text) => (text || "figure").toLowerCase().normalize("NFKD")
    .replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "").slice(0, 60) || "figure";

  const tabName = (el) => {
    const tab = document.querySelector("#tabs button[role='tab'][aria-selected='true']");
    return slug(tab ? tab.textContent : "nlp-playground");
  };

  const save = (blob, name) => {
    const url = URL.createObjectURL(blob);
    const a = Object.assign(document.createElement("a"), { href: url, download: name });
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  };

  const button = (label, title, onClick) => {
    const b = Object.assign(document.createElement("button"), { type: "button", textContent: label, title });
    b.className = "export-btn";
    b.addEventListener("click", (e) => { e.preventDefault(); e.stopPropagation(); onClick(); });
    return b;
  };

  // --- plotly figures --------------------------------------------------------------------------
  // The bar belongs to the host, not to one plot: Gradio replaces the plot's <div> when the figure
  // changes, so the figure and its size on screen are looked up at the click, never remembered.
  function plotlyBar(host) {
    const current = () => host.querySelector(":scope > .js-plotly-plot");
    const name = (gd) => {
      const title = gd.layout && gd.layout.title;
      return `${tabName(gd)}-${slug(typeof title === "string" ? title : title && title.text)}`;
    };
    const bar = document.createElement("div");
    bar.className = "export-bar";
    for (const format of ["png", "svg"]) {
      bar.appendChild(button(format.toUpperCase(), `Download this figure as ${format.toUpperCase()}`, () => {
        const gd = current();
        if (!gd) return;
        const box = gd.getBoundingClientRect();
        window.Plotly.downloadImage(gd, { format, filename: name(gd), scale: format === "png" ? 2 : 1,
          width: Math.round(box.width) || 900, height: Math.round(box.height) || 500 });
      }));
    }
    return bar;
  }

  // --- SVG views -------------------------------------------------------------------------------
  const STYLED = ["fill", "stroke", "stroke-width", "stroke-opacity", "fill-opacity", "opacity", "font-family",
    "font-size", "font-weight", "text-anchor", "dominant-baseline", "display", "visibility"];

  // The head view's title: its layer and the heads drawn (the checked head buttons), as the page shows them
  function headViewTitle(svg) {
    const hv = svg.closest(".hv");
    if (!hv) return "";
    const all = [...hv.querySelectorAll(".hv-hb input")], on = all.filter((i) => i.checked).map((i) => i.dataset.h);
    const heads = on.length === all.length && all.length > 1 ? `all ${all.length} heads`
      : on.length === 1 ? `head ${on[0]}` : on.length ? `heads ${on.join(", ")}` : "no head";
    return `Layer ${hv.dataset.layer}, ${heads}`;
  }

  const SVG_NS = "http://www.w3.org/2000/svg", TITLE_H = 30;

  function standaloneSvg(svg, title = "") {
    const copy = svg.cloneNode(true);
    const from = svg.querySelectorAll("*"), to = copy.querySelectorAll("*");
    from.forEach((el, i) => {
      const style = getComputedStyle(el);
      to[i].setAttribute("style", STYLED.map((p) => `${p}:${style.getPropertyValue(p)}`).join(";"));
    });
    copy.setAttribute("xmlns", SVG_NS);
    const box = svg.getBoundingClientRect();
    const top = title ? TITLE_H : 0;
    if (title) {  // the drawing moves down under its title (the viewBox, in the view's own units, grows with it)
      const [x, y, w, h] = (svg.getAttribute("viewBox") || `0 0 ${box.width} ${box.height}`).split(/[ ,]+/).map(Number);
      const scale = box.height ? h / box.height : 1;
      copy.setAttribute("viewBox", `${x} ${y - top * scale} ${w} ${h + top * scale}`);
      const text = document.createElementNS(SVG_NS, "text");
      Object.entries({ x: x + 8 * scale, y: y - top * scale + 20 * scale,
                       style: `font-family:system-ui,sans-serif;font-size:${16 * scale}px;font-weight:600;fill:#222` })
        .forEach(([k, v]) => text.setAttribute(k, v));
      text.textContent = title;
      copy.insertBefore(text, copy.firstChild);
    }
    copy.setAttribute("width", Math.ceil(box.width));
    copy.setAttribute("height", Math.ceil(box.height + top));
    const background = document.createElementNS(SVG_NS, "rect");
    Object.entries({ x: "-50%", y: "-50%", width: "200%", height: "200%", fill: "white" })
      .forEach(([k, v]) => background.setAttribute(k, v));
    copy.insertBefore(background, copy.firstChild);
    return { text: new XMLSerializer().serializeToString(copy), width: box.width, height: box.height + top, title };
  }

  function png({ text, width, height }, name) {
    const image = new Image();
    image.onload = () => {
      const canvas = Object.assign(document.createElement("canvas"), { width: width * 2, height: height * 2 });
      const ctx = canvas.getContext("2d");
      ctx.scale(2, 2);
      ctx.drawImage(image, 0, 0);
      canvas.toBlob((blob) => save(blob, name), "image/png");
    };
    image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
  }

  function svgBar(svg) {
    const bar = document.createElement("div");
    bar.className = "export-bar";
    const name = (title) => `${tabName(svg)}-${title ? slug(title) : "view"}`;
    bar.appendChild(button("PNG", "Download this view as PNG", () => {
      const drawn = standaloneSvg(svg, headViewTitle(svg));
      png(drawn, `${name(drawn.title)}.png`);
    }));
    bar.appendChild(button("SVG", "Download this view as SVG", () => {
      const drawn = standaloneSvg(svg, headViewTitle(svg));
      save(new Blob([drawn.text], { type: "image/svg+xml" }), `${name(drawn.title)}.svg`);
    }));
    return bar;
  }

  // --- HTML views --------------------------------------------------------------------------------
  const KEPT = ["display", "box-sizing", "position", "top", "left", "width", "height", "min-width", "max-width",
    "margin", "padding", "border", "border-radius", "border-collapse", "border-spacing", "background-color",
    "background-image", "background-position", "background-size", "background-repeat", "image-rendering", "filter",
    "color", "opacity", "font-family", "font-size", "font-weight", "font-style",
    "line-height", "letter-spacing", "white-space", "word-break", "overflow-wrap", "text-align",
    "text-decoration", "vertical-align", "direction", "unicode-bidi", "flex-direction", "flex-wrap",
    "flex-grow", "flex-shrink", "flex-basis", "align-items", "justify-content", "gap", "grid-template-columns",
    "grid-column", "grid-row", "box-shadow", "outline", "outline-offset", "transform", "fill", "stroke",
    "stroke-width", "table-layout"];
  const DEFAULTS = new Set(["", "none", "normal", "auto", "0px", "static", "visible", "rgba(0, 0, 0, 0)"]);

  function background(el) {  // the colour the view sits on: the first opaque one up the tree
    for (let node = el; node && node.nodeType === 1; node = node.parentElement) {
      const color = getComputedStyle(node).backgroundColor;
      if (color && color !== "transparent" && !/rgba\(.*, 0\)$/.test(color)) return color;
    }
    return "white";
  }

  function standaloneHtml(view) {
    const copy = view.cloneNode(true);
    copy.querySelectorAll(".export-bar, [data-testid='status-tracker']").forEach((el) => el.remove());
    const from = [view, ...view.querySelectorAll("*")].filter((el) => !el.closest(".export-bar, [data-testid='status-tracker']"));
    const to = [copy, ...copy.querySelectorAll("*")];
    from.forEach((el, i) => {
      const style = getComputedStyle(el);
      const inline = KEPT.map((p) => [p, style.getPropertyValue(p)]).filter(([p, v]) => !DEFAULTS.has(v) ||
                                                                             p === "display");
      to[i].setAttribute("style", inline.map(([p, v]) => `${p}:${v}`).join(";"));
      to[i].removeAttribute("id");
      to[i].removeAttribute("class");
    });
    const width = Math.ceil(Math.max(view.scrollWidth, view.getBoundingClientRect().width));
    const height = Math.ceil(Math.max(view.scrollHeight, view.getBoundingClientRect().height));
    copy.style.width = `${width}px`;
    copy.style.height = `${height}px`;
    copy.style.margin = "0";
    copy.style.overflow = "visible";
    copy.style.backgroundColor = background(view);
    copy.setAttribute("xmlns", "http://www.w3.org/1999/xhtml");
    const body = new XMLSerializer().serializeToString(copy);
    const text = `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" ` +
      `viewBox="0 0 ${width} ${height}"><foreignObject x="0" y="0" width="${width}" height="${height}">` +
      `${body}</foreignObject></svg>`;
    return { text, width, height };
  }

  function htmlBar(view) {
    const name = () => `${tabName(view)}-${slug(view.id || "view")}`;
    const bar = document.createElement("div");
    bar.className = "export-bar";
    bar.appendChild(button("PNG", "Download this view as PNG", () => png(standaloneHtml(content(view)), `${name()}.png`)));
    bar.appendChild(button("SVG", "Download this view as SVG", () => {
      save(new Blob([standaloneHtml(content(view)).text], { type: "image/svg+xml" }), `${name()}.svg`);
    }));
    return bar;
  }

  // a gr.HTML block: its rendered value is the first child that is not Gradio's or ours
  const content = (view) => [...view.children].find((el) => !el.matches(".export-bar, [data-testid='status-tracker'], .hide")) || view;

  // --- CSV of a JSON download ------------------------------------------------------------------
  function records(data) {
    // The data's main table: the longest list of records (objects) anywhere in it, or else the rows made
    // by zipping equal-length lists that sit side by side in one object (tokens, ids, offsets...), with
    // the rows of sibling objects of the same shape (one per tokenizer, one per cell...) stacked and
    // tagged with their key. Failing both, the object itself as one row.
    let list = null;
    const tables = new Map();  // column names -> rows
    const walk = (value, path, depth) => {
      if (depth > 6 || value === null || typeof value !== "object") return;
      if (Array.isArray(value)) {
        if (value.length && value.every((v) => v && typeof v === "object" && !Array.isArray(v)) &&
            (!list || value.length > list.length)) list = value;
        value.forEach((v, i) => walk(v, path.concat(String(i)), depth + 1));
        return;
      }
      const arrays = Object.entries(value).filter(([, v]) => Array.isArray(v) && v.length);
      const lengths = arrays.map(([, v]) => v.length);
      const n = lengths.sort((a, b) => lengths.filter((x) => x === b).length - lengths.filter((x) => x === a).length)[0];
      const columns = arrays.filter(([, v]) => v.length === n && v.every((x) => x === null || typeof x !== "object" ||
                                                                          Array.isArray(x)));
      if (columns.length >= 2) {
        const key = columns.map(([k]) => k).join(",");
        if (!tables.has(key)) tables.set(key, []);
        for (let i = 0; i < n; i++) {
          const row = path.length ? { group: path.join(".") } : {};
          row.index = i;
          columns.forEach(([k, v]) => { row[k] = v[i]; });
          tables.get(key).push(row);
        }
      }
      Object.entries(value).forEach(([k, v]) => walk(v, path.concat(k), depth + 1));
    };
    walk(data, [], 0);
    const zipped = [...tables.values()].sort((a, b) => b.length - a.length)[0];
    if (list && (!zipped || list.length >= zipped.length)) return list;
    return zipped || [data];
  }

  function toCsv(rows) {
    const columns = [];
    rows.forEach((r) => Object.keys(r).forEach((k) => { if (!columns.includes(k)) columns.push(k); }));
    const cell = (v) => {
      if (v === undefined || v === null) return "";
      const text = typeof v === "object" ? JSON.stringify(v) : String(v);
      return /[",\r\n]/.test(text) ? `"${text.replace(/"/g, '""')}"` : text;
    };
    return [columns.map(cell).join(","), ...rows.map((r) => columns.map((c) => cell(r[c])).join(","))].join("\r\n") + "\r\n";
  }

  // Gradio's DownloadButton keeps its file's URL to itself and, on a click, makes a temporary <a> and
  // clicks it. Catch that one <a> click to learn the URL (and skip the JSON download), then fetch it.
  function fileUrl(jsonButton) {
    return new Promise((resolve) => {
      const original = HTMLAnchorElement.prototype.click;
      const restore = () => { HTMLAnchorElement.prototype.click = original; };
      HTMLAnchorElement.prototype.click = function () { restore(); resolve(this.href); };
      jsonButton.click();
      setTimeout(() => { restore(); resolve(null); }, 3000);
    });
  }

  function csvButton(jsonButton) {
    return button("CSV", "Download the same data as CSV (its main table)", async () => {
      const url = await fileUrl(jsonButton);
      if (!url) return;
      const data = await (await fetch(url)).json();
      const stem = decodeURIComponent(url.split("/").pop().split("?")[0]).replace(/\.json$/, "");
      save(new Blob([toCsv(records(data))], { type: "text/csv;charset=utf-8" }), `${stem}.csv`);
    });
  }

  // Gradio's JSON panel copies JSON.stringify(value) with navigator.clipboard.writeText: lend it a
  // clipboard for that one click (an own property that shadows the real one, removed at once).
  function panelText(block) {
    const copy = block.querySelector("button[aria-label='Copy'], button[aria-label='Copied']");  // "Copied" for 1 s
    if (!copy) return Promise.resolve(null);
    return new Promise((resolve) => {
      let timer = null;
      const done = (text) => {
        clearTimeout(timer);
        delete navigator.clipboard;
        resolve(text);
      };
      Object.defineProperty(navigator, "clipboard", {
        configurable: true, value: { writeText: (text) => { done(text); return Promise.resolve(); } } });
      timer = setTimeout(() => done(null), 2000);
      copy.click();
    });
  }

  function panelBar(block) {
    const name = () => slug((block.querySelector("[data-testid='block-label']") || {}).textContent || "data");
    const bar = document.createElement("div");
    bar.className = "export-bar export-data";
    bar.appendChild(button("JSON", "Download this data as JSON", async () => {
      const text = await panelText(block);
      if (text !== null) save(new Blob([text], { type: "application/json" }), `${name()}.json`);
    }));
    bar.appendChild(button("CSV", "Download this data as CSV (its main table)", async () => {
      const text = await panelText(block);
      if (text !== null) save(new Blob([toCsv(records(JSON.parse(text)))], { type: "text/csv;charset=utf-8" }),
                              `${name()}.csv`);
    }));
    return bar;
  }

  const hasDownload = (block) => {  // a "Download JSON" button right before the panel serves it already
    let before = block.previousElementSibling;
    while (before && before.matches(".export-btn, .export-bar")) before = before.previousElementSibling;  // ours
    return !!before && [before, ...before.querySelectorAll("button")].some((b) =>
      b.tagName === "BUTTON" && /Download .*JSON/.test(b.textContent || ""));
  };

  // --- attach to whatever appears ----------------------------------------------------------------
  function attach() {
    document.querySelectorAll(".js-plotly-plot").forEach((gd) => {
      const host = gd.parentElement;
      if (host && !host.querySelector(":scope > .export-bar")) host.appendChild(plotlyBar(host));
    });
    document.querySelectorAll("svg.hv-svg").forEach((svg) => {
      const host = svg.closest(".hv-scroll") || svg.parentElement;
      if (host && !(host.nextElementSibling && host.nextElementSibling.classList.contains("export-bar"))) {
        host.after(svgBar(svg));
      }
    });
    // Gradio puts elem_classes on the block and on the HTML inside it: the outer one is the view
    document.querySelectorAll(".figure-view").forEach((view) => {
      if (view.parentElement.closest(".figure-view")) return;
      const empty = !(content(view).textContent || "").trim() && !content(view).querySelector("svg, img, canvas");
      const bar = view.querySelector(":scope > .export-bar");
      if (!bar && !empty) view.appendChild(htmlBar(view));
      else if (bar) bar.hidden = empty;
    });
    document.querySelectorAll("[data-testid='json'].block").forEach((block) => {
      if (block.dataset.exported || hasDownload(block)) return;
      block.dataset.exported = "1";
      block.after(panelBar(block));
    });
    document.querySelectorAll("button:not(.export-btn)").forEach((el) => {
      if (el.dataset.csv || !/^\s*Download .*JSON/.test(el.textContent || "")) return;
      el.dataset.csv = "1";
      const csv = csvButton(el);
      csv.classList.add("export-csv");
      el.after(csv);
    });
  }

  let pending = false;
  new MutationObserver(() => {
    if (pending) return;
    pending = true;
    requestAnimationFrame(() => { pending = false; attach(); });
  }).observe(document.documentElement, { childList: true, subtree: true });

  window.playgroundExport = { records, toCsv, standaloneHtml: (view) => standaloneHtml(content(view)),
                              standaloneSvg: (svg) => standaloneSvg(svg, headViewTitle(svg)) };
})();
