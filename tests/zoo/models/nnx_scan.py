"""Zoo: Flax NNX blocks created stacked with `nnx.vmap`, run with `nnx.scan`
over a block under `nnx.remat(policy=save_from_both_policies(dots_saveable,
save_only_these_names('attn')))`: one site, a policy that combines a dots
policy with a name.

`make_loss(policy)`: the same model with that `nnx.remat`'s policy
(NO_CHECKPOINT: the block scanned without it). The registered target `loss`
uses `WRITTEN`. Parameters are passed as an `nnx.State` (a pytree of
arrays), the graphdef closed over.
"""

import jax
import jax.numpy as jnp
from flax import nnx
from jax.ad_checkpoint import checkpoint_name

import remat_tui

LAYERS, WIDTH, SEQ, BATCH = 3, 16, 8, 2
NO_CHECKPOINT = "no checkpoint"
CP = jax.checkpoint_policies
WRITTEN = CP.save_from_both_policies(CP.dots_saveable, CP.save_only_these_names("attn"))


class Block(nnx.Module):
    def __init__(self, *, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(WIDTH, rngs=rngs)
        self.qk = nnx.Linear(WIDTH, 2 * WIDTH, use_bias=False, rngs=rngs)
        self.up = nnx.Linear(WIDTH, 2 * WIDTH, rngs=rngs)
        self.down = nnx.Linear(2 * WIDTH, WIDTH, rngs=rngs)

    def __call__(self, x):
        q, k = jnp.split(self.qk(self.norm(x)), 2, axis=-1)
        scores = jnp.einsum("bqd,bkd->bqk", q, k) / jnp.sqrt(WIDTH)
        attn = checkpoint_name(jax.nn.softmax(scores, axis=-1) @ x, "attn")
        x = x + attn
        return x + self.down(nnx.relu(self.up(x)))


class Model(nnx.Module):
    def __init__(self, policy, *, rngs: nnx.Rngs):
        self.policy = policy

        @nnx.split_rngs(splits=LAYERS)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def create(rngs: nnx.Rngs):
            return Block(rngs=rngs)

        self.blocks = create(rngs)

    def __call__(self, x):
        def forward(x, block):
            return block(x)

        if self.policy != NO_CHECKPOINT:
            forward = nnx.remat(forward, policy=self.policy)
        return nnx.scan(forward, in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)(x, self.blocks)


def make_loss(policy=WRITTEN):
    graphdef = nnx.graphdef(nnx.eval_shape(lambda: Model(policy, rngs=nnx.Rngs(0))))

    def loss(params, x):
        return jnp.mean(nnx.merge(graphdef, params)(x) ** 2)

    return loss


def example_args(batch=BATCH):
    _, params = nnx.split(nnx.eval_shape(lambda: Model(WRITTEN, rngs=nnx.Rngs(0))))
    return params, jax.ShapeDtypeStruct((batch, SEQ, WIDTH), jnp.float32)


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
