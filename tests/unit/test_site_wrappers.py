"""Sites applied by a library's wrapper (nn.remat, nnx.remat,
eqx.filter_checkpoint) name the wrapper's call and the argument to change
(issue 30, item 4), and the code to paste there does what it says.

The oracle for lines is the source file itself, read here; for the code to
paste, JAX's own residual list of the model with that change made by hand
(its factory given the new config string or policy).
"""

import ast
import functools
import os
import re

import pytest

pytest.importorskip("flax")
pytest.importorskip("equinox")
pytest.importorskip("optax")

import jax  # noqa: E402
from conftest import example, jax_saved_residuals  # noqa: E402

import remat_tui  # noqa: E402
from remat_tui.core.model import Source  # noqa: E402
from remat_tui.core.setup import loading  # noqa: E402

VIT = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "vit_linen.py")
LAYERS = os.path.join(os.path.dirname(os.path.dirname(__file__)), "models", "library_layers.py")


def line_of(path: str, text: str, after: int = 0) -> int:
    """The first line after `after` of the file holding `text`."""
    with open(path) as fh:
        for number, line in enumerate(fh, 1):
            if number > after and text in line:
                return number
    raise AssertionError(f"{text!r} is not in {path}")


@functools.cache
def load(path: str, name: str = "loss"):
    target = loading.load_targets(path)[name]
    return target, loading.resolve_arguments(target)


def texts(analysis):
    return [r.text for r in analysis.residuals]


# (file, target, text on the wrapper call's line, the call, what it wraps, its
# policy argument, text on the line that runs the site)
WRAPPED = [
    (VIT, "loss", "block = nn.remat(", "nn.remat", "Encoder1DBlock",
     "getattr(jax.checkpoint_policies, self.remat_policy, None)", "x, _ = nn.scan("),
    (example("flax_linen.py"), "loss", "= nn.remat(Block", "nn.remat", "Block", "self.remat_policy",
     'x, _ = Blocks(name="blocks")'),
    (example("flax_nnx.py"), "loss", "= nnx.remat(forward", "nnx.remat", "forward",
     "self.remat_policy", "x = forward(self.embed(tokens), self.blocks)"),
    (example("equinox_transformer.py"), "loss", "= eqx.filter_checkpoint(step",
     "eqx.filter_checkpoint", "step", "remat_policy", "x, _ = jax.lax.scan(step"),
    (LAYERS, "nnx_bf16", "nnx.remat(self.first", "nnx.remat", "self.first",
     "getattr(CP, self.policy)", "h = nnx.remat(self.first"),
]  # fmt: skip


@pytest.mark.parametrize(("path", "name", "written", "call", "wrapped", "policy", "runs"), WRAPPED)
def test_a_wrapped_site_names_the_wrapper_call(path, name, written, call, wrapped, policy, runs):
    target, _ = load(path, name)
    (site,) = remat_tui.analyze(target).sites
    called = line_of(path, written)
    assert site.source.file == path and site.source.line == called
    assert site.called_at.file == path and site.called_at.line == line_of(path, runs)
    w = site.wrapper
    assert (w.call, w.wrapped, w.policy) == (call, wrapped, policy)
    assert w.policy_line == line_of(path, policy, after=called - 1)
    d = site.to_dict()
    assert d["source"]["line"] == called and d["called_at"]["line"] == site.called_at.line
    assert d["wrapper"] == {
        "call": call, "wrapped": wrapped, "policy": policy,
        "policy_line": w.policy_line, "config": w.config,
    }  # fmt: skip


def test_the_vit_names_its_config_string_and_setting_it_does_what_the_override_did():
    target, (args, kwargs) = load(VIT)
    spec = "dots_with_no_batch_dims_saveable"
    got = remat_tui.analyze(target, sites={1: spec})
    (site,) = got.sites
    assert site.wrapper.config == "self.remat_policy"
    comment, code = got.python.splitlines()
    assert comment.startswith(f"# vit_linen.py:{line_of(VIT, 'nn.remat(')} (site 1)")
    assert "config string self.remat_policy" in comment
    assert f"line {line_of(VIT, 'policy=getattr(')}" in comment
    assert "now 'nothing_saveable'" in comment
    # The code is `remat_policy='...'`: the model built with that string is the oracle.
    (assign,) = ast.parse(code).body
    assert assign.targets[0].id == "remat_policy"
    by_hand = target.fn.__globals__["make_loss"](ast.literal_eval(assign.value))
    assert texts(got) == jax_saved_residuals(by_hand, "as_written", args, kwargs)


def test_a_policy_no_config_string_names_goes_in_place_of_the_getattr():
    target, _ = load(VIT)
    got = remat_tui.analyze(target, sites={1: "save_only_these_names('x')"})
    comment, code = got.python.splitlines()
    assert "no config string names this policy" in comment
    assert "in place of getattr(jax.checkpoint_policies, self.remat_policy, None)" in comment
    assert code == "policy=jax.checkpoint_policies.save_only_these_names('x')"


def test_removing_a_wrapped_checkpoint_says_to_use_what_it_wraps():
    target, (args, kwargs) = load(example("flax_linen.py"))
    got = remat_tui.analyze(target, sites={1: "as_written"})
    comment, code = got.python.splitlines()
    assert comment.endswith("nn.remat(Block, ...): remove the nn.remat")
    assert code == "Block  # no checkpoint"
    module = target.fn.__globals__
    hand = module["make_loss"](module["NO_CHECKPOINT"])
    assert texts(got) == jax_saved_residuals(hand, "as_written", args, kwargs)


