"""``python -m bench [NAME ...]``: run the benchmarks and write ``bench/results/latest.json``."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

import django


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument(
        "names", nargs="*", default=["reducer"], help="benchmarks to run (default: all): reducer"
    )
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    django.setup()
    from bench import reducer_scaling

    known = {"reducer": reducer_scaling.run}
    results = {}
    for name in args.names:
        if name not in known:
            sys.exit(f"unknown benchmark {name!r} (known: {', '.join(known)})")
        print(f"== {name}")
        results[name] = known[name]()
    out = Path(__file__).parent / "results"
    out.mkdir(exist_ok=True)
    (out / "latest.json").write_text(json.dumps(results, indent=1))
    print(f"wrote {out / 'latest.json'}")


if __name__ == "__main__":
    main()
