"""`--mesh AXIS=N,...`, run as a user runs it: the mesh built over the chosen
devices for a factory's `mesh` parameter compiles to the same step compiled
by hand over that mesh; bad input is exit 2 with one line naming the cause
and the fix; a `check` baseline records the mesh and refuses a comparison
over another; the TPU environment is set before the target is imported."""

import json
import os
import subprocess

import jax
import pytest
from zoo.oracle import hand_peak

from remat_tui.core.setup.devices import libtpu_installed

MODEL = """
import jax, jax.numpy as jnp
from jax.sharding import NamedSharding, PartitionSpec as P
import remat_tui

def args(mesh):
    f32 = lambda s, spec: jax.ShapeDtypeStruct(s, jnp.float32, sharding=NamedSharding(mesh, spec))
    return f32((16, 16), P(None, "model")), f32((8, 16), P("data", None))

def loss(w, x):
    h = jax.sharding.reshard(jnp.tanh(x @ w), P("data", None))
    return jnp.sum(jnp.sin(h @ w))

remat_tui.target(args=args, name="loss")(loss)
"""


def _run(cmd, *args, env=None):
    return subprocess.run([cmd, *args], capture_output=True, text=True, timeout=300, env=env)


def _hand(path, mesh_shape):
    """The step compiled by hand, over the mesh a user builds, from the file's own code."""
    namespace: dict = {}
    exec(compile(open(path).read(), path, "exec"), namespace)
    mesh = jax.make_mesh(mesh_shape, ("data", "model"), devices=jax.devices()[:4])
    with jax.set_mesh(mesh):
        return hand_peak(namespace["loss"], namespace["args"](mesh))


def test_mesh_option_compiles_to_the_hand_figure(write_target, remat_tui_cmd):
    path = write_target(MODEL)
    out = _run(remat_tui_cmd, "report", path, "--mesh", "data=2,model=2", "--compiled",
               "--format", "json")  # fmt: skip
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["compiled"]["peak_bytes"] == _hand(path, (2, 2))
    # The mesh is in the labels: the JSON's device, the text report's device line.
    assert report["device"]["mesh"] == {"data": 2, "model": 2}
    text = _run(remat_tui_cmd, "report", path, "--mesh", "data=4,model=1")
    assert "device  cpu:0, mesh data=4,model=1\n" in text.stdout, text.stderr


@pytest.mark.parametrize(
    "mesh, said",
    [
        ("data=2,model", "'model' is not AXIS=SIZE"),
        ("data=3,model=1", "has 3 devices, and the chosen device set has 4"),
        (None, "takes a `mesh` and none was asked for"),
    ],
)
def test_bad_mesh_is_exit_2_with_one_line(write_target, remat_tui_cmd, mesh, said):
    path = write_target(MODEL)
    out = _run(remat_tui_cmd, "compare", path, *(["--mesh", mesh] if mesh else []))
    assert out.returncode == 2, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "--mesh" in lines[0], out.stderr


def test_mesh_for_a_target_without_a_mesh_parameter_is_exit_2(write_target, remat_tui_cmd):
    path = write_target(
        "import jax.numpy as jnp, remat_tui\n"
        "@remat_tui.target(args=lambda: (jnp.ones(4),))\n"
        "def f(x):\n    return jnp.sum(jnp.sin(x))\n"
    )
    out = _run(remat_tui_cmd, "report", path, "--mesh", "data=4")
    assert out.returncode == 2
    assert "no factory of the target takes a `mesh`" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_check_records_the_mesh_and_refuses_another(write_target, remat_tui_cmd, tmp_path):
    path = write_target(MODEL)
    baseline = str(tmp_path / "baseline.json")
    wrote = _run(remat_tui_cmd, "check", path, "--mesh", "data=4,model=1", "--write", baseline)
    assert wrote.returncode == 0, wrote.stderr
    made = json.load(open(baseline))["check"]
    assert made["mesh"] == made["mesh_asked"] == {"data": 4, "model": 1}
    assert made["device_kind"] == jax.devices()[0].device_kind
    # Without --mesh the baseline's own is taken, as its policy and device are.
    same = _run(remat_tui_cmd, "check", path, "--against", baseline)
    assert same.returncode == 0, same.stderr
    other = _run(remat_tui_cmd, "check", path, "--mesh", "data=2,model=2", "--against", baseline)
    assert other.returncode == 2, other.stderr
    (line,) = other.stderr.strip().splitlines()
    assert "taken over the mesh data=4,model=1" in line and "data=2,model=2" in line


@pytest.mark.skipif(not libtpu_installed(), reason="libtpu's warnings need libtpu installed")
def test_the_tpu_environment_is_set_before_the_target_is_imported(write_target, remat_tui_cmd):
    """A target that builds its mesh from jax.devices() at import starts JAX's
    backends then: libtpu must already find its environment set."""
    path = write_target(
        "import jax, jax.numpy as jnp, remat_tui\n"
        "from jax.sharding import NamedSharding, PartitionSpec as P\n"
        "MESH = jax.make_mesh((len(jax.devices()),), ('data',))\n"
        "@remat_tui.target(args=lambda: (jax.ShapeDtypeStruct((4, 4), jnp.float32,\n"
        "    sharding=NamedSharding(MESH, P())),))\n"
        "def f(w):\n    return jnp.sum(jnp.sin(w))\n"
    )
    set_here = ("TPU_ACCELERATOR_TYPE", "TPU_WORKER_HOSTNAMES", "ALLOW_MULTIPLE_LIBTPU_LOAD")
    env = {k: v for k, v in os.environ.items() if k not in set_here}
    out = _run(remat_tui_cmd, "report", path, env=env)
    assert out.returncode == 0, out.stderr
    assert "TPU_WORKER_HOSTNAMES" not in out.stderr and "hostname" not in out.stderr


def test_every_headless_command_takes_mesh_and_the_page_says_so():
    from remat_tui.cli.commands import SUBCOMMANDS
    from remat_tui.cli.commands import parser as headless_parser

    parser = headless_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    for command in SUBCOMMANDS:
        assert "--mesh" in {o for a in commands[command]._actions for o in a.option_strings}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for page in ("cli.md", "targets.md"):
        text = open(os.path.join(root, "docs", "guide", page), encoding="utf-8").read()
        assert "--mesh data=4,model=2" in text, page


def test_fit_over_a_mesh_that_cannot_split_its_smallest_batch_says_multiple(
    write_target, remat_tui_cmd
):
    path = write_target(
        MODEL.replace("def args(mesh):", "def args(mesh, batch=8):").replace(
            "f32((8, 16)", "f32((batch, 16)"
        )
    )
    out = _run(remat_tui_cmd, "fit", path, "--mesh", "data=2,model=2", "--budget", "1MiB")
    assert out.returncode == 2, out.stderr
    (line,) = out.stderr.strip().splitlines()
    assert "at batch 1 its arguments do not split over their mesh" in line
    assert "--multiple N" in line
