#!/usr/bin/env python3
"""Plays another site's page in the admin's browser (headless Chromium,
the credential picked without a prompt), over the DevTools protocol:
the page posts a cross-site form to the API's reject route, sends a
no-cors fetch to it, and frames the API's and the console's event streams
twice each. Called by scripts/console-check.sh, which checks afterwards
that nothing was rejected and that the credential's stream slots are free.

    console-cross-site.py DEVTOOLS_PORT EVIL_PAGE_URL SHOTS_DIR

Prints what the page saw once it is done; keeps the page (and its
frames) open until stdin closes, so the caller can look meanwhile.
"""
import sys
import time

import websocket

from devtools import Page

port, url, shots = sys.argv[1], sys.argv[2], sys.argv[3]
page = Page(port)
call, js = page.call, page.js

call("Page.enable")
call("Emulation.setDeviceMetricsOverride", width=1280, height=720, deviceScaleFactor=1, mobile=False)
call("Page.navigate", url=url)
deadline = time.monotonic() + 30
while time.monotonic() < deadline:
    try:
        if js("document.title") == "done":
            break
    except (RuntimeError, websocket.WebSocketException):  # between two documents
        pass
    time.sleep(0.2)
else:
    sys.exit("console-cross-site: the page did not finish its requests within 30 s")
page.shot(f"{shots}/4-another-site.png")
print(f"console-cross-site: the page says: {js('document.body.innerText')}", flush=True)
sys.stdin.read()
