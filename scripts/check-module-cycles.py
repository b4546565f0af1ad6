#!/usr/bin/env python3
"""Fails when two top-level modules of a crate import each other, directly
or through others (issue 13: dependencies point one way inside a crate).

A top-level module is src/NAME.rs or src/NAME/; it depends on another when
its non-test code names `crate::OTHER` (also inside `use crate::{...}`
groups). Test modules (`#[cfg(test)] mod ...` and src/**/*tests.rs) are
ignored: tests may reach anywhere. Prints each cycle and exits 1 if any.

Usage: scripts/check-module-cycles.py [REPO_ROOT]
"""
import pathlib
import re
import sys

ROOT = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
PATH = re.compile(r"\bcrate::(\w+)")
GROUP = re.compile(r"\bcrate::\{([^}]*)\}")


def strip_test_modules(text: str) -> str:
    """Drops every `#[cfg(test)] mod x { ... }` block (brace-matched)."""
    out, pos = [], 0
    for m in TEST_MOD.finditer(text):
        if m.start() < pos:
            continue
        out.append(text[pos:m.start()])
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        pos = i
    out.append(text[pos:])
    return "".join(out)


def crate_graph(src: pathlib.Path) -> dict:
    modules = {}
    for f in src.rglob("*.rs"):
        rel = f.relative_to(src)
        top = rel.parts[0].removesuffix(".rs")
        if top in ("lib", "main", "bin") or f.name.endswith("tests.rs"):
            continue
        modules.setdefault(top, []).append(f)
    edges = {m: set() for m in modules}
    for m, files in modules.items():
        for f in files:
            text = strip_test_modules(f.read_text(encoding="utf-8", errors="replace"))
            names = set(PATH.findall(text))
            for group in GROUP.findall(text):
                names.update(n.split("::")[0].strip() for n in group.split(","))
            edges[m].update(n for n in names if n in modules and n != m)
    return edges


def cycles(edges: dict) -> list:
    """Strongly connected components of more than one module (Kosaraju)."""
    order, seen = [], set()
    for start in edges:
        if start in seen:
            continue
        stack = [(start, iter(sorted(edges[start])))]
        seen.add(start)
        while stack:
            node, it = stack[-1]
            nxt = next((n for n in it if n not in seen), None)
            if nxt is None:
                order.append(node)
                stack.pop()
            else:
                seen.add(nxt)
                stack.append((nxt, iter(sorted(edges[nxt]))))
    reverse = {m: set() for m in edges}
    for a, bs in edges.items():
        for b in bs:
            reverse[b].add(a)
    comps, assigned = [], set()
    for node in reversed(order):
        if node in assigned:
            continue
        comp, todo = [], [node]
        assigned.add(node)
        while todo:
            n = todo.pop()
            comp.append(n)
            for p in reverse[n]:
                if p not in assigned:
                    assigned.add(p)
                    todo.append(p)
        if len(comp) > 1:
            comps.append(sorted(comp))
    return comps


def main() -> int:
    found = 0
    for src in sorted(ROOT.glob("crates/*/src")):
        for comp in cycles(crate_graph(src)):
            print(f"{src.parent.name}: {' <-> '.join(comp)}")
            found += 1
    print(f"module cycles: {found}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
