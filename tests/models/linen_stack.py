"""A Linen stack for the structure code tests (issue 32, item 3): LAYERS
small residual blocks, `nn.scan` of `nn.remat(Block, policy=...)` with its
parameters stacked on a leading layer axis, each block returning its new
carry and a per-layer mean (the scan's ys, so a rebuilt scan must put ys
back in order). The batch is wide and the weights small, as in
scan_stack.py: the carries a scan keeps fill memory.

`make_stack(policy)` builds the loss with the blocks under that policy (the
oracle for a structure is the same Block and loss with the nn.scan
rewritten as the tool's snippet says: tests/unit/test_structures_linen.py)."""

import flax.linen as nn
import jax
import jax.numpy as jnp

import remat_tui

CP = jax.checkpoint_policies
LAYERS, BATCH, WIDTH = 8, 256, 16


class Block(nn.Module):
    width: int

    @nn.compact
    def __call__(self, x):
        h = jnp.tanh(nn.Dense(self.width)(x))
        return x + h, jnp.mean(h)


class Stack(nn.Module):
    policy: object = CP.nothing_saveable

    @nn.compact
    def __call__(self, x):
        layers = nn.scan(
            nn.remat(Block, policy=self.policy),
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=LAYERS,
        )
        x, means = layers(name="layers", width=WIDTH)(x)
        return x, means


def loss_of(x, means):
    """The loss from the scan's final carry and its stacked per-layer means."""
    return jnp.mean(x**2) + jnp.mean(means)


def make_loss(policy=CP.nothing_saveable):
    model = Stack(policy=policy)

    def loss(params, x):
        return loss_of(*model.apply({"params": params}, x))

    return loss


def example_args():
    x = jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32)
    params = jax.eval_shape(Stack().init, jax.random.key(0), x)["params"]
    return params, x


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
