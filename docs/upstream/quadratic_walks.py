"""Repro: Gradio 6's page does per component what it could do once, so opening and updating a page is quadratic.

Four places of Gradio 6.31's frontend (js/core/src/init.svelte.ts and js/core/src/dependency.ts; shipped minified
as templates/frontend/assets/core-*.js and Blocks-*.js), each run here on the installed Gradio's own minified code:

1. `AppTree.find_attached_events` runs for every node of the tree and scans every dependency's targets for it:
   nodes x dependencies scans when the page opens.
2. `find_node_by_id` (minified `Z`) walks the tree from its root for every `update_state` / `get_state`: each
   status and each value an event hands a component costs a walk of the whole tree.
3. `DependencyManager.set_event_args` fetches the component's state (a walk, or a scan of the component payload)
   before it looks whether there are event arguments at all; it is called for every target of every dependency
   when the page opens, and almost no dependency has any.
4. `update_loading_stati_state` hands every loading status to its component again after every status message of
   every event, changed or not (and each hand-over is an `update_state`: item 2's walk).

    python docs/upstream/quadratic_walks.py             # the counts, in headless Chromium (Playwright)
    python docs/upstream/quadratic_walks.py --serve 800  # serve an app of 800 components to profile its opening

Expected: work proportional to the page's size. Gradio 6.31: 1 and 2 grow with its square, 3 and 4 with the size
times the number of dependencies or messages. On a page of ~1,060 components and ~430 dependencies, 1 and 3 were
1.2 s of a 2.4 s opening (Chromium's profile) and 2 about 15% of the main thread when one input changes every tab.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import gradio as gr

# Each method of the minified files, from its start to the next member's (Gradio 6.31's names and order)
METHODS = {"find_attached_events": ("core", "find_attached_events(e,t){", "traverse(e,t){"),
           "Z": ("core", "function Z(e,t){", "function Ie(e,t){"),
           "set_event_args": ("Blocks", "async set_event_args(e,t){", "async cancel(e){"),
           "update_loading_stati_state": ("Blocks", "async update_loading_stati_state(){",
                                          "dispatch_state_change_events(e){")}

# The four methods, each run on `n` components, counting the work it does (not its time: the counts are exact)
COUNT_JS = """async ([m, n]) => {
  let scans = 0, reads = 0, states = 0, handed = 0;
  class Targets extends Array { find(f) { scans++; return super.find(f); } }
  const tree = new (eval(`(class { ${m.find_attached_events} })`))();
  const deps = Array.from({length: n}, (_, i) => ({targets: Targets.from([[i, 'change']])}));
  for (let i = 0; i < n; i++) tree.find_attached_events({id: i, props: {shared_props: {}}}, deps);

  const leaf = (id) => ({get id() { reads++; return id; }});
  const root = {get id() { reads++; return -1; }, children: Array.from({length: n}, (_, i) => leaf(i))};
  const find = new Function(`${m.Z}; return Z;`)();
  for (let i = 0; i < n; i++) if (find(root, i) !== root.children[i]) throw new Error('Z found another node');

  const manager = new (eval(`(class { ${m.set_event_args} })`))();
  manager.get_state_cb = async () => (states++, {value: 1});
  manager.update_state_cb = async () => {};
  for (let i = 0; i < n; i++) await manager.set_event_args(i, {});

  const stati = new (eval(`(class { ${m.update_loading_stati_state} })`))();
  stati.update_state_cb = async () => { handed++; };
  stati.loading_stati = {current: Object.fromEntries(Array.from({length: n}, (_, i) => [i, {status: 'complete'}]))};
  for (let message = 0; message < 3; message++) await stati.update_loading_stati_state();  // nothing changed
  return {scans, reads, states, handed};
}"""


def frontend_files() -> dict[str, str]:
    """The installed Gradio's two minified files these methods are in: {"Blocks": text, "core": text}."""
    assets = Path(gr.__file__).parent / "templates" / "frontend" / "assets"
    return {name: next(assets.glob(f"{name}-*.js")).read_text(encoding="utf-8") for name in ("Blocks", "core")}


def methods(files: dict[str, str]) -> dict[str, str]:
    """Each method of METHODS as its text in `files` (a ValueError when a Gradio has it no longer)."""
    found = {}
    for name, (file, start, end) in METHODS.items():
        text = files[file]
        begin = text.index(start)
        found[name] = text[begin:text.index(end, begin)]
    return found


def counts(page, files: dict[str, str], n: int) -> dict[str, int]:
    """The work of each method on `n` components (a Playwright page evaluates it): dependency scans, node id reads,
    state fetches, status hand-overs (three status messages in which nothing changed)."""
    return page.evaluate(COUNT_JS, [methods(files), n])


def serve(n: int) -> None:
    """An app of `n` textboxes, each with a change listener into one output: open it with the profiler on."""
    with gr.Blocks() as demo:
        out = gr.Textbox(label="last change")
        for i in range(n):
            gr.Textbox(label=f"box {i}").change(lambda v: v, gr.State(i), out)
    demo.launch()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--serve", type=int, metavar="N", help="serve an app of N components instead")
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    from playwright.sync_api import sync_playwright

    files = frontend_files()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=shutil.which("chromium") or shutil.which("chromium-browser"), args=["--no-sandbox"])
        try:
            page = browser.new_context().new_page()
            table = {n: counts(page, files, n) for n in (100, 200, 400)}
        finally:
            browser.close()
    print(f"Gradio {gr.__version__}: the work of each method for n components")
    for n, row in table.items():
        print(f"  n={n:>4}: " + ", ".join(f"{k} {v:,}" for k, v in row.items()))
    grows = table[400]["scans"] > 12 * table[100]["scans"] and table[400]["reads"] > 12 * table[100]["reads"]
    redundant = table[400]["states"] >= 400 and table[400]["handed"] >= 3 * 400
    print("FAULT PRESENT: quadratic walks and redundant work" if grows or redundant else "Not reproduced")
    return 0 if grows or redundant else 1


if __name__ == "__main__":
    sys.exit(main())
