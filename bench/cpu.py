"""CPU seconds of this process and of its database session (bench/README.md).

On a machine shared with other work the wall clock says how busy the machine was; the CPU
seconds of the work (the process, its finished children, and the PostgreSQL backend that
served it) say what it takes alone.
"""

from __future__ import annotations

import os
from pathlib import Path


def backend_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` from ``/proc/<pid>/stat``.

    Raises:
        OSError: no such process (or no ``/proc``).
    """
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_seconds() -> tuple[float, int | None, float]:
    """``(own, pid, session)``: CPU seconds used so far by this process and its finished
    children, and the PostgreSQL backend of Django's default connection with its CPU
    seconds (its ``/proc/<pid>/stat`` on this machine; ``None, 0`` without one). On a
    shared machine the CPU, not the wall time, says what the run would take alone: its work
    is sequential, one core at a time. Sessions other than Django's (a subprocess's, a
    second psycopg connection) are not counted."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    total = own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
    from django.db import connection

    if connection.vendor != "postgresql" or connection.connection is None:
        return total, None, 0.0
    try:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_backend_pid()")
            (pid,) = cur.fetchone()
        return total, pid, backend_cpu(pid)
    except (OSError, IndexError, ValueError):
        return total, None, 0.0


def cpu_between(
    start: tuple[float, int | None, float], end: tuple[float, int | None, float]
) -> float:
    """CPU seconds between two :func:`cpu_seconds` samples (a session opened meanwhile
    counts from 0; one closed meanwhile is lost)."""
    session = end[2] - (start[2] if start[1] == end[1] else 0.0)
    return end[0] - start[0] + session
