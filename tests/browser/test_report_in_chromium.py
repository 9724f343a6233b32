"""The HTML report in headless Chromium: the charts are drawn, and the console stays silent.

How the checks work, with nothing but the standard library: Chromium runs
with ``--enable-logging=stderr --v=0``, which prints every console message
(including Content-Security-Policy violations) as an ``INFO:CONSOLE`` line
on stderr; the page has no script at all, so any such line, or an
``Uncaught`` one, fails the test.  A control test serves a page that breaks
the same CSP and checks that the scan sees it, so the check cannot pass
vacuously.  The screenshot is decoded here (zlib, the five PNG filters) and
its pixels counted: a blank page has a handful of colours, the report has
thousands, and the line colours of every chart appear.
"""

from __future__ import annotations

import re
import struct
import subprocess
import zlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from support.live import in_thread, serving_report
from support.requirements import require_binary

from tokenwire.report.templating import csp

CHROMIUM_TIMEOUT_S = 90
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run",
         "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]
# The colours in report.css of the charts' lines and of the shaded outage (the drop-oldest line, dashed and
# 50 ms long on a 1000 ms axis, is too thin at half scale to count).
LINE_COLOURS = {"fast reader": (0x1F, 0x6F, 0xEB), "slow reader": (0xC2, 0x41, 0x0C),
                "outage shading": (0xF5, 0xD0, 0xD0), "after the reconnect": (0x15, 0x80, 0x3D)}
CONSOLE_LINE = re.compile(r"^.*(?::CONSOLE|Uncaught).*$", re.M)


def chromium(url: str, profile: Path, *extra: str) -> tuple[str, str]:
    """Run headless Chromium on ``url``; returns (stdout, stderr)."""
    exe = require_binary("chromium")
    done = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *extra, url],
                          capture_output=True, timeout=CHROMIUM_TIMEOUT_S, check=False)
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0, stderr[-3000:]
    return done.stdout.decode(errors="replace"), stderr


def console_lines(stderr: str) -> list[str]:
    return CONSOLE_LINE.findall(stderr)


# ---------------------------------------------------------------- PNG pixels


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def png_pixels(data: bytes) -> tuple[int, int, Counter[bytes]]:
    """Return width, height and a count of RGB values of an 8-bit RGB(A) PNG."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, [], b""
    while pos < len(data):
        size, kind = struct.unpack(">I4s", data[pos:pos + 8])
        chunk, pos = data[pos + 8:pos + 8 + size], pos + 12 + size
        if kind == b"IHDR":
            header = chunk
        elif kind == b"IDAT":
            idat.append(chunk)
    width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", header)
    assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
    bpp = 3 if colour == 2 else 4
    raw, stride = zlib.decompress(b"".join(idat)), width * bpp
    prev, counts = bytearray(stride), Counter[bytes]()
    for y in range(height):
        kind, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if kind == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev, strict=True))
        elif kind in (1, 3, 4):
            for x in range(stride):
                left = line[x - bpp] if x >= bpp else 0
                up_left = prev[x - bpp] if x >= bpp else 0
                guess = left if kind == 1 else (left + prev[x]) // 2 if kind == 3 else _paeth(left, prev[x], up_left)
                line[x] = (line[x] + guess) & 255
        counts.update(bytes(line[x:x + 3]) for x in range(0, stride, bpp))
        prev = line
    return width, height, counts


def near(counts: Counter[bytes], colour: tuple[int, int, int], tolerance: int = 40) -> int:
    return sum(n for px, n in counts.items() if all(abs(a - b) <= tolerance for a, b in zip(px, colour, strict=True)))


# ---------------------------------------------------------------- tests


def screenshot(query: str, tmp_path: Path, height: int) -> tuple[bytes, str]:
    """The report page for ``query``, 1200 CSS px wide and ``height`` tall, drawn at half scale to keep
    decoding quick; returns the PNG and Chromium's stderr."""
    shot = tmp_path / "page.png"
    with serving_report() as (host, port):
        _, stderr = chromium(f"http://{host}:{port}/?{query}", tmp_path / "profile",
                             "--force-device-scale-factor=0.5", f"--window-size=1200,{height}", f"--screenshot={shot}")
    return shot.read_bytes(), stderr


def test_report_page_draws_every_chart_without_console_messages(tmp_path: Path) -> None:
    png, stderr = screenshot("format=html&scenario=drop", tmp_path, 7000)      # tall enough for the whole page
    assert console_lines(stderr) == []
    width, height, counts = png_pixels(png)
    assert (width, height) == (600, 3500)
    assert len(counts) > 500, f"only {len(counts)} colours: the page looks blank"
    background = counts.most_common(1)[0][1]
    assert background < 0.9 * width * height
    for line, colour in LINE_COLOURS.items():
        assert near(counts, colour) >= 20, f"no {line} line in the screenshot"


def test_first_screen_is_not_blank(tmp_path: Path) -> None:
    png, stderr = screenshot("format=html", tmp_path, 2400)
    assert console_lines(stderr) == []
    _, _, counts = png_pixels(png)
    assert len(counts) > 200


def test_dom_holds_the_charts_the_holes_and_no_script(tmp_path: Path) -> None:
    with serving_report() as (host, port):
        dom, stderr = chromium(f"http://{host}:{port}/?format=html&scenario=drop-oldest", tmp_path / "profile",
                               "--dump-dom")
    assert console_lines(stderr) == []
    # arrivals, gaps, delivered per policy, four buffer depths on one time axis, the resume
    assert dom.count('<figure class="chart">') == 8
    assert dom.count("<polyline") == 2 + 1 + 4 + 2 and dom.count('<polygon class="band') == 4
    assert 'class="mark"' in dom and "Last-Event-ID: 17" in dom
    assert dom.count('class="hole"') > 0 and 'class="lost"' not in dom
    assert "<script" not in dom
    assert 'aria-current="page">drop-oldest<' in dom


class _Broken(BaseHTTPRequestHandler):
    """A page that breaks the report's CSP twice: an inline script and a style attribute."""

    body = (b'<!doctype html><html><head><title>x</title></head><body><p style="color:red">x</p>'
            b'<script>console.log("hello")</script></body></html>')

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Security-Policy", csp())
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def broken_page() -> Iterator[str]:
    with in_thread(ThreadingHTTPServer(("127.0.0.1", 0), _Broken)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/"


def test_the_console_scan_sees_csp_violations(tmp_path: Path) -> None:
    with broken_page() as url:
        _, stderr = chromium(url, tmp_path / "profile", "--dump-dom")
    lines = console_lines(stderr)
    assert any("Content Security Policy" in line and "script" in line for line in lines), stderr[-3000:]
    assert any("Content Security Policy" in line and "style" in line for line in lines), stderr[-3000:]


@pytest.mark.parametrize("scenario", ["baseline", "disconnect"])
def test_other_scenarios_load_cleanly(tmp_path: Path, scenario: str) -> None:
    with serving_report() as (host, port):
        dom, stderr = chromium(f"http://{host}:{port}/?format=html&scenario={scenario}&tokens=40",
                               tmp_path / "profile", "--dump-dom")
    assert console_lines(stderr) == [] and dom.count('<figure class="chart">') == 8
