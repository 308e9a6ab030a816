"""A headless Chromium driven over the DevTools protocol on a pipe (--remote-debugging-pipe:
the browser reads commands on fd 3 and writes replies and events on fd 4, one JSON message per
NUL-terminated chunk). Python's standard library only: tests/html_check.py checks capcheck's
pages with it, scripts/screenshot takes the guide's pictures.

    with Browser() as b:
        page = b.open("file:///tmp/out/report.html")   # waits for the load event
        page.errors, page.requests                      # console errors, exceptions; every URL
        page.eval("document.title")
        page.screenshot("report.png", width=1366, height=900)
"""
import base64
import fcntl
import json
import os
import shutil
import subprocess
import tempfile
import time

CANDIDATES = ("chromium", "chromium-browser", "chromium-headless-shell")


def find_chromium():
    """The browser's path, or None (scripts/setup installs Debian's chromium)."""
    for name in CANDIDATES:
        path = shutil.which(name)
        if path:
            return path
    return None


class BrowserError(Exception):
    pass


class Page:
    def __init__(self, browser, session):
        self.b = browser
        self.session = session
        self.errors = []    # console errors, uncaught exceptions, refused loads (CSP)
        self.requests = []  # the URL of every request the page made

    def call(self, method, **params):
        return self.b.call(method, params, self.session)

    def eval(self, expression):
        reply = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in reply:
            raise BrowserError("%s: %s" % (expression, reply["exceptionDetails"]))
        return reply["result"].get("value")

    def screenshot(self, path, width=1366, height=900, full=False, at=None):
        """A PNG of the page at width x height CSS pixels: from the top, from the element the CSS
        selector `at` names, or (full) the whole page."""
        self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        if full:
            height = int(self.eval("document.documentElement.scrollHeight"))
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                      deviceScaleFactor=1, mobile=False)
        top = 0
        if at:
            top = self.eval("document.querySelector(%s).getBoundingClientRect().top + scrollY"
                            % json.dumps(at))
        shot = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=True,
                         clip={"x": 0, "y": top, "width": width, "height": height, "scale": 1})
        with open(path, "wb") as f:
            f.write(base64.b64decode(shot["data"]))

    def pdf(self):
        """The page printed (A4, backgrounds on), as PDF bytes."""
        reply = self.call("Page.printToPDF", printBackground=True, paperWidth=8.27,
                          paperHeight=11.69)
        return base64.b64decode(reply["data"])

    def _event(self, msg):
        method, p = msg.get("method"), msg.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            self.errors.append("exception: %s" % d.get("exception", {}).get("description", d.get("text")))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append("console.%s: %s" % (p["type"], [a.get("value") for a in p.get("args", [])]))
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            self.errors.append("log: %s" % p["entry"].get("text"))
        elif method == "Network.requestWillBeSent":
            self.requests.append(p["request"]["url"])


class Browser:
    def __init__(self, binary=None, timeout=60):
        self.binary = binary or find_chromium()
        if not self.binary:
            raise BrowserError("no chromium on PATH (scripts/setup installs Debian's chromium)")
        self.timeout = timeout
        self.next_id = 0
        self.buf = b""
        self.pages = {}

    def __enter__(self):
        self.profile = tempfile.mkdtemp(prefix="capcheck-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()
        # the child's fd 3 and 4 are made in preexec from copies above any fd dup2 may hit
        hi_r = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10)
        hi_w = fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)

        def fds():
            os.dup2(hi_r, 3)
            os.dup2(hi_w, 4)

        self.proc = subprocess.Popen(
            [self.binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
             "--no-default-browser-check", "--disable-extensions", "--mute-audio",
             "--disable-dev-shm-usage", "--user-data-dir=" + self.profile,
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            close_fds=False, preexec_fn=fds)
        for fd in (to_browser_r, from_browser_w, hi_r, hi_w):
            os.close(fd)
        return self

    def __exit__(self, *exc):
        try:
            self.call("Browser.close", {})
        except Exception:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        shutil.rmtree(self.profile, ignore_errors=True)

    def _read(self, deadline):
        while b"\0" not in self.buf:
            if time.monotonic() > deadline:
                raise BrowserError("no answer from chromium within %d s" % self.timeout)
            chunk = os.read(self.from_browser, 1 << 16)
            if not chunk:
                raise BrowserError("chromium closed its pipe (exit %s)" % self.proc.poll())
            self.buf += chunk
        msg, self.buf = self.buf.split(b"\0", 1)
        return json.loads(msg)

    def _dispatch(self, msg):
        page = self.pages.get(msg.get("sessionId"))
        if page and "method" in msg:
            page._event(msg)

    def call(self, method, params, session=None, until_event=None):
        self.next_id += 1
        msg = {"id": self.next_id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self.to_browser, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        reply, seen = None, until_event is None
        while reply is None or not seen:
            m = self._read(deadline)
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise BrowserError("%s: %s" % (method, m["error"]))
                reply = m["result"]
            else:
                self._dispatch(m)
                seen = seen or (m.get("method") == until_event and m.get("sessionId") == session)
        return reply

    def open(self, url, width=1366, height=900):
        target = self.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.call("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]
        page = Page(self, session)
        self.pages[session] = page
        for domain in ("Page", "Runtime", "Log", "Network"):
            page.call(domain + ".enable")
        page.call("Emulation.setDeviceMetricsOverride", width=width, height=height,
                  deviceScaleFactor=1, mobile=False)
        self.call("Page.navigate", {"url": url}, session, until_event="Page.loadEventFired")
        return page
