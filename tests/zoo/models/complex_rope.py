"""Zoo: an attention block that rotates q and k with a complex rope
(`jnp.exp(1j * theta)` multiplied into them as complex pairs) inside
`jax.checkpoint`. JAX refuses `everything_saveable` there ("reduce_precision
does not accept dtype complex64"): a candidate JAX refuses.

`make_loss(policy)`: the same code with the block's checkpoint given
`policy` (NO_CHECKPOINT: the block called directly). The registered target
`loss` uses `WRITTEN`, dots_saveable.
"""

import jax
import jax.numpy as jnp

import remat_tui

WIDTH, SEQ, BATCH = 16, 8, 2
NO_CHECKPOINT = "no checkpoint"
WRITTEN = jax.checkpoint_policies.dots_saveable


def rope(x):
    """x: [batch, seq, width], rotated by position as width // 2 complex pairs."""
    pairs = x.reshape(*x.shape[:-1], WIDTH // 2, 2)
    z = jax.lax.complex(pairs[..., 0], pairs[..., 1])
    freqs = 1.0 / 10000 ** (jnp.arange(WIDTH // 2) / (WIDTH // 2))
    theta = jnp.arange(SEQ)[:, None] * freqs[None, :]
    z = z * jnp.exp(1j * theta)
    return jnp.stack([z.real, z.imag], axis=-1).reshape(x.shape)


def attention(w, x):
    q = rope(x @ w["wq"])
    k = rope(x @ w["wk"])
    scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(WIDTH)
    return x + jax.nn.softmax(scores, axis=-1) @ (x @ w["wv"])


def make_loss(policy=WRITTEN):
    block = attention if policy == NO_CHECKPOINT else jax.checkpoint(attention, policy=policy)

    def loss(params, x):
        return jnp.mean(block(params, x) ** 2)

    return loss


def example_args(batch=BATCH):
    w = jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32)
    return {"wq": w, "wk": w, "wv": w}, jax.ShapeDtypeStruct((batch, SEQ, WIDTH), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
