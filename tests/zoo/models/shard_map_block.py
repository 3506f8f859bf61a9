"""Zoo: a `jax.shard_map` block (data-parallel over a 4-device CPU mesh, the
batch split, the weights replicated, the loss's mean taken with a `psum`)
under `jax.checkpoint`.

`make_loss(policy)`: the same code with the block's checkpoint given
`policy` (NO_CHECKPOINT: the shard_map'd block called directly). The
registered target `loss` uses `WRITTEN`, nothing_saveable. The arguments
are sharded over every device the chosen device set has (`devices`).
"""

import jax
import jax.numpy as jnp
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui

WIDTH, BATCH = 16, 8
NO_CHECKPOINT = "no checkpoint"
WRITTEN = jax.checkpoint_policies.nothing_saveable


def _mesh(devices=None):
    devices = devices if devices is not None else jax.devices()
    return jax.make_mesh(
        (len(devices),), ("data",), axis_types=(AxisType.Explicit,), devices=devices
    )


def block(w, x):
    h = jnp.tanh(x @ w["w1"])
    y = jnp.sin(h @ w["w2"]) + x
    return jax.lax.psum(jnp.sum(y**2), "data")


def make_loss(policy=WRITTEN, devices=None):
    mesh = _mesh(devices)
    sharded = jax.shard_map(block, mesh=mesh, in_specs=(P(), P("data")), out_specs=P())

    def loss(params, x):
        if policy == NO_CHECKPOINT:
            total = sharded(params, x)
        else:
            total = jax.checkpoint(sharded, policy=policy)(params, x)
        return total / x.shape[0]

    return loss


def example_args(devices=None, batch=BATCH):
    mesh = _mesh(devices)
    replicated = NamedSharding(mesh, P())
    params = {
        "w1": jax.ShapeDtypeStruct((WIDTH, 2 * WIDTH), jnp.float32, sharding=replicated),
        "w2": jax.ShapeDtypeStruct((2 * WIDTH, WIDTH), jnp.float32, sharding=replicated),
    }
    x = jax.ShapeDtypeStruct(
        (batch, WIDTH), jnp.float32, sharding=NamedSharding(mesh, P("data", None))
    )
    return params, x


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
