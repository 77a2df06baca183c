"""Repro: one app's delete_cache deletes the files another app on the machine still serves.

Gradio caches every file it serves in one folder per machine (GRADIO_TEMP_DIR, by default <tmp>/gradio), under a
name made from the file's content (gradio/processing_utils.py), so two apps (or two copies of one app behind a load
balancer) that serve the same file share one path. With `gr.Blocks(delete_cache=...)` an app deletes, on shutdown
(gradio/route_utils.py `delete_files_created_by_app`) and on its schedule, the files it cached, including that
shared one: the other app's answers then link to a file that is gone.

    python docs/upstream/shared_cache_folder.py

Two Blocks cache the same file; the second one's shutdown deletion removes the first one's file.
Expected: an app deletes only what no other app uses (a cache folder per app or per process by default, or
reference counting).
"""

from __future__ import annotations

import os
import sys
import tempfile

import gradio as gr
from gradio import route_utils


def deleted_under_the_other() -> bool:
    """Whether the second app's deletion on shutdown removes the file the first app cached and serves."""
    with tempfile.NamedTemporaryFile("wb", suffix=".csv", delete=False) as source:
        source.write(b"word,count\nbank,3\n")
    apps = []
    for _ in range(2):
        with gr.Blocks(delete_cache=(3600, 3600)) as demo:
            download = gr.File()
        apps.append((demo, download))
    try:
        first, second = (download.move_resource_to_block_cache(source.name) for _, download in apps)
        assert first == second, "the two apps cached the file under two names"
        route_utils.delete_files_created_by_app(apps[1][0], None)    # the second app stops
        return not os.path.exists(first)
    finally:
        os.unlink(source.name)


def main() -> int:
    gone = deleted_under_the_other()
    print(f"Gradio {gr.__version__}: after the second app's shutdown, the first app's cached file is "
          f"{'gone' if gone else 'still there'}")
    print("FAULT PRESENT: one app deleted the other's file" if gone else "Not reproduced")
    return 0 if gone else 1


if __name__ == "__main__":
    sys.exit(main())
