"""Provides what this machine has free: `available_ram`, read by the compile
pool (how many workers fit) and by measuring (a CPU device's memory)."""

from __future__ import annotations

import os


def available_ram() -> int | None:
    """Bytes of memory available now (Linux's MemAvailable, else the free
    pages POSIX reports), or None where neither says."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
