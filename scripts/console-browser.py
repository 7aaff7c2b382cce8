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
import json
import re
import subprocess
import sys
import time

from devtools import Page

port, url, shots = sys.argv[1], sys.argv[2], sys.argv[3]
announce = sys.argv[4:]
page = Page(port, "console-browser")
call, js = page.call, page.js


until = page.until


def shot(name):
    page.shot(f"{shots}/{name}.png")
    print(f"console-browser: screenshot {shots}/{name}.png")


call("Page.enable")
call("Emulation.setDeviceMetricsOverride", width=1280, height=720, deviceScaleFactor=1, mobile=False)
call("Page.navigate", url=url)
until("the pending page loads with the credential", "document.title.startsWith('Pending nodes')")
until("the page follows the event stream", "document.getElementById('live-status').textContent.startsWith('following')")
js("window.sameDocument = true")
# The nodes waiting already (the demo's example node): the new one is another.
js("window.before = [...document.querySelectorAll('#live tbody tr td a')].map(a => a.textContent)")
NEW_ROW = "[...document.querySelectorAll('#live tbody tr td a')].find(a => !window.before.includes(a.textContent))"

console = subprocess.run(announce, capture_output=True, text=True)
said = console.stdout + console.stderr
match = re.findall(r"pki: this node's CA: SHA-256 ([0-9a-f]{64})", said)
if not match:
    sys.exit(f"console-browser: the node printed no CA line:\n{said}")
fingerprint = match[-1]
name = until("the announcement appears without a reload", f"({NEW_ROW} || {{}}).textContent")
if not js("window.sameDocument === true"):
    sys.exit("console-browser: the page was reloaded")
shot("1-pending-live")

# Readable at a glance (issue 55): at a desktop width and a narrow one, no
# table cell's text wraps inside a word (a word whose range has two line
# boxes), and every page keeps its long values whole.
WORDS_WRAPPED = """(() => {
  const broken = [];
  for (const cell of document.querySelectorAll('td, th')) {
    const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let text = walker.nextNode(); text; text = walker.nextNode()) {
      const re = /\\S+/g;
      let m;
      while ((m = re.exec(text.data))) {
        const range = document.createRange();
        range.setStart(text, m.index);
        range.setEnd(text, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (lines.size > 1) broken.push(m[0]);
      }
    }
  }
  return broken;
})()"""


def layout_holds(name):
    for width in (1280, 800):
        call("Emulation.setDeviceMetricsOverride", width=width, height=720, deviceScaleFactor=1, mobile=False)
        time.sleep(0.2)
        broken = js(WORDS_WRAPPED)
        if broken:
            sys.exit(f"console-browser: {name} at {width} px: words broken across lines: {broken[:10]}")
        # Issue 61: at a desktop's 1280 px every table fits, scrolling nothing.
        wide = js("Math.max(0, ...[...document.querySelectorAll('table')].map(t => Math.ceil(t.getBoundingClientRect().right)))")
        if width == 1280 and wide > width:
            sys.exit(f"console-browser: {name} at 1280 px: a table is {wide} px wide")
        shot(f"layout-{name}-{width}")
    call("Emulation.setDeviceMetricsOverride", width=1280, height=720, deviceScaleFactor=1, mobile=False)
    print(f"console-browser: {name}: no cell breaks a word at 1280 or 800 px; every table fits 1280 px")


layout_holds("pending")

js(f"location.assign({NEW_ROW}.href)")
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
layout_holds("node")
js("location.assign('/console/nodes')")
until("the nodes page", "document.title.startsWith('Nodes')")
layout_holds("nodes")
print(name)
