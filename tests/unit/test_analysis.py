"""The Analysis model: line maps, names, totals, devices, bad input."""

import re

import jax
import jax.numpy as jnp
import pytest

import remat_tui
from remat_tui.errors import RematError


def binders(line: str) -> list[str]:
    return re.findall(r"([A-Za-z_]\w*):\S+", line.split(" = ")[0])


@pytest.mark.parametrize(
    "policy",
    [
        "as_written",
        "nothing_saveable",
        "dots_saveable",
        "save_and_offload_only_these_names(names_which_can_be"
        "_saved=['a'], names_which_can_be_offloaded=['b'])",
    ],
)
def test_forward_lines_define_the_residual_variable(notebook_targets, policy):
    a = remat_tui.analyze(notebook_targets["loss"], policy=policy)
    assert a.residuals
    for i, r in enumerate(a.residuals):
        assert r.forward_var, r
        first = a.forward.lines[r.forward_lines[0]]
        if r.kind == "argument":
            assert f" {r.forward_var}:" in first  # declared in the jaxpr header
        else:
            assert r.forward_var in binders(first)  # defined by this equation
        assert all(i in a.forward.residual_lines[line] for line in r.forward_lines)


def test_backward_lines_read_the_residual(notebook_targets):
    a = remat_tui.analyze(notebook_targets["f"])
    for r in a.residuals:
        assert r.backward_var
        header, *readers = r.backward_lines
        assert f" {r.backward_var}:" in a.backward.lines[header]
        assert readers, f"{r.text} is never read"
        reader_text = " ".join(a.backward.lines[line] for line in readers)
        assert re.search(rf"\b{r.backward_var}\b", reader_text.split(" = ", 1)[-1])


def test_residual_sources_are_the_users_lines(notebook_targets):
    a = remat_tui.analyze(notebook_targets["f"])
    outputs = [r for r in a.residuals if r.kind == "output"]
    assert outputs
    for r in outputs:
        assert r.source.file.endswith("notebook.py")
        assert f"{r.source.line}" in r.text and r.source.function == "g"
        with open(r.source.file) as fh:
            code = fh.read().splitlines()[r.source.line - 1]
        assert ("sin" in code) if r.primitive in ("sin", "cos") else ("dot" in code)


def test_every_equation_line_has_its_source(notebook_targets):
    a = remat_tui.analyze(notebook_targets["f"])
    eqn_lines = [i for i, line in enumerate(a.forward.lines) if " = " in line]
    assert eqn_lines
    for i in eqn_lines:
        src = a.forward.source(i)
        assert src is not None and src.file.endswith("notebook.py")


def test_recomputation_is_marked_only_under_checkpointing(notebook_targets):
    plain = remat_tui.analyze(notebook_targets["f"])
    assert plain.backward.recompute_eqns == 0 and not plain.backward.recompute_lines
    remat = remat_tui.analyze(notebook_targets["f"], policy="nothing_saveable")
    assert remat.backward.recompute_eqns > 0
    recomputed = [remat.backward.lines[i] for i in remat.backward.recompute_lines]
    # nothing was saved, so the backward pass must rerun the sines' cosines
    assert any(" cos " in line for line in recomputed)
    assert any(" sin " in line or " cos " in line for line in recomputed)


def test_names_are_found_everywhere_including_scan():
    targets = remat_tui.load_targets(__import__("conftest").example("transformer.py"))
    a = remat_tui.analyze(targets["scanned"], policy="nothing_saveable")
    names = {n.name: n for n in a.names}
    assert set(names) == {"query_proj", "key_proj", "value_proj", "attention_out", "mlp_hidden"}
    assert names["mlp_hidden"].avals == ("f32[1,128,2048]",)
    assert names["mlp_hidden"].bytes == 128 * 2048 * 4


def test_totals_add_up(notebook_targets):
    a = remat_tui.analyze(
        notebook_targets["loss"],
        policy="save_and_offload_only_these_names("
        "names_which_can_be_saved=['a'], names_which_can_be_offloaded=['b'])",
    )
    t = a.totals
    assert t.bytes == sum(r.bytes for r in a.residuals) == t.device_bytes + t.host_bytes
    host = [r for r in a.residuals if r.memory == "host"]
    assert host and all("<host>" in r.aval for r in host)
    assert t.host_bytes == sum(r.bytes for r in host)
    args = sum(r.bytes for r in a.residuals if r.kind == "argument")
    assert t.bytes_excluding_arguments == t.bytes - args
    for r in a.residuals:
        assert r.bytes == jnp.dtype(r.dtype).itemsize * int(jnp.prod(jnp.array(r.shape)))


