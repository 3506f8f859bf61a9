"""Provides what XLA says of a configuration compiled for a device, never run:
the compiled peak and costs (compiled.py) of the gradient or the training step
as lowered (lowering.py), where the peak goes (memory.py, memory_accounting.py, occupancy.py;
Contract 7) and why it moved (peak_notes.py), the analysis with its compile
(compiled_analysis.py), the compile in a child process for the app
(compile_process.py), and the estimated step time on a chip (step_time.py,
chips.py).
"""
