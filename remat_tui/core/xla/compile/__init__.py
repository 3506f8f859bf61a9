"""Provides compiling and the compile store (Contract 13).

- `costs`: `compile_answer`, what XLA says the step a training loop runs needs
  on a device, for a target as configured: the entry every command uses.
- `lowering`: `lower`, the step lowered for the example arguments' shapes.
- `differentiated`: which arguments the gradient step differentiates.
- `service`: `compile_program`, the one place every compile goes through,
  memoised, de-duplicated and counted.
- `store`: the compile results kept on disk, one JSON file per program key.
- `compiled`: `Compiled`, XLA's numbers for one compiled step, and how they
  are read from an executable or a refused compile.
- `shared`: `compile_shared`, compile_answer for searches that compile many
  configurations, saying how each answer was had.
- `same_program`: `program_key`, and the parts of a configuration whose
  removal compiles to the same program (`verdicts`).
- `host_memory`: `offloads_to_host`, whether a device's compile puts
  offloaded values in host memory.
"""
