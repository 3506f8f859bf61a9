"""A Flax Linen model whose blocks are a Python list of `nn.remat(Block)`,
with no checkpoint_name (the shape of google-deepmind/nanodo's decoder):
one line applies the checkpoint of every block, each block its own site.

`make_loss(policy_of)` builds the loss with block i under `policy_of(i)`
(None: `nn.remat(Block)` as written), so a test builds by hand what a
per-block policy, or the code remat-tui prints for one, makes."""

import flax.linen as nn
import jax
import jax.numpy as jnp

import remat_tui

BLOCKS, WIDTH = 3, 16


class Block(nn.Module):
    @nn.compact
    def __call__(self, x):
        return x + jnp.tanh(nn.Dense(WIDTH)(x))


class Net(nn.Module):
    policy_of: object = None  # block index -> policy (None: as written)

    def setup(self):
        policy_of = self.policy_of or (lambda i: None)
        self.blocks = [
            nn.remat(Block, policy=policy_of(i))(name=f"block{i}") for i in range(BLOCKS)
        ]

    def __call__(self, x):
        for block in self.blocks:
            x = block(x)
        return x


def make_loss(policy_of=None):
    model = Net(policy_of=policy_of)

    def loss(params, x):
        return jnp.mean(model.apply({"params": params}, x) ** 2)

    return loss


def example_args():
    x = jnp.ones((4, WIDTH))
    params = Net().init(jax.random.key(0), x)["params"]
    return params, x


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
