"""Provides the running process's own utilities, which know nothing of JAX's
programs.

- `lru`: `LRU`, the one least-recently-used cache every cache is.
- `collector`: `paused`, garbage collection paused while an analysis traces.
- `machine`: `available_ram`, what this machine has free.
- `usercode`: `is_users`, whether a file is the user's code.
"""
