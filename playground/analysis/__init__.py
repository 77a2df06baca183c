"""What a tab shows, as plain data (dicts, numpy arrays): text in, data out. No gradio, no plotly."""
