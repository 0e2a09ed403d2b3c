#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The import graph of a Rust module tree, file by file, and its cycles.

    tests/imports.py DIR [ROOT.rs]

Reads every .rs file under DIR, takes the names each one imports from its
siblings (`use super::{a::X, b}`, `use crate::a::b::X`, `super::a::X` in
code), maps them to files, and prints the edges, then each cycle found (a
strongly connected component of more than one file). Exits 1 if there is
one. Module paths follow the files: DIR/conn.rs and DIR/conn/x.rs are
`conn` and `conn::x`; ROOT.rs (default: the only file DIR has with
`module!` or `harness_module!`) is the crate root.
"""
import os
import re
import sys


def modules(root_dir, root_file):
    mods = {}
    for d, _, files in os.walk(root_dir):
        for f in files:
            if not f.endswith(".rs"):
                continue
            p = os.path.join(d, f)
            rel = os.path.relpath(p, root_dir)[:-3]
            if p == root_file:
                path = ()
            else:
                path = tuple(rel.split(os.sep))
            mods[path] = p
    return mods


def strip_comments(src):
    src = re.sub(r"/\*.*?\*/", "", src, flags=re.S)
    return "\n".join(l.split("//")[0] for l in src.splitlines())


def use_paths(src):
    """Every path a `use` names, expanded from its braces, and every
    `super::`/`crate::` path in code."""
    out = []
    for m in re.finditer(r"\buse\s+([^;]+);", src):
        out += expand(re.sub(r"\s+", "", m.group(1)))
    for m in re.finditer(r"\b((?:super|crate)(?:::[A-Za-z_][A-Za-z0-9_]*)+)", src):
        out.append(m.group(1).split("::"))
    return out


def expand(tree):
    # a::{b::{c, d}, e} -> [a,b,c] [a,b,d] [a,e]
    i = tree.find("{")
    if i < 0:
        return [tree.split(" as ")[0].split("::")]
    prefix = [p for p in tree[:i].split("::") if p]
    body = tree[i + 1:tree.rfind("}")]
    parts, depth, cur = [], 0, ""
    for ch in body:
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        depth += ch == "{"
        depth -= ch == "}"
        cur += ch
    parts.append(cur)
    res = []
    for p in parts:
        if p:
            res += [prefix + e for e in expand(p)]
    return res


def reexports(mods):
    """What each file re-exports from its submodules: {(file, name): file}
    (`pub(crate) use x::{A, B}` in conn.rs maps conn's A and B to conn::x)."""
    out = {}
    for m, p in mods.items():
        src = strip_comments(open(p).read())
        for u in re.finditer(r"\bpub(?:\([a-z]+\))?\s+use\s+([^;]+);", src):
            for path in expand(re.sub(r"\s+", "", u.group(1))):
                if path[0] in ("crate", "super", "self", "kernel", "core"):
                    continue
                child = m + (path[0],)
                if child in mods:
                    out[(m, path[-1])] = child
    return out


def resolve(path, here, mods, reexp):
    """The file a path names: its longest prefix that is a module, or the
    submodule that module re-exports the next name from."""
    if path[0] == "crate":
        base, rest = (), path[1:]
    elif path[0] == "super":
        base, rest = here[:-1], path[1:]
        while rest and rest[0] == "super":
            base, rest = base[:-1], rest[1:]
    elif path[0] == "self":
        base, rest = here, path[1:]
    else:
        return None
    best, at = None, 0
    for n in range(len(rest) + 1):
        cand = base + tuple(rest[:n])
        if cand in mods:
            best, at = cand, n
    if best is not None and at < len(rest):
        best = reexp.get((best, rest[at]), best)
    return best


def main():
    root_dir = sys.argv[1]
    root = sys.argv[2] if len(sys.argv) > 2 else None
    if root is None:
        for d, _, files in os.walk(root_dir):
            for f in files:
                p = os.path.join(d, f)
                if f.endswith(".rs") and re.search(r"^\s*module!",
                                                    open(p).read(), re.M):
                    root = p
    mods = modules(root_dir, root)
    if len(mods) < 2 or root is None:
        print(f"{root_dir}: no crate root, or nothing to check ({len(mods)} files)")
        return 1
    reexp = reexports(mods)
    edges = {m: set() for m in mods}
    for m, p in mods.items():
        for path in use_paths(strip_comments(open(p).read())):
            t = resolve(path, m, mods, reexp)
            # The crate root declares everything: structure, not use.
            if t is None or t == m or t == ():
                continue
            edges[m].add(t)
    name = lambda m: "::".join(m) or "crate"
    for m in sorted(edges):
        if edges[m]:
            print(f"{name(m)} -> {', '.join(sorted(name(t) for t in edges[m]))}")
    # Tarjan's strongly connected components.
    index, low, stack, on, sccs, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            c = []
            while True:
                w = stack.pop()
                on.discard(w)
                c.append(w)
                if w == v:
                    break
            sccs.append(c)

    sys.setrecursionlimit(10000)
    for v in edges:
        if v not in index:
            visit(v)
    rings = [c for c in sccs if len(c) > 1]
    for c in rings:
        print("ring: " + " <-> ".join(sorted(name(m) for m in c)))
    print(f"{len(mods)} files, {sum(len(e) for e in edges.values())} edges, {len(rings)} rings")
    return 1 if rings else 0


if __name__ == "__main__":
    sys.exit(main())
