"""The README stays the way in (short, the two commands, links that resolve),
the test command it gives is the one CI and nox install, and no path of a
development machine reaches a page a user reads."""

import os
import re

from conftest import ROOT

TEST_COMMAND = (
    "python3 -m venv .venv && . .venv/bin/activate && "
    "pip install -e '.[test,examples,tpu,notebook,ray]' && python -m pytest -n auto"
)
USER_READ = ["README.md", "CONTRIBUTING.md", "bench/README.md", "mkdocs.yml"]
MACHINE_PATH = re.compile(r"/work/|\.\./shared|/root/|/home/\w|/tmp/")


def read(path: str) -> str:
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def docs_files(*extensions: str) -> list[str]:
    found = []
    for folder, _, files in os.walk(os.path.join(ROOT, "docs")):
        found += [
            os.path.relpath(os.path.join(folder, f), ROOT) for f in files if f.endswith(extensions)
        ]
    return sorted(found)


def test_readme_is_short_and_shows_the_two_commands():
    readme = read("README.md")
    assert len(readme.splitlines()) <= 200
    blocks = re.findall(r"```sh\n(.*?)```", readme, flags=re.S)
    lines = [line.strip() for block in blocks for line in block.splitlines()]
    assert "remat-tui examples/mlp.py" in lines
    assert TEST_COMMAND in lines
    assert "![" in readme and "(docs/screenshot.svg)" in readme


def test_ci_and_nox_install_what_the_readme_test_command_installs():
    extras = re.search(r"pip install -e '(\.\[[^\]]*\])'", TEST_COMMAND)[1]
    assert f"pip install --quiet -e '{extras}'" in read(".ci/run")
    assert f'EXTRAS = "{extras}"' in read("noxfile.py")
    assert "mkdocs build --strict" in read(".ci/run")
    # and CI runs the suite as the command does (one worker per core)
    pytest_command = TEST_COMMAND.split(" && ")[-1]
    assert pytest_command in read(".ci/run").splitlines()


def test_relative_links_resolve():
    """Links in the files read on the repository's own pages (the site's
    pages are checked by `mkdocs build --strict`)."""
    for page in ("README.md", "CONTRIBUTING.md", "bench/README.md"):
        folder = os.path.dirname(os.path.join(ROOT, page))
        for target in re.findall(r"\]\(([^)#\s]+)", read(page)):
            if re.match(r"[a-z]+://", target):
                continue
            assert os.path.exists(os.path.join(folder, target)), f"{page} links to {target}"


def test_no_development_machine_path_where_users_read():
    for path in USER_READ + docs_files(".md", ".svg"):
        found = MACHINE_PATH.search(read(path))
        assert found is None, f"{path} names {found[0]!r}"


def test_every_second_cpu_device_comes_with_the_flag_that_makes_it():
    """JAX gives one CPU device unless XLA_FLAGS asks for more: a page that
    shows `cpu:1` says how to get it in the same section, and the command it
    shows runs as written (without the flag the test suite itself sets)."""
    import subprocess

    commands = []
    for path in ["README.md", *docs_files(".md")]:
        for section in re.split(r"\n#+ ", read(path)):
            if re.search(r"cpu:[1-9]", section):
                assert "xla_force_host_platform_device_count" in section, (path, section[:80])
            for block in re.findall(r"```sh\n(.*?)```", section, flags=re.S):
                commands += [c.strip() for c in block.splitlines() if re.search(r"cpu:[1-9]", c)]
    assert commands, "no page shows a command on a second CPU device"
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    for command in commands:
        proc = subprocess.run(
            command, shell=True, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, (command, proc.stderr[-2000:])


def _api_pages_objects():
    """Every object whose docstring the API and results pages render (their
    `::: name` lines)."""
    import importlib

    for page in ("docs/reference/api.md", "docs/reference/results.md"):
        for name in re.findall(r"^::: ([\w.]+)", read(page), flags=re.M):
            module, _, attr = name.rpartition(".")
            obj = getattr(importlib.import_module(module), attr)
            yield name, obj
            for member in vars(obj).values() if isinstance(obj, type) else ():
                public = not getattr(member, "__name__", "_").startswith("_")
                if public and getattr(member, "__doc__", None):
                    yield f"{name}.{member.__name__}", member


def test_the_api_pages_speak_to_users_not_to_maintainers():
    """A docstring the API page renders says what the function does, not how
    long its own code is (a note for maintainers belongs in a comment)."""
    import inspect

    maintainer_words = re.compile(r"\b(over|under) \d+ lines\b|\bthe code is \d+", re.I)
    for name, obj in _api_pages_objects():
        doc = inspect.getdoc(obj) or ""
        assert not maintainer_words.search(doc), (name, maintainer_words.search(doc)[0])


def test_reference_tables_keep_their_keys_whole():
    """Material breaks inline code anywhere (`jax_versio` / `n` in the JSON
    report's key column): the site's stylesheet keeps a table's keys whole."""
    config = read("mkdocs.yml")
    sheets = re.findall(r"^extra_css:\n((?:\s+- .*\n)+)", config, flags=re.M)
    assert sheets, "mkdocs.yml names no extra stylesheet"
    paths = re.findall(r"- (\S+)", sheets[0])
    css = "".join(read(os.path.join("docs", p)) for p in paths)
    rule = re.search(r"table[^{]*td:first-child code\s*\{([^}]*)\}", css)
    assert rule and "white-space: nowrap" in rule[1] and "word-break: normal" in rule[1]
