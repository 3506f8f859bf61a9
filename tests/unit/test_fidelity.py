"""Fidelity gaps found on real code: outputs JAX accepts, and jax.checkpoint
failing on a callable it cannot hash."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from conftest import jax_saved_residuals

import remat_tui
from remat_tui.errors import RematError


def loss_with_aux(W, x):
    """(loss, aux) with a Python int and NumPy scalars in aux, as training code returns."""
    y = jnp.sin(x @ W)
    return jnp.sum(y * y), {"count": 8, "scale": np.float32(0.5), "flag": True, "y": y}


def test_python_and_numpy_scalars_in_outputs_are_accepted():
    args = (jnp.ones((4, 4)), jnp.ones((2, 4)))
    a = remat_tui.analyze(loss_with_aux, args=args)
    assert [r.text for r in a.residuals] == jax_saved_residuals(
        loss_with_aux, "as_written", args, {}
    )


def test_non_array_output_is_still_refused():
    with pytest.raises(RematError, match="returned a str, not an array"):
        remat_tui.analyze(lambda x: (jnp.sum(x), "done"), args=(jnp.ones(3),))


class Layer:
    """A callable object that hashes its array, as an Equinox module instance does."""

    def __init__(self):
        self.W = jnp.ones((4, 4))

    def __hash__(self):
        return hash(self.W)

    def __call__(self, x):
        return jnp.sin(x @ self.W)


def test_unhashable_callable_given_to_checkpoint_says_why():
    layer = Layer()

    def loss(x):
        return jnp.sum(jax.checkpoint(layer)(x))

    with pytest.raises(RematError) as info:
        remat_tui.analyze(loss, args=(jnp.ones((2, 4)),))
    message = info.value.message
    assert "unhashable" in message
    assert "jax.checkpoint (and jax.jit) hash the callable" in message
    assert "jax.checkpoint(lambda *a: module(*a))" in message
