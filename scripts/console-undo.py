#!/usr/bin/env python3
"""Rejects a pending node through the console's second step and undoes it,
in headless Chromium over the DevTools protocol: the node's page offers
"Reject…", which leads to a page saying what rejecting does and to which
node; nothing is rejected until that page's button; the rejected node's
page then offers the undo (Forget…), itself confirmed. Called by
scripts/console-check.sh after the other checks.

    console-undo.py DEVTOOLS_PORT CONSOLE_URL SHOTS_DIR NODE_NAME
"""
import sys
import time

from devtools import Page

port, url, shots, name = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
page = Page(port, "console-undo")
call, js = page.call, page.js


until = page.until


def shot(file):
    page.shot(f"{shots}/{file}.png")


def click(selector):
    js(f"document.querySelector({selector!r}).click(), true")


call("Page.enable")
call("Emulation.setDeviceMetricsOverride", width=1280, height=720, deviceScaleFactor=1, mobile=False)
call("Page.navigate", url=url)
until("the pending page", "document.title.startsWith('Pending nodes')")
link = until(f"{name} is pending", f"[...document.querySelectorAll('#live tbody tr td a')].filter(a => a.textContent === {name!r}).map(a => a.href)[0]")
js(f"location.assign({link!r})")
until("the node's page", "!!document.querySelector('form[action$=\"/reject\"] button')")
click('form[action$="/reject"] button')
asked = until("the second step", "document.title.startsWith('Reject') && document.body.innerText")
if "rejected at once" not in asked or name not in asked:
    sys.exit(f"console-undo: the second step does not say what rejecting does: {asked}")
state = js(f"fetch({link!r}).then(r => r.text()).then(t => t.includes('<dd>pending</dd>'))")
if not state:
    sys.exit("console-undo: the node is not pending any more before the second step's button")
shot("5-reject-second-step")
click('form[method="post"] button')
until("rejected", "(document.querySelector('dl.node') || {innerText: ''}).innerText.includes('rejected')")
click('form[action$="/forget"] button')
until("the undo's second step", "document.title.startsWith('Forget')")
click('form[method="post"] button')
said = until("forgotten", "(document.querySelector('.said.done') || {}).textContent || ''")
shot("6-rejection-undone")
print(f"console-undo: rejected {name} through its second step, then undid it: {said}")
