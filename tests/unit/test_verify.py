"""Contract 18, the same gradients: `verify` runs the step under a
configuration and as the code is written, on the device, with the same
inputs, and compares the loss and every gradient. The oracle: the same
gradients computed by hand with `jax.value_and_grad`, under
`jax.checkpoint(loss, policy=...)` and without it, at test time."""

import importlib.util
import os

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import ROOT, example

import remat_tui
from remat_tui.core.setup.config import Config
from remat_tui.core.setup.policies import as_spec, checkpoint_policy
from remat_tui.core.setup.policy_spec import builtin_specs
from remat_tui.core.xla.compile import service as compile_service
from remat_tui.core.xla.verify.runs import verify
from remat_tui.registry import Target

NOISY = os.path.join(ROOT, "tests", "models", "stateful_noise.py")
HAS_LIBTPU = importlib.util.find_spec("libtpu") is not None


def noisy():
    """The target, and its module's namespace (the draws' count, the factory)."""
    target = remat_tui.load_targets(NOISY)["loss"]
    return target, target.fn.__globals__


def by_hand(fn, policy_text, args, before=lambda: None):
    """(loss, gradients) of `fn` under the outer policy, by jax.value_and_grad."""
    spec = as_spec(policy_text)
    loss = fn if policy_text == "as_written" else jax.checkpoint(fn, policy=checkpoint_policy(spec))
    before()
    value, grads = jax.jit(jax.value_and_grad(loss))(*args)
    return {"loss": np.asarray(value), **{
        f"params{jax.tree_util.keystr(path)}": np.asarray(g)
        for path, g in jax.tree_util.tree_flatten_with_path(grads)[0]
    }}  # fmt: skip


def largest_difference(a, b):
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64)), initial=0))


def test_recomputing_a_stateful_callback_moves_the_gradients_and_verify_names_them():
    target, module = noisy()
    args = target.args()
    reset = lambda: module["draws"].__setitem__(0, 0)  # noqa: E731
    want = by_hand(target.fn, "as_written", args, reset)
    got = by_hand(target.fn, "nothing_saveable", args, reset)
    reset()
    v = verify(target, Config.make("nothing_saveable"))
    assert v.verdict == "differ" and not v.ok
    leaves = {leaf.path: leaf for leaf in v.leaves}
    assert set(leaves) == set(want)  # the loss and each parameter, by its path
    moved = {k for k in want if largest_difference(got[k], want[k]) > leaves[k].tolerance}
    assert moved and {leaf.path for leaf in v.differing} == moved
    for path in moved:  # the difference verify measured is JAX's own
        assert leaves[path].max_abs == pytest.approx(largest_difference(got[path], want[path]),
                                                     rel=1e-4)  # fmt: skip
    assert v.max_abs == max(leaves[p].max_abs for p in moved)
    with open(NOISY) as fh:  # the callback the recomputation runs again, by its line
        line = next(i for i, text in enumerate(fh, 1) if "jax.pure_callback(_draw" in text)
    assert v.callbacks == (f"pure_callback at stateful_noise.py:{line}",)


def test_saving_the_callbacks_value_keeps_the_gradients():
    target, module = noisy()
    module["draws"][0] = 0
    v = verify(target, Config.make("everything_saveable"))
    assert v.ok, [leaf.to_dict() for leaf in v.differing]
    args = target.args()
    reset = lambda: module["draws"].__setitem__(0, 0)  # noqa: E731
    want = by_hand(target.fn, "as_written", args, reset)
    got = by_hand(target.fn, "everything_saveable", args, reset)
    for leaf in v.leaves:
        assert largest_difference(got[leaf.path], want[leaf.path]) <= leaf.tolerance


def with_arrays(target):
    """`target` with real arrays of its example's shapes (the oracle runs them too)."""
    keys = iter(jax.random.split(jax.random.key(7), 32))

    def real(s):
        return 0.3 * jax.random.normal(next(keys), s.shape, s.dtype)

    return Target(fn=target.fn, name=target.name, args=jax.tree.map(real, target.args()))


def mlp_with_arrays():
    return with_arrays(remat_tui.load_targets(example("mlp.py"))["loss"])


def test_every_builtin_policy_verifies_on_the_mlp_as_jax_computes_it():
    target = mlp_with_arrays()
    want = by_hand(target.fn, "as_written", target.args)
    shares = {}
    for text in builtin_specs():
        v = verify(target, Config.make(text))
        assert v.ok, (text, [leaf.to_dict() for leaf in v.differing])
        got = by_hand(target.fn, text, target.args)
        leaves = {leaf.path: leaf for leaf in v.leaves}
        assert set(leaves) == set(want)
        for path, leaf in leaves.items():  # JAX's own step under the policy agrees too
            assert largest_difference(got[path], want[path]) <= leaf.tolerance, (text, path)
        shares[text] = v.bitwise_leaves / len(v.leaves)
    print("bitwise-equal share per policy:", shares)


def test_drawn_inputs_are_the_same_for_both_runs():
    """examples/mlp.py gives shapes only: its inputs are drawn, with one
    seed for both runs, so the code as written against itself is bitwise
    equal; the inputs say how they were made."""
    target = remat_tui.load_targets(example("mlp.py"))["loss"]
    v = verify(target, Config.make("as_written"), seed=3)
    assert v.verdict == "equal"
    assert v.inputs == {"seed": 3, "given": 0, "drawn": len(jax.tree.leaves(target.args()))}


