"""The faults of Gradio 6.31 that the app's patches work around, shown on Gradio as it ships (docs/upstream.md): each
test passes while the fault is there, with the minimal repro of its drafted upstream report (docs/upstream/*.py).
When one fails, Gradio changed there: see whether it fixed the fault (the draft says what was expected), then drop
the patch and its check (ui/patches.py, ui/gradio_check.PATCHES, docs/upstream.md), or update them."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest
from gradio import component_meta
from gradio.blocks import Blocks
from gradio.state_holder import SessionState, StateHolder

from playground.ui import patches
from playground.ui.gradio_check import original

UPSTREAM = Path(__file__).resolve().parent.parent / "docs" / "upstream"
REPLACED = ((SessionState, "__init__"), (SessionState, "__setitem__"), (SessionState, "_update_config"),
            (SessionState, "_update_value_in_config"), (StateHolder, "update"), (Blocks, "postprocess_data"),
            (Blocks, "close"), (component_meta, "create_or_modify_pyi"))


def repro(name: str):
    """docs/upstream/<name>.py, the minimal repro of a drafted upstream report, as a module."""
    spec = importlib.util.spec_from_file_location(f"upstream_{name}", UPSTREAM / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def stock(monkeypatch):
    """Gradio as it ships, for one test: what the app replaces (if this process applied its patches) set back to
    Gradio's own."""
    for owner, name in REPLACED:
        monkeypatch.setattr(owner, name, original(owner, name))
    monkeypatch.setattr(component_meta, "inspect", inspect)


# -- the server (the other drafts under docs/upstream/)

def test_making_a_component_class_rewrites_its_stub_from_its_parsed_source(stock):
    """docs/upstream/pyi-at-import.md: every component class made (gradio's ~80 at its import) calls
    create_or_modify_pyi, which reads and parses the class's source file."""
    assert repro("pyi_at_import").calls_per_component_class() == 1
    assert "source_file.read_text(" in inspect.getsource(component_meta.create_or_modify_pyi)


def test_a_session_copies_every_components_config_without_a_deep_link_button(stock):
    """docs/upstream/session-config-copies.md."""
    copies = repro("session_config_copies")
    demo, fn = copies.app(20)
    session, _ = copies.new_session(demo)
    assert len(session.config_values) >= 20
    assert copies.kept_after_an_answer(demo, fn) >= 100_000


def test_postprocessing_costs_per_output_what_it_need_not(stock):
    """docs/upstream/postprocess-overhead.md: a component built per skip, a signature read per update, a thread hop
    per plain value."""
    found = repro("postprocess_overhead").overhead(10)
    assert {what: n for what, (n, _) in found.items()} == {
        "components built for skips": 10, "signature reads for updates": found["signature reads for updates"][0],
        "thread hops for plain values": 10}
    assert found["signature reads for updates"][0] >= 10


def test_close_sets_the_stop_event_from_the_calling_thread(stock):
    """docs/upstream/close-race.md: set from another thread than its loop's, and its waiter is not even woken."""
    setter, owner, woke = repro("close_race").who_sets_the_stop_event()
    assert setter != owner and not woke


def test_a_full_session_store_drops_a_session_whatever_it_holds(stock):
    """docs/upstream/session-eviction.md (a feature request)."""
    assert not repro("session_eviction").lecturer_kept()


def test_one_apps_delete_cache_deletes_the_file_another_app_serves():
    """docs/upstream/shared-cache-folder.md."""
    assert repro("shared_cache_folder").deleted_under_the_other()


# -- the frontend (docs/upstream/always-last-redispatch.md, docs/upstream/quadratic-walks.md), last: once Chromium
# runs, Playwright's loop runs in this thread until the module ends (tests/conftest.py), and asyncio.run() above
# would refuse to start

def test_the_page_dispatches_the_whole_event_again_after_a_deferred_listener():
    """Both places a deferred always_last dependency is run again dispatch `e`, the whole event, not that one."""
    bundle = patches.shipped("/assets/Blocks-").read_bytes()
    assert bundle.count(b"this.queue.has(r.id)&&(this.queue.delete(r.id),this.dispatch(e))") == 2


def test_two_always_last_listeners_run_more_often_than_they_were_asked(browser):
    """Two clicks while both listeners run: each should run once more, four runs in all. Gradio's page, served as
    Gradio serves it, runs them seven times (each deferred listener's end re-sends the whole click)."""
    always_last = repro("always_last_redispatch")
    calls: list = []
    demo = always_last.build(calls)
    demo.launch(server_name="127.0.0.1", prevent_thread_lock=True, quiet=True)
    try:
        names = always_last.click_twice(browser, demo.local_url, calls, watch=7.0)
    finally:
        demo.close()
    assert len(names) > 4 and max(names.count("quick"), names.count("slow")) > 2, names


def test_the_pages_opening_and_answers_do_per_component_what_could_be_done_once(browser):
    """Gradio's own minified methods, run in Chromium on n and 2n components: the dependency scans and the id reads
    of the tree walks grow 4x (quadratic), a state is fetched for every dependency without event arguments, and
    every unchanged status is handed over again at every message. The app's fixed files do each linearly."""
    walks = repro("quadratic_walks")
    files = walks.frontend_files()
    fixed = {"Blocks": patches.fix_frontend(f"/assets/{patches.shipped('/assets/Blocks-').name}",
                                            files["Blocks"].encode()).decode(),
             "core": patches.fix_frontend(f"/assets/{patches.shipped('/assets/core-').name}",
                                          files["core"].encode()).decode()}
    context = browser.new_context()
    try:
        page = context.new_page()
        gradios = {n: walks.counts(page, files, n) for n in (100, 200)}
        ours = walks.counts(page, fixed, 200)
    finally:
        context.close()
    assert gradios[200]["scans"] >= 4 * gradios[100]["scans"] - 200 and gradios[200]["scans"] >= 200 * 200
    assert gradios[200]["reads"] >= 4 * gradios[100]["reads"] - 400
    assert gradios[200]["states"] == 200 and gradios[200]["handed"] == 3 * 200
    assert ours == {"scans": 0, "reads": ours["reads"], "states": 0, "handed": 200} and ours["reads"] <= 4 * 200
