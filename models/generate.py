"""Rebuild every named model of :mod:`placement_dsl.zoo` into ``models/<name>.json``.

The files are the project's native workload JSON (:func:`placement_dsl.io.save_workload`).
Generation is deterministic: running this twice gives byte-identical files, and the tests
check that the committed files equal what the generators produce now.

Usage::

    python models/generate.py            # rewrite models/*.json
    python models/generate.py --check    # exit 1 if a committed file is missing or differs
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from placement_dsl import save_workload, zoo

HERE = Path(__file__).resolve().parent


def generate(outdir: Path = HERE, models: list[str] | None = None) -> list[Path]:
    """Write ``<outdir>/<name>.json`` for each model (default: every name in :func:`zoo.names`)."""
    outdir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name in models or zoo.names():
        path = outdir / f"{name}.json"
        save_workload(zoo.get(name), path)
        paths.append(path)
    return paths


def stale(outdir: Path = HERE) -> list[str]:
    """Names whose file in ``outdir`` is missing or differs from a fresh build."""
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp))
        return [p.stem for p in fresh
                if not (outdir / p.name).is_file() or (outdir / p.name).read_bytes() != p.read_bytes()]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare the committed files with a fresh build")
    parser.add_argument("--outdir", type=Path, default=HERE, help="where the JSON files go (default: models/)")
    args = parser.parse_args(argv)
    if args.check:
        bad = stale(args.outdir)
        for name in bad:
            print(f"stale: {name}.json (run python models/generate.py)", file=sys.stderr)
        return 1 if bad else 0
    for path in generate(args.outdir):
        print(f"{path.stat().st_size:>9,d}  {path.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