def test_verify_args_are_the_inputs_where_the_target_gives_them():
    def loss(table, tokens):
        return jnp.mean(jnp.tanh(table[tokens]) ** 2)

    shapes = (jax.ShapeDtypeStruct((50, 8), jnp.float32), jax.ShapeDtypeStruct((12,), jnp.int32))
    given = (jnp.ones((50, 8)) * jnp.arange(50.0)[:, None] / 50, jnp.arange(12) * 4)
    target = Target(fn=loss, name="loss", args=shapes, verify_args=lambda: given)
    v = remat_tui.verify(target, policy="nothing_saveable")
    assert v.ok and v.inputs == {"seed": 0, "given": 2, "drawn": 0}
    # The table's gradient, by hand on those arrays: verify ran these inputs.
    (value, grad) = jax.value_and_grad(loss)(*given)
    assert [leaf.path for leaf in v.leaves] == ["loss", "table"]
    assert v.leaves[1].magnitude == pytest.approx(float(jnp.max(jnp.abs(grad))))
    assert v.leaves[0].magnitude == pytest.approx(float(value))


def test_a_training_step_compares_the_loss_and_the_new_parameters():
    optax = pytest.importorskip("optax")
    target, module = noisy()
    trained = Target(fn=target.fn, name="loss", args=target.args, param_positions=(0,),
                     optimizer=optax.sgd(0.1))  # fmt: skip
    module["draws"][0] = 0
    same = verify(trained, Config.make("everything_saveable"))
    assert same.step == "train" and same.ok
    assert [leaf.path for leaf in same.leaves] == ["loss", "params['W1']", "params['W2']"]
    module["draws"][0] = 0
    assert verify(trained, Config.make("nothing_saveable")).verdict == "differ"


@pytest.mark.skipif(not HAS_LIBTPU, reason="needs the tpu extra (libtpu)")
def test_a_deviceless_topology_runs_nothing_and_claims_nothing():
    target = remat_tui.load_targets(example("mlp.py"))["loss"]
    before = compile_service.counts.snapshot()
    v = verify(target, Config.make("nothing_saveable", device="tpu:v5e:2x2"))
    assert v.verdict == "not_run" and not v.ok and v.leaves == ()
    assert "deviceless" in v.reason and "nothing is claimed" in v.reason
    assert compile_service.counts.snapshot() == before  # nothing compiled, nothing run
    said = v.to_dict()
    assert said["verdict"] == "not_run" and said["max_abs"] == 0.0 and said["leaves"] == []


def test_the_json_carries_the_contracts_keys():
    target, module = noisy()
    module["draws"][0] = 0
    said = verify(target, Config.make("nothing_saveable")).to_dict()
    assert {"verdict", "bitwise_leaves", "max_abs", "max_rel", "tolerance", "device"} <= set(said)
    assert said["device"] == "cpu:0" and "xla_backend_optimization_level" in said["tolerance"]
    assert [leaf["path"] for leaf in said["leaves"]] == ["loss", "params['W1']", "params['W2']"]


def test_every_structure_offered_verifies_on_a_scan_as_jax_computes_it():
    """The structures a search weighs (nested and split scans, rebuilt from
    the traced program) compute the scan as written's gradients; the code
    as written's own are JAX's value_and_grad of the target."""
    from remat_tui.core.search.configs.structure_grid import structure_candidates

    scan_stack = os.path.join(ROOT, "tests", "models", "scan_stack.py")
    target = with_arrays(remat_tui.load_targets(scan_stack)["stack"])
    offered = structure_candidates(target, Config())
    assert len(offered) >= 4
    shares = {}
    for config in offered:
        v = verify(target, config)
        assert v.ok, (config.label(), [leaf.to_dict() for leaf in v.differing])
        shares[str(config.structure)] = v.bitwise_leaves / len(v.leaves)
    want = by_hand(target.fn, "as_written", target.args)
    assert [leaf.magnitude for leaf in v.leaves] == pytest.approx(
        [float(np.max(np.abs(want[leaf.path]))) for leaf in v.leaves], rel=1e-6
    )
    print("bitwise-equal share per structure:", shares)


def test_a_suggestion_verifies_its_answer():
    target, module = noisy()
    s = remat_tui.suggest(target, "1KiB")
    assert s.best.config.policy == "nothing_saveable" and s.gradients is None
    module["draws"][0] = 0
    v = s.verify()
    assert v.verdict == "differ" and v.config == "policy nothing_saveable"
    module["draws"][0] = 0
    checked = remat_tui.suggest(target, "1KiB", verify=True)
    assert checked.gradients.ok and checked.best.config.policy != "nothing_saveable"
    assert [f.row.config.policy for f in checked.verify_failed][0] == "nothing_saveable"


def test_a_verification_displays_itself_in_a_notebook():
    target, module = noisy()
    module["draws"][0] = 0
    v = remat_tui.verify(target, policy="nothing_saveable")
    html = v._repr_html_()
    assert "gradients differ: 2 of 3 leaves" in html and "params[&#x27;W1&#x27;]" in html
    assert "<script" not in html and "http" not in html
    plain = v._repr_mimebundle_()["text/plain"]
    assert plain.startswith("gradients differ") and "params['W2']" in plain


def test_host_callbacks_are_found_with_their_lines_and_checkpoints():
    from remat_tui.core.jaxcompat.callbacks import host_callbacks

    def f(x):
        y = jax.pure_callback(np.sin, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
        return jnp.sum(jnp.tanh(x * y))

    def g(x):
        jax.debug.callback(print, x)
        return jax.checkpoint(f)(x)

    jaxpr = jax.make_jaxpr(g)(jnp.ones(3)).jaxpr
    found = {(c.kind, c.checkpointed) for c in host_callbacks(jaxpr)}
    assert found == {("debug_callback", False), ("pure_callback", True)}
    where = {c.kind: c.where for c in host_callbacks(jaxpr)}
    assert where["pure_callback"].startswith("test_verify.py:")
