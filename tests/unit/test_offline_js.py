"""The offline page's script (src/benchwatch/share/offline.js): valid JavaScript, inlined unchanged."""

from __future__ import annotations

import os
import shutil
import subprocess

from benchwatch.share import html

SCRIPT = os.path.join(os.path.dirname(html.__file__), html.SCRIPT)


def test_node_finds_no_syntax_error():
    # node is part of the test machine (scripts/install-deps --test): without it this check is not done,
    # and that is a failure, not a skip.
    node = shutil.which("node") or shutil.which("nodejs")
    assert node, "node is not installed: apt-get install nodejs (the offline page's script is checked with it)"
    r = subprocess.run([node, "--check", SCRIPT], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr


def test_the_page_inlines_the_file_byte_for_byte():
    with open(SCRIPT, encoding="utf-8", newline="") as f:
        script = f.read()
    # The HTML parser ends a script at "</script" whatever the JavaScript around it means.
    assert "</script" not in script.lower() and "<!--" not in script
    page = html.page("t", "", {"panels": [], "zoomMode": "time"})
    assert page.endswith(f"<script>\n{script}</script></body></html>\n")
