"""Zoo: a two-layer model over a 4-device CPU mesh (2 data x 2 model), its
arguments placed with `NamedSharding` (the batch split over `data`, the
hidden dimension over `model`), each layer under `jax.checkpoint` with a
named hidden value.

`make_loss(policy_of)`: the same model with `policy_of(i)` the policy of
layer i's checkpoint (NO_CHECKPOINT: the layer called directly). The
registered target `loss` uses `WRITTEN`, `save_only_these_names('hidden')`
at both layers. The arguments are
sharded over the chosen device set's devices (`devices`); the mesh needs 4.
With `--mesh data=D,model=M` (the factory's `mesh`) they are sharded over
that mesh instead.
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui

LAYERS, WIDTH, BATCH = 2, 16, 8
NO_CHECKPOINT = "no checkpoint"


def WRITTEN(i):
    return jax.checkpoint_policies.save_only_these_names("hidden")


def mlp(w, x):
    hidden = checkpoint_name(jax.nn.relu(x @ w["up"]), "hidden")
    # the hidden dimension is split over "model": its sum is reduced across it
    return x + jnp.dot(hidden, w["down"], out_sharding=jax.typeof(x).sharding)


def make_loss(policy_of=WRITTEN):
    def loss(params, x):
        for i, w in enumerate(params):
            if policy_of(i) == NO_CHECKPOINT:
                x = mlp(w, x)
            else:
                x = jax.checkpoint(mlp, policy=policy_of(i))(w, x)
        return jnp.mean(x**2)

    return loss


def example_args(devices=None, batch=BATCH, mesh=None):
    devices = devices if devices is not None else jax.devices()
    if mesh is None and len(devices) < 4:
        raise ValueError(
            f"mesh_model needs 4 devices, has {len(devices)}: "
            "XLA_FLAGS=--xla_force_host_platform_device_count=4"
        )
    if mesh is None:
        mesh = jax.make_mesh(
            (2, 2), ("data", "model"), axis_types=(AxisType.Explicit,) * 2, devices=devices[:4]
        )

    def f32(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    params = [
        {
            "up": f32((WIDTH, 2 * WIDTH), P(None, "model")),
            "down": f32((2 * WIDTH, WIDTH), P("model", None)),
        }
        for _ in range(LAYERS)
    ]
    return params, f32((batch, WIDTH), P("data", None))


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
