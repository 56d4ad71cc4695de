"""``python -m bench [NAME ...] [--small | --full] [--keepdb]``: run the benchmarks.

Prints each benchmark's own figures as it goes, then ONE table of every benchmark's summary
rows (benchmark, metric, goal, measured, unit, baseline measured in the same run, ratio,
met) and writes everything to ``bench/results/latest.json``.

Sizes: the default run fits in 10 minutes on a 2-core machine;
``--full`` adds the long sizes (the 1,000,000-entry search tenant and verify memory
journal, and each benchmark's other long sizes); ``--small`` is a smoke run of a minute or
two.

Benchmarks that touch the database run in a scratch database created for the run (the
configured database's name plus ``_bench``, or ``BENCH_DATABASE_NAME``) and dropped at the
end unless ``--keepdb``: journal rows are append-only, so a benchmark could not clean up
after itself in a real database. Its URL is exported as ``BENCH_DATABASE_URL`` for
benchmarks that start subprocesses.

Each benchmark is a module ``bench/<module>.py`` with ``run(...) -> dict``, imported lazily:
one that is not there yet is skipped with a message. ``run`` receives ``small=True`` with
``--small`` when its signature has a ``small`` parameter, ``full=True`` with ``--full`` when
it has ``full``, and ``profile=True`` with ``--profile`` when it has ``profile`` (with
``--profile``, a benchmark without that parameter runs whole under :mod:`cProfile`, and the
product's functions with the most cumulative time are printed after it:
:func:`bench.profiling.print_profile`)
(``BENCH_SMALL=1`` / ``BENCH_FULL=1`` are set either way). A result may carry ``"summary"``: rows of ``{"metric", "value", "unit", "baseline",
"ratio", "target", "met", "what"}`` for the table (``what``: one line saying what the row
times and what its baseline does, printed under the row); otherwise the runner summarises
what it knows.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import json
import os
import platform
import secrets
import sys
import time
import traceback
import warnings
from pathlib import Path
from typing import Any
from urllib.parse import quote

import django

from bench.cpu import cpu_between, cpu_seconds
from bench.profiling import profiled

#: name -> (module, needs the database)
BENCHMARKS: dict[str, tuple[str, bool]] = {
    "reducer": ("bench.reducer_scaling", False),
    "ingest": ("bench.ingest", True),
    "storage": ("bench.storage", True),
    # bench/outside.py over the same input: does an outside count agree with the two rows?
    "agreement": ("bench.agreement", True),
    "verify": ("bench.verify", True),
    "memory": ("bench.memory", True),
    "fold": ("bench.fold_overhead", True),
    "fold_scaling": ("bench.fold_scaling", True),
    "search": ("bench.search_latency", True),
    "context": ("bench.context_vs_trim", True),
    "context_build": ("bench.context_build", False),
    "loss_report": ("bench.loss_report", False),
    "ui": ("bench.ui_pages", True),
    "eval_ledger": ("bench.eval_table", True),
    "mandatory": ("bench.mandatory_state", True),
    # the proxy's rows (the proxy's own benchmark module); skipped while the file is absent
    "proxy": ("bench.proxy_rows", True),
}


def database_url(db: dict[str, Any]) -> str:
    """A ``DATABASE_URL`` for the connection settings ``db`` (PostgreSQL or SQLite)."""
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    auth = quote(db.get("USER") or "")
    if db.get("PASSWORD"):
        auth += ":" + quote(db["PASSWORD"])
    host = db.get("HOST") or "127.0.0.1"
    port = f":{db['PORT']}" if db.get("PORT") else ""
    return f"postgres://{auth + '@' if auth else ''}{host}{port}/{quote(str(db['NAME']))}"


class BenchError(Exception):
    """A run that cannot start: the message says why (printed as one line, exit status 2)."""


def _existing(connection: Any, name: str) -> bool:
    """Whether the scratch database ``name`` exists already (a file for SQLite).

    Raises:
        BenchError: the database server cannot be reached (its error, one line).
    """
    from django.db import OperationalError

    if connection.vendor == "sqlite":
        return Path(name).exists()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # Django's "will use the first database" note
            with connection._nodb_cursor() as cursor:
                cursor.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name])
                return cursor.fetchone() is not None
    except OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BenchError(f"cannot reach the database of DATABASE_URL: {first}") from exc


def scratch_name(configured: str, vendor: str, given: str | None) -> str:
    """The scratch database's name: ``BENCH_DATABASE_NAME`` when ``given``, else the
    configured database's name plus ``_bench`` (a file in /tmp for SQLite).

    Raises:
        BenchError: ``given`` names the configured database itself (the run would drop it).
    """
    if vendor == "sqlite":
        name = given or "/tmp/ledgerkeep_bench.sqlite3"
        same = Path(name).resolve() == Path(str(configured)).resolve()
    else:
        name = given or f"{configured}_bench"
        same = name == configured
    if same:
        raise BenchError(
            f"BENCH_DATABASE_NAME {name!r} is the database of DATABASE_URL: the bench creates "
            "its scratch database afresh and drops it at the end; name another"
        )
    return name


def _setup_database(keepdb: bool) -> tuple[str, str]:
    from django.db import connection

    old_name = connection.settings_dict["NAME"]
    name = scratch_name(old_name, connection.vendor, os.environ.get("BENCH_DATABASE_NAME"))
    if not keepdb and _existing(connection, name) and "bench" not in Path(name).name:
        # a database the bench made has "bench" in its name; any other would be lost
        raise BenchError(
            f"the scratch database {name!r} exists and is not one the bench made (no 'bench' "
            "in its name): the run would empty it and drop it; name another with "
            "BENCH_DATABASE_NAME, or pass --keepdb to reuse it"
        )
    connection.settings_dict.setdefault("TEST", {})["NAME"] = name
    print(f"bench database: {name} ({connection.vendor}){' kept' if keepdb else ''}")
    connection.creation.create_test_db(verbosity=0, autoclobber=True, keepdb=keepdb)
    os.environ["BENCH_DATABASE_URL"] = database_url(connection.settings_dict)
    return old_name, name


def _call(module: Any, small: bool, profile: bool, full: bool = False) -> dict[str, Any]:
    run = module.run
    params = inspect.signature(run).parameters
    kwargs: dict[str, Any] = {}
    if "small" in params:
        kwargs["small"] = small
    if full and "full" in params:
        kwargs["full"] = True
    if profile and "profile" in params:
        kwargs["profile"] = True
    if not profile or "profile" in params:
        return run(**kwargs)
    # a benchmark without a profile of its own: the whole run under cProfile, the product's
    # functions by cumulative time (its timings then carry the profiler's overhead)
    result: dict[str, Any] = profiled(
        lambda: run(**kwargs), f"{module.__name__} (whole run, cProfile on)"
    )
    return result


def _fmt(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}" if abs(value) < 10 else f"{value:.1f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def summarize(name: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """Rows for the summary table from one benchmark's result."""
    if "skipped" in result:
        return [{"metric": "skipped", "value": result["skipped"]}]
    if "failed" in result:
        return [{"metric": "FAILED", "value": result["failed"], "met": False}]
    if isinstance(result.get("summary"), list):
        return result["summary"]
    if isinstance(result.get("summary"), dict):  # {group: {figure: value}} or {figure: value}
        rows = []
        for group, value in result["summary"].items():
            items = value.items() if isinstance(value, dict) else [("", value)]
            for key, v in items:
                if isinstance(v, int | float | str | None) and not isinstance(v, bool):
                    rows.append({"metric": f"{group} {key}".strip(), "value": v})
        if rows:
            return rows
    if name == "reducer" and "exponent" in result:
        last = result["rows"][-1]
        return [
            {
                "metric": f"reduce {last['deltas']:,} deltas",
                "value": last["seconds"],
                "unit": "s",
                "baseline": last["baseline_seconds"],
                "ratio": last["ratio"],
                "what": "the reducer over this many deltas, best of 3, garbage collector "
                "paused | baseline: the 100-delta reduce's time per delta x the deltas (linear)",
            },
            {
                "metric": "scaling exponent",
                "what": "slope of log(s) over log(deltas), 10 ... 10,000 deltas | linear is 1",
                "value": result["exponent"],
                "target": "<= 1.1",
                "met": result["exponent"] <= 1.1,
            },
        ]
    rows = []
    for key, value in result.items():
        if isinstance(value, int | float | str) and not isinstance(value, bool):
            rows.append({"metric": key, "value": value})
    return rows or [{"metric": "result", "value": "see JSON"}]


