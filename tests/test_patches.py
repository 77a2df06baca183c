"""The app's patches to Gradio fail loudly (ui/gradio_check.py): each checks its target before it applies, and a
Gradio without it (here a target changed or removed for the test) stops the app with a PatchError that names the
patch, the Gradio installed and what to do. On the Gradio the app pins, every check passes. docs/upstream.md lists
every patch; its table and the code name the same ones."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import gradio as gr
import pytest
from gradio import component_meta, route_utils
from gradio.blocks import Blocks
from gradio.state_holder import SessionState, StateHolder

from playground.ui import fastpath, gradio_check, patches, process, queuepath
from playground.ui.gradio_check import PatchError

ROOT = Path(__file__).resolve().parent.parent
FIXES = [(prefix, fix) for prefix, fixes in patches.FIXES.items() for fix in fixes]


def gradios(owner, name: str):
    """Gradio's own `owner.name`, also where the app has replaced it."""
    return gradio_check.original(owner, name)


def test_every_patch_applies_to_the_gradio_the_app_pins_and_a_second_time_changes_nothing():
    assert gr.__version__ == gradio_check.TESTED, "requirements.txt pins the Gradio the patches were made for"
    process.configure()
    applied = (SessionState.__init__, SessionState.__setitem__, StateHolder.update, Blocks.postprocess_data,
               Blocks.close, component_meta.inspect)
    process.configure()
    assert (SessionState.__init__, SessionState.__setitem__, StateHolder.update, Blocks.postprocess_data,
            Blocks.close, component_meta.inspect) == applied
    assert all(getattr(f, "gradio", None) is not None for f in applied[:5]), "each keeps Gradio's own as .gradio"


def test_the_error_names_the_patch_the_gradio_and_what_to_do():
    message = str(PatchError("kept-paths", "its text is gone"))
    assert "'kept-paths'" in message and f"Gradio {gr.__version__}" in message and "its text is gone" in message
    assert f"pip install gradio=={gradio_check.TESTED}" in message and "docs/upstream.md" in message
    with pytest.raises(AssertionError, match="not in gradio_check.PATCHES"):
        PatchError("a-patch-nobody-listed", "anything")


# -- the frontend: each replaced text found exactly as often as expected, in a file Gradio ships

@pytest.mark.parametrize("prefix, fix", FIXES, ids=[f"{fix.patch}:{fix.old[:24].decode()}" for _, fix in FIXES])
def test_a_frontend_file_without_the_text_a_fix_replaces_stops_the_app(prefix, fix):
    body = patches.shipped(prefix).read_bytes()
    path = f"/assets/{patches.shipped(prefix).name}"
    assert patches.fix_frontend(path, body) != body
    with pytest.raises(PatchError, match=re.escape(f"'{fix.patch}'") + f".*has the text it replaces 0 times, not "
                                         f"{fix.count}"):
        patches.fix_frontend(path, body.replace(fix.old, b""))
    with pytest.raises(PatchError, match=f"{fix.count + 1} times, not {fix.count}"):
        patches.fix_frontend(path, body + b";" + fix.old)


def test_a_gradio_without_a_fixed_file_stops_the_app(tmp_path, monkeypatch):
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "core-abc.js").write_bytes(patches.shipped("/assets/core-").read_bytes())
    monkeypatch.setattr(patches, "frontend", lambda: tmp_path)
    with pytest.raises(PatchError, match="'always-last-alone'.*ships 0 files assets/Blocks-\\*.js"):
        patches.check_frontend()


def test_any_other_file_of_the_frontend_is_served_as_it_is():
    other = b"this.queue.delete(r.id),this.dispatch(e)"
    assert patches.fix_frontend("/assets/Other-abc.js", other) == other
    assert patches.fix_frontend("/assets/Blocks-abc.css", other) == other


# -- the import hook

def test_a_gradio_without_the_stub_rewrite_stops_the_app(monkeypatch):
    monkeypatch.delattr(component_meta, "create_or_modify_pyi")
    with pytest.raises(PatchError, match="'pyi-at-import'.*create_or_modify_pyi is gone"):
        patches.apply()


def test_a_stub_rewrite_with_other_parameters_stops_the_app(monkeypatch):
    monkeypatch.setattr(component_meta, "create_or_modify_pyi", lambda component_class, name: None)
    with pytest.raises(PatchError, match=r"'pyi-at-import'.*takes \(component_class, name\)"):
        patches.apply()


