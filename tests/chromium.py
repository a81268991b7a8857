"""Headless Chromium driven over the DevTools protocol on a pipe (no packages needed).

``Browser(url)`` starts ``/usr/bin/chromium --headless --remote-debugging-pipe`` on
``url``; messages are JSON texts ended by NUL, written to the browser's fd 3 and
read from its fd 4.  ``evaluate(expression)`` runs JavaScript in the page and
returns its value.  Used by the report's browser test and by
``benchmarks/pipeline.py`` (time to the page's first content).
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import tempfile
import time

CHROMIUM = "/usr/bin/chromium"


class Browser:
    """One headless Chromium showing one page."""

    def __init__(self, url: str, timeout: float = 120.0):
        self.timeout = timeout
        self._profile = tempfile.TemporaryDirectory(prefix="chromium-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()
        # The child's ends above fd 4, so moving them to 3 and 4 clobbers neither.
        high = [fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 10) for fd in (to_browser_r, from_browser_w)]
        os.close(to_browser_r)
        os.close(from_browser_w)
        to_browser_r, from_browser_w = high
        # The browser reads commands on fd 3 and writes answers on fd 4 (moved there by
        # a shell: no Python code runs between fork and exec).
        argv = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--disable-background-networking", "--disable-extensions",
                f"--user-data-dir={self._profile.name}", "--remote-debugging-pipe", "about:blank"]
        self.proc = subprocess.Popen(
            ["/bin/bash", "-c", f'exec "$@" 3<&{to_browser_r} 4>&{from_browser_w}', "bash", *argv],
            pass_fds=(to_browser_r, from_browser_w), stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next = 0
        self.session = None
        targets = self.call("Target.getTargets")["targetInfos"]
        page = next(t for t in targets if t["type"] == "page")
        self.session = self.call("Target.attachToTarget",
                                 {"targetId": page["targetId"], "flatten": True})["sessionId"]
        self.call("Page.navigate", {"url": url})
        self.wait_for(f"location.href.startsWith({json.dumps(url.split('#')[0])}) && "
                      "document.readyState === 'complete'")

    def call(self, method: str, params: dict | None = None) -> dict:
        """Send one command and return its result (an error raises RuntimeError)."""
        self._next += 1
        message = {"id": self._next, "method": method, "params": params or {}}
        if self.session is not None and not method.startswith("Target."):
            message["sessionId"] = self.session
        os.write(self._to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" not in self._buffer:
                if time.monotonic() > deadline:
                    raise TimeoutError(method)
                chunk = os.read(self._from_browser, 1 << 16)
                if not chunk:
                    raise RuntimeError("chromium closed the pipe")
                self._buffer += chunk
            text, self._buffer = self._buffer.split(b"\0", 1)
            answer = json.loads(text)
            if answer.get("id") == self._next:
                if "error" in answer:
                    raise RuntimeError(answer["error"])
                return answer.get("result", {})

    def evaluate(self, expression: str):
        """The value of JavaScript ``expression`` in the page (promises awaited)."""
        result = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in result:
            raise RuntimeError(result["exceptionDetails"])
        return result["result"].get("value")

    def wait_for(self, expression: str) -> None:
        """Poll until ``expression`` is true in the page."""
        deadline = time.monotonic() + self.timeout
        while not self.evaluate(expression):
            if time.monotonic() > deadline:
                raise TimeoutError(expression)
            time.sleep(0.05)

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (RuntimeError, OSError, TimeoutError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._to_browser)
        os.close(self._from_browser)
        self._profile.cleanup()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
