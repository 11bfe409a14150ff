"""How many attributes the runtime's modules reach on one object (issue 10). Writes benchmarks/out/coupling.json.

A static count over the source (no run): for each module of `agentgrad.runtime`, the distinct attributes it reads
through a name bound to the engine (`engine.x`, `self.engine.x`, `e.x`), the distinct ones it assigns
(`engine.x = ...`), and, over all modules, the union. An attribute path counts once at its first level
(`engine.journal.counts` counts as `journal`). `--root` points at another checkout's `src/agentgrad/runtime`, so
two versions can be measured side by side.
"""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

OUT = Path(__file__).parent / "out" / "coupling.json"
NAMES = ("engine", "eng")  # names the runtime binds the engine to


def _is_engine(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in NAMES
    return isinstance(node, ast.Attribute) and node.attr in NAMES and isinstance(node.value, ast.Name)


def reached(source: str) -> tuple[set[str], set[str]]:
    """The engine attributes a module's source reads and the ones it assigns."""
    reads: set[str] = set()
    writes: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and _is_engine(node.value):
            (writes if isinstance(node.ctx, ast.Store) else reads).add(node.attr)
    return reads, writes


def measure(root: Path) -> dict[str, object]:
    """Per module and overall: the engine attributes reached and written."""
    modules: dict[str, dict[str, object]] = {}
    breadth: dict[str, int] = {}
    union: set[str] = set()
    written: set[str] = set()
    for path in sorted(root.glob("*.py")):
        reads, writes = reached(path.read_text())
        if reads or writes:
            breadth[path.stem] = len(reads | writes)
            modules[path.stem] = {"reads": breadth[path.stem], "writes": sorted(writes)}
            union |= reads | writes
            written |= writes
    widest = max(breadth, key=lambda name: breadth[name], default="")
    return {"root": str(root), "modules": modules, "distinct": len(union), "written": sorted(written),
            "widest_module": widest, "widest_reads": breadth.get(widest, 0), "modules_reaching": len(modules)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--root", type=Path, action="append",
                        help="a runtime package folder (repeat to compare; default: this checkout's)")
    args = parser.parse_args()
    roots = args.root or [Path(__file__).resolve().parent.parent / "src" / "agentgrad" / "runtime"]
    missing = [str(root) for root in roots if not root.is_dir()]
    if missing:
        parser.error(f"--root must be a folder of Python modules; not found: {', '.join(missing)}")
    results = [measure(root) for root in roots]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(results, indent=2))
    for r in results:
        print(f"{r['root']}: {r['modules_reaching']} modules reach {r['distinct']} engine attributes; widest "
              f"{r['widest_module']} ({r['widest_reads']}); written outside the engine: {r['written']}")


if __name__ == "__main__":
    main()
