"""`remat-tui FILE --web`: the app served to a browser by textual-serve, on
localhost only. Every request goes to 127.0.0.1, bounded in count and time."""

import asyncio
import re
import shlex
import socket
import subprocess
import time
import urllib.request

import pytest
from conftest import example

from remat_tui import cli

DEADLINE = 60  # seconds for the server to answer and the app to draw


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as resp:
        return resp.status, resp.read().decode("utf-8")


async def first_app_frame(url: str, timeout: float) -> str:
    """Connect as the browser page does and read the app's output until a
    frame shows the residual summary; the terminal text without escapes."""
    import aiohttp

    seen = b""
    async with aiohttp.ClientSession() as session:
        async with session.ws_connect(url) as ws:
            await ws.send_json(["resize", {"width": 140, "height": 40}])
            end = time.monotonic() + timeout
            while time.monotonic() < end:
                try:
                    msg = await ws.receive(timeout=1)
                except TimeoutError:
                    continue
                if msg.type == aiohttp.WSMsgType.BINARY:
                    seen += msg.data
                elif msg.type == aiohttp.WSMsgType.TEXT:
                    seen += msg.data.encode()
                else:
                    break
                text = re.sub(rb"\x1b\[[0-9;?]*[A-Za-z]", b"", seen).decode("utf-8", "replace")
                # (an aval of the residual table: the sidebar's names hide below 100 columns)
                if "residuals" in text and "f32[64,128]" in text:
                    return text
    raise AssertionError(f"no app frame within {timeout} s; got {seen[-500:]!r}")


def test_web_serves_the_app_on_localhost(remat_tui_cmd):
    port = free_port()
    proc = subprocess.Popen(
        [remat_tui_cmd, example("mlp.py"), "--web", "--port", str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        end = time.monotonic() + DEADLINE
        while True:
            assert proc.poll() is None, proc.communicate()[0]
            try:
                status, page = get(f"http://127.0.0.1:{port}/")
                break
            except OSError:
                if time.monotonic() > end:
                    raise
                time.sleep(0.2)
        assert status == 200
        assert 'class="textual-terminal"' in page and "data-session-websocket-url" in page
        assert "remat-tui mlp.py" in page  # the page's title names the target file
        # The page's websocket runs the app itself: its first frame arrives.
        frame = asyncio.run(first_app_frame(f"ws://127.0.0.1:{port}/ws", DEADLINE))
        assert "save_only_these_names" in frame or "as written" in frame
    finally:
        proc.terminate()
        try:
            out = proc.communicate(timeout=15)[0]
        except subprocess.TimeoutExpired:
            proc.kill()
            out = proc.communicate()[0]
    assert proc.returncode == 0, out  # SIGTERM stops the server cleanly
    assert f"http://localhost:{port}" in out


def test_web_binds_localhost_and_quotes_the_app_command(monkeypatch, tmp_path):
    import textual_serve.server

    made = {}

    class FakeServer:
        def __init__(self, command, host, port, title):
            made.update(command=command, host=host, port=port, title=title)

        def serve(self):
            made["served"] = True

    monkeypatch.setattr(textual_serve.server, "Server", FakeServer)
    path = tmp_path / "it's a model; rm -rf $HOME.py"
    path.write_text("x = 1\n")
    assert cli.main([f"{path}:loss", "--web", "--policy", "dots_saveable", "--port", "9"]) == 0
    assert made["host"] == "localhost" and made["port"] == 9 and made["served"]
    argv = shlex.split(made["command"])  # what the shell textual-serve runs sees
    assert argv[1:] == ["-m", "remat_tui", f"{path}:loss", "--policy", "dots_saveable"]


@pytest.mark.parametrize(
    "args,fragment",
    [
        (["--port", "8000"], "--port is for --web"),
        (["--web", "--port", "70000"], "give a port from 1 to 65535"),
        (["--web", "--policy", "save_only_these_names(1)"], "expected a quoted name"),
    ],
)
def test_web_bad_options_exit_2(capsys, args, fragment):
    assert cli.main([example("mlp.py"), *args]) == 2
    assert fragment in capsys.readouterr().err


def test_web_port_in_use_exits_2(remat_tui_cmd):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = subprocess.run(
            [remat_tui_cmd, example("mlp.py"), "--web", "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert proc.returncode == 2
    assert f"cannot serve on localhost:{port}" in proc.stderr and "another --port" in proc.stderr
