"""An Equinox model passed whole as an argument (issue 41, item 14): its
functions, Python numbers and flags are carried into the function unchanged
and its arrays traced, as `eqx.filter_value_and_grad` under `eqx.filter_jit`
takes a module. JAX is the oracle: the residual list is what
print_saved_residuals prints for the same function differentiated the
filtered way (eqx.partition / eqx.combine, built here at test time), and the
compiled step is `eqx.filter_jit(eqx.filter_value_and_grad(loss))` compiled
by hand."""

import contextlib
import functools
import io
import subprocess
import sys
import types
from collections.abc import Callable

import jax
import jax.ad_checkpoint
import jax.numpy as jnp
import pytest

eqx = pytest.importorskip("equinox")

import remat_tui  # noqa: E402
from remat_tui.core.setup.config import Config  # noqa: E402
from remat_tui.core.xla.compile.costs import compile_answer  # noqa: E402
from remat_tui.errors import RematError  # noqa: E402
from remat_tui.registry import Target  # noqa: E402

CP = jax.checkpoint_policies
POLICIES = {
    "dots_saveable": CP.dots_saveable,
    "nothing_saveable": CP.nothing_saveable,
    "everything_saveable": CP.everything_saveable,
    "save_only_these_names('hidden')": CP.save_only_these_names("hidden"),
}
WIDTH, SEQ, BATCH = 8, 4, 2


# ---- the models: factories taking the checkpoint's policy ----------------------------


def mlp_target(policy: Callable) -> Target:
    """eqx.nn.MLP (its activations are fields, functions) under one
    eqx.filter_checkpoint."""

    def loss(model, x):
        run = eqx.filter_checkpoint(lambda m, x: jax.vmap(m)(x), policy=policy)
        return jnp.mean(run(model, x) ** 2)

    def args():
        model = eqx.nn.MLP(WIDTH, 2, 16, 2, activation=jax.nn.gelu, key=jax.random.key(0))
        return model, jax.random.normal(jax.random.key(1), (BATCH, WIDTH))

    return Target(fn=loss, name="loss", args=args)


class Block(eqx.Module):
    attn: eqx.nn.MultiheadAttention  # its Dropout holds a Python float and a bool
    mlp_in: eqx.nn.Linear
    mlp_out: eqx.nn.Linear
    act: Callable  # an activation as a field, not marked static

    def __init__(self, key):
        k_attn, k_in, k_out = jax.random.split(key, 3)
        self.attn = eqx.nn.MultiheadAttention(2, WIDTH, key=k_attn)
        self.mlp_in = eqx.nn.Linear(WIDTH, 2 * WIDTH, key=k_in)
        self.mlp_out = eqx.nn.Linear(2 * WIDTH, WIDTH, key=k_out)
        self.act = jax.nn.relu

    def __call__(self, x):  # x: [SEQ, WIDTH]
        x = x + self.attn(x, x, x)
        hidden = jax.ad_checkpoint.checkpoint_name(self.act(jax.vmap(self.mlp_in)(x)), "hidden")
        return x + jax.vmap(self.mlp_out)(hidden)


class Tiny(eqx.Module):
    blocks: list
    scale: float  # a Python float field, not marked static

    def __init__(self, key):
        self.blocks = [Block(k) for k in jax.random.split(key, 2)]
        self.scale = 0.5


def transformer_target(policy: Callable) -> Target:
    """Two blocks in a Python loop, each under eqx.filter_checkpoint, no names
    but one; the model and its input as keyword arguments too."""

    def loss(model, x):
        def run(x):
            for block in model.blocks:
                x = eqx.filter_checkpoint(lambda b, x: b(x), policy=policy)(block, x)
            return x * model.scale

        return jnp.mean(jax.vmap(run)(x) ** 2)

    def args():
        return Tiny(jax.random.key(0)), jax.random.normal(jax.random.key(1), (BATCH, SEQ, WIDTH))

    return Target(fn=loss, name="loss", args=args)


