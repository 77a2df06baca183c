// Export: every figure as PNG and SVG, every data download also as CSV. All in the browser, offline.
//
// - Plotly figures: two buttons under each one call Plotly.downloadImage (plotly.js is the copy Gradio's
//   plot component loads; it sets window.Plotly). PNG at twice the size on screen, for slides.
// - SVG views (the attention head view): the <svg> serialised with the styles it uses inlined, so the file
//   renders on its own; PNG by drawing that SVG on a canvas.
// - Data: next to each "Download JSON" button, a CSV button fetches the same JSON file and writes its main
//   table (the longest list of records in it) as CSV, one row per record, nested values as JSON text.
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
  function plotlyBar(gd) {
    const name = () => {
      const title = gd.layout && gd.layout.title;
      return `${tabName(gd)}-${slug(typeof title === "string" ? title : title && title.text)}`;
    };
    const bar = document.createElement("div");
    bar.className = "export-bar";
    for (const format of ["png", "svg"]) {
      bar.appendChild(button(format.toUpperCase(), `Download this figure as ${format.toUpperCase()}`, () => {
        window.Plotly.downloadImage(gd, { format, filename: name(), scale: format === "png" ? 2 : 1,
          width: gd.clientWidth || 900, height: gd.clientHeight || 500 });
      }));
    }
    return bar;
  }

  // --- SVG views -------------------------------------------------------------------------------
  const STYLED = ["fill", "stroke", "stroke-width", "stroke-opacity", "fill-opacity", "opacity", "font-family",
    "font-size", "font-weight", "text-anchor", "dominant-baseline", "display", "visibility"];

  function standaloneSvg(svg) {
    const copy = svg.cloneNode(true);
    const from = svg.querySelectorAll("*"), to = copy.querySelectorAll("*");
    from.forEach((el, i) => {
      const style = getComputedStyle(el);
      to[i].setAttribute("style", STYLED.map((p) => `${p}:${style.getPropertyValue(p)}`).join(";"));
    });
    copy.setAttribute("xmlns", "http://www.w3.org/2000/svg");
    const box = svg.getBoundingClientRect();
    copy.setAttribute("width", Math.ceil(box.width));
    copy.setAttribute("height", Math.ceil(box.height));
    const background = document.createElementNS("http://www.w3.org/2000/svg", "rect");
    Object.entries({ width: "100%", height: "100%", fill: "white" }).forEach(([k, v]) => background.setAttribute(k, v));
    copy.insertBefore(background, copy.firstChild);
    return { text: new XMLSerializer().serializeToString(copy), width: box.width, height: box.height };
  }

  function svgBar(svg) {
    const bar = document.createElement("div");
    bar.className = "export-bar";
    bar.appendChild(button("PNG", "Download this view as PNG", () => {
      const { text, width, height } = standaloneSvg(svg);
      const image = new Image();
      image.onload = () => {
        const canvas = Object.assign(document.createElement("canvas"), { width: width * 2, height: height * 2 });
        const ctx = canvas.getContext("2d");
        ctx.scale(2, 2);
        ctx.drawImage(image, 0, 0);
        canvas.toBlob((blob) => save(blob, `${tabName(svg)}-view.png`), "image/png");
      };
      image.src = "data:image/svg+xml;charset=utf-8," + encodeURIComponent(text);
    }));
    bar.appendChild(button("SVG", "Download this view as SVG", () => {
      save(new Blob([standaloneSvg(svg).text], { type: "image/svg+xml" }), `${tabName(svg)}-view.svg`);
    }));
    return bar;
  }

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

  // --- attach to whatever appears ----------------------------------------------------------------
  function attach() {
    document.querySelectorAll(".js-plotly-plot").forEach((gd) => {
      const host = gd.parentElement;
      if (host && !host.querySelector(":scope > .export-bar")) host.appendChild(plotlyBar(gd));
    });
    document.querySelectorAll("svg.hv-svg").forEach((svg) => {
      const host = svg.closest(".hv-scroll") || svg.parentElement;
      if (host && !(host.nextElementSibling && host.nextElementSibling.classList.contains("export-bar"))) {
        host.after(svgBar(svg));
      }
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

  window.playgroundExport = { records, toCsv };
})();
