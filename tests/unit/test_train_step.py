"""Contract 8, the step you train: a target that names its parameters and
optax optimizer compiles one whole training step (gradient, update,
parameters and optimizer state donated), checked against the same step
written by hand and compiled by JAX; without them the figure is the gradient
alone, and every view says which."""

import jax
import jax.numpy as jnp
import pytest

optax = pytest.importorskip("optax")

import remat_tui  # noqa: E402
from remat_tui.core.setup.config import Config  # noqa: E402
from remat_tui.core.xla.compile.costs import compile_answer  # noqa: E402
from remat_tui.errors import RematError  # noqa: E402
from remat_tui.registry import Target  # noqa: E402
from remat_tui.report import render  # noqa: E402

WIDTH, BATCH = 256, 64
PARAMS = {"w1": jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32),
          "w2": jax.ShapeDtypeStruct((WIDTH, WIDTH), jnp.float32)}  # fmt: skip
BATCH_X = jax.ShapeDtypeStruct((BATCH, WIDTH), jnp.float32)


def loss(params, x):
    h = jnp.tanh(x @ params["w1"])
    return jnp.mean(jnp.tanh(h @ params["w2"]) ** 2)


def trained(optimizer=None):
    return Target(
        fn=loss,
        name="loss",
        args=(PARAMS, BATCH_X),
        param_positions=(0,) if optimizer is not None else None,
        optimizer=optimizer,
    )


def by_hand(optimizer):
    """The step a training loop runs, written out and compiled by JAX itself."""

    def step(params, opt_state, x):
        value, grads = jax.value_and_grad(loss)(params, x)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    opt_state = jax.eval_shape(optimizer.init, PARAMS)
    return jax.jit(step, donate_argnums=(0, 1)).lower(PARAMS, opt_state, BATCH_X).compile()


@pytest.mark.parametrize("name", ["adam", "sgd"])
def test_the_training_step_is_what_a_loop_compiles(name):
    optimizer = {"adam": optax.adam(1e-3), "sgd": optax.sgd(1e-2)}[name]
    c = compile_answer(trained(optimizer), Config()).result
    want = by_hand(optimizer).memory_analysis()
    assert c.step == "train"
    assert c.argument_bytes == want.argument_size_in_bytes
    assert c.output_bytes == want.output_size_in_bytes
    assert c.alias_bytes == want.alias_size_in_bytes > 0  # parameters and state donated
    gradient = compile_answer(trained(), Config()).result
    assert gradient.step == "gradient"
    params_bytes = 2 * WIDTH * WIDTH * 4
    if name == "adam":  # two moments the size of the parameters, and a step count
        assert c.argument_bytes >= gradient.argument_bytes + 2 * params_bytes


def test_every_view_says_what_was_compiled():
    optimizer = optax.adam(1e-3)
    train = remat_tui.analyze(trained(optimizer), compiled=True)
    alone = remat_tui.analyze(trained(), compiled=True)
    assert "one training step" in render(train, "text")
    assert "the gradient alone" in render(alone, "text")
    assert train.to_dict()["compiled"]["step"] == "train"
    assert alone.to_dict()["compiled"]["step"] == "gradient"


def test_an_optimizer_needs_params_and_params_name_real_arguments():
    with pytest.raises(TypeError, match="optimizer needs params"):
        remat_tui.target(args=(), optimizer=optax.sgd(1.0))
    bad = Target(fn=loss, name="loss", args=(PARAMS, BATCH_X), param_positions=(5,),
                 optimizer=optax.sgd(1.0))  # fmt: skip
    with pytest.raises(RematError, match=r"params=\(5,\) names argument positions \[5\]"):
        compile_answer(bad, Config())


def test_the_cli_compiles_the_training_step_of_a_file(write_target, capsys):
    from remat_tui.cli import main

    path = write_target(
        "import jax, jax.numpy as jnp, optax, remat_tui\n"
        "@remat_tui.target(args=lambda: ({'w': jnp.ones((8, 8))}, jnp.ones((4, 8))),\n"
        "                  params=0, optimizer=optax.adam(1e-3))\n"
        "def loss(params, x):\n"
        "    return jnp.sum(jnp.tanh(x @ params['w']))\n"
    )
    assert main(["report", path, "--compiled", "--format", "json"]) == 0
    import json

    assert json.loads(capsys.readouterr().out)["compiled"]["step"] == "train"