@pytest.mark.parametrize("file", ["flax_linen.py", "flax_nnx.py", "equinox_transformer.py"])
def test_the_policy_argument_to_paste_is_the_override(file):
    target, (args, kwargs) = load(example(file))
    got = remat_tui.analyze(target, sites={1: "dots_saveable"})
    comment, code = got.python.splitlines()
    assert f"change its policy= (line {got.sites[0].wrapper.policy_line})" in comment
    name, _, value = code.partition("=")
    assert name == "policy"
    policy = eval(value, {"jax": jax})  # the code as pasted, run
    by_hand = target.fn.__globals__["make_loss"](policy)
    assert texts(got) == jax_saved_residuals(by_hand, "as_written", args, kwargs)


def test_a_plain_jax_checkpoint_is_left_as_it_was():
    def block(W, x):
        return jax.numpy.sin(x @ W)

    blk = jax.checkpoint(block, policy=jax.checkpoint_policies.nothing_saveable)

    def loss(W, x):
        return blk(W, x).sum()

    args = (jax.numpy.ones((4, 4)), jax.numpy.ones((2, 4)))
    got = remat_tui.analyze(loss, args=args, sites={1: "dots_saveable"})
    (site,) = got.sites
    assert site.wrapper is None and site.called_at == site.source
    assert site.source.line == line_of(__file__, "return blk(W, x).sum()")
    assert got.python.splitlines()[1] == (
        "jax.checkpoint(block, policy=jax.checkpoint_policies.dots_saveable)"
    )
    assert got.to_dict()["sites"][0]["wrapper"] is None


# ---- reading the wrapper call from source: the forms users write ---------------------

LINEN = ("remat", "checkpoint", "remat_scan")


def find_wrapper(*args):
    from remat_tui.core.trace import wrappers

    return wrappers.find_wrapper(*args)


def find(tmp_path, source: str, runs: str, function: str, names=LINEN):
    path = tmp_path / "model.py"
    path.write_text(source)
    line = line_of(str(path), runs)
    found = find_wrapper(names, Source(str(path), line, 1, "f"), function)
    return (None, None) if found is None else (found[0].line, found[1])


def test_decorator_forms(tmp_path):
    source = """
import functools
import equinox as eqx
from flax import nnx

@eqx.filter_checkpoint
def bare(x):
    return x

@nnx.remat(policy=jax.checkpoint_policies.dots_saveable)
def called(x):
    return x

@functools.partial(nnx.remat, policy=P)
def curried(x):
    return x

def run(x):
    return bare(called(curried(x)))
"""
    line, w = find(tmp_path, source, "return bare(", "bare", ("filter_checkpoint",))
    assert line == 6 and (w.call, w.wrapped, w.policy) == ("eqx.filter_checkpoint", "bare", None)
    line, w = find(tmp_path, source, "return bare(", "called", ("remat",))
    assert line == 10 and w.policy == "jax.checkpoint_policies.dots_saveable"
    line, w = find(tmp_path, source, "return bare(", "curried", ("remat",))
    assert line == 14 and (w.call, w.wrapped, w.policy) == ("nnx.remat", "curried", "P")


def test_a_policy_read_into_a_name_first(tmp_path):
    source = """
import jax
import flax.linen as nn
from jax import checkpoint_policies as cp

class Stack(nn.Module):
    def __call__(self, x):
        policy = getattr(cp, self.config.remat_policy)
        block = nn.remat(Block, policy=policy)
        return nn.scan(block)(x)
"""
    line, w = find(tmp_path, source, "return nn.scan", "Block.__call__")
    assert line == 9 and w.config == "self.config.remat_policy" and w.policy_line == 8


def test_calls_that_are_not_the_sites_are_not_taken(tmp_path):
    source = """
import jax
import flax.linen as nn

class A(nn.Module):
    pass

class B(nn.Module):
    pass

def run(x):
    a = nn.remat(A)
    b = nn.remat(B, policy=jax.checkpoint_policies.nothing_saveable)
    c = jax.checkpoint(B)
    return a(b(c(x)))
"""
    line, w = find(tmp_path, source, "return a(b(", "B.__call__")
    assert line == 13 and w.wrapped == "B"
    # Another function's wrapper, when two could be it: no answer rather than a guess.
    assert find(tmp_path, source, "return a(b(", "core_fn") == (None, None)


def test_an_edited_file_is_read_again(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("import flax.linen as nn\nb = nn.remat(Block)\nb(x)\n")
    first = find_wrapper(LINEN, Source(str(path), 3, 1, "f"), "Block.__call__")
    path.write_text("import flax.linen as nn\n\nb = nn.remat(Block)\nb(x)\n")
    os.utime(path, (1, 1))  # a new modification time, as an editor gives it
    second = find_wrapper(LINEN, Source(str(path), 4, 1, "f"), "Block.__call__")
    assert (first[0].line, second[0].line) == (2, 3)


def test_an_unreadable_file_gives_no_wrapper(tmp_path):
    missing = Source(str(tmp_path / "gone.py"), 3, 1, "f")
    assert find_wrapper(LINEN, missing, "Block.__call__") is None
    broken = tmp_path / "broken.py"
    broken.write_text("def (:\n")
    assert find_wrapper(LINEN, Source(str(broken), 1, 1, "f"), "x") is None


def test_only_library_files_have_wrappers():
    from remat_tui.core.trace import wrappers

    flax_file = re.sub(r"__init__\.py$", "transforms.py", __import__("flax.linen").linen.__file__)
    assert wrappers.wrapper_names(flax_file) == LINEN
    assert wrappers.wrapper_names(__file__) == ()
    assert wrappers.wrapper_names(None) == ()