MODELS = {"mlp": mlp_target, "transformer": transformer_target}


# ---- the oracles ---------------------------------------------------------------------


def filtered(fn: Callable, args: tuple, kwargs: dict) -> tuple[Callable, tuple, dict]:
    """`fn` of the arrays alone, the rest of its arguments closed over, as
    eqx.filter_vjp differentiates it: (function, array args, array kwargs)."""
    (dyn_args, dyn_kwargs), static = eqx.partition((args, kwargs), eqx.is_array)

    @functools.wraps(fn)  # the same argument names in JAX's words
    def of_arrays(*a, **kw):
        full_args, full_kwargs = eqx.combine((a, kw), static)
        return fn(*full_args, **full_kwargs)

    return of_arrays, dyn_args, dyn_kwargs


def saved_residuals(target: Target) -> list[str]:
    """print_saved_residuals of the target differentiated the filtered way."""
    fn, args, kwargs = filtered(target.fn, *_built(target))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.ad_checkpoint.print_saved_residuals(fn, *args, **kwargs)
    return buf.getvalue().splitlines()


def _built(target: Target) -> tuple[tuple, dict]:
    args = target.args() if callable(target.args) else target.args
    return args, dict(target.kwargs or {})


# ---- the residual list ---------------------------------------------------------------


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("model", MODELS)
def test_a_module_is_differentiated_as_equinox_does(model, policy):
    target = MODELS[model](POLICIES[policy])
    got = remat_tui.analyze(target)
    assert [r.text for r in got.residuals] == saved_residuals(target)


def test_the_residuals_name_the_modules_fields():
    got = remat_tui.analyze(mlp_target(CP.nothing_saveable))
    named = {r.argument for r in got.residuals if r.kind == "argument"}
    assert "model.layers[0].weight" in named


def test_an_outer_policy_and_a_site_override_take_the_module_too():
    """The primal program (sites, overrides, outer policies) takes the module
    as the trace does: jax.checkpoint around the filtered function."""
    target = transformer_target(CP.dots_saveable)
    got = remat_tui.analyze(
        target,
        policy="nothing_saveable",
        sites={1: "everything_saveable", 2: "everything_saveable"},
    )
    hand = transformer_target(CP.everything_saveable)
    fn, args, kwargs = filtered(hand.fn, *_built(hand))
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        jax.ad_checkpoint.print_saved_residuals(
            jax.checkpoint(fn, policy=CP.nothing_saveable), *args, **kwargs
        )
    assert len(got.sites) == 2
    assert [r.text for r in got.residuals] == buf.getvalue().splitlines()


# ---- the compiled step ----------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS)
def test_the_compiled_step_is_equinoxs_own(model):
    """jax.value_and_grad of the filtered function, under jax.jit, is the
    oracle to the byte; eqx.filter_jit's own compile of it has the same
    arguments and temporaries (its outputs hold one s32 more, of its own)."""
    target = MODELS[model](CP.dots_saveable)
    ours = compile_answer(target, Config()).result
    args, kwargs = _built(target)
    fn, dyn_args, dyn_kwargs = filtered(target.fn, args, kwargs)
    want = jax.jit(jax.value_and_grad(fn)).lower(*dyn_args, **dyn_kwargs).compile()
    want = want.memory_analysis()
    assert ours.argument_bytes == want.argument_size_in_bytes
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.temp_bytes == want.temp_size_in_bytes
    assert ours.peak_bytes == (
        want.argument_size_in_bytes
        + want.output_size_in_bytes
        + want.temp_size_in_bytes
        - want.alias_size_in_bytes
    )
    assert ours.differentiated["positions"] == [0]
    step = eqx.filter_jit(eqx.filter_value_and_grad(target.fn))
    equinox = step.lower(*args, **kwargs).compile().compiled.memory_analysis()
    assert ours.argument_bytes == equinox.argument_size_in_bytes
    assert ours.temp_bytes == equinox.temp_size_in_bytes