def test_what_the_import_hook_found_wrong_stops_the_app(monkeypatch):
    found = PatchError("pyi-at-import", "create_or_modify_pyi is gone")
    monkeypatch.setattr(patches, "_STUB_PROBLEMS", [found])
    with pytest.raises(PatchError) as raised:
        patches.apply()
    assert raised.value is found


# -- the sessions: Gradio's own __init__ run, its __setitem__ the one the app's copy was made from

def test_a_session_init_with_other_parameters_stops_the_app(monkeypatch):
    monkeypatch.setattr(SessionState, "__init__", lambda self, blocks, request=None: None)
    with pytest.raises(PatchError, match=r"'session-config-copies'.*takes \(self, blocks, request\)"):
        patches.apply()


def test_a_session_init_that_builds_every_config_anyway_stops_the_app(monkeypatch):
    from copy import copy

    def init(self, blocks):   # a Gradio that no longer builds the configs from blocks.blocks
        self.blocks_config = copy(blocks.default_config)
        self.config_values = {k: self.blocks_config.config_for_block(k, [], v)
                              for k, v in self.blocks_config.blocks.items()}
        self.state_data, self._state_ttl = {}, {}

    monkeypatch.setattr(SessionState, "__init__", init)
    with pytest.raises(PatchError, match="'session-config-copies'.*no longer spares the copies"):
        patches.apply()


def test_a_session_without_a_field_the_app_writes_stops_the_app(monkeypatch):
    gradio_init = gradios(SessionState, "__init__")

    def init(self, blocks):
        gradio_init(self, blocks)
        del self._state_ttl

    monkeypatch.setattr(SessionState, "__init__", init)
    with pytest.raises(PatchError, match="'session-config-copies'.*SessionState has no _state_ttl"):
        patches.apply()


def test_a_session_that_keeps_the_blocks_it_is_made_with_stops_the_app(monkeypatch):
    gradio_init = gradios(SessionState, "__init__")

    def init(self, blocks):   # the stand-in without components would stay in every session
        gradio_init(self, blocks)
        self.blocks = blocks

    monkeypatch.setattr(SessionState, "__init__", init)
    with pytest.raises(PatchError, match="'session-config-copies'.*keeps the Blocks it is made with"):
        patches.apply()


def test_a_changed_session_setitem_stops_the_app(monkeypatch):
    def setitem(self, key, value):   # Gradio's, changed: the app's copy would drop what it now does
        self.blocks_config.blocks[key] = value

    monkeypatch.setattr(SessionState, "__setitem__", setitem)
    with pytest.raises(PatchError, match="'session-config-copies'.*SessionState.__setitem__ is not the one the app's "
                                         "copy was made from"):
        patches.apply()


def test_a_field_gradio_adds_to_a_session_is_kept():
    """The app's sessions are made by Gradio's own __init__: a field a later Gradio adds is there, not dropped."""
    gradio_init = gradios(SessionState, "__init__")

    class Later(SessionState):
        def __init__(self, blocks):
            gradio_init(self, blocks)
            self.added_by_a_later_gradio = "kept"

    with gr.Blocks() as demo:
        state, text = gr.State(1), gr.Textbox()
    patches.keep_no_config_copies(Later)
    session = Later(demo)
    assert session.added_by_a_later_gradio == "kept" and session.config_values == {}
    session[state._id], session[text._id] = 2, gr.Textbox("new", render=False)
    assert session.state_data[state._id] == 2 and session.config_values == {}


# -- the other replaced methods and the private structures

def test_a_changed_state_holder_update_stops_the_app(monkeypatch):
    def update(self, session_id):
        self.session_data.move_to_end(session_id)

    monkeypatch.setattr(StateHolder, "update", update)
    with pytest.raises(PatchError, match="'seated-eviction'.*StateHolder.update is not the one"):
        patches.apply()


def test_a_changed_postprocess_data_stops_the_app(monkeypatch):
    async def postprocess_data(self, block_fn, predictions, state, request=None):
        return predictions

    monkeypatch.setattr(Blocks, "postprocess_data", postprocess_data)
    with pytest.raises(PatchError, match="'skip-without-rebuild'.*Blocks.postprocess_data is not the one"):
        patches.apply()


