#!/usr/bin/env python3
"""Drives headless Chromium through the admin console as a person would,
over the DevTools protocol (websocket-client from PyPI): the pending page
follows new announcements without a reload, a mistyped fingerprint is
refused, the right one approves. Called by scripts/console-check.sh,
which owns the browser's NSS database, policy and the server.

    console-browser.py DEVTOOLS_PORT URL SHOTS_DIR ANNOUNCE_CMD...

ANNOUNCE_CMD makes a node announce itself (pending) and prints its
console, whose `pki: this node's CA: SHA-256 <hex>` line is the
fingerprint an admin types. Prints the node's name on success.
"""
import base64
import json
import re
import subprocess
import sys
import time

from devtools import Page

port, url, shots = sys.argv[1], sys.argv[2], sys.argv[3]
announce = sys.argv[4:]
page = Page(port)
call, js = page.call, page.js


def until(what, expression, seconds=20):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            value = js(expression)
            if value:
                return value
        except RuntimeError:
            pass  # between two documents
        time.sleep(0.1)
    body = js("document.body ? document.body.innerText : document.documentElement.outerHTML")
    sys.exit(f"console-browser: {what}: not within {seconds} s; the page says:\n{body}")


def shot(name):
    data = call("Page.captureScreenshot", format="png")["data"]
    path = f"{shots}/{name}.png"
    with open(path, "wb") as out:
        out.write(base64.b64decode(data))
    print(f"console-browser: screenshot {path}")


call("Page.enable")
call("Emulation.setDeviceMetricsOverride", width=1280, height=720, deviceScaleFactor=1, mobile=False)
call("Page.navigate", url=url)
until("the pending page loads with the credential", "document.title.startsWith('Pending nodes')")
until("the page follows the event stream", "document.getElementById('live-status').textContent.startsWith('following')")
js("window.sameDocument = true")

console = subprocess.run(announce, capture_output=True, text=True)
said = console.stdout + console.stderr
match = re.findall(r"pki: this node's CA: SHA-256 ([0-9a-f]{64})", said)
if not match:
    sys.exit(f"console-browser: the node printed no CA line:\n{said}")
fingerprint = match[-1]
name = until("the announcement appears without a reload",
             "(document.querySelector('#live tbody tr td a') || {}).textContent")
if not js("window.sameDocument === true"):
    sys.exit("console-browser: the page was reloaded")
shot("1-pending-live")

js("location.assign(document.querySelector('#live tbody tr td a').href)")
until("the node's page", "!!document.querySelector('form[action$=\"/approve\"]')")
mistyped = fingerprint[:-1] + ("0" if fingerprint[-1] != "0" else "1")
fill = ("(v => {{ const f = document.querySelector('form[action$=\"/approve\"]');"
        " f.querySelector('input[name=expect_ca_sha256]').value = v; f.querySelector('button').click(); return true }})({})")
js(fill.format(json.dumps(mistyped)))
refusal = until("a mistyped fingerprint is refused",
                "(document.querySelector('.said.refused') || {}).textContent || ''")
print(f"console-browser: a mistyped fingerprint: {refusal}")
state = js("(document.querySelector('dl.node') || {}).innerText || ''")
if "pending" not in state:
    sys.exit(f"console-browser: the node is not pending after a refused approval: {state}")
shot("2-mistyped-refused")

grouped = " ".join(fingerprint[i:i + 4] for i in range(0, 64, 4)).upper()
js(fill.format(json.dumps(grouped)))
until("the right fingerprint approves", "(document.querySelector('.said.done') || {}).textContent || ''")
until("the node's page says admitted", "document.querySelector('dl.node').innerText.includes('admitted')")
shot("3-approved")
print(name)
