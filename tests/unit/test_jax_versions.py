"""A JAX remat-tui has not seen: it says so once, and an assumption about
JAX's internals that fails names the JAX version and what was expected."""

from types import SimpleNamespace

import jax
import pytest
from conftest import example

from remat_tui import cli
from remat_tui.core import jaxcompat as jc


@pytest.mark.parametrize(
    "version, said", [("0.13.0", "newer"), ("0.9.1", "older"), ("0.12.0.1", None)]
)
def test_untested_versions_are_named(monkeypatch, version, said):
    monkeypatch.setattr(jax, "__version__", version)
    message = jc.untested_message()
    if said is None:
        assert message is None
    else:
        assert version in message and said in message


def test_the_cli_warns_once_on_stderr(monkeypatch, capsys):
    monkeypatch.setattr(jax, "__version__", "0.13.0")
    assert cli.main(["report", example("mlp.py"), "--format", "json"]) == 0
    err = capsys.readouterr().err
    assert err.count("JAX 0.13.0 is newer than remat-tui was tested with") == 1


def test_a_changed_internal_names_the_version_and_the_expectation():
    eqn = SimpleNamespace(primitive=SimpleNamespace(name="scan"), params={}, invars=[])
    with pytest.raises(jc.JaxChanged) as caught:
        jc.scan_layout(eqn)
    text = caught.value.message
    assert f"JAX {jax.__version__}" in text and "a scan equation" in text
