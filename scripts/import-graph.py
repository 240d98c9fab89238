#!/usr/bin/env python3
"""The import graph of the library's modules (one node per file under src/, the command-line
program excluded), from the `crate::` paths in code (comments and doc links do not count).
Prints the graph with --print; exits 1 and prints every cycle found otherwise."""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")


def module_of(path):
    rel = os.path.relpath(path, ROOT)[:-3].split(os.sep)
    if rel[-1] in ("mod", "lib"):
        rel = rel[:-1]
    return "::".join(rel)


def files():
    for dp, _, fn in os.walk(ROOT):
        for f in fn:
            p = os.path.join(dp, f)
            rel = os.path.relpath(p, ROOT)
            if f.endswith(".rs") and not rel.startswith("cli") and rel != "main.rs":
                yield p


def code_lines(text):
    """The code of a file: comments removed, `#[cfg(test)]` modules at the end dropped."""
    cut = re.search(r"^#\[cfg\(test\)\]\s*\nmod tests", text, re.M)
    if cut:
        text = text[: cut.start()]
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return [re.sub(r"//.*", "", line) for line in text.splitlines()]


def graph():
    mods = {module_of(p): p for p in files()}
    edges = {m: set() for m in mods}
    for m, p in mods.items():
        text = "\n".join(code_lines(open(p, encoding="utf-8").read()))
        # `use crate::a::{b, c::d}` and inline `crate::a::b` paths
        paths = set()
        for u in re.findall(r"use\s+crate::([^;]+);", text, re.S):
            head, _, rest = u.partition("{")
            head = head.strip().rstrip(":")
            if rest:
                for part in re.split(r",", rest.rstrip("} \n")):
                    part = part.strip()
                    if part:
                        paths.add(head + "::" + part.split(" as ")[0].strip().split("{")[0])
            else:
                paths.add(head)
        paths |= set(re.findall(r"crate::([a-z_][a-z0-9_:]*)", text))
        for path in paths:
            segs = [s for s in path.replace(" ", "").split("::") if s]
            # the longest prefix that is a module file
            target = None
            for k in range(len(segs), 0, -1):
                cand = "::".join(segs[:k])
                if cand in mods:
                    target = cand
                    break
            if target and target != m and not m.startswith(target + "::") and not target.startswith(m + "::"):
                edges[m].add(target)
    return edges


def cycles(edges):
    """Strongly connected components with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
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
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


if __name__ == "__main__":
    g = graph()
    if "--print" in sys.argv:
        for m in sorted(g):
            print(f"{m or 'lib'} -> {', '.join(sorted(g[m]))}")
    found = cycles(g)
    for c in found:
        print("cycle:", " <-> ".join(c))
        for a in c:
            print(f"  {a} -> {', '.join(sorted(x for x in g[a] if x in c))}")
    sys.exit(1 if found else 0)
