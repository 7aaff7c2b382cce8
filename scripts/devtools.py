"""The DevTools protocol as the console checks speak it (websocket-client
from PyPI): the first page of a browser started with
--remote-debugging-port, its commands and its JavaScript."""
import itertools
import json
import urllib.request

import websocket


class Page:
    """The browser's first page."""

    def __init__(self, port):
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
