"""The word selected in the shared sentence, followed through every tab.

A selection is a span of characters of the sentence (Python string indices, so an emoji of several
code points is several characters, as in the tokenizers' offsets). Each view maps it to what it shows:
the tokens over those characters, the time steps that read them, the rows and columns of the
attention heatmap, the position to mask.
"""

from __future__ import annotations

import html

from playground.text import MASK, words


def parse(focus: str | None, text: str) -> tuple[int, int] | None:
    """"start:end" as a span of `text`, or None when empty, malformed or not a word of this text (a
    selection left over from an earlier sentence)."""
    try:
        start, end = (int(part) for part in str(focus or "").split(":"))
    except ValueError:
        return None
    return (start, end) if any((s, e) == (start, end) for s, e, _ in words(text)) else None


def toggle(text: str, index: int, current: str | None) -> str:
    """The focus after a click on the `index`-th word: that word, or none when it was already selected."""
    units = words(text)
    if not 0 <= index < len(units):
        return ""
    start, end, _ = units[index]
    return "" if parse(current, text) == (start, end) else f"{start}:{end}"


def masked(text: str, span: tuple[int, int] | None) -> str:
    """The sentence with the selected word replaced by [MASK]."""
    return text if span is None else text[:span[0]] + MASK + text[span[1]:]


def prefix(text: str, span: tuple[int, int] | None) -> str:
    """The sentence up to and including the selected word: a prompt for "what comes next?"."""
    return text if span is None else text[:span[1]]


CHIPS_SHOWN = 40  # chips shown at once; a long text's other words wait behind "N more words" (5,000 characters
                 # made ~1,000 chips, which pushed the tabs 3,000 px down)


def chips_html(text: str, span: tuple[int, int] | None) -> str:
    """The sentence's words as chips to click; the selected one marked. Past CHIPS_SHOWN words, the rest are in a
    box that opens (open when the selected word is among them) and scrolls."""
    units = words(text)
    if not units:
        return '<div class="chips chips-empty">Type a sentence: its words appear here to select one.</div>'
    # buttons for the keyboard too: one tab stop (the selected chip, else the first), the arrow keys move between
    # them, Enter or Space selects (CHIP_CLICK_JS)
    stop = next((i for i, (s, e, _) in enumerate(units) if (s, e) == span), 0)
    chips = [f'<span class="chip{" on" if (s, e) == span else ""}" data-i="{i}" data-s="{s}" data-e="{e}" '
             f'role="button" tabindex="{0 if i == stop else -1}" aria-pressed="{str((s, e) == span).lower()}" '
             f'title="select “{html.escape(w)}” in every tab">{html.escape(w)}</span>'
             for i, (s, e, w) in enumerate(units)]
    more = ""
    if len(units) > CHIPS_SHOWN:
        later = span is not None and span[0] >= units[CHIPS_SHOWN][0]
        more = (f'<details class="chips-more" data-key="{len(text)}:{len(units)}"{" open" if later else ""}>'
                f'<summary>{len(units) - CHIPS_SHOWN:,} more words</summary>'
                f'<div class="chips-rest">{"".join(chips[CHIPS_SHOWN:])}</div></details>')
    return (f'<div class="chips"><span class="chips-label">Select a word:</span>{"".join(chips[:CHIPS_SHOWN])}'
            f'{more}</div>')


# A click on a chip selects its word. A long text's other words (chips_html) stay open while the text is the same
# (selecting one redraws the chips), the selected one scrolled into view in their box.
CHIP_CLICK_JS = """
element.addEventListener('click', (event) => {
  const chip = event.target.closest('.chip[data-i]');
  if (chip) trigger('select', {index: +chip.dataset.i, value: chip.textContent});
});
element.addEventListener('keydown', (event) => {
  const chip = event.target.closest('.chip[data-i]');
  if (!chip) return;
  if (event.key === 'Enter' || event.key === ' ') {
    event.preventDefault();
    trigger('select', {index: +chip.dataset.i, value: chip.textContent});
  }
  const step = {ArrowRight: 1, ArrowLeft: -1}[event.key];
  const next = step && element.querySelector(`.chip[data-i="${+chip.dataset.i + step}"]`);
  if (next) { event.preventDefault(); next.focus(); }
});
let opened = null;  // the data-key of the text whose other words were opened by hand
element.addEventListener('click', (event) => {
  const more = event.target.closest('details.chips-more');
  if (more && event.target.closest('summary')) opened = more.open ? null : more.dataset.key;  // before it toggles
});
new MutationObserver(() => {
  const more = element.querySelector('details.chips-more');
  if (!more) return;
  if (opened === more.dataset.key && !more.open) more.open = true;
  const box = more.querySelector('.chips-rest'), on = more.querySelector('.chip.on');
  if (more.open && box && on && (on.offsetTop < box.scrollTop || on.offsetTop > box.scrollTop + box.clientHeight)) {
    box.scrollTop = on.offsetTop - box.clientHeight / 2;
  }
}).observe(element, {childList: true, subtree: true, attributes: true, attributeFilter: ['open', 'class']});
"""