def test_the_training_step_updates_the_modules_arrays():
    """Contract 8 with a module: the optax step is Equinox's loop, the
    optimizer's state built from the module's arrays."""
    optax = pytest.importorskip("optax")
    optimizer = optax.adam(1e-3)
    target = mlp_target(CP.dots_saveable)
    trained = Target(
        fn=target.fn, name="loss", args=target.args, param_positions=(0,), optimizer=optimizer
    )
    ours = compile_answer(trained, Config()).result
    model, x = _built(target)[0]
    params, static = eqx.partition(model, eqx.is_array)

    def step(params, opt_state, x):
        value, grads = jax.value_and_grad(lambda p: target.fn(eqx.combine(p, static), x))(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    opt_state = optimizer.init(params)
    want = jax.jit(step, donate_argnums=(0, 1)).lower(params, opt_state, x).compile()
    want = want.memory_analysis()
    assert ours.step == "train"
    assert ours.argument_bytes == want.argument_size_in_bytes
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.temp_bytes == want.temp_size_in_bytes


def test_a_train_step_of_ones_own_gets_the_modules_arrays():
    """targets.md: a train_step of one's own receives the array part of the
    module as `params` (None where a field is carried), and `loss` puts the
    rest back."""
    seen = []

    def sgd(params, opt_state, x, *, loss):
        seen.append(params)
        grads = jax.grad(loss)(params, x)
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads), opt_state

    target = mlp_target(CP.dots_saveable)
    trained = Target(
        fn=target.fn, name="loss", args=target.args, param_positions=(0,),
        train_step=sgd, opt_state=(),
    )  # fmt: skip
    ours = compile_answer(trained, Config()).result
    model, x = _built(target)[0]
    params, static = eqx.partition(model, eqx.is_array)

    def step(params, opt_state, x):
        return sgd(params, opt_state, x, loss=lambda p, x: target.fn(eqx.combine(p, static), x))

    want = jax.jit(step, donate_argnums=(0, 1)).lower(params, (), x).compile().memory_analysis()
    assert seen[0].activation is None and seen[0].layers[0].weight.shape == (16, WIDTH)
    assert ours.argument_bytes == want.argument_size_in_bytes
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.temp_bytes == want.temp_size_in_bytes


# ---- what cannot be carried ----------------------------------------------------------


class Configured(eqx.Module):
    linear: eqx.nn.Linear
    table: types.SimpleNamespace  # neither an array nor hashable

    def __call__(self, x):
        return self.linear(x)


def unhashable_target() -> Target:
    def loss(model, x):
        return jnp.sum(model(x) ** 2)

    def args():
        model = Configured(eqx.nn.Linear(3, 3, key=jax.random.key(0)), types.SimpleNamespace())
        return model, jnp.ones(3)

    return Target(fn=loss, name="loss", args=args)


def test_a_leaf_that_cannot_be_carried_is_named():
    with pytest.raises(RematError) as caught:
        remat_tui.analyze(unhashable_target())
    said = str(caught.value)
    assert "model.table" in said and "SimpleNamespace" in said
    assert "eqx.partition" in said and "closure" in said


UNHASHABLE = """\
import types
import equinox as eqx, jax, jax.numpy as jnp
import remat_tui

class Configured(eqx.Module):
    linear: eqx.nn.Linear
    table: types.SimpleNamespace

    def __call__(self, x):
        return self.linear(x)

def args():
    linear = eqx.nn.Linear(3, 3, key=jax.random.key(0))
    return Configured(linear, types.SimpleNamespace()), jnp.ones(3)

@remat_tui.target(args=args)
def loss(model, x):
    return jnp.sum(model(x) ** 2)
"""


def test_the_cli_says_so_and_exits_2(tmp_path):
    path = tmp_path / "unhashable.py"
    path.write_text(UNHASHABLE)
    done = subprocess.run(
        [sys.executable, "-m", "remat_tui", "report", str(path)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2, done.stderr
    assert "model.table" in done.stderr and "eqx.partition" in done.stderr
    assert "Traceback" not in done.stderr
