#!/usr/bin/env python3
"""The code's layout at a glance (standard library only):

    python3 infra/layout.py            the core's rooms and their arrows, any circle,
                                       product files over 500 lines, product functions
                                       over 70 lines, across the workspace
    python3 infra/layout.py --json     the same as JSON

A room is a top-level module of the core crate (`shared/src`); an arrow is a
`crate::…` path of one room's product code naming another (comments and inline test
modules aside), as `shared/tests/core/layout.rs` reads them. Product files are the
workspace's Rust sources outside tests (`tests/`, `tests.rs`, `target/`); a
function's length runs from its `fn` line to its closing brace.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORE = ROOT / "shared" / "src"
PRODUCT_DIRS = ["shared/src", "adapters/src", "functions", "channels", "infra", "sim/src", "bench/src"]
MAX_FILE = 500
MAX_FUNCTION = 70


def product_code(text: str) -> str:
    code = text.split("#[cfg(test)]\nmod tests")[0]
    return "\n".join(line for line in code.splitlines() if not line.lstrip().startswith("//"))


def module_of(path: Path) -> str:
    parts = list(path.relative_to(CORE).with_suffix("").parts)
    if parts and parts[-1] in ("mod", "lib"):
        parts.pop()
    return "::".join(parts)


def rooms() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for file in sorted(CORE.rglob("*.rs")):
        module = module_of(file)
        room = module.split("::")[0]
        if not module or room == "testing" or module.endswith("tests"):
            continue
        edges = graph.setdefault(room, set())
        code = product_code(file.read_text(encoding="utf-8"))
        for match in re.finditer(r"crate::([a-z_][a-z0-9_]*)", code):
            target = match.group(1)
            if target not in (room, "testing") and (CORE / f"{target}.rs").exists() or (CORE / target).is_dir():
                if target != room and target != "testing":
                    edges.add(target)
        parts = module.split("::")
        for match in re.finditer(r"(?<![a-z0-9_:])((?:super::)+)([a-z_][a-z0-9_]*)", code):
            ups = match.group(1).count("super::")
            if ups > len(parts):
                continue
            base = parts[: len(parts) - ups]
            target = (base + [match.group(2)])[0]
            if target not in (room, "testing") and ((CORE / f"{target}.rs").exists() or (CORE / target).is_dir()):
                edges.add(target)
    return graph


def circle(graph: dict[str, set[str]]) -> list[str] | None:
    done: set[str] = set()

    def visit(node: str, path: list[str]) -> list[str] | None:
        if node in path:
            return path[path.index(node):] + [node]
        if node in done:
            return None
        for nxt in sorted(graph.get(node, ())):
            found = visit(nxt, path + [node])
            if found:
                return found
        done.add(node)
        return None

    for node in sorted(graph):
        found = visit(node, [])
        if found:
            return found
    return None


def product_files() -> list[Path]:
    files = []
    for folder in PRODUCT_DIRS:
        for file in sorted((ROOT / folder).rglob("*.rs")):
            text = str(file)
            if "/target/" in text or "/tests/" in text or text.endswith("/tests.rs") or "/node_modules/" in text:
                continue
            files.append(file)
    return files


FN = re.compile(r"^\s*(pub(\([^)]*\))?\s+)?(async\s+)?(const\s+)?(unsafe\s+)?fn\s+([a-zA-Z_][a-zA-Z0-9_]*)")


def long_functions(file: Path) -> list[tuple[str, int, int]]:
    lines = file.read_text(encoding="utf-8").split("#[cfg(test)]\nmod tests")[0].splitlines()
    found = []
    i = 0
    while i < len(lines):
        match = FN.match(lines[i])
        if not match:
            i += 1
            continue
        depth, opened, j = 0, False, i
        while j < len(lines):
            code = re.sub(r'"([^"\\]|\\.)*"', '""', lines[j].split("//")[0])
            code = re.sub(r"'([^'\\]|\\.)'", "''", code)
            depth += code.count("{") - code.count("}")
            opened = opened or "{" in code
            if opened and depth <= 0:
                break
            if not opened and code.rstrip().endswith(";"):
                break
            j += 1
        length = j - i + 1
        if opened and length > MAX_FUNCTION:
            found.append((match.group(6), i + 1, length))
        i = j + 1 if opened else i + 1
    return found


def main(argv: list[str]) -> int:
    graph = rooms()
    files = product_files()
    big = [(str(f.relative_to(ROOT)), len(f.read_text(encoding="utf-8").splitlines())) for f in files]
    big = sorted([b for b in big if b[1] > MAX_FILE], key=lambda b: -b[1])
    long = sorted(
        [(str(f.relative_to(ROOT)), name, line, length) for f in files for (name, line, length) in long_functions(f)],
        key=lambda b: -b[3],
    )
    report = {
        "rooms": {room: sorted(edges) for room, edges in sorted(graph.items())},
        "circle": circle(graph),
        "files_over_500": big,
        "functions_over_70": long,
    }
    if "--json" in argv:
        print(json.dumps(report, indent=2))
        return 0
    print(f"the core's rooms ({len(graph)}) and what each names:")
    for room, edges in report["rooms"].items():
        print(f"  {room} → {', '.join(edges) or '—'}")
    print(f"circle: {' → '.join(report['circle']) if report['circle'] else 'none'}")
    print(f"product files over {MAX_FILE} lines: {len(big)}")
    for name, count in big:
        print(f"  {count:5}  {name}")
    print(f"product functions over {MAX_FUNCTION} lines: {len(long)}")
    for name, fn, line, length in long:
        print(f"  {length:5}  {name}:{line} {fn}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
