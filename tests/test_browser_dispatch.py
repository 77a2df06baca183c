"""Gradio's frontend as the app serves it (ui/patches.fix_frontend): a listener triggered again while it runs runs
once more, alone (and a component's loading status is handed over only when it changed). Gradio 6.31's own bundle
re-sent the whole event after a listener that had waited, so two listeners that take different times re-sent each
other for ever (issue #31: a page that opened a link with a selected word never stopped computing)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import gradio as gr
import pytest
from starlette.middleware import Middleware

from playground.ui import patches
from playground.ui.pagecache import CachedPage
from tests.conftest import free_port

BUNDLE = patches.shipped("/assets/Blocks-")
CORE = patches.shipped("/assets/core-")


def served(path: Path) -> str:
    return patches.fix_frontend(f"/assets/{path.name}", path.read_bytes()).decode()


def method(source: str, start: str, next_member: str) -> str:
    """One method of a minified class, as its text: from its name to the next member's."""
    begin = source.index(start)
    return source[begin:source.index(next_member, begin)]


def test_gradios_files_are_served_with_their_fixes():
    """A new Gradio whose files no longer have the fixed forms fails here (then check the dispatch, the page's
    opening and the find by id again)."""
    bundle, core = served(BUNDLE).encode(), served(CORE).encode()
    assert patches._AGAIN_WHOLE not in bundle and bundle.count(patches._AGAIN_ALONE) == 2
    assert patches._EVERY_STATUS not in bundle and bundle.count(patches._CHANGED_STATUS) == 1
    assert patches._STATE_FIRST not in bundle and bundle.count(patches._ARGS_FIRST) == 1
    assert patches._TREE_BUILT not in core and core.count(patches._TREE_BUILT_AFRESH) == 1
    assert patches._SCAN_EVERY_DEPENDENCY not in core and core.count(patches._LOOK_UP_THE_INDEX) == 1
    assert patches._WALK_PER_LOOKUP not in core and core.count(patches._KEPT_PATHS) == 1
    other = b"this.queue.delete(r.id),this.dispatch(e)"
    assert patches.fix_frontend("/assets/Other-abc.js", other) == other


# Gradio's method and the fixed one, each the body of a class of its own, run on the same values in the browser
SAME_ATTACHED_EVENTS_JS = """([gradios, fixed, dependencies, ids]) => {
  const [before, after] = [gradios, fixed].map((text) => new (eval(`(class { ${text} })`))());
  const attached = (tree, id) => tree.find_attached_events({id, props: {shared_props: {}}}, dependencies)
    .props.shared_props.attached_events;
  after._attached = null;  // as the fixed postprocess does before its walk
  return ids.map((id) => [id, attached(before, id), attached(after, id)]);
}"""
SAME_EVENT_ARGS_JS = """async ([gradios, fixed, cases]) => {
  const run = async (text, [id, args, state]) => {
    const made = [], blocks = new (eval(`(class { ${text} })`))();
    blocks.get_state_cb = async (i) => (made.push(['get', i]), state);
    blocks.update_state_cb = async (i, values) => made.push(['update', i, values]);
    const undo = await blocks.set_event_args(id, args);
    await undo();
    return made.filter(([what]) => what === 'update');
  };
  const out = [];
  for (const c of cases) out.push([JSON.stringify(await run(gradios, c)), JSON.stringify(await run(fixed, c))]);
  return out;
}"""


def test_the_pages_opening_attaches_every_components_events_as_gradios_own_did(browser):
    """The page's opening without its two quadratic walks (ui/patches.py) hands every component of the app the same
    events, in the same order, and sets the same event arguments, as Gradio's own methods did: both run in the
    browser on the app's own dependencies, with made-up ones for the cases the app does not have (two events of a
    dependency on one component, an empty event name, event arguments)."""
    import app

    config = app.demo.get_config_file()
    ids = [c["id"] for c in config["components"]]
    one, two = max(ids) + 1, max(ids) + 2  # components of the made-up dependencies only
    made_up = [{"targets": [[one, "change"], [one, "input"], [two, ""]]}, {"targets": [[two, "click"], [one, "blur"]]}]
    dependencies = [{"targets": d["targets"]} for d in config["dependencies"]] + made_up
    ids += [one, two]
    gradios = method(CORE.read_text(), "find_attached_events(e,t){", "traverse(e,t){")
    fixed = method(served(CORE), "find_attached_events(e,t){", "traverse(e,t){")
    args = [[7, {}, {"value": 1}], [7, {"value": 2}, {"value": 1}], [7, {"value": 2}, None], [7, {}, None]]
    context = browser.new_context()
    try:
        page = context.new_page()
        attached = page.evaluate(SAME_ATTACHED_EVENTS_JS, [gradios, fixed, dependencies, ids])
        event_args = page.evaluate(SAME_EVENT_ARGS_JS, [method(BUNDLE.read_text(), "async set_event_args(e,t){",
                                                               "async cancel(e){"),
                                                        method(served(BUNDLE), "async set_event_args(e,t){",
                                                               "async cancel(e){"), args])
    finally:
        context.close()
    assert [(i, a) for i, a, b in attached if a != b] == [], "the fixed walk attaches other events"
    assert sum(bool(a) for _, a, _ in attached) > 100 and attached[-2][1] == ["change", "blur"]  # not vacuous
    assert all(a == b for a, b in event_args), event_args
    assert event_args[1][0] != "[]"  # a dependency with arguments still sets them


