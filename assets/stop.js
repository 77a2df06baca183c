// A Stop button (elem_classes "stop-button") cancels an event, which Gradio reports to the event's failure
// handlers like an error. The time of the last Stop click, noted before Gradio sees the click, lets those handlers
// (playground/ui/demo.py clear_on_failure) keep what was generated until then.
(() => {
  "use strict";
  document.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest(".stop-button")) window.playgroundStoppedAt = Date.now();
  }, true);
})();
