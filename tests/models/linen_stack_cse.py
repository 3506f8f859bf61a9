"""linen_stack's Stack with its blocks under `nn.remat(..., prevent_cse=False)`,
as Flax advises inside an nn.scan (issue 42): a structure's Linen code must
keep it, in what is traced and in what is printed
(tests/unit/test_structures_linen_cse.py). No target is registered here:
the test builds its own, as test_structures_linen.py does."""

import flax.linen as nn
import jax
import jax.numpy as jnp
from linen_stack import BATCH, CP, LAYERS, WIDTH, Block, loss_of


class Stack(nn.Module):
    policy: object = CP.nothing_saveable

    @nn.compact
    def __call__(self, x):
        layers = nn.scan(
            nn.remat(Block, policy=self.policy, prevent_cse=False),
            variable_axes={"params": 0},
            split_rngs={"params": True},
            length=LAYERS,
        )
        x, means = layers(name="layers", width=WIDTH)(x)
        return x, means


def loss(params, x):
    return loss_of(*Stack().apply({"params": params}, x))


def example_args():
    x = jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32)
    params = jax.eval_shape(Stack().init, jax.random.key(0), x)["params"]
    return params, x
