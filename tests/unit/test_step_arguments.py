"""The compiled step differentiates what the step users run differentiates
(issue 30, item 2): `jax.value_and_grad`'s default, the first argument, or
the positions a target names with `params=`; integer leaves never. The
oracle is JAX: the same function compiled by hand with `jax.value_and_grad`
and those argnums, at test time. The residual list stays
print_saved_residuals' own (every argument), and the reports say, in one
line, where the two differ."""

import json
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import remat_tui
from remat_tui.core.setup.config import Config
from remat_tui.core.xla.compile.costs import compile_answer
from remat_tui.core.xla.compile.differentiated import FIRST, FIRST_NOT_FLOAT, KEYWORDS_ONLY, NAMED
from remat_tui.registry import Target
from remat_tui.report import render

sys.path.insert(0, str(Path(__file__).parent.parent))
from models import vit_linen  # noqa: E402

F32, I32 = jnp.float32, jnp.int32


def _shape(*shape, dtype=F32):
    return jax.ShapeDtypeStruct(shape, dtype)


def _by_hand(fn, args, policy: str = "as_written", argnums=0):
    """jax.value_and_grad(fn, argnums) under `policy`, compiled by JAX directly."""
    if policy != "as_written":
        fn = jax.checkpoint(fn, policy=getattr(jax.checkpoint_policies, policy))
    return jax.jit(jax.value_and_grad(fn, argnums=argnums)).lower(*args).compile()


@pytest.mark.parametrize(
    ("integer_labels", "policy"), [(False, "as_written"), (True, "dots_saveable")]
)
def test_the_vit_step_differentiates_its_parameters_not_its_batch(integer_labels, policy):
    """loss(params, images, labels): the step takes the parameters' gradient
    alone, as jax.value_and_grad(loss) does, not the images' or labels'."""
    args = vit_linen.example_args(integer_labels)
    fn = vit_linen.make_loss(vit_linen.REMAT_POLICY, integer_labels)
    ours = compile_answer(Target(fn=fn, name="loss", args=lambda: args), Config.make(policy)).result
    want = _by_hand(fn, args, policy).memory_analysis()
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.temp_bytes == pytest.approx(want.temp_size_in_bytes, rel=0.05, abs=1024)
    assert ours.peak_bytes == pytest.approx(
        want.argument_size_in_bytes + want.output_size_in_bytes + want.temp_size_in_bytes,
        rel=0.02,
    )
    assert ours.differentiated == {
        "positions": [0], "keywords": [], "why": FIRST, "every_argument": False,
    }  # fmt: skip


def scaled(x, w, b):
    return jnp.sum(jnp.tanh(x @ w + b) ** 2)


def test_params_names_what_the_step_differentiates():
    x, w, b = _shape(64, 128), _shape(128, 128), _shape(128)
    # params without an optimizer is allowed: it names what the gradient takes.
    assert remat_tui.target(args=(x, w, b), params=(1, 2))(scaled) is scaled
    t = Target(fn=scaled, name="scaled", args=(x, w, b), param_positions=(2, 1))
    ours = compile_answer(t, Config()).result
    want = _by_hand(scaled, (x, w, b), argnums=(1, 2)).memory_analysis()
    assert not t.trains and ours.step == "gradient"
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.differentiated["positions"] == [1, 2]
    assert ours.differentiated["why"] == NAMED


def counted(params, x, n):
    """Parameters with an integer leaf (a step count), and an integer argument."""
    return jnp.sum(jnp.tanh(x @ params["w"]) * params["count"]) / n


def test_integer_arguments_are_never_differentiated_even_when_named():
    params = {"w": _shape(64, 64), "count": _shape(dtype=I32)}
    x, n = _shape(32, 64), _shape(dtype=I32)
    t = Target(fn=counted, name="counted", args=(params, x, n), param_positions=(0, 2))
    ours = compile_answer(t, Config()).result

    def of_w(w, count, x, n):  # JAX refuses integer inputs: the float leaf alone
        return counted({"w": w, "count": count}, x, n)

    want = _by_hand(of_w, (params["w"], params["count"], x, n)).memory_analysis()
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.differentiated["positions"] == [0]


