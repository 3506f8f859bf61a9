"""The test matrix: both ends of the JAX versions remat-tui supports.

    nox                  # tests-3.11, tests-3.13 and remat3
    nox -l               # list the sessions
    nox -s docs          # build the documentation site, strictly
    nox -s tests-3.13 -- tests/unit/test_oracle.py    # arguments after -- go to pytest
    nox -s tests-3.13 -- -n0 tests/unit/test_oracle.py   # ... in one process, no workers

tests-3.11 is the oldest supported JAX (the `jax>=` bound of pyproject.toml) on
Python 3.11; tests-3.13 the newest JAX pip serves, on Python 3.13 (JAX 0.11 and
later need Python >= 3.12); remat3 the JAX-facing tests on the newest JAX with
JAX_REMAT3=1 (jax.checkpoint bound as remat3).

nox finds each session's interpreter on PATH, as it always does: python3.11 and
python3.13 must be there (CI puts its 3.13 there before running nox).
"""

import os
import re
import tomllib
from pathlib import Path

import nox

ROOT = Path(__file__).resolve().parent
EXTRAS = ".[test,examples,tpu,notebook,ray]"
# What the remat3 session's tests import (pytest and its plugins; flax, equinox
# and optax for the examples test_jaxpr_text prints): not libtpu, Ray or the
# notebook stack, each a large install into that session's own virtualenv.
REMAT3_EXTRAS = ".[test,examples]"
OLDEST = "3.11"  # the Python the oldest JAX is tested on
NEWEST = "3.13"  # the Python the newest JAX is tested on
REMAT3_TESTS = [
    "tests/unit/test_oracle.py",
    "tests/unit/test_edge_cases.py",
    "tests/unit/test_sites.py",
    "tests/unit/test_remat3.py",
    "tests/unit/test_jaxpr_text.py",
    "tests/unit/test_structures.py",
]

# One pytest-xdist worker per core, each taking whole files (pyproject's
# addopts); `-n0` after -- runs in one process (a later -n wins).
WORKERS = ["-n", "auto"]

nox.options.sessions = [f"tests-{OLDEST}", f"tests-{NEWEST}", "remat3"]
nox.options.reuse_venv = "yes"


def _oldest_jax() -> str:
    """The `jax>=` bound of pyproject.toml's dependencies."""
    with open(ROOT / "pyproject.toml", "rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    for dependency in dependencies:
        if m := re.fullmatch(r"jax\s*>=\s*([0-9][0-9.]*)\s*(,.*)?", dependency):
            return m[1]
    raise RuntimeError("pyproject.toml has no jax>= dependency")


@nox.session(python=[OLDEST, NEWEST])
def tests(session: nox.Session) -> None:
    """The full suite: the oldest JAX on Python 3.11, the newest on 3.13."""
    if session.python == OLDEST:
        oldest = _oldest_jax()
        session.install("-e", EXTRAS, f"jax=={oldest}", f"jaxlib=={oldest}")
    else:
        session.install("-e", EXTRAS)
    session.run("python", "-m", "pytest", *WORKERS, *session.posargs)


@nox.session(python=NEWEST)
def remat3(session: nox.Session) -> None:
    """The JAX-facing tests on the newest JAX with JAX_REMAT3=1."""
    session.install("-e", REMAT3_EXTRAS)
    default = [f for f in REMAT3_TESTS if os.path.exists(ROOT / f)]
    session.run(
        "python", "-m", "pytest", *WORKERS, *(session.posargs or default), env={"JAX_REMAT3": "1"}
    )


@nox.session
def docs(session: nox.Session) -> None:
    """The documentation site (mkdocs.yml, docs/), built as CI builds it: a
    broken link, a missing page or an API name that does not resolve fails."""
    session.install("-e", ".[docs]")
    session.run("mkdocs", "build", "--strict", env={"NO_MKDOCS_2_WARNING": "1"})


# The formatter's output changes between ruff releases: the check pins the one
# the tree was formatted with (bump both together: `ruff format .` after).
RUFF = "ruff==0.17.6"
# The type checker, pinned for the same reason: a new mypy finds new things.
MYPY = "mypy==2.4.1"


@nox.session
def lint(session: nox.Session) -> None:
    """The code's form, as CI checks it: ruff's formatting and rules, the
    import-linter contracts (the one-way layers, the app's rooms), which
    import the package, and the types (mypy, configured in pyproject.toml)."""
    session.install("-e", ".", RUFF, "import-linter>=2.1", MYPY)
    session.run("ruff", "format", "--check", ".")
    session.run("ruff", "check", ".")
    session.run("lint-imports")
    session.run("mypy")
