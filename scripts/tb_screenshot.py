"""Screenshot of a run's TensorBoard Custom Scalars page: the learned policy beside the heuristics.

Starts TensorBoard on the run folder (127.0.0.1 only, a free port), waits
until it serves the Custom Scalars plugin, opens the page in headless Chromium
with the smoothing set (0 by default: the evaluation curves have about 20
points), widens the first chart (the learned policy and every reference on
one axis), opens the legends ("Matches") of the first category's charts, saves
a PNG and stops TensorBoard and Chromium::

    python scripts/tb_screenshot.py runs/mixed__ppo__0__20261130-101500 \\
        --output docs/img/tensorboard-custom-scalars.png

Chromium is driven through the DevTools protocol over a pipe
(``--remote-debugging-pipe``), so nothing but the Python standard library and
a Chromium binary is needed: ``/usr/bin/chromium`` or ``--chromium PATH``
(Debian/Ubuntu: ``apt-get install -y chromium``). Exit status 0 when the PNG
was written, 1 with a message otherwise.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

HOST = "127.0.0.1"

# finds elements through TensorBoard's (Polymer) shadow roots
_DEEP = """
function all(root, sel, out) {
  root.querySelectorAll(sel).forEach(e => out.push(e));
  root.querySelectorAll('*').forEach(e => { if (e.shadowRoot) all(e.shadowRoot, sel, out); });
  return out;
}
function cards() {
  return all(document, 'tf-custom-scalar-multi-line-chart-card, tf-custom-scalar-margin-chart-card', []);
}
"""
_READY = """
const cs = cards();
if (!cs.length) return false;
const chart = all(cs[0].shadowRoot, 'vz-line-chart2', [])[0];
return !!chart && all(chart.shadowRoot || chart, 'svg', []).length > 0;
"""
_EXPAND = """
const dash = all(document, 'tf-custom-scalar-dashboard', [])[0];
if (dash) {  // the tooltip lists the series top to bottom; the whole intervals in view
  dash._tooltipSortingMethod = 'descending';
  dash._ignoreYOutliers = false;
}
const cs = cards();
const first = cs[0];
const n = Math.min(cs.length, %d);
for (let i = n > 0 && %s ? 1 : 0; i < n; i++) {
  const t = cs[i].shadowRoot.querySelector('.toggle-matches-button');
  if (t) t.click();
}
for (let i = 0; i < Math.min(cs.length, %d); i++) {
  const full = cs[i].shadowRoot.querySelector('#buttons paper-icon-button[icon="fullscreen"]');
  if (full) full.click();
}
const chart = all(first.shadowRoot, 'vz-line-chart2', [])[0];
const r = chart.getBoundingClientRect();
return [r.left, r.top, r.width, r.height];
"""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def wait_for_custom_scalars(port: int, proc: subprocess.Popen[bytes], timeout: float) -> None:
    """Until TensorBoard lists the Custom Scalars plugin as enabled (a layout was found)."""
    url = f"http://{HOST}:{port}/data/plugins_listing"
    deadline = time.time() + timeout
    last = "no answer"
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"tensorboard exited with status {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                plugins = json.load(r)
            if plugins.get("custom_scalars", {}).get("enabled"):
                return
            last = "the Custom Scalars plugin is not enabled (no layout in the run)"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = str(exc)
        time.sleep(0.5)
    raise RuntimeError(f"tensorboard on port {port} not ready after {timeout:.0f} s: {last}")


def find_chromium(path: str | None) -> str:
    for cand in (
        path,
        "/usr/bin/chromium",
        shutil.which("chromium"),
        shutil.which("chromium-browser"),
    ):
        if cand and Path(cand).is_file():
            return cand
    raise RuntimeError(
        "no Chromium found: install it (apt-get install -y chromium) or pass --chromium PATH"
    )


class Browser:
    """Headless Chromium driven by the DevTools protocol over ``--remote-debugging-pipe``.

    The browser reads commands on its fd 3 and writes replies on fd 4, each a
    JSON message ended by a NUL byte.
    """

    def __init__(self, chromium: str, width: int, height: int, timeout: float) -> None:
        self.timeout = timeout
        to_child_r, self._w = os.pipe()
        self._r, from_child_w = os.pipe()

        def fds() -> None:  # in the child: the protocol pipes on fds 3 and 4
            a, b = os.dup(to_child_r), os.dup(from_child_w)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self._profile = tempfile.TemporaryDirectory()
        self.proc = subprocess.Popen(
            [
                chromium,
                "--headless",
                "--no-sandbox",  # root in a container has no user namespace for the sandbox
                "--disable-gpu",
                "--hide-scrollbars",
                "--no-first-run",
                "--remote-debugging-pipe",
                f"--user-data-dir={self._profile.name}",
                f"--window-size={width},{height}",
            ],
            pass_fds=(3, 4),
            preexec_fn=fds,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        os.close(to_child_r)
        os.close(from_child_w)
        self._buf = b""
        self._id = 0
        self.session: str | None = None
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        self.send(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
        )

    def send(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params or {}}
        if self.session is not None:
            msg["sessionId"] = self.session
        os.write(self._w, json.dumps(msg).encode() + b"\0")
        deadline = time.time() + self.timeout
        while True:
            while b"\0" not in self._buf:
                if time.time() > deadline:
                    raise RuntimeError(f"chromium: no answer to {method}")
                chunk = os.read(self._r, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"chromium closed the protocol pipe during {method}")
                self._buf += chunk
            raw, self._buf = self._buf.split(b"\0", 1)
            reply = json.loads(raw)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"chromium: {method}: {reply['error']}")
                return dict(reply.get("result", {}))

    def evaluate(self, body: str) -> Any:
        res = self.send(
            "Runtime.evaluate",
            {"expression": f"(() => {{ {_DEEP} {body} }})()", "returnByValue": True},
        )
        return res.get("result", {}).get("value")

    def close(self) -> None:
        try:
            self.session = None
            self.send("Browser.close")
        except (RuntimeError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self._r)
        os.close(self._w)
        self._profile.cleanup()


def screenshot(
    chromium: str,
    url: str,
    output: Path,
    width: int,
    height: int,
    legends: int,
    wide: int,
    hover: float | None,
    settle: float,
    timeout: float,
) -> None:
    browser = Browser(chromium, width, height, timeout)
    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", {"url": url})
        deadline = time.time() + timeout
        while not browser.evaluate(_READY):
            if time.time() > deadline:
                raise RuntimeError("the Custom Scalars charts did not appear")
            time.sleep(0.5)
        time.sleep(settle)  # the charts fetch their data
        # with the tooltip, the first chart's legend would sit under it: not opened
        skip_first = "true" if hover is not None else "false"
        left, top, w, h = browser.evaluate(_EXPAND % (legends, skip_first, wide))
        time.sleep(settle)  # the widened charts re-render
        if hover is not None:  # the tooltip: every series' name and value at that step
            x, y = left + hover * w, top + 0.5 * h
            browser.send("Input.dispatchMouseEvent", {"type": "mouseMoved", "x": x, "y": y})
            time.sleep(1.0)
        png = browser.send("Page.captureScreenshot", {"format": "png"})["data"]
    finally:
        browser.close()
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_bytes(base64.b64decode(png))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("run", type=Path, help="run folder (or its tensorboard/ folder, or any logdir)")
    ap.add_argument(
        "--output",
        type=Path,
        default=Path("docs/img/tensorboard-custom-scalars.png"),
        help="PNG to write (default: docs/img/tensorboard-custom-scalars.png)",
    )
    ap.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    ap.add_argument("--chromium", default=None, help="Chromium binary (default: /usr/bin/chromium)")
    ap.add_argument("--width", type=int, default=1400, help="window width, pixels (default: 1400)")
    ap.add_argument(
        "--height", type=int, default=1350, help="window height, pixels (default: 1350)"
    )
    ap.add_argument("--smoothing", type=float, default=0.0, help="smoothing 0..1 (default: 0)")
    ap.add_argument(
        "--legends",
        type=int,
        default=2,
        help="charts, from the first, whose legend (Matches) is opened (default: 2)",
    )
    ap.add_argument(
        "--wide",
        type=int,
        default=2,
        help="charts, from the first, shown full width (default: 2: the comparison and the ratio)",
    )
    ap.add_argument(
        "--hover",
        type=float,
        default=None,
        metavar="X",
        help="move the mouse over the first chart at X (0..1 of its width) to show its tooltip",
    )
    ap.add_argument(
        "--settle", type=float, default=4.0, help="seconds to let charts render (default: 4)"
    )
    ap.add_argument(
        "--timeout", type=float, default=120.0, help="seconds for each stage (default: 120)"
    )
    args = ap.parse_args(argv)
    if not args.run.exists():
        print(f"error: {args.run} does not exist", file=sys.stderr)
        return 1
    try:
        chromium = find_chromium(args.chromium)
    except RuntimeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    port = args.port or free_port()
    command = [sys.executable, "-m", "tensorboard.main", "--logdir", str(args.run)]
    command += ["--host", HOST, "--port", str(port)]  # this machine only
    tb = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://{HOST}:{port}/#custom_scalars&_smoothingWeight={args.smoothing:g}"
    try:
        wait_for_custom_scalars(port, tb, args.timeout)
        screenshot(
            chromium,
            url,
            args.output,
            args.width,
            args.height,
            args.legends,
            args.wide,
            args.hover,
            args.settle,
            args.timeout,
        )
    except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        tb.terminate()
        try:
            tb.wait(timeout=10)
        except subprocess.TimeoutExpired:
            tb.kill()
            tb.wait()
    print(f"wrote {args.output} ({url})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
