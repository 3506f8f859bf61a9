"""Test models for the exact search (issue 33): stacks whose layers make named
values of chosen sizes and chosen recompute costs, so that which names to
save under a budget is a knapsack.

Each named value is a gate, `sin` applied `k` times to a slice of the
layer's input of width `w` (the slice's gradient stopped, as a mask's is),
multiplied into the layer's update. The backward pass reads the gate, so
recomputing it costs its `k` sines per element again, and saving it keeps
`w` columns per layer. Recompute removed per byte saved is `k`: the
knapsack trap is three names where the one with the most per byte crowds out
two that together save more.

`make_scanned(policy, spec)` builds the loss with each layer of a
`jax.lax.scan` under `jax.checkpoint(layer, policy=policy)` (on the CPU a
scan keeps its remat: XLA merges the recompute of loop-free code into the
forward pass). `make_two_sites(policy_a, policy_b)` has two checkpointed
functions in the scan's body, each with its own names. `make_unrolled(
policy_of)`'s scan body calls a checkpointed block in a Python loop (an
unrolled stack inside each layer), the i-th call under `policy_of(i)`: the
per-call choices the search writes back as code. The
oracle of any assignment is the factory with the policy written by hand.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

CP = jax.checkpoint_policies
LAYERS, BATCH, WIDTH = 8, 256, 64
# (k: sines per element, w: columns) per name. n0 has the most recompute per
# byte; n1 and n2 together save more than n0 in about the same bytes.
KNAPSACK = ((6, 40), (5, 32), (5, 32), (1, 64), (3, 16), (2, 48))
EIGHT = (*KNAPSACK, (4, 24), (7, 8))
TWELVE = (*EIGHT, (2, 16), (3, 40), (5, 8), (1, 24))
SITE_A, SITE_B = ((6, 40), (5, 32), (2, 48)), ((5, 32), (3, 16), (1, 64))
PAIR = ((6, 40), (2, 48))


def names_of(spec, prefix: str = "n") -> list[str]:
    return [f"{prefix}{i}" for i in range(len(spec))]


def gated(x, spec, prefix: str = "n"):
    """x's update from its gates (the module doc), before the layer's own matmul."""
    update = jnp.zeros_like(x)
    for name, (k, w) in zip(names_of(spec, prefix), spec, strict=True):
        gate = jax.lax.stop_gradient(x[:, :w])
        for _ in range(k):
            gate = jnp.sin(gate)
        gate = checkpoint_name(gate, name)
        update = update + jnp.pad(gate * x[:, :w], ((0, 0), (0, x.shape[1] - w)))
    return update


def make_layer(spec, prefix: str = "n", name: str = "layer"):
    def layer(x, w):
        return x + 0.1 * jnp.tanh(x @ w + gated(x, spec, prefix))

    layer.__name__ = layer.__qualname__ = name  # the checkpointed function's name: its site's
    return layer


def loss_of(x):
    return jnp.mean(x**2)


def make_scanned(policy=CP.nothing_saveable, spec=KNAPSACK):
    step = jax.checkpoint(make_layer(spec), policy=policy)

    def loss(ws, x):
        x, _ = jax.lax.scan(lambda c, w: (step(c, w), None), x, ws)
        return loss_of(x)

    return loss


def make_two_sites(policy_a=CP.nothing_saveable, policy_b=CP.nothing_saveable):
    first = jax.checkpoint(make_layer(SITE_A, "a", "first"), policy=policy_a)
    second = jax.checkpoint(make_layer(SITE_B, "b", "second"), policy=policy_b)

    def loss(ws, x):
        x, _ = jax.lax.scan(lambda c, w: (second(first(c, w), w), None), x, ws)
        return loss_of(x)

    return loss


def make_unrolled(policy_of=lambda i: CP.nothing_saveable, calls=3, spec=PAIR):
    """Each layer of the scan calls a checkpointed block `calls` times in a
    Python loop, the i-th call under `policy_of(i)`."""
    block = make_layer(spec, "u")

    def loss(ws, x):
        def body(c, w):
            for i in range(calls):
                c = jax.checkpoint(block, policy=policy_of(i))(c, w)
            return c, None

        x, _ = jax.lax.scan(body, x, ws)
        return loss_of(x)

    return loss


def scanned_args(layers=LAYERS):
    ws = jax.ShapeDtypeStruct((layers, WIDTH, WIDTH), jnp.float32)
    return ws, jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32)


def knapsack_args(layers=2):
    """scanned_args for 2 layers (the 6-name model of tests/unit/test_exact.py:
    a scan of 2 layers keeps its remat on the CPU, and has no structure to
    compile beside the name assignments, where 8 layers have 9)."""
    return scanned_args(layers)


def batch_args(batch=32):
    """scanned_args at any batch, for 2 layers (fit --optimize's tests: a
    scan of 2 layers has no structure to compile at each batch, 4 had 4,
    and its two names, PAIR, few assignments)."""
    ws = jax.ShapeDtypeStruct((2, WIDTH, WIDTH), jnp.float32)
    return ws, jax.ShapeDtypeStruct((batch, WIDTH), jnp.float32)


knapsack = remat_tui.target(args=knapsack_args, name="knapsack")(make_scanned())
eight = remat_tui.target(args=scanned_args, name="eight")(make_scanned(spec=EIGHT))
twelve = remat_tui.target(args=scanned_args, name="twelve")(make_scanned(spec=TWELVE))
two_sites = remat_tui.target(args=scanned_args, name="two_sites")(make_two_sites())
unrolled = remat_tui.target(args=scanned_args, name="unrolled")(make_unrolled())
batches = remat_tui.target(args=batch_args, name="batches")(make_scanned(spec=PAIR))
