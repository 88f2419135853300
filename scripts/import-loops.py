#!/usr/bin/env python3
"""Reports import loops between the source files of a Rust crate.

    scripts/import-loops.py kafka-coordination/src [core/src ...] [--allow a.rs:b.rs ...]
                            [--layers kafka/src=kafka/layers.txt ...]

For each `.rs` file under a crate's `src/`, reads the paths it names (in `use` items and in
code) that start with `crate::`, `super::`, `self::` or a module the file declares, maps each
path to the file that holds the longest module prefix of it, and so draws an arrow from the
file to every other file it imports from. A loop is a set of files that reach each other by
such arrows (a strongly connected component of more than one file). Each loop is printed with
one arrow per line; the exit status is 1 when there is a loop outside the allowed pairs, else 0.

`--allow A:B` (paths relative to the crate's `src/`) accepts the arrows between A and B in
either direction: a loop that remains only through allowed arrows is not reported.

`--layers SRC=FILE` also checks that no arrow of the crate at SRC runs up its layers. FILE has
one line per layer, lowest first, `name: glob glob ...` (globs of paths relative to SRC; a file
belongs to the first layer, in file order, one of whose globs it matches); a line
`exempt: glob ...` names files the check leaves out (test modules); `#` starts a comment. A
file may import from its own layer and the ones listed before it. Every arrow that goes to a
later layer is printed, and so is every file that no layer names; either makes the exit status
1.

Declaring a module (`mod x;`) is not an import; re-exporting from it (`pub use x::Y`) is. A
path that goes through a `use` of another module (`crate::Error`, `super::lock`) counts as an
import of the file that defines the item, not of the file that passes it on. A glob (`use super::*`) imports the whole file it names. Unit
test modules (`#[cfg(test)] mod tests { .. }`) are left out.
"""

import os
import re
import sys

IDENT = r"[A-Za-z_][A-Za-z0-9_]*"


