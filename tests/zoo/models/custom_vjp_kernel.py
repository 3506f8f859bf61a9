"""Zoo: a `jax.custom_vjp` kernel (a fused gelu-linear with a backward of its
own) inside a checkpointed block, with a `checkpoint_name` on the kernel's
output.

`make_loss(policy)`: the same code with the block's checkpoint given
`policy` (NO_CHECKPOINT: the block called directly). The registered target
`loss` uses `WRITTEN`, nothing_saveable.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

WIDTH, BATCH = 16, 4
NO_CHECKPOINT = "no checkpoint"
WRITTEN = jax.checkpoint_policies.nothing_saveable


@jax.custom_vjp
def gelu_linear(x, w):
    return jax.nn.gelu(x @ w)


def _fwd(x, w):
    pre = x @ w
    return jax.nn.gelu(pre), (x, w, pre)


def _bwd(saved, g):
    x, w, pre = saved
    d_pre = g * jax.grad(lambda p: jnp.sum(jax.nn.gelu(p)))(pre)
    return d_pre @ w.T, x.T @ d_pre


gelu_linear.defvjp(_fwd, _bwd)


def block(w, x):
    h = checkpoint_name(gelu_linear(x, w["up"]), "kernel_out")
    return x + jnp.tanh(h @ w["down"])


def make_loss(policy=WRITTEN):
    blk = block if policy == NO_CHECKPOINT else jax.checkpoint(block, policy=policy)

    def loss(params, x):
        return jnp.mean(blk(params, x) ** 2)

    return loss


def example_args(batch=BATCH):
    params = {
        "up": jax.ShapeDtypeStruct((WIDTH, 2 * WIDTH), jnp.float32),
        "down": jax.ShapeDtypeStruct((2 * WIDTH, WIDTH), jnp.float32),
    }
    return params, jax.ShapeDtypeStruct((batch, WIDTH), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
