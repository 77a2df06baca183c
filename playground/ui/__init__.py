"""The Gradio UI: the only part of the package that imports gradio. One module per tab (its handlers and a
`build(demo, shared)` that lays out the tab and wires its events), the page that holds them (`demo.py`),
and the library patches the app applies (`patches.py`)."""
