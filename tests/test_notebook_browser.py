"""The compare display in headless Chromium: where scripts run, clicking a
header sorts the rows by that column (again: the other way), numerically.
Needs Debian's `chromium`; skipped without it,
except in CI (CI set), where it fails."""

import os
import re
import shutil
import subprocess

import jax.numpy as jnp
import pytest
from jax.ad_checkpoint import checkpoint_name

import remat_tui

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("CI"):
        pytest.fail("CI is set but chromium is not installed (.ci/run installs it)", pytrace=False)
    pytest.skip("chromium not installed (apt-get install chromium)", allow_module_level=True)


def layers(W1, W2, W3, x):
    x = checkpoint_name(jnp.sin(jnp.dot(W1, x)), name="a")
    x = checkpoint_name(jnp.sin(jnp.dot(W2, x)), name="b")
    return checkpoint_name(jnp.sin(jnp.dot(W3, x)), name="c")


def dom_after_clicks(html: str, header: str, clicks: int, tmp_path) -> str:
    """The page's DOM after clicking the header named `header` `clicks` times."""
    click = (
        "<script>const th = [...document.querySelectorAll('th')]"
        f".find((h) => h.textContent.trim() === {header!r});"
        f"for (let i = 0; i < {clicks}; i++) th.click();</script>"
    )
    page = tmp_path / f"compare{clicks}.html"
    page.write_text(f'<!DOCTYPE html><meta charset="utf-8"><body>{html}{click}</body>')
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
         "--proxy-server=http://127.0.0.1:9", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0 and "<table" in proc.stdout, proc.stderr[-2000:]
    return proc.stdout


def column(dom: str, index: int) -> list[str]:
    """The data-sort values of one column, rows in the order shown."""
    body = dom.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, flags=re.S)
    return [re.findall(r'data-sort="([^"]*)"', row)[index] for row in rows]


def test_clicking_a_header_sorts_the_compare_table(tmp_path):
    args = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
    c = remat_tui.compare(layers, args=args)
    html = c._repr_html_()
    device = 2  # the columns' data-sort values: #, ★, device, ...
    as_compared = [float(r.device_bytes) for r in c.rows]
    assert as_compared != sorted(as_compared)  # else sorting could not be seen

    unsorted = dom_after_clicks(html, "device", 0, tmp_path)
    assert [float(v) for v in column(unsorted, device)] == as_compared
    ascending = [float(v) for v in column(dom_after_clicks(html, "device", 1, tmp_path), device)]
    assert ascending == sorted(as_compared)
    twice = dom_after_clicks(html, "device", 2, tmp_path)
    assert [float(v) for v in column(twice, device)] == sorted(as_compared, reverse=True)
    assert "▼" in twice
