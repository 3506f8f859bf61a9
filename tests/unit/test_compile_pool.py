"""core/xla/run/pool.py: the local pool sized from the machine."""

from remat_tui.core.xla.run import pool as compile_pool


def test_one_worker_where_the_machine_tells_neither_cores_nor_memory(monkeypatch):
    # os.cpu_count() answers None where the count cannot be had, and
    # available_ram() None where neither /proc/meminfo nor sysconf says:
    # one worker then, not a TypeError out of min(..., None).
    monkeypatch.delattr(compile_pool.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(compile_pool.os, "cpu_count", lambda: None)
    monkeypatch.setattr(compile_pool, "available_ram", lambda: None)
    assert compile_pool.default_jobs() == 1


def test_memory_unknown_leaves_the_cores_to_decide(monkeypatch):
    monkeypatch.delattr(compile_pool.os, "sched_getaffinity", raising=False)
    monkeypatch.setattr(compile_pool.os, "cpu_count", lambda: 8 * compile_pool.CORES_PER_JOB)
    monkeypatch.setattr(compile_pool, "available_ram", lambda: None)
    assert compile_pool.default_jobs() == 8
