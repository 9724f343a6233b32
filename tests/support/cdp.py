"""A headless Chromium driven over the DevTools protocol with the standard library only; no tests here.

How this works: Chromium starts with ``--remote-debugging-pipe``, which reads
protocol commands on fd 3 and writes answers and events on fd 4, each a
JSON object ended by a NUL byte.  ``Browser`` attaches to the page target
(``flatten``: commands carry a ``sessionId``), and ``Page`` navigates at a
given viewport, evaluates script, collects console messages, log entries
(CSP violations, failed loads) and HTTP statuses, and takes screenshots.
``axe(page)`` injects the npm package ``axe-core`` (installed by
``.ci/run`` into ``.ci/node``) and returns its violations.  A missing
Chromium or axe-core skips the test with the reason (a failure under
``TOKENWIRE_REQUIRE_ALL=1``).
"""

from __future__ import annotations

import base64
import json
import os
import select
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from support.live import wait_until
from support.requirements import NODE_MODULES, require_binary, skip_or_fail

TIMEOUT_S = 30.0
AXE = NODE_MODULES / "axe-core" / "axe.min.js"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--remote-debugging-pipe"]


class Browser:
    """One Chromium process and its protocol pipe."""

    def __init__(self, profile: str) -> None:
        exe = require_binary("chromium")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def plumb() -> None:
            os.dup2(to_chrome_r, 3)
            os.dup2(from_chrome_w, 4)
            for fd in (3, 4):                 # a dup2 onto itself keeps close-on-exec (pipes made as fds 3, 4)
                os.set_inheritable(fd, True)

        self.proc = subprocess.Popen([exe, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, close_fds=False,
                                     preexec_fn=plumb)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buffer, self._next = b"", 0
        self.events: list[dict[str, Any]] = []

    def send(self, method: str, params: dict[str, Any] | None = None, session: str | None = None,
             timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        """Send one command and return its result within ``timeout_s``, whatever events come meanwhile; raises
        ``RuntimeError`` with the protocol's error."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params or {}}
        if session is not None:
            message["sessionId"] = session
        os.write(self._to_chrome, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while (remaining := deadline - time.monotonic()) > 0:
            try:
                reply = self._read(remaining)
            except TimeoutError:
                break
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)
        raise TimeoutError(f"{method}: no answer from Chromium within {timeout_s:.1f} s")

    def wait_for(self, method: str, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
        """Return the first event named ``method`` (seen already or still to come)."""
        for i, event in enumerate(self.events):
            if event.get("method") == method:
                return self.events.pop(i)
        deadline = time.monotonic() + timeout_s
        while True:
            event = self._read(deadline - time.monotonic())
            if event.get("method") == method:
                return event
            self.events.append(event)

    def _read(self, timeout_s: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            ready, _, _ = select.select([self._from_chrome], [], [], max(0.0, timeout_s))
            if not ready:
                raise TimeoutError(f"no message from Chromium within {timeout_s:.1f} s")
            chunk = os.read(self._from_chrome, 1 << 20)
            if not chunk:
                raise RuntimeError("Chromium closed its protocol pipe")
            self._buffer += chunk
        raw, self._buffer = self._buffer.split(b"\0", 1)
        return dict(json.loads(raw))

    def close(self) -> None:
        try:
            self.send("Browser.close", timeout_s=5)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        os.close(self._to_chrome)
        os.close(self._from_chrome)


class Page:
    """The browser's one page: navigate at a viewport, evaluate, screenshot; what it logged is kept."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        target = next(t for t in browser.send("Target.getTargets")["targetInfos"] if t["type"] == "page")
        self.session = browser.send("Target.attachToTarget", {"targetId": target["targetId"], "flatten": True})[
            "sessionId"]
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(f"{domain}.enable")

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return self.browser.send(method, params, self.session)

    def open(self, url: str, width: int, height: int = 900, bypass_csp: bool = False) -> None:
        """Load ``url`` at ``width`` x ``height`` CSS px and wait for its load event."""
        self.browser.events.clear()
        self.send("Emulation.setDeviceMetricsOverride", {"width": width, "height": height, "deviceScaleFactor": 1,
                                                         "mobile": width < 600})
        self.send("Page.setBypassCSP", {"enabled": bypass_csp})
        self.send("Page.navigate", {"url": url})
        self.browser.wait_for("Page.loadEventFired")

    def eval(self, expression: str) -> Any:
        """The value of ``expression`` (awaited if a promise); raises ``RuntimeError`` if it threw."""
        reply = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                               "awaitPromise": True})
        if "exceptionDetails" in reply:
            raise RuntimeError(f"{expression[:80]!r} threw: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_until(self, expression: str, what: str, timeout_s: float = TIMEOUT_S) -> None:
        """Until ``expression`` is true in the page."""
        wait_until(lambda: self.eval(expression), what, timeout_s)

    def problems(self) -> list[str]:
        """Console messages, uncaught exceptions, log entries and HTTP errors since the last ``open``."""
        self.eval("1")                       # let queued events arrive
        found = []
        for event in self.browser.events:
            method, params = event.get("method"), event.get("params", {})
            if method == "Runtime.consoleAPICalled":
                found.append(f"console.{params['type']}: {[a.get('value') for a in params['args']]}")
            elif method == "Runtime.exceptionThrown":
                found.append(f"exception: {params['exceptionDetails'].get('text')}")
            elif method == "Log.entryAdded":
                found.append(f"log {params['entry']['level']}: {params['entry']['text']} {params['entry'].get('url')}")
            elif method == "Network.responseReceived" and params["response"]["status"] >= 400:
                found.append(f"HTTP {params['response']['status']}: {params['response']['url']}")
        return found

    def screenshot(self, path: Path, height: int | None = None) -> None:
        """The page from its top, ``height`` CSS px tall (default: all of it), as a PNG at ``path``."""
        full = self.eval("document.documentElement.scrollHeight")
        width = self.eval("document.documentElement.clientWidth")
        clip = {"x": 0, "y": 0, "width": width, "height": min(full, height or full), "scale": 1}
        data = self.send("Page.captureScreenshot", {"format": "png", "clip": clip, "captureBeyondViewport": True})
        path.write_bytes(base64.b64decode(data["data"]))


@contextmanager
def browser_page() -> Iterator[Page]:
    """A fresh Chromium (its own profile directory) and its page; closed on exit."""
    with tempfile.TemporaryDirectory(prefix="tokenwire-chromium-") as profile:
        browser = Browser(profile)
        try:
            yield Page(browser)
        finally:
            browser.close()


def require_axe() -> str:
    """The source of axe-core's ``axe.min.js``; skips (fails under REQUIRE_ALL) when it is not installed."""
    if AXE.exists():
        return AXE.read_text()
    skip_or_fail(f"axe-core is not installed at {AXE} (npm install --prefix .ci/node axe-core@4, as .ci/run does)")


def axe(page: Page, source: str) -> list[dict[str, Any]]:
    """axe-core's violations on the loaded page (WCAG 2 A and AA and best practices), impact and nodes."""
    page.eval(source)
    found = page.eval("axe.run(document, {resultTypes: ['violations']}).then(r => r.violations.map(v => ("
                      "{id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 3).map(n => n.html)})))")
    return list(found)


# What a test reads of a page at one width: page overflow and the smallest chart text.
MEASURE = """(() => {
  const root = document.documentElement;
  const sizes = [...document.querySelectorAll('svg text')].filter(t => t.getClientRects().length)
    .map(t => parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a);
  return {overflow: root.scrollWidth - root.clientWidth, smallest: sizes.length ? Math.min(...sizes) : null,
          texts: sizes.length};
})()"""
