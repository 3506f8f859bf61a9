"""The Linen helpers a structure's Linen code calls (Contract 15, issue 32
item 3): `nested_nn_scan` and `split_nn_scan`, drop-ins for a Linen target's
`nn.scan` that build, with Linen's lifted nn.scan and nn.remat, the program
structure_code.py's `nested_scan` / `split_scan` make at the JAX level.

remat-tui never imports this module (Flax is not a dependency of
remat-tui): structure_code_flax.py prints these functions' text, read from
this file, for the user to paste; tests/unit/test_structures_linen.py runs that
printed text.
"""

import flax.linen as nn
import jax
import jax.numpy as jnp


def nested_nn_scan(block, groups, length, static_argnums=(), prevent_cse=True, **scan_kwargs):
    """nn.scan(block, length=length, **scan_kwargs) run as `groups` groups of
    length // groups layers, each group under nn.remat: about groups +
    length // groups carries kept instead of length, for one more forward
    pass over the layers. Called as the nn.scan's module is, it returns what
    it returns; the block's parameters move to [name]['layers'] with a
    leading [groups, length // groups] axis in place of [length]. Scanned
    inputs (in_axes 0, the default) are split in groups here;
    static_argnums, prevent_cse: the block's nn.remat's, for the group's
    nn.remat."""
    layers = nn.scan(block, length=length // groups, **scan_kwargs)

    class Group(nn.Module):
        block_kwargs: dict

        @nn.compact
        def __call__(self, carry, *xs):
            return layers(name="layers", **self.block_kwargs)(carry, *xs)

    scanned = nn.remat(Group, static_argnums=static_argnums, prevent_cse=prevent_cse)
    outer = nn.scan(scanned, length=groups, **scan_kwargs)
    in_axes = scan_kwargs.get("in_axes", 0)

    def make(name=None, **block_kwargs):
        module = outer(name=name, block_kwargs=block_kwargs)

        def call(carry, *xs):
            axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(xs)
            xs = [
                x if axis is nn.broadcast else
                jax.tree.map(lambda v: v.reshape(groups, -1, *v.shape[1:]), x)
                for x, axis in zip(xs, axes, strict=True)
            ]  # fmt: skip
            carry, ys = module(carry, *xs)
            return carry, jax.tree.map(lambda y: y.reshape(length, *y.shape[2:]), ys)

        return call

    return make


def split_nn_scan(block_first, block_rest, first, length, **scan_kwargs):
    """nn.scan(block, length=length, **scan_kwargs) whose first `first`
    layers run block_first and the others block_rest (the block under two
    nn.remat policies). Called as the nn.scan's module is, it returns what
    it returns; the block's parameters split in two: [name]['first'] holds
    [:first], [name]['rest'] the others."""
    head = nn.scan(block_first, length=first, **scan_kwargs)
    tail = nn.scan(block_rest, length=length - first, **scan_kwargs)
    in_axes = scan_kwargs.get("in_axes", 0)

    class Split(nn.Module):
        block_kwargs: dict

        @nn.compact
        def __call__(self, carry, *xs):
            axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(xs)
            parts = [
                (x, x) if axis is nn.broadcast else
                (jax.tree.map(lambda v: v[:first], x), jax.tree.map(lambda v: v[first:], x))
                for x, axis in zip(xs, axes, strict=True)
            ]  # fmt: skip
            carry, ys_head = head(name="first", **self.block_kwargs)(carry, *[p[0] for p in parts])
            carry, ys_tail = tail(name="rest", **self.block_kwargs)(carry, *[p[1] for p in parts])
            return carry, jax.tree.map(lambda a, b: jnp.concatenate([a, b]), ys_head, ys_tail)

    return lambda name=None, **block_kwargs: Split(block_kwargs, name=name)