def clipped_step(params, opt_state, x, *, loss):
    """A step of the user's own: clipped gradients, an EMA of the loss in the state."""
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    inner, ema = opt_state
    value, grads = jax.value_and_grad(loss)(params, x)
    updates, inner = optimizer.update(grads, inner, params)
    return optax.apply_updates(params, updates), (inner, 0.9 * ema + 0.1 * value)


def clipped_init(params):
    optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))
    return optimizer.init(params), jnp.zeros((), jnp.float32)


def test_a_train_step_of_ones_own_is_what_jax_compiles_for_it():
    target = Target(fn=loss, name="loss", args=(PARAMS, BATCH_X), param_positions=(0,),
                    train_step=clipped_step, opt_state=clipped_init)  # fmt: skip
    c = compile_answer(target, Config()).result
    state = jax.eval_shape(clipped_init, PARAMS)
    want = (
        jax.jit(lambda p, s, x: clipped_step(p, s, x, loss=loss), donate_argnums=(0, 1))
        .lower(PARAMS, state, BATCH_X)
        .compile()
        .memory_analysis()
    )
    assert c.step == "train"
    assert c.argument_bytes == want.argument_size_in_bytes
    assert c.output_bytes == want.output_size_in_bytes
    assert c.alias_bytes == want.alias_size_in_bytes > 0


def test_the_train_step_differentiates_the_configured_loss():
    """The policy under study reaches the user's step through `loss`: saving
    nothing makes the step's temporaries no larger than saving everything."""
    target = Target(fn=loss, name="loss", args=(PARAMS, BATCH_X), param_positions=(0,),
                    train_step=clipped_step, opt_state=clipped_init)  # fmt: skip
    seen = []

    def spying_step(params, opt_state, x, *, loss):
        seen.append(jax.make_jaxpr(loss)(params, x))
        return clipped_step(params, opt_state, x, loss=loss)

    spied = Target(**{**vars(target), "train_step": spying_step})
    compile_answer(spied, Config.make("nothing_saveable"))
    assert "checkpoint" in str(seen[-1]) or "remat" in str(seen[-1])
    compile_answer(spied, Config())
    assert "checkpoint" not in str(seen[-1]) and "remat" not in str(seen[-1])


def test_a_train_step_that_returns_the_wrong_shape_is_told_so():
    target = Target(fn=loss, name="loss", args=(PARAMS, BATCH_X), param_positions=(0,),
                    train_step=lambda p, s, x, loss: p, opt_state=clipped_init)  # fmt: skip
    with pytest.raises(RematError, match=r"train_step must return \(params, opt_state\)"):
        compile_answer(target, Config())


def test_train_step_needs_params_and_a_state():
    with pytest.raises(TypeError, match="train_step needs params"):
        remat_tui.target(train_step=clipped_step, opt_state=clipped_init)
    with pytest.raises(TypeError, match="train_step needs its optimizer state"):
        remat_tui.target(params=0, train_step=clipped_step)
    with pytest.raises(TypeError, match="opt_state goes with train_step"):
        remat_tui.target(params=0, optimizer=optax.sgd(1.0), opt_state=clipped_init)


def test_a_sharded_training_step_is_per_device_and_shards_the_state():
    """Parameters sharded over the four CPU devices: the step compiles over
    them, the optimizer state follows the parameters' sharding, and the
    figures are one device's: a quarter of the unsharded step's arguments."""
    from jax.sharding import AxisType, NamedSharding
    from jax.sharding import PartitionSpec as P

    mesh = jax.make_mesh((4,), ("data",), axis_types=(AxisType.Explicit,))
    rows = NamedSharding(mesh, P("data", None))
    params = {k: jax.ShapeDtypeStruct(v.shape, v.dtype, sharding=rows) for k, v in PARAMS.items()}
    x = jax.ShapeDtypeStruct(BATCH_X.shape, BATCH_X.dtype, sharding=rows)
    optimizer = optax.adam(1e-3)
    sharded = Target(fn=loss, name="loss", args=(params, x), param_positions=(0,),
                     optimizer=optimizer)  # fmt: skip
    c = compile_answer(sharded, Config()).result
    whole = compile_answer(trained(optimizer), Config()).result
    assert c.step == "train" and c.devices == 4
    # parameters, the two Adam moments and the batch split four ways (the step
    # count, a scalar, is whole on each device)
    assert c.argument_bytes < whole.argument_bytes / 4 + 64
    assert c.alias_bytes > 0
