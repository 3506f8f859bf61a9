"""Contract 1: target files, selection, and the errors a user sees."""

import pytest

import remat_tui
from remat_tui.core.setup import loading
from remat_tui.errors import RematError

GOOD = """
import jax.numpy as jnp
import remat_tui

@remat_tui.target(args=lambda: (jnp.ones(3),))
def first(x):
    return jnp.sin(x)

@remat_tui.target(args=(jnp.ones(2),), kwargs=lambda: {"scale": 2.0}, name="second")
def other(x, scale):
    return jnp.cos(x) * scale
"""


def test_load_collects_targets_in_order_with_arguments(write_target):
    targets = remat_tui.load_targets(write_target(GOOD))
    assert list(targets) == ["first", "second"]
    args, kwargs = loading.resolve_arguments(targets["second"])
    assert args[0].shape == (2,) and kwargs == {"scale": 2.0}
    assert targets["first"].file.endswith("target.py")


def test_target_returns_the_callable_unchanged():
    def f(x):
        return x

    assert remat_tui.target(args=())(f) is f


def test_file_name_selection(write_target):
    path = write_target(GOOD)
    assert loading.load_target(f"{path}:second").name == "second"
    with pytest.raises(RematError, match="has 2 targets: first, second"):
        loading.load_target(path)
    with pytest.raises(RematError, match="no target named 'third'"):
        loading.load_target(f"{path}:third")


def test_target_file_can_import_its_neighbours(write_target):
    write_target("def helper(x):\n    return x * 2\n", name="helpers.py")
    path = write_target(
        "import remat_tui, jax.numpy as jnp\nfrom helpers import helper\n"
        "@remat_tui.target(args=lambda: (jnp.ones(2),))\n"
        "def f(x):\n    return helper(x)\n"
    )
    assert list(remat_tui.load_targets(path)) == ["f"]


@pytest.mark.parametrize(
    "source,fragments",
    [
        ("def f(:\n", ["syntax error at line 1"]),
        (
            "import remat_tui\n\ndef boom():\n    raise ValueError('bad config')\n\nboom()\n",
            ["importing the file raised", "ValueError: bad config", "line 4, in boom"],
        ),
        ("x = 1\n", ["registers no targets"]),
    ],
)
def test_broken_files_get_one_clear_message(write_target, source, fragments):
    with pytest.raises(RematError) as err:
        remat_tui.load_targets(write_target(source))
    for fragment in fragments:
        assert fragment in err.value.message
    assert "remat_tui/" not in err.value.message  # no frames of ours


def test_missing_file():
    with pytest.raises(RematError, match="no such file"):
        remat_tui.load_targets("/nonexistent/model.py")


def test_args_factory_that_raises_shows_the_users_frame(write_target):
    path = write_target(
        "import remat_tui\n\ndef make():\n    return 1 / 0\n\n"
        "@remat_tui.target(args=make)\ndef f(x):\n    return x\n"
    )
    target = remat_tui.load_targets(path)["f"]
    with pytest.raises(RematError) as err:
        loading.resolve_arguments(target)
    assert "args factory raised" in err.value.message
    assert "ZeroDivisionError" in err.value.message and "line 4, in make" in err.value.message


def test_args_of_the_wrong_type(write_target):
    path = write_target(
        "import remat_tui\n@remat_tui.target(args=lambda: 3)\ndef f(x):\n    return x\n"
    )
    with pytest.raises(RematError, match="args must be a tuple"):
        loading.resolve_arguments(remat_tui.load_targets(path)["f"])


def test_duplicate_names(write_target):
    path = write_target(
        "import remat_tui\n@remat_tui.target()\ndef f():\n    pass\n"
        "g = remat_tui.target(name='f')(lambda: 0)\n"
    )
    with pytest.raises(RematError, match="two targets are named 'f'"):
        remat_tui.load_targets(path)


def test_split_target_ref():
    assert loading.split_target_ref("a/b.py:loss") == ("a/b.py", "loss")
    assert loading.split_target_ref("a/b.py") == ("a/b.py", None)


def test_target_module_with_dataclasses_and_future_annotations(write_target):
    path = write_target(
        "from __future__ import annotations\n"
        "import dataclasses\nimport jax.numpy as jnp\nimport remat_tui\n\n"
        "@dataclasses.dataclass\nclass Config:\n    width: int = 3\n\n"
        "@remat_tui.target(args=lambda: (jnp.ones(Config().width),))\n"
        "def f(x):\n    return jnp.sin(x)\n"
    )
    assert list(remat_tui.load_targets(path)) == ["f"]


def test_syntax_error_in_an_imported_neighbour_names_that_file(write_target):
    write_target("def broken(:\n", name="helper.py")
    path = write_target("import helper\n")
    with pytest.raises(RematError) as err:
        remat_tui.load_targets(path)
    assert "helper.py: syntax error at line 1" in err.value.message
