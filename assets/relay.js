// The tabs follow a real change of the shared sentence or the selected word, once (playground/ui/common.py,
// Shared.changed). Gradio 6.31's page fires a state component's change again, with the value it already had, after
// later answers, sometimes for ever; each component's change calls `changed` here, which passes it on as the
// relay's `select` only when the value differs from the one passed on last.
(() => {
  "use strict";
  const triggers = {};  // name -> the relay component's trigger
  const last = {};      // name -> the value relayed last (JSON)
  const waiting = {};   // name -> a value that came before its relay was mounted

  function relay(name, value) {
    const key = JSON.stringify(value);
    if (last[name] === key) return;
    last[name] = key;
    triggers[name]("select", { value });
  }

  function changed(name, value) {
    if (triggers[name]) relay(name, value);
    else waiting[name] = value;
  }

  function register(name, trigger) {
    triggers[name] = trigger;
    if (name in waiting) {
      relay(name, waiting[name]);
      delete waiting[name];
    }
  }

  window.playgroundRelay = { changed, register };
})();
