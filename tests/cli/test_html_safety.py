"""The HTML report is safe to open: headless Chromium renders a report whose
file path, folder, target name, checkpoint_name, argument key, policy names,
function names (jitted and checkpointed) and source lines all carry planted
markup and script, and nothing runs,
everything planted shows as text, and nothing is fetched from the network.

A control page with the same payloads left unescaped proves the harness would
see it if they did run or fetch. Needs Debian's `chromium`; skipped without
it, except in CI (CI set), where it fails.
"""

import json
import os
import shutil
import subprocess
from html.parser import HTMLParser

import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("CI"):
        pytest.fail(
            "CI is set but chromium is not installed: .ci/run installs it "
            "(apt-get install chromium); the HTML safety tests must run in CI.",
            pytrace=False,
        )
    pytest.skip(
        "chromium not installed (apt-get install chromium); the HTML safety tests "
        "render the report in headless Chromium",
        allow_module_level=True,
    )

# Each payload, if it ever ran, marks <html> with data-pwned=WHERE. None needs a
# slash except the stylesheet <link>, so file and folder names carry the rest.
PWN = "document.documentElement.setAttribute('data-pwned','{}')"


def payload(where: str, slash: bool = True) -> str:
    js = PWN.format(where)
    text = f"<script>{js}</script>" if slash else f"<script>{js}"
    text += f'<img src=x onerror="{js}">"><svg onload="{js}">'
    if slash:
        text += f"<link rel=stylesheet href=http://example.invalid/{where}.css>"
    return text


NAME, CKPT, ARG, COMMENT, UNKNOWN, FUNC = (
    payload(w) for w in ("name", "ckpt", "arg", "src", "spec", "func")
)
FOLDER, FILE = payload("folder", slash=False), payload("file", slash=False) + ".py"

SOURCE = f"""\
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui


def block(x):  # {COMMENT}
    return jnp.cos(x) * x


block.__name__ = block.__qualname__ = {FUNC!r}


@remat_tui.target(args=lambda: ({{{ARG!r}: jnp.ones(3)}},), name={NAME!r})
def f(d):  # {COMMENT}
    y = checkpoint_name(jnp.sin(d[{ARG!r}]), {CKPT!r})  # {COMMENT}
    y = jax.jit(block)(y) + jax.checkpoint(block)(y)
    return jnp.sum(jnp.sin(y))
"""
POLICY = f"save_only_these_names({CKPT!r}, {UNKNOWN!r})"


def chromium(url: str, tmp_path) -> tuple[str, list[dict]]:
    """The DOM after load (scripts run), and the URL requests the page made,
    from Chromium's net log. Every host resolves to nothing and every request
    goes to a closed proxy on loopback, so not even Chromium's own background
    requests leave the machine."""
    profile, netlog = tmp_path / "profile", tmp_path / "net.json"
    proc = subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--proxy-server=http://127.0.0.1:9",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--log-net-log={netlog}",
            "--dump-dom",
            url,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "<html" in proc.stdout, proc.stderr[-2000:]
    log = json.loads(netlog.read_text())
    names = {v: k for k, v in log["constants"]["logEventTypes"].items()}
    requests = [
        e["params"]
        for e in log["events"]
        if names.get(e["type"]) == "URL_REQUEST_START_JOB" and "url" in e.get("params", {})
    ]
    # The page's own requests: isolated under its file:// origin (Chromium's
    # background requests, to its update and account services, are not).
    return proc.stdout, [r for r in requests if "file://" in r.get("network_isolation_key", "")]


class _Dom(HTMLParser):
    RESOURCE_ATTRS = {
        "src", "href", "srcset", "action", "formaction", "data", "poster",
        "background", "xlink:href", "ping", "manifest", "icon",
    }  # fmt: skip

    def __init__(self):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.title = ""
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))
        self._in_title = tag == "title"

    def handle_endtag(self, tag):
        self._in_title = False

    def handle_data(self, data):
        self.text.append(data)
        if self._in_title:
            self.title += data

    def marked(self) -> list[str]:
        return [a["data-pwned"] for _, a in self.elements if "data-pwned" in a]

    def resources(self) -> list[tuple[str, str, str]]:
        return [
            (tag, k, v)
            for tag, attrs in self.elements
            for k, v in attrs.items()
            if k in self.RESOURCE_ATTRS or (k == "style" and "url(" in (v or ""))
        ]


def parse(dom: str) -> _Dom:
    parser = _Dom()
    parser.feed(dom)
    return parser


def test_harness_sees_a_payload_that_runs_or_fetches(tmp_path):
    """Control: the payloads unescaped do run and fetch, and the checks see it."""
    page = tmp_path / "unsafe.html"
    page.write_text(f"<!DOCTYPE html><html><head><title>t</title></head><body>{NAME}</body></html>")
    dom, requests = chromium(page.as_uri(), tmp_path)
    got = parse(dom)
    assert "name" in got.marked()  # the script (or onerror, or onload) ran
    assert ("link", "href", "http://example.invalid/name.css") in got.resources()
    assert any(r["url"] == "http://example.invalid/name.css" for r in requests)


def test_report_with_planted_markup_runs_nothing_and_fetches_nothing(remat_tui_cmd, tmp_path):
    folder = tmp_path / FOLDER
    folder.mkdir()
    target = folder / FILE
    target.write_text(SOURCE)
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [remat_tui_cmd, "report", str(target), "--policy", POLICY, "--format", "html"]
        + ["-o", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "defines no checkpoint_name" in proc.stderr  # UNKNOWN is shown as a warning too

    dom, requests = chromium(out.as_uri(), tmp_path)
    got = parse(dom)
    assert got.marked() == [], "a planted script ran"
    assert {tag for tag, _ in got.elements}.isdisjoint({"script", "img", "svg", "link", "iframe"})
    assert got.resources() == [], "the report refers to a resource"
    assert requests == [], "the report made the browser fetch something"
    # Everything planted is on the page, as text.
    text = "".join(got.text)
    # (argument paths and policy specs quote names as Python does).
    for planted in (NAME, CKPT, f"d[{ARG!r}]", repr(UNKNOWN), FUNC, FILE, f"{FOLDER}/{FILE}"):
        assert planted in text, planted
    assert got.title.startswith(f"remat-tui: {NAME} under ")