def table_lines(summary: dict[str, list[dict[str, Any]]]) -> list[tuple[str, ...]]:
    """The rows of the one table: a header, then one line per summary row of every benchmark.

    A summary row is ``{"metric", "value", "unit", "baseline", "ratio", "target", "met"}``
    (all optional but ``metric``); ``target`` is shown as the goal, ``value`` as measured,
    ``met`` as ``met`` / ``MISSED`` (blank when the row has no goal).
    """
    head = ("benchmark", "metric", "goal", "measured", "unit", "baseline", "ratio", "met")
    lines = [head]
    for name, rows in summary.items():
        for r in rows:
            met = r.get("met")
            lines.append(
                (
                    name,
                    str(r.get("metric", "")),
                    str(r.get("target", "") or ""),
                    _fmt(r.get("value")),
                    str(r.get("unit", "") or ""),
                    _fmt(r.get("baseline")),
                    _fmt(r.get("ratio")),
                    "" if "met" not in r else "-" if met is None else "met" if met else "MISSED",
                )
            )
    return lines


def what_lines(summary: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Per table row (in :func:`table_lines` order, header excluded), the row's ``what``:
    one line saying what it times and what its baseline does (``""`` when it has none)."""
    return [str(r.get("what") or "") for rows in summary.values() for r in rows]


def print_table(summary: dict[str, list[dict[str, Any]]]) -> None:
    """Print the one summary table; a row with a ``what`` is followed by that line."""
    lines = table_lines(summary)
    whats = ["", *what_lines(summary)]
    head = lines[0]
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    print()
    for n, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if n == 0:
            print("  ".join("-" * w for w in widths))
        elif whats[n]:
            print(f"    ^ {whats[n]}")


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "names", nargs="*", help=f"benchmarks to run (default: all): {', '.join(BENCHMARKS)}"
    )
    sizes = parser.add_mutually_exclusive_group()
    sizes.add_argument("--small", action="store_true", help="small sizes: a quick smoke run")
    sizes.add_argument(
        "--full",
        action="store_true",
        help="also the long sizes (the 1,000,000-entry search tenant and verify journal, ...): "
        "much longer than the default run's 10 minutes",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print where each benchmark spends its time (its own profile, or cProfile of its run)",
    )
    parser.add_argument("--keepdb", action="store_true", help="keep the scratch database")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "latest.json"
    )
    args = parser.parse_args()
    started = time.perf_counter()
    try:  # the results file is checked now, not after the run
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a"):
            pass
    except OSError as exc:
        parser.error(f"--out {args.out}: cannot write there ({exc.strerror or exc})")
    unknown = [n for n in args.names if n not in BENCHMARKS]
    if unknown:
        sys.exit(f"unknown benchmark {unknown[0]!r} (known: {', '.join(BENCHMARKS)})")
    names = args.names or list(BENCHMARKS)
    if args.small:
        os.environ["BENCH_SMALL"] = "1"
    if args.full:
        os.environ["BENCH_FULL"] = "1"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_DEBUG", "false")  # DEBUG keeps every query in memory
    # DEBUG off requires a real key; a benchmark signs nothing that outlives its run
    os.environ.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
    django.setup()

    modules: dict[str, Any] = {}
    results: dict[str, Any] = {}
    for name in names:
        module_name = BENCHMARKS[name][0]
        try:
            modules[name] = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            print(f"== {name}: skipped ({module_name.replace('.', '/')}.py is not there yet)")
            results[name] = {"skipped": f"{module_name.replace('.', '/')}.py not present"}

    from django.db import connection

    database = None
    cpu: dict[str, float] = {}
    if any(BENCHMARKS[n][1] for n in modules):
        try:
            database = _setup_database(args.keepdb)
        except BenchError as exc:
            print(f"python -m bench: {exc}", file=sys.stderr)
            sys.exit(2)
    try:
        for name, module in modules.items():
            print(f"== {name}")
            t0, c0 = time.perf_counter(), cpu_seconds()
            try:
                results[name] = _call(module, args.small, args.profile, args.full)
            except Exception as exc:  # one benchmark's failure must not lose the table
                traceback.print_exc()
                results[name] = {"failed": f"{type(exc).__name__}: {exc}"[:200]}
            results[name].setdefault("wall_seconds", time.perf_counter() - t0)
            results[name]["cpu_seconds"] = cpu_between(c0, cpu_seconds())
            cpu[name] = results[name]["cpu_seconds"]
            print(
                f"== {name}: {results[name]['wall_seconds']:.0f} s "
                f"(CPU {results[name]['cpu_seconds']:.0f} s)"
            )
    finally:
        if database is not None:
            connection.creation.destroy_test_db(database[0], verbosity=0, keepdb=args.keepdb)

    summary = {name: summarize(name, results[name]) for name in names}
    wall = time.perf_counter() - started
    # the 10-minute goal is the whole default run's: a run of some benchmarks, of other
    # sizes or profiled states its time without a verdict
    judged = not (args.full or args.small or args.profile or args.names)
    summary["bench"] = [
        {
            "metric": "wall time of this run" + (" (--full)" if args.full else ""),
            "value": wall / 60,
            "unit": "min",
            **({"target": "<= 10", "met": wall <= 600} if judged else {}),
            "what": "wall clock of this python -m bench, setup and teardown included | "
            "the next row: CPU seconds of the same run (on a machine shared with other work, "
            "what the run would take alone)",
        },
        {
            "metric": "CPU of this run (process, children, its database session)",
            "value": sum(cpu.values()) / 60,
            "unit": "min",
            **({"target": "<= 10", "met": sum(cpu.values()) <= 600} if judged else {}),
            "what": "largest: "
            + ", ".join(f"{k} {v:.0f} s" for k, v in sorted(cpu.items(), key=lambda kv: -kv[1])[:4])
            + " | no baseline",
        },
    ]
    if args.profile:
        print(
            "\n--profile: the figures below carry the profiler's overhead (and a profiled "
            "import is compared with an unprofiled outside count): read them from a run "
            "without --profile"
        )
    print_table(summary)
    report = {
        "meta": {
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "small": args.small,
            "full": args.full,
            "profile": args.profile,
            "wall_seconds": wall,
            "database": connection.vendor,
            "python": platform.python_version(),
            "machine": f"{platform.machine()} x{os.cpu_count()}",
        },
        "summary": summary,
        "results": results,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1, default=str))
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    main()
