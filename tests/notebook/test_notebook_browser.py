"""The displays in headless Chromium: where scripts run, clicking a compare
header sorts the rows by that column (again: the other way), numerically;
and `show`'s panes wrap in a 900 px notebook, every mark in sight. Needs
Debian's `chromium`; skipped without it, except in CI (CI set), where it fails."""

import os
import re
import shutil
import subprocess

import jax
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
    return dom_after(html + click, f"compare{clicks}", tmp_path)


def dom_after(html: str, name: str, tmp_path, width: int = 1200) -> str:
    """The DOM of a page holding `html` after its scripts ran, in a window
    `width` pixels wide."""
    page = tmp_path / f"{name}.html"
    page.write_text(f'<!DOCTYPE html><meta charset="utf-8"><body>{html}</body>')
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
         "--disable-background-networking", f"--user-data-dir={tmp_path / 'profile'}",
         "--proxy-server=http://127.0.0.1:9", f"--window-size={width},900",
         "--dump-dom", page.as_uri()],
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


# Each pane's marks, measured where they are drawn: a mark whose right edge is
# past its pane's, or a pane wider than its box, is cut off (or hidden in a
# sideways scroll); the count says what was measured.
MEASURE = """<script>
const out = [];
for (const pre of document.querySelectorAll("pre")) {
  const box = pre.getBoundingClientRect();
  const wide = pre.scrollWidth > pre.clientWidth + 1;
  let marks = 0, cut = 0;
  for (const span of pre.querySelectorAll("span span")) {
    if (!/[◀↻⇠]/.test(span.textContent)) continue;
    marks += 1;
    if (span.getBoundingClientRect().right > box.right + 1) cut += 1;
  }
  out.push(`${marks}:${cut}:${wide}`);
}
document.body.setAttribute("data-measured", out.join(" "));
</script>"""


def g(W, x):
    return jnp.sin(jnp.dot(W, x))


def f2(W1, W2, W3, x):
    x = jax.checkpoint(g)(W1, x)
    x = jax.checkpoint(g)(W2, x)
    return jax.checkpoint(g)(W3, x)


@pytest.mark.parametrize("width", [900, 1400])
def test_show_panes_wrap_and_keep_every_mark_in_sight(tmp_path, width):
    args = (jnp.ones((5, 4)), jnp.ones((6, 5)), jnp.ones((7, 6)), jnp.ones(4))
    html = remat_tui.analyze(f2, args=args)._repr_html_()
    dom = dom_after(html + MEASURE, f"show{width}", tmp_path, width)
    measured = re.search(r'data-measured="([^"]*)"', dom).group(1).split()
    panes = [m.split(":") for m in measured]
    forward, backward = panes[-2], panes[-1]  # the snippet's <pre> comes first
    assert int(forward[0]) > 0 and int(backward[0]) > 0, measured
    for _, cut, wide in (forward, backward):
        assert cut == "0" and wide == "false", measured
