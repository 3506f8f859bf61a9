"""Test models with checkpoint_names for Contract 14 (issue 34): an MLP block
stack, unrolled and as a scan, its values named as MaxText-style policies
name them (`up`, `act`); and a scan of named blocks beside a checkpointed
head, whose policy cannot reach the names in the scan.

Each `make_*(policy)` builds the loss for an outer policy (a JAX policy
callable, or None for none): the oracle for a spec is the same factory with
the policy written by hand. Each registered target uses no policy.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

LAYERS, WIDTH, HIDDEN, BATCH = 4, 64, 256, 128


def block(x, w):
    up = checkpoint_name(x @ w["up"], "up")
    act = checkpoint_name(jnp.tanh(up), "act")
    return x + act @ w["down"]


def _layer_shapes(stacked: bool, layers=LAYERS, width=WIDTH, hidden=HIDDEN):
    lead = (layers,) if stacked else ()
    return {
        "up": jax.ShapeDtypeStruct((*lead, width, hidden), jnp.float32),
        "down": jax.ShapeDtypeStruct((*lead, hidden, width), jnp.float32),
    }


def unrolled_args(layers=LAYERS, width=WIDTH, hidden=HIDDEN, batch=BATCH):
    x = jax.ShapeDtypeStruct((batch, width), jnp.float32)
    return [_layer_shapes(False, layers, width, hidden) for _ in range(layers)], x


def scanned_args(layers=LAYERS, width=WIDTH, hidden=HIDDEN, batch=BATCH):
    stacked = _layer_shapes(True, layers, width, hidden)
    return stacked, jax.ShapeDtypeStruct((batch, width), jnp.float32)


def make_unrolled(policy=None):
    def loss(layers, x):
        for w in layers:
            x = block(x, w)
        return jnp.mean(x**2)

    return loss if policy is None else jax.checkpoint(loss, policy=policy)


def make_scanned(policy=None):
    def loss(stacked, x):
        x, _ = jax.lax.scan(lambda c, w: (block(c, w), None), x, stacked)
        return jnp.mean(x**2)

    return loss if policy is None else jax.checkpoint(loss, policy=policy)


unrolled = remat_tui.target(args=unrolled_args, name="unrolled")(make_unrolled())
scanned = remat_tui.target(args=scanned_args, name="scanned")(make_scanned())

# Wide enough that a TPU keeps the residuals in HBM, not VMEM (bench/bench_residual_names.py).
WIDE = {"layers": 8, "width": 512, "hidden": 2048, "batch": 2048}
wide_unrolled = remat_tui.target(args=lambda: unrolled_args(**WIDE), name="wide_unrolled")(
    make_unrolled()
)
wide_scanned = remat_tui.target(args=lambda: scanned_args(**WIDE), name="wide_scanned")(
    make_scanned()
)


# ---- a scan of named blocks, then a checkpointed head -----------------------------


def head(x, w):
    return jnp.sin(checkpoint_name(x @ w, "logits"))


def head_args():
    stacked, x = scanned_args()
    return stacked, jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32), x


def make_scan_then_head(head_policy=jax.checkpoint_policies.nothing_saveable):
    def loss(stacked, w_head, x):
        x, _ = jax.lax.scan(lambda c, w: (block(c, w), None), x, stacked)
        return jnp.mean(jax.checkpoint(head, policy=head_policy)(x, w_head))

    return loss


scan_then_head = remat_tui.target(args=head_args, name="scan_then_head")(make_scan_then_head())
