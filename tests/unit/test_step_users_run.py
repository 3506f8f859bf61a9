"""The compiled program is the step users run (Contract 9): the gradient keeps
the loss as `jax.value_and_grad` does, and an optax step returns it too. The
oracle is JAX: the same function under the same policy, compiled by hand with
`jax.value_and_grad`, at test time."""

import jax
import jax.numpy as jnp
import pytest

from remat_tui.core.setup.config import Config
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.registry import Target

SIDE = 512  # 1 MiB of f32: large enough that XLA keeps temporaries for the chain


def elementwise_chain(x):
    """Activations and a loss with no dot: the kind of program whose forward
    work XLA deletes when the loss is dropped."""
    for _ in range(6):
        x = jnp.tanh(jnp.exp(jnp.sin(x)) * 0.5)
    return jnp.sum(jnp.log1p(x * x))


def mlp(ws, x):
    for w in ws:
        x = jax.nn.gelu(x @ w)
    return jnp.mean(x**2)


def attention(q, k, v):
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(q.shape[-1])
    out = jnp.einsum("bqk,bkd->bqd", jax.nn.softmax(scores, axis=-1), v)
    return jnp.mean(jnp.square(jax.nn.standardize(out, axis=-1)))


def _f32(*shape):
    return jax.ShapeDtypeStruct(shape, jnp.float32)


PROGRAMS = {
    "chain": (elementwise_chain, (_f32(SIDE, SIDE),)),
    "mlp": (mlp, ([_f32(256, 256) for _ in range(3)], _f32(128, 256))),
    "attention": (attention, (_f32(4, 128, 64), _f32(4, 128, 64), _f32(4, 128, 64))),
}
POLICIES = ("as_written", "nothing_saveable", "dots_saveable")


def _by_hand(fn, args, policy: str):
    """jax.value_and_grad of `fn` under `policy` (its default: the first
    argument, as the step users run; tests/unit/test_step_arguments.py has the
    others), compiled by JAX directly."""
    if policy != "as_written":
        fn = jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, policy))
    gradient = jax.value_and_grad(fn)
    executable = jax.jit(gradient).lower(*args).compile()
    costs = executable.cost_analysis()
    costs = costs[0] if isinstance(costs, (list, tuple)) else costs
    return executable.memory_analysis(), costs


@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("program", sorted(PROGRAMS))
def test_the_compiled_gradient_is_value_and_grad(program, policy):
    fn, args = PROGRAMS[program]
    ours = compile_answer(
        Target(fn=fn, name=program, args=lambda: args), Config.make(policy)
    ).result
    stats, costs = _by_hand(fn, args, policy)
    assert ours.temp_bytes == pytest.approx(stats.temp_size_in_bytes, rel=0.1, abs=1024)
    assert ours.flops == pytest.approx(costs["flops"], rel=0.1)
    # The loss is an output: its bytes are there beside the gradients'.
    assert ours.output_bytes == stats.output_size_in_bytes


def test_the_chain_keeps_the_forward_work_a_dropped_loss_loses():
    """The failure this guards against, shown on the oracle itself: with the
    loss dropped XLA needs no temporaries for the chain; kept, it does."""
    fn, args = PROGRAMS["chain"]

    def loss_dropped(x):
        out, vjp = jax.vjp(fn, x)
        return vjp(jnp.ones_like(out))

    dropped = jax.jit(loss_dropped).lower(*args).compile().memory_analysis()
    kept, _ = _by_hand(fn, args, "as_written")
    ours = compile_answer(Target(fn=fn, name="chain", args=lambda: args), Config()).result
    assert dropped.temp_size_in_bytes < kept.temp_size_in_bytes
    assert ours.temp_bytes == pytest.approx(kept.temp_size_in_bytes, rel=0.1)


def test_a_non_scalar_output_is_kept_beside_its_cotangents():
    def f(x):
        return jnp.sin(x) * 2.0

    x = _f32(64, 64)
    ours = compile_answer(Target(fn=f, name="f", args=lambda: (x,)), Config()).result
    # Output: f's own f32[64,64] and the gradient's (and the tuple's index table).
    assert ours.output_bytes == pytest.approx(2 * 64 * 64 * 4, abs=64)
