// Small behaviours of the page's controls.
// - Enter in a slider's number box applies the number (Gradio applies it only when the box loses focus).
// - A Stop button (elem_classes "stop-button") cancels an event, which Gradio reports to the event's failure
//   handlers like an error. The time of the last Stop click, noted before Gradio sees the click, lets those
//   handlers (playground/ui/demo.py clear_on_failure) keep what was generated until then.
// - A notice already on screen is not shown twice: one change of a control runs several views, and each may say
//   the same thing (our GPT leaves out the same characters in each). Gradio 6 groups the notices of one kind in
//   one toast ("Warning (3)"): a message already in its group is hidden, with its separator, and the count is of
//   the messages shown.
// - A dropdown's label cut with "…" (style.css: it ends before the arrow) is whole in its tooltip.
(() => {
  "use strict";
  const seen = (toast) => [...document.querySelectorAll("[data-testid='toast-body']")].some((other) =>
    other !== toast && other.style.display !== "none" && other.innerText === toast.innerText);
  function once(group) {
    const texts = new Set();
    const items = [...group.querySelectorAll(".toast-message-item")];
    items.forEach((item) => {
      const again = texts.has(item.innerText);
      texts.add(item.innerText);
      item.style.display = again ? "none" : "";
      const separator = item.previousElementSibling;
      if (separator && separator.classList.contains("toast-separator")) separator.style.display = again ? "none" : "";
    });
    const count = group.querySelector(".toast-count"), shown = items.length ? `(${texts.size})` : null;
    if (count && shown && texts.size < items.length && count.textContent !== shown) count.textContent = shown;
  }
  new MutationObserver((changes) => changes.forEach((change) => {
    const group = change.target.closest && change.target.closest("[data-testid='toast-body']");
    if (group) once(group);
    change.addedNodes.forEach((node) => {
      if (node.nodeType !== 1) return;
      const toasts = node.matches("[data-testid='toast-body']") ? [node] : node.querySelectorAll("[data-testid='toast-body']");
      toasts.forEach((toast) => { if (seen(toast)) toast.style.display = "none"; else once(toast); });
    });
  })).observe(document.body, { childList: true, subtree: true });
  document.addEventListener("mouseover", (event) => {
    const box = event.target.closest && event.target.closest(".secondary-wrap");
    const input = box && box.querySelector("input[role='combobox']");
    if (input) input.title = input.scrollWidth > input.clientWidth ? input.value : "";
  });
  document.addEventListener("keydown", (event) => {
    const box = event.target;
    if (event.key === "Enter" && box.matches && box.matches("input[type='number']") && box.closest(".block")
        && box.closest(".block").querySelector("input[type='range']")) box.blur();
  }, true);
  document.addEventListener("click", (event) => {
    if (event.target.closest && event.target.closest(".stop-button")) window.playgroundStoppedAt = Date.now();
  }, true);
})();
