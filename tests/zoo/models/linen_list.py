"""Zoo: a Flax Linen model whose blocks are a Python list of `nn.remat(Block)`,
with no `checkpoint_name` and no policy (the shape of nanodo's decoder).

`make_loss(policy_of)`: the same model with `policy_of(i)` the policy of
block i's `nn.remat` (None: its default; NO_CHECKPOINT: the block without
`nn.remat`). The registered target `loss` uses `WRITTEN`.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp

import remat_tui

LAYERS, WIDTH, BATCH = 3, 16, 4
NO_CHECKPOINT = "no checkpoint"


def WRITTEN(i):
    return None


class Block(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x):
        h = nn.gelu(nn.Dense(2 * self.width)(nn.LayerNorm()(x)))
        return x + nn.Dense(self.width)(h)


class Stack(nn.Module):
    policy_of: object = WRITTEN

    @nn.compact
    def __call__(self, x):
        blocks = []
        for i in range(LAYERS):
            if self.policy_of(i) == NO_CHECKPOINT:
                blocks.append(Block(WIDTH, name=f"block{i}"))
            else:
                blocks.append(nn.remat(Block, policy=self.policy_of(i))(WIDTH, name=f"block{i}"))
        for blk in blocks:
            x = blk(x)
        return x


def make_loss(policy_of=WRITTEN):
    model = Stack(policy_of=policy_of)

    def loss(params, x):
        return jnp.mean(model.apply({"params": params}, x) ** 2)

    return loss


def example_args(batch=BATCH):
    x = jax.ShapeDtypeStruct((batch, WIDTH), jnp.float32)
    return jax.eval_shape(Stack().init, jax.random.key(0), x)["params"], x


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
