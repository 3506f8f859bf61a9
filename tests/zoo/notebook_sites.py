"""The seed notebook's targets (examples/notebook.py, used by its path, not
copied) as factories taking their checkpoints' policies: the oracle's
by-hand build of a configuration that changes a site. Each mirrors the
target's own code line for line, with the policy a parameter.

`policy_of(i)`: the policy of the i-th checkpoint the target's trace
reaches (0 for the first: the order of remat-tui's site ids); NO_CHECKPOINT
calls the function directly.
"""

import importlib.util
import itertools
import os

import jax

NO_CHECKPOINT = "no checkpoint"
FILE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "notebook.py")
FILE = os.path.abspath(FILE)


def _load():
    spec = importlib.util.spec_from_file_location("zoo_seed_notebook", FILE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


nb = _load()
CP = jax.checkpoint_policies


def _checkpoint(fn, policy):
    return fn if policy == NO_CHECKPOINT else jax.checkpoint(fn, policy=policy)


def make_f2(policy_of):
    """f2: three calls of jax.checkpoint(g)."""

    def f2(W1, W2, W3, x):
        x = _checkpoint(nb.g, policy_of(0))(W1, x)
        x = _checkpoint(nb.g, policy_of(1))(W2, x)
        x = _checkpoint(nb.g, policy_of(2))(W3, x)
        return x

    return f2


def make_f3(policy_of):
    """f3: f under one jax.checkpoint."""
    return _checkpoint(nb.f, policy_of(0))


def make_f4(policy_of):
    """f4: f4_layers under one jax.checkpoint."""
    return _checkpoint(nb.f4_layers, policy_of(0))


def make_recursive(policy_of):
    """recursive: recursive_checkpoint(8 sins), its checkpoints numbered in
    the order its trace reaches them."""

    def build(funs, counter):
        if len(funs) == 1:
            return funs[0]
        if len(funs) == 2:
            f1, f2 = funs
            return lambda x: f1(f2(x))
        f1 = build(funs[: len(funs) // 2], counter)
        f2 = build(funs[len(funs) // 2 :], counter)
        return lambda x: f1(_checkpoint(f2, policy_of(next(counter)))(x))

    def recursive(x):
        return build(nb._chain_fns(8), itertools.count())(x)

    return recursive


# The policy each site has as the file writes it, in site order.
WRITTEN = {
    "f2": (None, None, None),
    "f3": (CP.dots_with_no_batch_dims_saveable,),
    "f4": (CP.save_only_these_names("a"),),
    "recursive": (None, None, None),
}
