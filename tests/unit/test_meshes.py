"""Meshes as users build them (Contract 17, issue 42): a mesh of one device
kept, parameters from `nnx.eval_shape` over an AbstractMesh made over the
chosen devices, and `mesh=` built for a factory's `mesh` parameter, each
compiled peak equal to the same step compiled by hand with the same
shardings, under the mesh as a user runs it (`jax.set_mesh`)."""

import jax
import jax.numpy as jnp
import pytest
from jax.sharding import AbstractMesh, AxisType, NamedSharding
from jax.sharding import PartitionSpec as P
from zoo.oracle import hand_peak

import remat_tui
from remat_tui.errors import RematError
from remat_tui.registry import Target


def _peak(target: Target, **kw) -> int:
    return remat_tui.analyze(target, compiled=True, **kw).compiled.peak_bytes


def _hand(fn, args, mesh) -> int:
    with jax.set_mesh(mesh):
        return hand_peak(fn, args)


def resharded(w, x):
    """A model that writes bare PartitionSpecs: it needs the mesh current."""
    h = jnp.tanh(x @ w)
    h = jax.sharding.reshard(h, P("data", None))
    return jnp.sum(jnp.sin(h @ w))


REPLICATED, BATCH_SPLIT = P(), P("data", None)


def _placed(mesh, w_spec=REPLICATED, x_spec=BATCH_SPLIT):
    def f32(shape, spec):
        return jax.ShapeDtypeStruct(shape, jnp.float32, sharding=NamedSharding(mesh, spec))

    return f32((16, 16), w_spec), f32((8, 16), x_spec)


def test_a_one_device_mesh_is_kept_and_compiles_to_the_hand_figure():
    def one_device(devices):
        return _placed(jax.make_mesh((1,), ("data",), (AxisType.Explicit,), devices=devices[:1]))

    target = Target(fn=resharded, name="resharded", args=one_device)
    mesh = jax.make_mesh((1,), ("data",), (AxisType.Explicit,), devices=jax.devices()[:1])
    assert _peak(target) == _hand(resharded, _placed(mesh), mesh)


# ---- parameters from nnx.eval_shape, sharded over an AbstractMesh ---------------------


def _nnx_model():
    from flax import nnx

    class MLP(nnx.Module):
        def __init__(self, rngs):
            init = nnx.with_partitioning(nnx.initializers.lecun_normal(), (None, None))
            self.up = nnx.Linear(16, 32, kernel_init=init, rngs=rngs)
            self.down = nnx.Linear(32, 16, kernel_init=init, rngs=rngs)

        def __call__(self, x):
            return self.down(jnp.tanh(self.up(x)))

    abstract = AbstractMesh((4,), ("data",), axis_types=(AxisType.Explicit,))
    with jax.sharding.use_abstract_mesh(abstract):
        model = nnx.eval_shape(lambda: MLP(nnx.Rngs(0)))
    graphdef, state = nnx.split(model)

    def loss(state, x):
        return jnp.sum(nnx.merge(graphdef, state)(x) ** 2)

    x = jax.ShapeDtypeStruct((8, 16), jnp.float32, sharding=NamedSharding(abstract, P("data")))
    return loss, (state, x)


def test_nnx_eval_shape_parameters_on_an_abstract_mesh_compile_to_the_hand_figure():
    pytest.importorskip("flax")
    loss, abstract_args = _nnx_model()
    assert isinstance(jax.tree.leaves(abstract_args)[0].sharding.mesh, AbstractMesh)
    target = Target(fn=loss, name="nnx_loss", args=lambda: abstract_args)
    # The same arguments by hand, over a mesh of the four devices with the same axes.
    mesh = jax.make_mesh((4,), ("data",), (AxisType.Explicit,), devices=jax.devices()[:4])
    concrete = jax.tree.map(
        lambda s: jax.ShapeDtypeStruct(s.shape, s.dtype, sharding=s.sharding.update(mesh=mesh)),
        abstract_args,
    )
    assert _peak(target) == _hand(loss, concrete, mesh)


