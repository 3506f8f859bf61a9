"""JAX is the oracle: for every example target and every built-in policy, our
residual list (order and text) equals what print_saved_residuals prints now."""

import pytest
from conftest import example, jax_saved_residuals

from remat_tui.core.setup import loading, policies

NAME_SPECS = {
    "notebook.py": [
        "save_only_these_names('a')",
        "save_any_names_but_these('a')",
        "save_and_offload_only_these_names(names_which_can_be_saved=['a'], "
        "names_which_can_be_offloaded=['b'])",
        "save_from_both_policies(dots_saveable, save_only_these_names('b'))",
        "save_anything_except_these_names('a')",
    ],
    "mlp.py": [
        "save_only_these_names('layer1')",
        "save_any_names_but_these('layer0')",
        "save_and_offload_only_these_names(names_which_can_be_saved=['layer0'], "
        "names_which_can_be_offloaded=['layer2'])",
    ],
    "transformer.py": [
        "save_only_these_names('query_proj', 'key_proj', 'value_proj')",
        "save_and_offload_only_these_names(names_which_can_be_saved="
        "['mlp_hidden'], names_which_can_be_offloaded=['attention_out'])",
    ],
}


def cases():
    for file, extra in NAME_SPECS.items():
        targets = loading.load_targets(example(file))
        for name, target in targets.items():
            specs = policies.builtin_specs() + extra + list(target.policies)
            for spec in specs:
                slow = file == "transformer.py" and name == "unrolled"
                marks = [pytest.mark.slow] if slow else []
                yield pytest.param(target, spec, id=f"{file}:{name}:{spec}", marks=marks)


@pytest.mark.parametrize("target,spec", list(cases()))
def test_residuals_match_jax(target, spec):
    import remat_tui

    args, kwargs = loading.resolve_arguments(target)
    want = jax_saved_residuals(target.fn, spec, args, kwargs, target.policies)
    analysis = remat_tui.analyze(target, policy=spec)
    assert [r.text for r in analysis.residuals] == want
    assert analysis.totals.count == len(want)