def test_plain_callable_and_device_choice():
    assert len(jax.devices()) == 4, "conftest sets four CPU devices"

    def f(x):
        return jnp.sin(x) * 2

    a = remat_tui.analyze(f, args=(jnp.ones(3),), device="cpu:2")
    assert a.device["id"] == 2 and a.device["platform"] == "cpu"
    assert a.to_dict()["device"]["id"] == 2
    with pytest.raises(RematError, match="unknown device 'cpu:9'.*cpu:0, cpu:1"):
        remat_tui.analyze(f, args=(jnp.ones(3),), device="cpu:9")


def test_json_object_follows_contracts_3_and_5(notebook_targets):
    d = remat_tui.analyze(notebook_targets["f4"]).to_dict()
    assert set(d) == {
        "schema",
        "tool",
        "jax_version",
        "target",
        "device",
        "policy",
        "sites",
        "residuals",
        "totals",
        "auto_sharded_devices",  # Contract 17: above 1, the byte figures are global array sizes
        "flops",
        "flops_exact",
        "compiled",
        "time",
        "measured",
        "applied",  # Contract 14
        "effects",  # issue 43: callbacks, and which the backward pass runs again
        "gradients",  # Contract 18: with verify=True, else None
        "structure",  # Contract 15
        "jaxprs",
    }
    assert d["schema"] == 1 and d["jax_version"] == jax.__version__
    assert d["compiled"] is None  # Contract 6: only on request (tests/unit/test_compiled.py)
    assert d["time"] is None and d["measured"] is None  # Contracts 8 and 9: with a compile
    assert d["gradients"] is None  # Contract 18: only on request
    assert set(d["flops"]) == {"forward", "backward", "recompute"}  # Contract 6
    assert all(isinstance(n, int) for n in d["flops"].values()) and d["flops_exact"] is True
    assert set(d["residuals"][0]) == {
        "text",
        "aval",
        "shape",
        "dtype",
        "bytes",  # one device's (Contract 17)
        "global_bytes",  # the array's whole size
        "memory",
        "kind",
        "primitive",
        "name",
        "argument",
        "source",
        "origin",
        "bytes_per_device",
        "story",  # Contract 14
    }
    assert set(d["residuals"][0]["story"]) == {"rule", "made_by", "readers", "xla", "runs_again"}
    named = [r for r in d["residuals"] if r["kind"] == "named"]
    assert named and named[0]["name"] == "a"
    assert set(named[0]["source"]) == {"file", "line", "column", "function"}
    assert set(named[0]["origin"]) == {
        "primitive",
        "name",
        "source",
        "trip_count",
        "per_iteration",
        "site",
    }
    assert named[0]["origin"]["name"] == "a"
    assert set(d["totals"]) == {
        "count",
        "bytes",
        "bytes_excluding_arguments",
        "device_bytes",
        "host_bytes",
        "device_bytes_per_device",
        # Contract 17: the figures above are one device's; these the global array sizes
        "global_bytes",
        "global_bytes_excluding_arguments",
        "global_device_bytes",
        "global_host_bytes",
    }


def test_integer_only_inputs_are_refused():
    with pytest.raises(RematError, match="no argument is a floating-point array"):
        remat_tui.analyze(lambda n: n * 2, args=(jnp.arange(3),))


def test_non_array_output_is_refused():
    with pytest.raises(RematError, match="returned a str, not an array"):
        remat_tui.analyze(lambda x: "hello", args=(jnp.ones(3),))


def test_tracing_errors_name_the_cause():
    def f(x):
        return x @ jnp.ones((7, 7))  # shapes do not match

    with pytest.raises(RematError) as err:
        remat_tui.analyze(f, args=(jnp.ones(3),))
    assert "tracing under policy as_written failed: TypeError" in err.value.message
    assert "in f" in err.value.message and "remat_tui/" not in err.value.message


def test_cancelled_analysis_stops():
    from remat_tui.core.trace.analysis import analyze
    from remat_tui.core.trace.configured import Cancelled

    with pytest.raises(Cancelled):
        analyze(lambda x: jnp.sin(x), args=(jnp.ones(3),), cancelled=lambda: True)


def test_offloaded_residuals_stay_on_host_in_the_backward_pass(notebook_targets):
    a = remat_tui.analyze(
        notebook_targets["loss"],
        policy="save_and_offload_only_these_names(names_which_can_be_saved=[], "
        "names_which_can_be_offloaded=['b'])",
    )
    host = [r for r in a.residuals if r.memory == "host"]
    assert host
    for r in host:
        header = a.backward.lines[r.backward_lines[0]]
        assert f" {r.backward_var}:{r.aval}" in header  # e.g. bh:f32<host>[6]
