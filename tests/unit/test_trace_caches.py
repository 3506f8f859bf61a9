"""What an analysis keeps between calls: the primal program of a target (its
checkpoint sites, core/trace/primal.py) is kept while the function lives,
and let go with it; the user's line of each equation (jaxcompat.sources) is
read once per traceback, and read again when JAX is told of more files that
are not the user's."""

import gc
import weakref

import jax
import jax.numpy as jnp

import remat_tui
from remat_tui.core import jaxcompat as jc
from remat_tui.core.jaxcompat.private import source_info_util
from remat_tui.core.trace import primal


def _checkpointed():
    def layer(x):
        return jnp.sin(x) * 2.0

    return jax.checkpoint(layer)


def test_a_kept_program_goes_with_its_function():
    fn = _checkpointed()
    args = (jnp.ones(4),)
    remat_tui.analyze(fn, args=args, policy="nothing_saveable")
    assert any(p.fn() is fn for p in primal._cache.values())  # kept while it lives

    again = remat_tui.analyze(fn, args=args, policy="dots_saveable")
    assert [s.function for s in again.sites] == ["layer"]

    gone = weakref.ref(fn)
    del fn, again
    gc.collect()
    assert gone() is None
    assert not any(p.fn() is None for p in primal._cache.values())


def test_users_line_follows_jaxs_exclusions(tmp_path):
    """A file JAX is told is not the user's (as a library registers its own on
    import) is no longer the user's line, even for an equation asked before."""
    module = tmp_path / "user_layer.py"
    module.write_text("import jax.numpy as jnp\n\ndef layer(x):\n    return jnp.sin(x)\n")
    namespace: dict = {}
    exec(compile(module.read_text(), str(module), "exec"), namespace)
    eqn = jax.make_jaxpr(namespace["layer"])(jnp.ones(3)).jaxpr.eqns[0]
    assert jc.user_source(eqn.source_info).file == str(module)

    before = list(source_info_util._exclude_paths)
    jax.extend.source_info_util.register_exclusion(str(tmp_path))
    try:
        seen = jc.user_source(eqn.source_info)
        assert seen is None or seen.file != str(module)
    finally:
        source_info_util._exclude_paths[:] = before
        source_info_util._exclude_path_regex.cache_clear()
        source_info_util.is_user_filename.cache_clear()
