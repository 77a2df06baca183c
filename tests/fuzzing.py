"""What the fuzz tests share: hypothesis strategies for any UI value, and the rule every handler keeps."""

from __future__ import annotations

import gradio as gr
from hypothesis import strategies as st

texts = st.one_of(st.none(), st.text(max_size=300), st.text(alphabet=st.characters(codec="utf-8"), max_size=50))
numbers = st.one_of(st.integers(-10**12, 10**12), st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=5),
                    st.none())


def accepts(fn, *args):
    """fn(*args), or None when it refuses with a gr.Error that says what is wrong; anything else fails."""
    try:
        return fn(*args)
    except gr.Error as err:
        assert str(err.message).strip(), "an error must say what is wrong"
        return None