def strip(text):
    """The source with comments, string and char literals blanked (same length, same lines)."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', text[i:]) and (i == 0 or not re.match(r"\w", text[i - 1])):
            hashes = re.match(r"r(#*)\"", text[i:]).group(1)
            end = text.find('"' + hashes, i + 2 + len(hashes))
            j = n if end < 0 else end + 1 + len(hashes)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'":
            # A char literal ('a', '\n', '\u{..}'), or a lifetime (left alone).
            m = re.match(r"'(\\(u\{[0-9a-fA-F]+\}|x[0-9a-fA-F]{2}|.)|[^\\'])'", text[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def module_of(src, path):
    """The module path of the file `path` under `src` (`lib.rs` is the root: [])."""
    rel = os.path.relpath(path, src)[: -len(".rs")].split(os.sep)
    if rel in (["lib"], ["main"]):
        return []
    if rel[0] == "bin":
        return None  # a binary is a crate of its own
    if rel[-1] == "mod":
        rel = rel[:-1]
    return rel


def file_of(src, files, module):
    """The file holding the longest prefix of `module` that is a file of its own."""
    for k in range(len(module), -1, -1):
        prefix = module[:k]
        if not prefix:
            return os.path.join(src, "lib.rs")
        base = os.path.join(src, *prefix)
        for cand in (base + ".rs", os.path.join(base, "mod.rs")):
            if cand in files:
                return cand
    return None


def matching_brace(text, open_at):
    depth = 0
    for j in range(open_at, len(text)):
        if text[j] == "{":
            depth += 1
        elif text[j] == "}":
            depth -= 1
            if depth == 0:
                return j
    return len(text)


def expand_use(tree):
    """The (path, name) pairs of a use tree: `a::{b, c::{d as e}}` gives (a::b, b), (a::c::d, e)."""
    tree = re.sub(r"\s+", " ", tree.strip())
    tree = re.sub(r"\s*(::|\{|\}|,)\s*", r"\1", tree)

    def split_top(s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        if cur:
            parts.append(cur)
        return parts

    def leaf(prefix, s):
        alias = None
        m = re.match(r"(.*) as (" + IDENT + r")$", s)
        if m:
            s, alias = m.group(1), m.group(2)
        path = prefix + [p for p in s.split("::") if p]
        return path, alias or (path[-1] if path else None)

    def walk(prefix, s):
        i = s.find("{")
        if i < 0:
            yield leaf(prefix, s)
            return
        head = [p for p in s[:i].split("::") if p]
        inner = s[i + 1 : s.rfind("}")]
        for part in split_top(inner):
            if part in ("self", ""):
                yield prefix + head, (head[-1] if head else None)
            else:
                yield from walk(prefix + head, part)

    return list(walk([], tree))


def resolve(module, local_mods, path):
    """The absolute module path of `path` named inside `module`, or None when not in the crate."""
    if not path:
        return None
    if path[0] == "crate":
        return path[1:]
    if path[0] in ("self", "super"):
        here = list(module)
        rest = list(path)
        while rest and rest[0] in ("self", "super"):
            if rest[0] == "super":
                if not here:
                    return None
                here.pop()
            rest.pop(0)
        return here + rest
    if path[0] in local_mods:
        return list(module) + path
    return None


def scan(src, files, path):
    """The module paths `path` names, and what it re-exports.

    Returns (named, reexports): `named` is a list of absolute module paths; `reexports` maps
    a name this file's module brings in with `use` (public or not: a child module may name
    it through `super::`) to the absolute path it stands for (`*` for a glob, mapped to a
    list).
    """
    base = module_of(src, path)
    if base is None:
        return [], {}
    with open(path, encoding="utf-8") as f:
        text = strip(f.read())
    # Inline modules: (start, end, module path), innermost last. Unit-test modules
    # (`#[cfg(test)] mod x { .. }`) are left out: they are not part of the layering.
    spans, tests = [], []
    for m in re.finditer(r"(#\[cfg\(test\)\]\s*)?\bmod\s+(" + IDENT + r")\s*\{", text):
        span = (m.end() - 1, matching_brace(text, m.end() - 1), m.group(2))
        (tests if m.group(1) else spans).append(span)
        if m.group(1):
            spans.append(span)
    in_test = lambda pos: any(s < pos < e for s, e, _ in tests)
    declared = {m.group(1) for m in re.finditer(r"\bmod\s+(" + IDENT + r")\s*[;{]", text)}

    def module_at(pos):
        mod = list(base)
        for start, end, name in spans:
            if start < pos < end:
                mod.append(name)
        return mod

    named, reexports, used = [], {}, []
    for m in re.finditer(r"(\bpub(?:\s*\([^)]*\))?\s+)?\buse\s+([^;]+);", text):
        used.append((m.start(), m.end()))
        if in_test(m.start()):
            continue
        here = module_at(m.start())
        for p, name in expand_use(m.group(2)):
            absolute = resolve(here, declared, p)
            if absolute is None:
                if here == base and name and name != "*":
                    reexports[name] = None  # re-exported from outside the crate
                continue
            named.append(absolute)
            if here == base and name:
                if name == "*":
                    reexports.setdefault("*", []).append(absolute[:-1])
                else:
                    reexports[name] = absolute
    heads = "|".join(["crate", "super", "self"] + sorted(declared))
    for m in re.finditer(r"(?<![\w:$])(?:" + heads + r")(?:\s*::\s*" + IDENT + r")+", text):
        if in_test(m.start()) or any(s <= m.start() < e for s, e in used):
            continue
        absolute = resolve(module_at(m.start()), declared, [p.strip() for p in m.group(0).split("::")])
        if absolute is not None:
            named.append(absolute)
    return named, reexports


def target(src, files, reexports, absolute, seen=None):
    """The file that defines what `absolute` names, following `use` items (`None`: outside
    the crate)."""
    f = file_of(src, files, absolute)
    if f is None:
        return None
    prefix = module_of(src, f) or []
    rest = absolute[len(prefix) :]
    if not rest or rest[0] == "*":
        return f
    seen = set() if seen is None else seen
    if (f, rest[0]) in seen:
        return None  # a `use` that comes back to itself (globs in both directions)
    seen.add((f, rest[0]))
    table = reexports.get(f, {})
    if rest[0] in table:
        via = table[rest[0]]
        if via is None:
            return None
        return target(src, files, reexports, via + rest[1:], seen)
    for glob in table.get("*", []):
        t = target(src, files, reexports, glob + rest, seen)
        if t is not None and t != file_of(src, files, glob):
            return t
    return f


def imports(src, files, scanned, reexports, path):
    """The files `path` imports from (itself excluded), each with the paths that lead there."""
    out = {}
    for absolute in scanned[path]:
        t = target(src, files, reexports, absolute)
        if t and t != path:
            out.setdefault(t, set()).add("::".join(absolute))
    return out


def loops(graph):
    """Strongly connected components of more than one node (Tarjan, iterative)."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                    advanced = True
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    top = stack.pop()
                    on.discard(top)
                    comp.append(top)
                    if top == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def read_layers(path):
    """The layers of a layers file, lowest first, as (name, globs), and the exempt globs."""
    layers, exempt = [], []
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            if ":" not in line:
                sys.exit(f"import-loops: {path}:{n}: a layer line is 'name: glob ...'")
            name, globs = line.split(":", 1)
            if name.strip() == "exempt":
                exempt.extend(globs.split())
            else:
                layers.append((name.strip(), globs.split()))
    return layers, exempt


