"""A scan of layers inside a `jax.shard_map` body (issue 42, Wanted 1), as
an FSDP kernel written with shard_map runs it: the stacked weights split
over the mesh's `data` axis on their input axis, the batch split over
`data`, and the body, on each device's local arrays, scans the layers under
`jax.checkpoint`, each layer gathering its weights (`all_gather`) before
using them; `checkpoint_name` marks the gathered weight ('gathered') and
the layer's hidden activation ('hidden').

`make_loss(policy, devices)`: the loss with the layer's checkpoint given
`policy` (None: no checkpoint) over a mesh of `devices` (all of JAX's
unless given). `example_args(devices)`: its arguments. The registered
target `loss` uses `WRITTEN`, save_only_these_names('hidden').
"""

import jax
import jax.numpy as jnp
from jax.ad_checkpoint import checkpoint_name
from jax.sharding import AxisType, NamedSharding
from jax.sharding import PartitionSpec as P

import remat_tui

LAYERS, WIDTH, BATCH = 4, 16, 32
CP = jax.checkpoint_policies
WRITTEN = CP.save_only_these_names("hidden")


def mesh_of(devices=None):
    devices = devices if devices is not None else jax.devices()
    return jax.make_mesh(
        (len(devices),), ("data",), axis_types=(AxisType.Explicit,), devices=devices
    )


def layer(x, p):
    w = checkpoint_name(jax.lax.all_gather(p["w"], "data", axis=0, tiled=True), "gathered")
    h = checkpoint_name(jnp.tanh(x @ w + p["b"]), "hidden")
    return x + jnp.sin(h), jnp.mean(h)


def loss_of(x, means):
    """The loss of one device's carry and stacked per-layer means, summed over the mesh."""
    return jax.lax.psum(jnp.sum(x**2) + jnp.sum(means), "data")


def make_body(policy=WRITTEN):
    step = layer if policy is None else jax.checkpoint(layer, policy=policy)

    def body(params, x):
        x, means = jax.lax.scan(step, x, params)
        return loss_of(x, means)

    return body


def make_loss(policy=WRITTEN, devices=None, body=None):
    """The loss over a mesh of `devices`: `body` (the scan as written, with
    `policy`, unless given) mapped over the mesh."""
    mesh = mesh_of(devices)
    specs = ({"w": P(None, "data", None), "b": P()}, P("data", None))
    mapped = jax.shard_map(body or make_body(policy), mesh=mesh, in_specs=specs, out_specs=P())

    def loss(params, x):
        return mapped(params, x) / x.shape[0]

    return loss


def example_args(devices=None):
    mesh = mesh_of(devices)

    def typed(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    params = {
        "w": typed((LAYERS, WIDTH, WIDTH), P(None, "data", None)),
        "b": typed((LAYERS, WIDTH), P()),
    }
    return params, typed((BATCH, WIDTH), P("data", None))


loss = remat_tui.target(args=example_args, name="loss")(make_loss())
