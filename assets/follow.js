// Follow me, the lecturer's side (playground/ui/follow.py): while "Follow me" is ticked, the page's view (its
// address's query string, which assets/view.js rewrites on every change) is sent to the server 150 ms after the
// last change, and every HEARTBEAT_MS while nothing changes (so the students' pages know the lecturer is there).
(() => {
  "use strict";
  const DEBOUNCE_MS = 150;
  const HEARTBEAT_MS = 5000;
  let trigger = null;
  let leading = false;
  let pending = null;
  let heartbeat = null;

  function publish() {
    pending = null;
    if (leading && trigger) trigger("select", { index: 0, value: window.location.search });  // gr.SelectData needs an index
  }

  function moved() {
    if (!leading) return;
    clearTimeout(pending);
    pending = setTimeout(publish, DEBOUNCE_MS);
  }

  function lead(on) {
    leading = !!on;
    clearInterval(heartbeat);
    heartbeat = leading ? setInterval(publish, HEARTBEAT_MS) : null;
    if (leading) publish();
  }

  function register(fn) { trigger = fn; }

  window.playgroundFollow = { register, moved, lead };
})();