def layer_errors(graph, rel, layers_file):
    """The arrows of `graph` that run up the layers of `layers_file`, and the unplaced files."""
    import fnmatch

    layers, exempt = read_layers(layers_file)

    def place(f):
        r = rel(f)
        if any(fnmatch.fnmatchcase(r, g) for g in exempt):
            return None
        for i, (_, globs) in enumerate(layers):
            if any(fnmatch.fnmatchcase(r, g) for g in globs):
                return i
        return -1

    errors = []
    for f in sorted(graph):
        at = place(f)
        if at is None:
            continue
        if at < 0:
            errors.append(f"{rel(f)} is in no layer of {layers_file}")
            continue
        for t in sorted(graph[f]):
            to = place(t)
            if to is not None and to > at:
                why = ", ".join(sorted(graph[f][t])[:3])
                errors.append(
                    f"{rel(f)} ({layers[at][0]}) -> {rel(t)} ({layers[to][0]}) runs up  ({why})"
                )
    return errors


def main(argv):
    roots, allowed, layered = [], set(), {}
    args = iter(argv)
    for a in args:
        if a == "--layers":
            spec = next(args, "")
            if "=" not in spec:
                sys.exit("import-loops: --layers takes SRC=FILE")
            src, file = spec.split("=", 1)
            layered[os.path.normpath(src)] = file
        elif a == "--allow":
            pair = next(args, "")
            if ":" not in pair:
                sys.exit("import-loops: --allow takes A.rs:B.rs")
            x, y = pair.split(":", 1)
            allowed.add(frozenset((x, y)))
        elif a in ("-h", "--help"):
            print(__doc__)
            return 0
        else:
            roots.append(a)
    if not roots:
        print(__doc__, file=sys.stderr)
        return 2
    found = 0
    for src in roots:
        src = os.path.normpath(src)
        files = set()
        for d, _, names in os.walk(src):
            files.update(os.path.join(d, n) for n in names if n.endswith(".rs"))
        scanned, reexports = {}, {}
        for f in sorted(files):
            scanned[f], reexports[f] = scan(src, files, f)
        graph = {f: imports(src, files, scanned, reexports, f) for f in sorted(files)}
        rel = lambda f: os.path.relpath(f, src)
        for f in graph:
            graph[f] = {
                t: why for t, why in graph[f].items() if frozenset((rel(f), rel(t))) not in allowed
            }
        comps = loops(graph)
        for comp in comps:
            found += 1
            members = set(comp)
            print(f"{src}: import loop among {len(comp)} files:")
            for f in comp:
                for t in sorted(set(graph[f]) & members):
                    why = ", ".join(sorted(graph[f][t])[:3])
                    print(f"    {rel(f)} -> {rel(t)}  ({why})")
        if not comps:
            print(f"{src}: no import loops ({len(files)} files)")
        if src in layered:
            errors = layer_errors(graph, rel, layered[src])
            for e in errors:
                print(f"{src}: {e}")
            found += len(errors)
            if not errors:
                print(f"{src}: every arrow runs down the layers of {layered[src]}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
