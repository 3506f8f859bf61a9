"""Provides what remat-tui knows of XLA's own rematerialization pass, in one
place: how its clones are named in the optimized module, the option that
sets the memory limit a TPU compile fits (the pass acts above it), and the
JAX option that is meant to turn the pass off. As measured with JAX 0.10.2
and its libtpu on deviceless v5e compiles: the TPU pass is
`rematerialization_with_stats` in the `final_rematerialization` pipeline;
`jax_compiler_enable_remat_pass=False` disables XLA passes named
`rematerialization`, which leaves the TPU one on; `xla_tpu_max_hbm_size_mib`
sets the HBM a compile fits. XLA's CPU compiler has no such pass.
"""

from __future__ import annotations

CLONE_MARK = ".remat"  # the suffix of the instructions the pass clones
TPU_LIMIT_OPTION = "xla_tpu_max_hbm_size_mib"  # a compile option, in MiB
JAX_OPTION = "jax_compiler_enable_remat_pass"


def is_clone(instruction_name: str) -> bool:
    """Whether the pass made this instruction (a clone of forward work)."""
    return CLONE_MARK in instruction_name


def tpu_limit(limit_bytes: int) -> tuple[str, dict]:
    """(the option as said, `name=MiB`; the compile options setting it)."""
    mib = max(1, limit_bytes // 2**20)
    return f"{TPU_LIMIT_OPTION}={mib}", {TPU_LIMIT_OPTION: mib}
