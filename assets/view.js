// The view in the URL, "copy link", and lecture mode (the server side is playground/ui/view.py).
(() => {
  "use strict";

  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  const MAX_TEXT = 2000;  // view.MAX_TEXT: a restored text is cut there too
  const encode = (v) => (Array.isArray(v) ? v.join(",") : typeof v === "boolean" ? (v ? "1" : "0")
    : String(v).slice(0, MAX_TEXT));
  const tabId = (label) => label.trim().toLowerCase().replace(/ /g, "-");  // ui.tab_id

  // Plotly names its gradients and clip paths by the page's address (url('<address>#id'), because Gradio's
  // page has a <base>): after the address changes, those references point at another document and the
  // colour bars go blank. Every change of address goes through `move`, which points them back here.
  function move(url) {
    if (url.href === window.location.href) return;
    window.history.replaceState(null, "", url);
    if (window.playgroundFollow) window.playgroundFollow.moved();  // a leading lecturer's page publishes it
    const here = window.location.href.split("#")[0];
    document.querySelectorAll(".js-plotly-plot").forEach((gd) => {
      if (gd._context && gd._context._baseUrl) gd._context._baseUrl = here;
    });
    document.querySelectorAll(".js-plotly-plot [style*='url('], .js-plotly-plot [clip-path], .js-plotly-plot [mask]")
      .forEach((el) => {
        for (const name of ["style", "clip-path", "mask"]) {
          const value = el.getAttribute(name);
          if (value && value.includes("url(")) {
            el.setAttribute(name, value.replace(/url\((['"]?)[^#'")]+#/g, (_, quote) => `url(${quote}${here}#`));
          }
        }
      });
  }

  function set(key, value, fallback) {
    const url = new URL(window.location.href);
    if (value === null || value === undefined || same(value, fallback)) url.searchParams.delete(key);
    else url.searchParams.set(key, encode(value));
    move(url);
  }

  // The selected tab, as "top" or "top/sub" (a tab's own sub-tab, when it is not its first). ui.tab_id and
  // view.sub_id name them.
  const subId = (label) => label.trim().toLowerCase().replace(/[^a-z0-9]+/g, "-").replace(/^-+|-+$/g, "");
  const visible = (el) => el.offsetParent !== null;

  function subTabs(tabs) {  // the tab buttons shown inside the selected top-level tab, by group
    const groups = new Map();
    [...tabs.querySelectorAll("button[role='tab']")].filter((b) => b.closest(".tabs") !== tabs && visible(b))
      .forEach((b) => {
        const group = b.closest(".tabs");
        if (!groups.has(group)) groups.set(group, []);
        groups.get(group).push(b);
      });
    return [...groups.values()];
  }

  function tabPath() {
    const tabs = document.getElementById("tabs");
    if (!tabs) return null;
    const top = [...tabs.querySelectorAll("button[role='tab']")].filter((b) => b.closest(".tabs") === tabs);
    const selected = top.find((b) => b.getAttribute("aria-selected") === "true") || top[0];
    if (!selected) return null;
    const group = subTabs(tabs)[0] || [];
    const sub = group.find((b) => b.getAttribute("aria-selected") === "true");
    const path = tabId(selected.textContent);
    return { path: sub && sub !== group[0] ? `${path}/${subId(sub.textContent)}` : path, first: tabId(top[0].textContent) };
  }

  // Written whenever a tab button's selection changes, whoever changed it: a click, the guided tour (the server
  // selects its step's tab), a link. Once the page has settled (100 ms), so a top-level tab's sub-tabs are shown.
  let tabTimer = null;
  new MutationObserver((mutations) => {
    if (!mutations.some((m) => m.target.closest && m.target.closest("#tabs"))) return;
    clearTimeout(tabTimer);
    tabTimer = setTimeout(() => { const tab = tabPath(); if (tab) set("tab", tab.path, tab.first); }, 100);
  }).observe(document.documentElement, { subtree: true, attributes: true, attributeFilter: ["aria-selected"] });

  // A link's sub-tab: the server selects the top-level tab; its sub-tab is clicked here once it is shown
  // (a click, so the sub-tab's own select events run as if the user had chosen it). Only after the server's
  // answer (`restored`): clicked before it, on the first tab's sub-tabs, the answer's tab selection would
  // arrive later and undo a tab the user chose meanwhile.
  function openSubTab(sub, deadline) {
    const tabs = document.getElementById("tabs");
    const button = tabs && subTabs(tabs).flat().find((b) => subId(b.textContent) === sub);
    if (button) button.click();
    else if (Date.now() < deadline) setTimeout(() => openSubTab(sub, deadline), 200);
  }
  const linked = new URL(window.location.href).searchParams.get("tab") || "";

  // What a link got wrong (playground/ui/view.py refused or could not find it) leaves the address bar, so the
  // next copy of the link is clean. A clamped number is rewritten by its component's change (`set`).
  function drop(keys) {
    if (!keys) return;
    const url = new URL(window.location.href);
    keys.split(",").forEach((key) => url.searchParams.delete(key));
    move(url);
  }

  // The server has restored the link's view: drop what it refused, then open the link's sub-tab.
  function restored(keys) {
    drop(keys);
    if (linked.includes("/") && !(keys || "").split(",").includes("tab")) openSubTab(linked.split("/")[1], Date.now() + 30000);
  }

  // Follow me (assets/follow.js, playground/ui/follow.py): the server has set the lecturer's view; the address
  // becomes the lecturer's link, and its sub-tab is opened as a link's is (the first one when it names none).
  // Lecture mode is the page's own, not the view's (the server leaves it as it is): the address keeps this
  // page's, never the lecturer's `lecture=1`.
  function follow(query) {
    if (typeof query !== "string" || !query) return;
    const url = new URL(window.location.href);
    const lecture = url.searchParams.get("lecture");
    url.search = query;
    url.searchParams.delete("lecture");
    if (lecture !== null) url.searchParams.set("lecture", lecture);
    move(url);
    const sub = (url.searchParams.get("tab") || "").split("/")[1];
    setTimeout(() => {
      const tabs = document.getElementById("tabs");
      const first = tabs && (subTabs(tabs)[0] || [])[0];
      if (sub) openSubTab(sub, Date.now() + 10000);
      else if (first && first.getAttribute("aria-selected") !== "true") first.click();
    }, 150);
  }

  // A workshop step's view (playground/ui/workshop_tab.py): the server has selected its top-level tab; its sub-tab
  // ("top/sub") is opened here, as a link's is.
  function open(path) {
    if (path && path.includes("/")) openSubTab(path.split("/")[1], Date.now() + 30000);
  }

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
  // sizes in px (font, title, note: the smallest annotation) and factors (line, marker, text: a point's label)
  // (tick: the smallest type of a category axis' labels, which are thinned out rather than made smaller)
  const LECTURE = { font: 20, title: 26, note: 16, tick: 12, line: 2.2, marker: 1.6, text: 1.35 };
  let lectureOn = false;

  function scale(gd) {
    if (!window.Plotly || !gd.layout || !gd.data) return;
    const marked = gd.dataset.lecture === "1";
    if (lectureOn === marked) return;
    if (lectureOn) {
      const legend = gd.layout.legend || {};
      gd._normal = { layout: { "font.size": (gd.layout.font || {}).size ?? null,
                               "title.font.size": ((gd.layout.title || {}).font || {}).size ?? null },
                     data: gd.data.map((t) => ({ line: (t.line || {}).width, marker: (t.marker || {}).size,
                                                 text: (t.textfont || {}).size })) };
      const bigger = { "font.size": LECTURE.font, "title.font.size": LECTURE.title };
      // notes in a small type of their own (a gate's name, "top-k cut") grow too; subplot titles (16 px) stay
      (gd.layout.annotations || []).forEach((a, i) => {
        const size = (a.font || {}).size;
        if (typeof size === "number" && size < LECTURE.note) {
          gd._normal.layout[`annotations[${i}].font.size`] = size;
          bigger[`annotations[${i}].font.size`] = LECTURE.note;
        }
      });
      // a legend laid out in a row under the plot would sit on the x axis' title once the type is larger: it
      // moves (legendPlaced), and back afterwards
      if (legend.orientation === "h" && (legend.y ?? 1) < 0) {
        const placed = legendPlaced(gd);
        Object.keys(placed).forEach((k) => { gd._normal.layout[k] = layoutValue(gd, k) ?? null; });
        Object.assign(bigger, placed);
      }
      // a 3D scene's tick numbers (PCA or t-SNE coordinates, meaningless on their own) would crowd it at this size
      if (gd._fullLayout && gd._fullLayout.scene) {
        ["xaxis", "yaxis", "zaxis"].forEach((axis) => {
          gd._normal.layout[`scene.${axis}.showticklabels`] = ((gd.layout.scene || {})[axis] || {}).showticklabels ?? null;
          bigger[`scene.${axis}.showticklabels`] = false;
        });
      }
      gd.dataset.lecture = "1";
      const drawn = window.Plotly.relayout(gd, bigger);
      gd.data.forEach((t, i) => {
        const update = {};
        if (t.type === undefined || t.type === "scatter" || t.type === "scattergl" || t.type === "scatter3d") {
          update["line.width"] = ((t.line || {}).width || 2) * LECTURE.line;
          if (typeof (t.marker || {}).size === "number") update["marker.size"] = t.marker.size * LECTURE.marker;
          if (typeof (t.textfont || {}).size === "number") update["textfont.size"] = t.textfont.size * LECTURE.text;
        }
        if (Object.keys(update).length) window.Plotly.restyle(gd, update, [i]);
      });
      fitAfterEachDraw(gd);
      Promise.resolve(drawn).then(() => fit(gd));
    } else if (gd._normal) {
      gd.dataset.lecture = "";
      window.Plotly.relayout(gd, gd._normal.layout);
      gd._normal.data.forEach((t, i) => {
        if (t.line !== undefined || t.marker !== undefined || t.text !== undefined) {
          window.Plotly.restyle(gd, { "line.width": t.line ?? null, "marker.size": t.marker ?? null,
                                      "textfont.size": t.text ?? null }, [i]);
        }
      });
    }
  }

  // Where a legend under the plot goes in lecture mode: to the right of the plot (which makes room for it), or,
  // when its widest entry would take more than LEGEND_SHARE of the figure's width there (Classify's ten methods,
  // each with its accuracy, took 60% of it and hid two entries), under everything in columns in the notes' type,
  // the figure taller by its rows so that the plot keeps its height.
  const LEGEND_SHARE = 0.3;
  const measure = document.createElement("canvas").getContext("2d");
  function legendPlaced(gd, below = false) {
    const full = gd._fullLayout || {}, width = gd.clientWidth || full.width || 0;
    const names = gd.data.filter((t) => t.showlegend !== false && t.name).map((t) => String(t.name));
    const widest = (size) => {  // px of the widest entry: its name, the symbol and the gaps
      measure.font = `${size}px ${(full.font || {}).family || "sans-serif"}`;
      return Math.max(0, ...names.map((name) => measure.measureText(name).width)) + 3 * size;
    };
    if (!below && widest(LECTURE.font) <= LEGEND_SHARE * width) {
      return { "legend.orientation": "v", "legend.x": 1.02, "legend.y": 1, "legend.xanchor": "left",
               "legend.yanchor": "top" };
    }
    const plot = (full._size || {}).w || width, columns = Math.max(1, Math.floor(plot / widest(LECTURE.note)));
    const rows = Math.ceil(names.length / columns);
    return { "legend.orientation": "h", "legend.x": 0, "legend.xanchor": "left", "legend.yref": "container",
             "legend.y": 0, "legend.yanchor": "bottom", "legend.entrywidthmode": "fraction",
             "legend.entrywidth": 1 / columns, "legend.font.size": LECTURE.note,
             height: (full.height || 450) + Math.ceil(rows * LECTURE.note * 1.6) };
  }

  // The figure's own value of a layout key ("legend.font.size"), as relayout names it
  const layoutValue = (gd, key) => key.split(".").reduce((at, part) => (at == null ? undefined : at[part]), gd.layout);

  // Fitted to the figure as drawn, once the larger type is in, and again after every redraw (a resize: a
  // projector's window), changing only what differs:
  // - a category axis with one label per row (a heatmap's tokens, a bar chart's words) would lose every other label
  //   to the larger type: each label gets the largest type up to LECTURE.font that its row holds (a line takes 1.25
  //   times its type; labels at an angle have more room), and every row is labelled. Rows too thin for
  //   LECTURE.tick are labelled every few rows in that type (Generation's 128 tokens of attention had a label on
  //   every other row in 8 px type, unreadable from a hall). Upright labels on x are plotly's to space out.
  // - a long title would run past the figure's right edge: its type shrinks to fit (and grows back, up to
  //   LECTURE.title, when the figure widens).
  function fit(gd) {
    if (!lectureOn || gd.dataset.lecture !== "1" || !gd._fullLayout || !gd._normal) return;
    if (drawnForAnotherBox(gd) && !gd._boxGaveUp) {
      gd.dataset.fitted = "";
      followBox(gd);   // fits it again once it is drawn for its box
      return;
    }
    const update = {}, keep = (key, value, was) => {
      if (!(key in gd._normal.layout)) gd._normal.layout[key] = was ?? null;  // the server's value, once
      if (value !== was) update[key] = value;
    };
    Object.keys(gd._fullLayout).filter((name) => /^[xy]axis\d*$/.test(name)).forEach((name) => {
      const ax = gd._fullLayout[name], n = (ax._categories || []).length;
      if (ax.type !== "category" || !ax.showticklabels || !ax._length || !n) return;
      const angle = name[0] === "y" ? 90 : (typeof ax.tickangle === "number" ? Math.abs(ax.tickangle) : 0);
      if (!angle) return;
      const room = (ax._length / n) * Math.sin((angle * Math.PI) / 180);   // px of a row across its label
      const fits = Math.min(LECTURE.font, Math.floor(room / 1.25));
      const size = fits >= LECTURE.tick ? fits : LECTURE.tick, every = Math.ceil((1.25 * size) / room);
      const own = gd.layout[name] || {}, was = (own.tickfont || {}).size;
      // a pixel either way is kept: the margins follow the labels' size, and the axes' lengths the margins
      keep(`${name}.tickfont.size`, typeof was === "number" && Math.abs(size - was) <= 1 ? was : size, was);
      keep(`${name}.dtick`, every, own.dtick);
    });
    // - a legend taller than the plot scrolls, its last entries out of sight (Classify's curves, ten of them): it
    //   goes under the figure in columns (legendPlaced)
    const legend = gd._fullLayout.legend;
    if (gd._fullLayout.showlegend && legend && legend._height > legend._effHeight + 1) {
      Object.entries(legendPlaced(gd, true)).forEach(([key, value]) => keep(key, value, layoutValue(gd, key)));
    }
    const title = gd.querySelector(".gtitle"), svg = gd.querySelector(".main-svg");
    if (title && svg && title.getBBox().width > 0) {
      const box = title.getBoundingClientRect(), right = svg.getBoundingClientRect().right - 6;
      const size = ((gd.layout.title || {}).font || {}).size || LECTURE.title;
      const natural = (box.width * LECTURE.title) / size;  // its width in LECTURE.title type
      const fits = Math.max(14, Math.min(LECTURE.title, Math.floor((LECTURE.title * (right - box.left)) / natural)));
      // smaller while it runs past the edge; larger again only by a clear margin (no see-saw of a pixel)
      const next = box.right > right ? Math.max(14, Math.min(fits, size - 1))
        : fits === LECTURE.title && box.left + natural <= right ? LECTURE.title : fits >= size + 2 ? fits - 1 : size;
      keep("title.font.size", next, size);
    }
    // data-fitted: "1" once nothing is left to change (the browser tests wait for it); never more than a few
    // rounds in a row, whatever the fonts measure
    const changes = Object.keys(update).length && (gd._fitRounds = (gd._fitRounds || 0) + 1) <= 6;
    if (!changes) gd._fitRounds = 0;
    gd.dataset.fitted = changes ? "" : "1";
    if (changes) window.Plotly.relayout(gd, update);
  }

  function fitAfterEachDraw(gd) {
    gd.dataset.fitted = "";
    if (gd._fitting || typeof gd.on !== "function") return;
    gd._fitting = true;
    gd.on("plotly_afterplot", () => {
      gd.dataset.fitted = "";
      clearTimeout(gd._fitTimer);
      gd._fitTimer = setTimeout(() => fit(gd), 100);
    });
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

  // Every figure follows its box's width. Plotly's own handler of the window's resize measured some figures while
  // the page was still laying out (panels side by side that lecture mode stacks): a figure drawn at 1,216 px in a
  // 1280 px window stayed 1,216 px wide when the window became a 1920 px projector's (the Contextual view, Inside one
  // head, SFT's curve). Each figure's box is observed; a figure narrower or wider than its box is resized to it.
  const drawnForAnotherBox = (gd) => {
    const own = gd.layout || {};
    const full = gd._fullLayout;
    return !own.width && own.autosize !== false && !!full && Math.abs(gd.clientWidth - full.width) > 1;
  };
  // Checked once the box has rested, after plotly's own resize (100 ms after the window's), and again after each
  // resize of ours, a few times at most; then lecture mode's type is fitted to the figure as it is drawn.
  function followBox(gd, tries = 3) {
    clearTimeout(gd._boxTimer);
    gd._boxTimer = setTimeout(() => {
      if (!window.Plotly || !gd._fullLayout || !gd.offsetParent) return;
      if (!drawnForAnotherBox(gd) || tries <= 0) {
        gd._boxGaveUp = drawnForAnotherBox(gd);
        fit(gd);
        return;
      }
      Promise.resolve(window.Plotly.Plots.resize(gd)).then(() => followBox(gd, tries - 1), () => {});
    }, 150);
  }
  const boxes = new ResizeObserver((entries) => entries.forEach(({ target }) => {
    target._boxGaveUp = false;
    followBox(target);
  }));
  const observeBoxes = () => document.querySelectorAll(".js-plotly-plot:not([data-boxed])").forEach((gd) => {
    gd.dataset.boxed = "1";
    boxes.observe(gd);
  });

  let pending = false;
  new MutationObserver(() => {
    if (pending) return;
    pending = true;
    setTimeout(() => { pending = false; observeBoxes(); if (lectureOn) scaleAll(); }, 200);
  }).observe(document.documentElement, { childList: true, subtree: true });

  // --- lecture mode: the step walked stays on screen over its view ------------------------------------
  // On a 1280 x 720 projector the tour's or a workshop's step (its text, Previous, Next) sits above the tabs and the
  // step's view below the fold: the lecturer scrolled down to show it and back up for Next, at every step. The panel
  // walked is marked (`walking`); in lecture mode it sticks to the window's top from its step's text on (what is
  // above the text scrolls away: --stuck-top, style.css), and the window scrolls so that the view (`target`, or the
  // open tab's innermost panel) starts just under it: again for WALK_MS while the view is laid out, unless the user
  // scrolls or clicks meanwhile.
  const WALK_MS = 4000;
  let walkTimer = null, walkUntil = 0;
  // the user's own scroll or click ends it (the click on Next comes before its step's walk)
  ["wheel", "touchmove", "keydown", "pointerdown"].forEach((type) => window.addEventListener(type, () => {
    walkUntil = 0;
  }, { passive: true }));
  const innermostPanel = () => [...document.querySelectorAll("#tabs [role='tabpanel']")].filter(visible).pop();

  function walk(step, target) {
    const text = document.querySelector(step), panel = text && text.closest("#tour, #workshop");
    if (!panel) return;
    document.querySelectorAll("#tour, #workshop").forEach((p) => p.classList.toggle("walking", p === panel));
    clearTimeout(walkTimer);
    walkUntil = Date.now() + WALK_MS;
    const place = () => {
      const view = (target && document.querySelector(target)) || innermostPanel();
      if (lectureOn && view && visible(view) && visible(text)) {
        const above = text.getBoundingClientRect().top - panel.getBoundingClientRect().top;
        panel.style.setProperty("--stuck-top", `${-Math.round(above)}px`);
        const stuck = panel.getBoundingClientRect().height - above;   // what stays of the panel on screen
        const y = Math.round(window.scrollY + view.getBoundingClientRect().top - stuck - 8);
        if (Math.abs(y - window.scrollY) > 2) window.scrollTo(0, y);
      }
      if (Date.now() < walkUntil) walkTimer = setTimeout(place, 250);   // the view may still be laid out
    };
    place();
  }

  window.playgroundView = { set, copy, lecture, drop, restored, follow, open, walk };
})();
