"""Zoo: a Flax Linen `nn.scan` over an `nn.remat`'d block (parameters stacked
on a layer axis), the block's hidden activation named `mlp_hidden`.

`make_loss(policy)`: the same model with the block's `nn.remat` given
`policy` (NO_CHECKPOINT: the block scanned without `nn.remat`). The
registered target `loss` uses `WRITTEN`, `dots_with_no_batch_dims_saveable`.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name

import remat_tui

LAYERS, WIDTH, BATCH = 3, 16, 4
NO_CHECKPOINT = "no checkpoint"
WRITTEN = jax.checkpoint_policies.dots_with_no_batch_dims_saveable


class Block(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x, _):
        h = checkpoint_name(jnp.tanh(nn.Dense(2 * self.width)(x)), "mlp_hidden")
        return x + nn.Dense(self.width)(h), None


class Stack(nn.Module):
    policy: object = WRITTEN

    @nn.compact
    def __call__(self, x):
        if self.policy == NO_CHECKPOINT:
            block = Block
        else:
            block = nn.remat(Block, policy=self.policy)
        layers = nn.scan(
            block, variable_axes={"params": 0}, split_rngs={"params": True}, length=LAYERS
        )
        x, _ = layers(WIDTH, name="layers")(x, None)
        return x


def make_loss(policy=WRITTEN):
    model = Stack(policy=policy)

    def loss(params, x):
        return jnp.mean(model.apply({"params": params}, x) ** 2)

    return loss


def example_args(batch=BATCH):
    x = jax.ShapeDtypeStruct((batch, WIDTH), jnp.float32)
    return jax.eval_shape(Stack().init, jax.random.key(0), x)["params"], x


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
