#!/usr/bin/env python3
"""Fails when modules of a crate import each other, directly or through
others, at any depth: dependencies point one way inside a crate.

Every crate under crates/ is read as its module tree (src/lib.rs or
src/main.rs is the root; src/a.rs and src/a/mod.rs are `a`; src/a/b.rs is
`a::b`; src/bin/ holds other crates and is skipped). Each path written in a
module's non-test code is resolved to the module it names: `crate::a::b`,
`super::...` and `self::...`, including every leaf of `use` groups such as
`use crate::a::{b::X, c}`. A path from module `p::x::...` to module
`p::y::...` is an edge `x -> y` between the siblings `x` and `y` under their
common parent `p`; so `gro::fast::inner` naming `gro::rx` makes `fast -> rx`
inside `gro`. Each parent's siblings must form no cycle.

Test code is ignored (tests may reach anywhere): `#[cfg(test)] mod x {...}`
blocks and files whose name ends in `tests.rs`.

Prints each cycle as `CRATE: src/PARENT: a <-> b <-> c`, then
`module cycles: N`; exits 1 when N > 0.

Usage: scripts/check-module-cycles.py [REPO_ROOT]
"""
import pathlib
import re
import sys

TEST_MOD = re.compile(r"#\[cfg\(test\)\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+\w+\s*\{")
USE = re.compile(r"\buse\s+([^;]*);", re.S)
PATH = re.compile(r"\b(?:crate|super|self)(?:\s*::\s*\w+)+")


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


def module_path(src: pathlib.Path, f: pathlib.Path) -> tuple:
    parts = list(f.relative_to(src).with_suffix("").parts)
    if parts[-1] in ("mod", "lib", "main") and (parts[-1] == "mod" or len(parts) == 1):
        parts.pop()
    return tuple(parts)


def expand_use(tree: str) -> list:
    """`a::{b, c::{d, e}}` -> ['a::b', 'a::c::d', 'a::c::e'] (`as` dropped)."""
    tree = re.sub(r"\s+as\s+\w+", "", tree)
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix: str, s: str):
        depth, start, items = 0, 0, []
        for i, ch in enumerate(s):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(s[start:i])
                start = i + 1
        items.append(s[start:])
        for item in filter(None, items):
            brace = item.find("{")
            if brace >= 0 and item.endswith("}"):
                walk(prefix + item[:brace], item[brace + 1:-1])
            else:
                out.append(prefix + item)
    walk("", tree)
    return out


def resolve(path: str, here: tuple):
    """The absolute segments of `crate::`/`super::`/`self::` path `path`
    written in module `here`; None for other paths."""
    segs = [s for s in re.split(r"\s*::\s*", path.strip()) if s]
    if not segs or segs[0] not in ("crate", "super", "self"):
        return None
    if segs[0] == "crate":
        return tuple(segs[1:])
    base = list(here)
    while segs and segs[0] in ("super", "self"):
        if segs.pop(0) == "super":
            if not base:
                return None
            base.pop()
    return tuple(base + segs)


def crate_edges(src: pathlib.Path) -> dict:
    """{parent module path: {child: set(sibling children it names)}}."""
    files = [f for f in src.rglob("*.rs") if f.relative_to(src).parts[0] != "bin"]
    modules = {module_path(src, f) for f in files}
    for m in list(modules):  # src/a/b.rs with no src/a.rs or src/a/mod.rs
        for i in range(len(m)):
            modules.add(m[:i])
    edges = {}
    for m in modules:
        if m:
            edges.setdefault(m[:-1], {}).setdefault(m[-1], set())
    for f in files:
        if f.name.endswith("tests.rs"):
            continue
        here = module_path(src, f)
        text = strip_test_modules(f.read_text(encoding="utf-8", errors="replace"))
        paths = PATH.findall(text)
        for tree in USE.findall(text):
            paths.extend(p for p in expand_use(tree) if p.split("::")[0] in ("crate", "super", "self"))
        for p in paths:
            target = resolve(p, here)
            if target is None:
                continue
            i = 0
            while i < len(here) and i < len(target) and here[i] == target[i]:
                i += 1
            if i >= len(here) or i >= len(target):
                continue  # an ancestor or a descendant, not a sibling subtree
            parent = here[:i]
            if target[: i + 1] in modules:
                edges[parent][here[i]].add(target[i])
    return edges


def cycles(graph: dict) -> list:
    """Strongly connected components of more than one module (Tarjan)."""
    index, low, stack, on, comps = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main() -> int:
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else ".")
    found = 0
    for src in sorted(root.glob("crates/*/src")):
        for parent, graph in sorted(crate_edges(src).items()):
            for comp in cycles(graph):
                where = "/".join(("src",) + parent)
                print(f"{src.parent.name}: {where}: {' <-> '.join(comp)}")
                found += 1
    print(f"module cycles: {found}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
