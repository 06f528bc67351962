"""Keep the lock files in requirements/ tied to the dependency lists of pyproject.toml.

`make lock` runs uv to pin the versions, then this script writes into each lock's first line a SHA-256 of
the pyproject.toml entries the lock was made from. `make test`, `make demo` and `make bench` run
``check`` first: it recomputes that digest and refuses to go on when the dependency lists changed since
the lock was made. Standard library only (tomllib), so it runs with the system Python before .venv exists.

    python scripts/lockfile.py tools                                    # build-system requires + pip, for uv
    python scripts/lockfile.py stamp requirements/test.lock --extra test
    python scripts/lockfile.py check requirements/test.lock --extra test
    python scripts/lockfile.py check requirements/bench.lock --extra test --extra bench \\
        --constraint requirements/test.lock

The digest covers requires-python, [build-system].requires, [project].dependencies, the named
[project.optional-dependencies] lists and, with --constraint, the bytes of that lock (bench.lock is
resolved with test.lock as constraints, so it is stale when test.lock changes). Everything else in
pyproject.toml (tool settings, version, description) can change without refreshing the locks.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
PREFIX = "# pyproject-sha256: "
NOTE = "# ^ "


def dependency_sections(pyproject: Path, extras: list[str]) -> dict[str, Any]:
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    project = data["project"]
    optional = project.get("optional-dependencies", {})
    missing = [extra for extra in extras if extra not in optional]
    if missing:
        raise SystemExit(f"pyproject.toml has no optional-dependencies {missing}")
    return {
        "requires-python": project.get("requires-python"),
        "build-system.requires": data.get("build-system", {}).get("requires", []),
        "dependencies": project.get("dependencies", []),
        "optional-dependencies": {extra: optional[extra] for extra in extras},
    }


def digest(pyproject: Path, extras: list[str], constraints: list[Path]) -> str:
    payload: dict[str, Any] = dependency_sections(pyproject, extras)
    payload["constraints"] = {c.name: hashlib.sha256(c.read_bytes()).hexdigest() for c in constraints}
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def header(extras: list[str], constraints: list[Path], value: str) -> str:
    sections = ", ".join(["requires-python", "build-system.requires", "dependencies"] + [f"[{e}]" for e in extras])
    also = "".join(f" and of {c.name}" for c in constraints)
    return (f"{PREFIX}{value}\n"
            f"{NOTE}SHA-256 of pyproject.toml's {sections}{also}; a lock whose digest differs is\n"
            f"{NOTE}stale and refused by scripts/lockfile.py check. `make lock` refreshes it (docs/development.md).\n")


def read_recorded(lock: Path) -> str | None:
    with lock.open(encoding="utf-8") as handle:
        first = handle.readline()
    return first[len(PREFIX):].strip() if first.startswith(PREFIX) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("tools", help="print [build-system].requires and pip, one a line (an input for uv)")
    for name in ("stamp", "check"):
        command = sub.add_parser(name)
        command.add_argument("lock", type=Path)
        command.add_argument("--extra", action="append", default=[], dest="extras")
        command.add_argument("--constraint", action="append", default=[], type=Path, dest="constraints")
    parser.add_argument("--pyproject", type=Path, default=ROOT / "pyproject.toml")
    args = parser.parse_args(argv)

    if args.command == "tools":
        requires = dependency_sections(args.pyproject, [])["build-system.requires"]
        print("# [build-system].requires of pyproject.toml, and pip (written by `scripts/lockfile.py tools`)")
        print("\n".join([*requires, "pip"]))
        return 0

    value = digest(args.pyproject, args.extras, args.constraints)
    if args.command == "stamp":
        body = args.lock.read_text(encoding="utf-8")
        while body.startswith((PREFIX, NOTE)):  # an old header
            body = body.split("\n", 1)[1]
        args.lock.write_text(header(args.extras, args.constraints, value) + body, encoding="utf-8")
        return 0

    if not args.lock.exists():
        print(f"{args.lock} is missing: run `make lock`, then `make test`, and commit the lock files.",
              file=sys.stderr)
        return 1
    recorded = read_recorded(args.lock)
    if recorded != value:
        inputs = "the dependency lists of pyproject.toml" + (
            f" or {', '.join(map(str, args.constraints))}" if args.constraints else "")
        what = ("has no pyproject-sha256 header: it was not written by `make lock`" if recorded is None
                else f"is stale: {inputs} changed since it was made")
        print(f"{args.lock} {what}.\n"
              f"Run `make lock` (newest releases allowed by the ranges; `make lock LOCK_FLAGS=` keeps the "
              f"current pins where they still fit), then `make test`, and commit pyproject.toml with the "
              f"lock files. See docs/development.md.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
