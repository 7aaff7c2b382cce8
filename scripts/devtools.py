"""The DevTools protocol as the console checks speak it (websocket-client
from PyPI): the first page of a browser started with
--remote-debugging-port, its commands and its JavaScript."""
import base64
import itertools
import json
import sys
import time
import urllib.request

import websocket


class Page:
    """The browser's first page."""

    def __init__(self, port, who="console-check"):
        self.who = who
        targets = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list"))
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], suppress_origin=True, timeout=30)
        self.ids = itertools.count(1)

    def call(self, method, **params):
        """Sends a command and returns its result (raises on its error)."""
        n = next(self.ids)
        self.ws.send(json.dumps({"id": n, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == n:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    def js(self, expression):
        """The value of `expression` in the page (raises on an exception)."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def until(self, what, expression, seconds=20):
        """The first truthy value of `expression` within `seconds`; else
        exits saying what did not happen and what the page says."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                value = self.js(expression)
                if value:
                    return value
            except RuntimeError:
                pass  # between two documents
            time.sleep(0.1)
        body = self.js("document.body ? document.body.innerText : document.documentElement.outerHTML")
        sys.exit(f"{self.who}: {what}: not within {seconds} s; the page says:\n{body}")

    def shot(self, path):
        """A screenshot of the page, as PNG, at `path`."""
        data = self.call("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as out:
            out.write(base64.b64decode(data))
