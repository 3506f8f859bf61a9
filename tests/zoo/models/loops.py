"""Zoo: checkpoints without names, called more than once (issue 41, item 1).

`loop`: a Python loop calling `jax.checkpoint(layer)` on each layer's
weights, no policy and no `checkpoint_name` (the seed notebook's `f2`, in a
loop). `block_list`: a Python list of checkpointed blocks, one per layer, run
in turn.

`make_loop(policy_of)` / `make_block_list(policy_of)`: the same code with
`policy_of(i)` the policy of call i (None: `jax.checkpoint`'s default;
NO_CHECKPOINT: the layer called directly). The registered targets use
`WRITTEN` (the default policy at every call).
"""

import jax
import jax.numpy as jnp

import remat_tui

LAYERS, WIDTH, BATCH = 3, 16, 4
NO_CHECKPOINT = "no checkpoint"


def WRITTEN(i):
    return None


def layer(w, x):
    return jnp.tanh(x @ w["w"] + w["b"])


def block(w, x):
    h = jnp.sin(x @ w["w"])
    return x + h * w["b"]


def make_loop(policy_of=WRITTEN):
    def loop(params, x):
        for i, w in enumerate(params):
            if policy_of(i) == NO_CHECKPOINT:
                x = layer(w, x)
            else:
                x = jax.checkpoint(layer, policy=policy_of(i))(w, x)
        return jnp.mean(x**2)

    return loop


def make_block_list(policy_of=WRITTEN):
    blocks = []
    for i in range(LAYERS):
        if policy_of(i) == NO_CHECKPOINT:
            blocks.append(block)
        else:
            blocks.append(jax.checkpoint(block, policy=policy_of(i)))

    def block_list(params, x):
        for blk, w in zip(blocks, params, strict=True):
            x = blk(w, x)
        return jnp.mean(x**2)

    return block_list


def example_args(batch=BATCH):
    f32 = jnp.float32
    params = [
        {
            "w": jax.ShapeDtypeStruct((WIDTH, WIDTH), f32),
            "b": jax.ShapeDtypeStruct((WIDTH,), f32),
        }
        for _ in range(LAYERS)
    ]
    return params, jax.ShapeDtypeStruct((batch, WIDTH), f32)


loop = remat_tui.target(args=example_args, name="loop")(make_loop())
block_list = remat_tui.target(args=example_args, name="block_list")(make_block_list())
