// The view in the URL, "copy link", and lecture mode (the server side is playground/ui/view.py).
(() => {
  "use strict";

  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const MAX_TEXT = 2000;  // view.MAX_TEXT: a restored text is cut there too
  const encode = (v) => (Array.isArray(v) ? v.join(",") : typeof v === "boolean" ? (v ? "1" : "0")
    : String(v).slice(0, MAX_TEXT));
  const tabId = (label) => label.trim().toLowerCase().replace(/ /g, "-");  // ui.tab_id

  function set(key, value, fallback) {
    const url = new URL(window.location.href);
    if (value === null || value === undefined || same(value, fallback)) url.searchParams.delete(key);
    else url.searchParams.set(key, encode(value));
    if (url.href !== window.location.href) window.history.replaceState(null, "", url);
  }

  // The selected top-level tab: a click on one of its buttons (the first tab is the default, left out).
  document.addEventListener("click", (event) => {
    const button = event.target.closest && event.target.closest("button[role='tab']");
    const tabs = document.getElementById("tabs");
    if (!button || !tabs) return;
    const top = [...tabs.querySelectorAll("button[role='tab']")].filter((b) => b.closest(".tabs") === tabs);
    if (!top.includes(button)) return;  // a tab's own sub-tabs
    set("tab", tabId(button.textContent), tabId(top[0].textContent));
  }, true);

  function note(text) {
    let box = document.getElementById("copy-note");
    if (!box) {
      box = Object.assign(document.createElement("div"), { id: "copy-note" });
      document.body.appendChild(box);
    }
    box.textContent = text;
    box.classList.add("on");
    setTimeout(() => box.classList.remove("on"), 2500);
  }

  async function copy() {
    const link = window.location.href;
    try {
      await navigator.clipboard.writeText(link);
      note("Link copied: it opens this view.");
    } catch (err) {  // no clipboard (plain http from another host): the link to copy by hand
      window.prompt("Copy this link:", link);
    }
  }

  // --- lecture mode: larger type and thicker lines in every plotly figure ----------------------------
  const LECTURE = { font: 20, title: 26, line: 2.2, marker: 1.6 };
  let lectureOn = false;

  function scale(gd) {
    if (!window.Plotly || !gd.layout || !gd.data) return;
    const marked = gd.dataset.lecture === "1";
    if (lectureOn === marked) return;
    if (lectureOn) {
      gd._normal = { layout: { "font.size": (gd.layout.font || {}).size ?? null,
                               "title.font.size": ((gd.layout.title || {}).font || {}).size ?? null },
                     data: gd.data.map((t) => ({ line: (t.line || {}).width, marker: (t.marker || {}).size })) };
      gd.dataset.lecture = "1";
      window.Plotly.relayout(gd, { "font.size": LECTURE.font, "title.font.size": LECTURE.title });
      gd.data.forEach((t, i) => {
        const update = {};
        if (t.type === undefined || t.type === "scatter" || t.type === "scattergl" || t.type === "scatter3d") {
          update["line.width"] = ((t.line || {}).width || 2) * LECTURE.line;
          if (typeof (t.marker || {}).size === "number") update["marker.size"] = t.marker.size * LECTURE.marker;
        }
        if (Object.keys(update).length) window.Plotly.restyle(gd, update, [i]);
      });
    } else if (gd._normal) {
      gd.dataset.lecture = "";
      window.Plotly.relayout(gd, gd._normal.layout);
      gd._normal.data.forEach((t, i) => {
        if (t.line !== undefined || t.marker !== undefined) {
          window.Plotly.restyle(gd, { "line.width": t.line ?? null, "marker.size": t.marker ?? null }, [i]);
        }
      });
    }
  }

  const scaleAll = () => document.querySelectorAll(".js-plotly-plot").forEach((gd) => {
    // a new figure from the server replaces the data: mark it unscaled
    if (gd._scaledData !== gd.data) { gd.dataset.lecture = ""; gd._scaledData = gd.data; }
    scale(gd);
  });

  function lecture(on) {
    lectureOn = !!on;
    document.body.classList.toggle("lecture", lectureOn);
    scaleAll();
  }

  let pending = false;
  new MutationObserver(() => {
    if (pending || !lectureOn) return;
    pending = true;
    setTimeout(() => { pending = false; scaleAll(); }, 200);
  }).observe(document.documentElement, { childList: true, subtree: true });

  window.playgroundView = { set, copy, lecture };
})();