def test_an_abstract_mesh_larger_than_the_device_set_is_said():
    abstract = AbstractMesh((8,), ("data",), axis_types=(AxisType.Explicit,))
    target = Target(fn=resharded, name="resharded", args=lambda: _placed(abstract))
    with pytest.raises(RematError, match="abstract mesh of 8 devices.*has 4"):
        _peak(target)


# ---- mesh= for a factory's `mesh` parameter ----------------------------------------------


def _meshed(mesh):
    return _placed(mesh, P(None, "model"), P("data", None))


def test_mesh_is_built_over_the_chosen_devices_for_the_factory():
    target = Target(fn=resharded, name="resharded", args=_meshed)
    mesh = jax.make_mesh((2, 2), ("data", "model"), devices=jax.devices()[:4])
    assert _peak(target, mesh="data=2,model=2") == _hand(resharded, _meshed(mesh), mesh)
    # Another mesh is another program, with other bytes per device.
    flat = jax.make_mesh((4, 1), ("data", "model"), devices=jax.devices()[:4])
    assert _peak(target, mesh="data=4,model=1") == _hand(resharded, _meshed(flat), flat)


@pytest.mark.parametrize(
    "args, mesh, said",
    [
        (_meshed, "data=2,model", "is not AXIS=SIZE"),
        (_meshed, "data=2,data=2", "named twice"),
        (_meshed, "data=3", "has 3 devices, and the chosen device set has 4"),
        (lambda: _placed(jax.make_mesh((4,), ("data",))), "data=4", "no factory of the target"),
        (_meshed, None, "takes a `mesh` and none was asked for"),
    ],
)
def test_bad_meshes_are_said_with_their_fix(args, mesh, said):
    target = Target(fn=resharded, name="resharded", args=args)
    with pytest.raises(RematError, match=said):
        remat_tui.analyze(target, mesh=mesh)


def test_a_compile_worker_builds_the_mesh_asked_for(tmp_path):
    """A worker process rebuilds the target from its file: the mesh travels
    with the request, and the worker lowers the very program asked for."""
    from remat_tui.core.setup.config import Config
    from remat_tui.core.setup.loading import load_targets, with_mesh
    from remat_tui.core.xla.compile.costs import compile_answer
    from remat_tui.core.xla.run import process as compile_process

    path = tmp_path / "meshed.py"
    path.write_text(MESHED_FILE)
    target = with_mesh(load_targets(str(path))["loss"], "data=2,model=2", jax.devices())
    config = Config.make("as_written", None, "cpu:0")
    key = compile_answer(target, config, memory=True).program
    request = compile_process.CompileRequest(
        str(path), "loss", None, config, "cpu:0", True, key, False, target.mesh
    )
    kind, answered = compile_process.answer(request)
    assert kind == "ok" and answered["peak_bytes"] == _peak(target)


MESHED_FILE = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import remat_tui

def args(mesh):
    f32 = lambda s, spec: jax.ShapeDtypeStruct(s, jnp.float32, sharding=NamedSharding(mesh, spec))
    return f32((16, 16), P(None, "model")), f32((8, 16), P("data", None))

@remat_tui.target(args=args)
def loss(w, x):
    return jnp.sum(jnp.sin(jnp.tanh(x @ w) @ w))
"""


def test_the_mesh_is_part_of_the_compile_key(store_on):
    """Contract 17: what a configuration is compiled over is in its key, as
    the store keeps it beside the program."""
    from remat_tui.core.setup.config import Config
    from remat_tui.core.setup.loading import with_mesh
    from remat_tui.core.xla.compile import service as compile_service
    from remat_tui.core.xla.compile.costs import compile_answer

    target = Target(fn=resharded, name="resharded", args=_meshed)
    config = Config.make("as_written", None, "cpu:0")
    keys = {}
    for mesh in ("data=2,model=2", "data=4,model=1"):
        meshed = with_mesh(target, mesh, jax.devices())
        keys[mesh] = compile_answer(meshed, config).program
        assert compile_service.store().get(keys[mesh])["program"]["mesh"] == mesh
    assert len(set(keys.values())) == 2