def test_keyword_arguments_alone_are_all_differentiated():
    """jax.value_and_grad takes positional arguments only; a target with
    keyword arguments alone gets its floating-point ones differentiated."""

    def f(*, x, w, n):
        return jnp.sum(jnp.sin(x @ w)) * n

    kwargs = {"x": _shape(16, 32), "w": _shape(32, 32), "n": _shape(dtype=I32)}
    ours = compile_answer(Target(fn=f, name="f", args=(), kwargs=kwargs), Config()).result

    def of_floats(floats, n):
        return f(**floats, n=n)

    floats = {k: kwargs[k] for k in ("x", "w")}
    want = _by_hand(of_floats, (floats, kwargs["n"])).memory_analysis()
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.differentiated == {
        "positions": [], "keywords": ["w", "x"], "why": KEYWORDS_ONLY, "every_argument": True,
    }  # fmt: skip


def test_an_integer_first_argument_gives_way_to_the_floating_ones():
    def lookup(tokens, table, scale):
        return jnp.sum(jnp.tanh(table[tokens] * scale))

    args = (_shape(8, dtype=I32), _shape(50, 16), _shape(16))
    ours = compile_answer(Target(fn=lookup, name="lookup", args=args), Config()).result
    want = _by_hand(lookup, args, argnums=(1, 2)).memory_analysis()
    assert ours.output_bytes == want.output_size_in_bytes
    assert ours.differentiated["positions"] == [1, 2]
    assert ours.differentiated["why"] == FIRST_NOT_FLOAT


def test_the_reports_say_in_one_line_where_the_step_and_the_residuals_differ():
    x, w, b = _shape(8, 16), _shape(16, 16), _shape(16)
    a = remat_tui.analyze(scaled, args=(x, w, b), compiled=True)
    assert json.loads(render(a, "json"))["compiled"]["differentiated"]["positions"] == [0]
    for fmt in ("text", "md", "html"):
        said = render(a, fmt)
        assert said.count("print_saved_residuals differentiates them") == 1, fmt
        assert "the loss and the gradients of argument 0" in said, fmt
    # The residual list is still every argument's: print_saved_residuals' own.
    assert {r.argument for r in a.residuals if r.kind == "argument"} >= {"x", "w"}
    one = remat_tui.analyze(lambda w: jnp.sum(jnp.sin(w) ** 2), args=(w,), compiled=True)
    assert one.compiled.differentiated["every_argument"]
    assert "print_saved_residuals differentiates them" not in render(one, "text")


def test_a_training_steps_outputs_are_the_new_parameters_and_state():
    optax = pytest.importorskip("optax")
    x, w, b = _shape(8, 16), _shape(16, 16), _shape(16)
    t = Target(fn=scaled, name="scaled", args=(x, w, b), param_positions=(1,),
               optimizer=optax.sgd(0.1))  # fmt: skip
    text = render(remat_tui.analyze(t, compiled=True), "text")
    assert "outputs (the new parameters and optimizer state, and the loss)" in text
    assert "the loss and the gradients" not in text


def test_the_flop_note_names_the_arguments_the_step_leaves_out():
    """remat-tui's FLOPs are the traced vjp's, every argument's gradient in
    them: a compiled count below it is first that."""
    from remat_tui.core.xla.estimates.flop_note import flop_note

    compiled = {"loops": False, "flops": 700.0, "transcendentals": 0.0,
                "differentiated": {"every_argument": False}}  # fmt: skip
    assert "the gradients of every argument" in flop_note(1000.0, 0.0, compiled)
    compiled["differentiated"] = {"every_argument": True}
    assert "the gradients of every argument" not in flop_note(1000.0, 0.0, compiled)


def test_compare_and_suggest_say_once_what_their_compiled_step_differentiates():
    from remat_tui.report.comparisons import render_compare
    from remat_tui.report.suggest import render_suggest

    x, w, b = _shape(8, 16), _shape(16, 16), _shape(16)
    c = remat_tui.compare(scaled, args=(x, w, b), policies=["as_written"], compiled=True)
    s = remat_tui.suggest(scaled, 2**40, args=(x, w, b), compiled=True)
    said = [render_compare(c, fmt) for fmt in ("text", "md", "html")]
    said += [render_suggest(s, fmt) for fmt in ("text", "md")]
    for text in said:
        assert text.count("The compiled step differentiates argument 0 (") == 1