def test_a_skip_that_is_not_a_bare_update_stops_the_app(monkeypatch):
    from gradio import helpers

    monkeypatch.setattr(helpers, "skip", lambda: {"__type__": "skip"})
    with pytest.raises(PatchError, match="'skip-without-rebuild'.*gr.skip\\(\\) is"):
        patches.apply()


def test_a_component_meta_that_no_longer_reads_signatures_with_inspect_stops_the_app(monkeypatch):
    def updateable(fn):   # a Gradio that reads the signature some other way
        return fn

    monkeypatch.setattr(component_meta, "updateable", updateable)
    with pytest.raises(PatchError, match="'signature-once'.*no longer does 'inspect.getfullargspec\\('"):
        patches.apply()
    monkeypatch.setattr(component_meta, "inspect", SimpleNamespace(getfullargspec=inspect.getfullargspec))
    with pytest.raises(PatchError, match="'signature-once'.*does not use the inspect module"):
        patches.apply()


def test_a_close_with_other_parameters_or_without_the_cross_thread_set_stops_the_app(monkeypatch):
    monkeypatch.setattr(Blocks, "close", lambda self, verbose=True, timeout=5: None)
    with pytest.raises(PatchError, match=r"'close-in-loop'.*takes \(self, verbose, timeout\)"):
        patches.apply()

    def close(self, verbose=True):   # a Gradio that sets the stop event in its loop: the patch no longer applies
        self.app.loop.call_soon_threadsafe(self.app.stop_event.set)

    monkeypatch.setattr(Blocks, "close", close)
    with pytest.raises(PatchError, match="'close-in-loop'.*no longer does 'self.app.stop_event.set\\(\\)'"):
        patches.apply()


def queued_demo() -> gr.Blocks:
    with gr.Blocks() as demo:
        gr.Button().click(lambda: 1, None, gr.Number())
    demo.queue()
    return demo


def test_the_queue_structures_the_page_s_answers_are_written_into_are_checked(monkeypatch):
    demo = queued_demo()
    queuepath.check_gradio(demo)
    monkeypatch.delattr(demo._queue, "pending_event_ids_session")
    with pytest.raises(PatchError, match="'queue-streams'.*gradio.queueing.Queue has no pending_event_ids_session"):
        queuepath.check_gradio(demo)


def test_a_completion_message_without_a_field_the_kept_answers_fill_stops_the_app(monkeypatch):
    from pydantic import BaseModel

    class Completed(BaseModel):
        msg: str = "process_completed"
        event_id: str
        output: dict

    monkeypatch.setattr(queuepath, "ProcessCompletedMessage", Completed)
    with pytest.raises(PatchError, match="'queue-streams'.*Completed has no field success"):
        queuepath.check_gradio(queued_demo())


def test_the_root_url_and_the_call_stream_the_plain_api_answers_read_are_checked(monkeypatch):
    fastpath.check_gradio()
    monkeypatch.setattr(route_utils, "get_root_url", lambda request, route_path: "")
    with pytest.raises(PatchError, match=r"'call-streams'.*get_root_url takes \(request, route_path\)"):
        fastpath.check_gradio()


def test_the_launch_settings_check_the_private_structures_first(monkeypatch):
    """launch_settings() (what every launch of the app's demo uses) checks what the middleware relies on."""
    from playground.ui import demo as ui

    demo = queued_demo()
    monkeypatch.setattr(route_utils, "get_api_call_path", lambda request, prefix: "")
    with pytest.raises(PatchError, match="'call-streams'"):
        ui.launch_settings(demo)
    monkeypatch.delattr(demo._queue, "pending_message_lock")
    with pytest.raises(PatchError, match="'queue-streams'"):
        ui.launch_settings(demo)


# -- one inventory

def test_docs_upstream_lists_every_patch_and_links_drafts_that_exist():
    table = (ROOT / "docs" / "upstream.md").read_text(encoding="utf-8")
    rows = set(re.findall(r"^\| `([a-z-]+)` \|", table, flags=re.M))
    assert rows == set(gradio_check.PATCHES), "docs/upstream.md's table and gradio_check.PATCHES differ"
    assert {fix.patch for _, fix in FIXES} <= set(gradio_check.PATCHES)
    for target in re.findall(r"\]\((upstream/[^)#\s]+)", table):
        assert (ROOT / "docs" / target).exists(), target
    assert "docs/upstream.md" in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8") or \
        "(upstream.md)" in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