# Gradio's find by id (a walk of the tree) and the fixed one (kept paths), on the app's own tree, then on that tree
# changed as a re-render changes it: each finds the same node object (or none) for every id, known or not
SAME_NODE_JS = """([gradios, fixed, layout]) => {
  const [before, after] = [gradios, fixed].map((text) => new Function(`${text}; return Z;`)());
  const root = structuredClone(layout);
  let next = 0;
  const walk = (node) => { next = Math.max(next, node.id + 1); (node.children || []).forEach(walk); };
  walk(root);
  const made = (depth) => ({id: next++, children: depth ? [made(depth - 1), made(0)] : undefined});
  const differ = [], found = {};
  const compare = (label, from = root, unknown = false) => {  // an unknown id walks the tree afresh: asked apart
    for (const id of unknown ? [-1, next, next + 1] : Array.from({length: next}, (_, i) => i)) {
      const a = before(from, id), b = after(from, id);
      if (a !== b) differ.push([label, id]);
      found[label] = (found[label] || 0) + (a !== null);
    }
  };
  const inner = [];  // nodes with children below the root, deepest last
  const collect = (node) => (node.children || []).forEach((c) => { if (c.children?.length) inner.push(c); collect(c); });
  collect(root);
  compare("the app's tree");
  compare('again, from the kept paths');
  inner[3].children = [made(2), made(1)];  // a part re-rendered: its children new nodes with new ids
  compare('a part re-rendered');
  const moved = inner[inner.length - 1].children.pop();  // a node moved to another parent
  inner[1].children.unshift(moved);
  compare('a node moved');
  inner[1].children.splice(2, 1);  // a node removed
  compare('a node removed');
  inner[2].children[0] = made(1);  // one node replaced in place
  compare('a node replaced');
  compare('from a node other than the root', inner[1]);
  compare('ids not in the tree', root, true);
  return {differ, found};
}"""


def test_a_component_is_found_as_gradios_walk_found_it(browser):
    """The fixed find by id (kept paths, ui/patches.py) gives the same node as Gradio's walk for every id of the
    app's own tree, and after the changes a re-render makes (new children, a node moved, removed or replaced)."""
    import app

    layout = app.demo.get_config_file()["layout"]
    start = "function Z(e,t){"
    gradios, fixed = (method(text, start, "function Ie(e,t){") for text in (CORE.read_text(), served(CORE)))
    context = browser.new_context()
    try:
        result = context.new_page().evaluate(SAME_NODE_JS, [gradios, fixed, layout])
    finally:
        context.close()
    assert result["differ"] == [], result["differ"][:10]
    assert result["found"]["the app's tree"] > 1000 and len(result["found"]) == 8, result["found"]  # not vacuous


@pytest.fixture(scope="module")
def two_listeners():
    """A page with one button whose click two always_last listeners follow, one slower than the other; every call's
    start is recorded."""
    calls: list[tuple[str, float]] = []
    lock = threading.Lock()

    def listener(name: str, seconds: float):
        def run(count):
            with lock:
                calls.append((name, time.monotonic()))
            time.sleep(seconds)
            return count
        return run

    with gr.Blocks() as demo:
        button = gr.Button("Go", elem_id="go")
        count = gr.Number(0, elem_id="count")
        quick, slow = gr.Number(elem_id="quick"), gr.Number(elem_id="slow")
        button.click(listener("quick", 0.6), count, quick, trigger_mode="always_last")
        button.click(listener("slow", 1.2), count, slow, trigger_mode="always_last")
    port = free_port()
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, quiet=True,
                app_kwargs={"middleware": [Middleware(CachedPage, blocks=demo)]})
    yield f"http://127.0.0.1:{port}/", calls
    demo.close()


def test_a_listener_that_waited_runs_once_more_alone(browser, two_listeners):
    url, calls = two_listeners
    context = browser.new_context()
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#go")
        page.click("#go")
        page.wait_for_timeout(150)
        page.click("#go")  # while the first click's listeners run: each runs once more, when it ends
        started = time.monotonic()
        while len(calls) < 4 and time.monotonic() - started < 60:  # the four runs that must come
            page.wait_for_timeout(50)
        # then quiet for twice the slow listener's time: Gradio's own sent the next run as soon as one ended
        while calls and time.monotonic() - max(t for _, t in calls) < 2 * 1.2 + 0.5:
            page.wait_for_timeout(50)
    finally:
        context.close()
    names = [name for name, _ in calls]
    assert sorted(names) == ["quick", "quick", "slow", "slow"], names  # Gradio's own: quick, slow, quick, ... for ever
