#!/usr/bin/env python3
"""The drawn import structure of src/: which file imports which.

Walks both crates from their roots (src/lib.rs, src/main.rs) along `mod` declarations
(honouring `#[path]` and inline `mod x { ... }` blocks), then reads every `use` tree and
every `crate::`/`super::`/`self::` path (and `treefork::` in the binary crate) and
resolves it to the file of the deepest module it names. A `mod x;` declaration is not
an import. Comments and string literals are ignored.

The rules come from the layer table of docs/design.md, "Layers" (the first ``` block
after that heading): one row per layer, top first, each naming its files and folders
(`src/x.rs`, `src/x/`) on its first line. A file may import the files of its own row
and of the rows below it, never of a row above: that is checked for every file but
those compiled for tests only (a `#[cfg(test)] mod`, and everything below one), which
drive their module from above. On top of the table, FORBIDDEN below lists imports
refused to every file, tests included.

Usage: scripts/layers.py [--src DIR] [--design FILE] [--edges] [--check]
  --src     the source tree to read (default: this checkout's src/)
  --design  the design document holding the layer table (default: docs/design.md
            beside --src)
  --edges   print, for each file, the files it imports
  --check   print every import that runs up the table or breaks FORBIDDEN, every
            file of src/ that no row of the table names (but the crate root lib.rs
            and files compiled for tests only), and every circle among files that is
            not a parent/child pair (a module's mod.rs and its own children); exit 1
            if any.
"""

import os
import re
import sys
from collections import defaultdict

SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
SRC = os.path.normpath(SRC)


def strip(text):
    """Blank out comments, string and char literals, keeping offsets and newlines."""
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
        elif c == "r" and re.match(r'r#*"', text[i:i + 10]) and not (
            i and (text[i - 1].isalnum() or text[i - 1] == "_")
        ):
            m = re.match(r'r(#*)"', text[i:])
            close = '"' + m.group(1)
            j = text.find(close, i + len(m.group(0)))
            j = n if j < 0 else j + len(close)
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
            m = re.match(r"'(\\.[^']*|[^'\\])'", text[i:])
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


def cfg_test(text, pos):
    """Whether the `mod` declared at `pos` carries `#[cfg(test)]` among the
    attributes right before it."""
    head = text[:pos]
    cut = max(head.rfind(";"), head.rfind("{"), head.rfind("}"))
    return re.search(r"#\[cfg\(test\)\]", head[cut + 1:]) is not None


MOD_RE = re.compile(r"(#\[path\s*=\s*\"([^\"]+)\"\]\s*)?(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


class Crate:
    def __init__(self, name, root):
        self.name = name
        self.files = {}  # module path tuple -> file
        self.file_mod = {}  # file -> module path tuple (of the file's top)
        self.regions = defaultdict(list)  # file -> [(start, end, modpath)] inline mods
        self.test_only = set()  # files compiled for tests only
        self._walk(root, (), False)

    def _walk(self, path, modpath, test_only):
        self.files[modpath] = path
        self.file_mod[path] = modpath
        if test_only:
            self.test_only.add(path)
        raw = open(path).read()
        text = strip(raw)
        is_modrs = os.path.basename(path) in ("mod.rs", "lib.rs", "main.rs")
        base = os.path.dirname(path) if is_modrs else os.path.splitext(path)[0]
        # `#[path]` attributes must be read from the raw text (the string is blanked).
        for m in MOD_RE.finditer(text):
            name = m.group(3)
            inner = self._inline_path(path, m.start())
            full = modpath + inner + (name,)
            if m.group(4) == "{":
                end = self._match_brace(text, m.end() - 1)
                self.regions[path].append((m.end(), end, full))
                continue
            if m.group(1):
                pm = re.match(r'#\[path\s*=\s*"([^"]+)"\]', raw[m.start():])
                child = os.path.join(os.path.dirname(path), pm.group(1))
            else:
                d = os.path.join(base, *inner)
                child = os.path.join(d, name + ".rs")
                if not os.path.exists(child):
                    child = os.path.join(d, name, "mod.rs")
            if os.path.exists(child):
                self._walk(os.path.normpath(child), full, test_only or cfg_test(text, m.start()))

    def _inline_path(self, path, pos):
        best = ()
        for s, e, mp in self.regions.get(path, []):
            if s <= pos < e and len(mp) > len(best):
                best = mp[len(self.file_mod[path]):]
        return best

    @staticmethod
    def _match_brace(text, i):
        depth = 0
        for j in range(i, len(text)):
            if text[j] == "{":
                depth += 1
            elif text[j] == "}":
                depth -= 1
                if depth == 0:
                    return j
        return len(text)

    def module_at(self, path, pos):
        return self.file_mod[path] + self._inline_path(path, pos)

    def resolve(self, modpath):
        """The file of the deepest existing module on this path."""
        for k in range(len(modpath), -1, -1):
            if modpath[:k] in self.files:
                return self.files[modpath[:k]]
        return None


def expand_use(tree):
    """Flatten a use tree `a::{b, c::{d, e}}` into paths."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def rec(prefix, s):
        if "{" not in s:
            for part in split_top(s):
                out.append(prefix + [p for p in part.split("::") if p])
            return
        i = s.index("{")
        head = [p for p in s[:i].split("::") if p]
        j = Crate._match_brace(s, i)
        for part in split_top(s[i + 1:j]):
            rec(prefix + head, part)

    rec([], tree)
    return out


def split_top(s):
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if cur:
        parts.append(cur)
    return parts


USE_RE = re.compile(r"\buse\s+([^;]+);")
PATH_RE = re.compile(r"(?<![\w:])((?:crate|super|self|treefork)(?:::(?:super|\w+))+)")


def resolve_segs(crate, lib, here, segs):
    """(crate, module path) a path's segments name, or None for an external crate."""
    if not segs:
        return None
    if segs[0] == "crate":
        return crate, tuple(segs[1:])
    if segs[0] == "treefork" and crate is not lib:
        return lib, tuple(segs[1:])
    if segs[0] in ("super", "self"):
        cur = list(here)
        k = 0
        while k < len(segs) and segs[k] in ("super", "self"):
            if segs[k] == "super":
                cur = cur[:-1]
            k += 1
        return crate, tuple(cur) + tuple(segs[k:])
    # A bare path in a `use` names a child module of `here` or an external crate.
    if (here + (segs[0],)) in crate.files:
        return crate, here + tuple(segs)
    return None


def imports(crate, lib, path):
    raw = open(path).read()
    text = strip(raw)
    found = []  # (pos, [segments])
    spans = []
    aliases = {}  # a name a `use` binds to a module -> (crate, module path)
    for m in USE_RE.finditer(text):
        body = re.sub(r"\s+as\s+(\w+)", r"@\1", m.group(1))
        for segs in expand_use(body):
            alias = None
            if segs and "@" in segs[-1]:
                segs[-1], alias = segs[-1].split("@")
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            found.append((m.start(), segs))
            r = resolve_segs(crate, lib, crate.module_at(path, m.start()), segs)
            if r and r[1] in r[0].files and segs:
                aliases[alias or segs[-1]] = r
        spans.append((m.start(), m.end()))
    for m in PATH_RE.finditer(text):
        if any(s <= m.start() < e for s, e in spans):
            continue
        found.append((m.start(), m.group(1).split("::")))
    targets = set()
    for pos, segs in found:
        r = resolve_segs(crate, lib, crate.module_at(path, pos), segs)
        if r:
            f = r[0].resolve(r[1])
            if f and f != path:
                targets.add(f)
    # Paths through a module a `use` named (`use crate::refs; refs::tracking::get`).
    if aliases:
        alias_re = re.compile(
            r"(?<![\w:])(" + "|".join(map(re.escape, aliases)) + r")((?:::\w+)+)"
        )
        for m in alias_re.finditer(text):
            if any(s <= m.start() < e for s, e in spans):
                continue
            c, mp = aliases[m.group(1)]
            f = c.resolve(mp + tuple(m.group(2).split("::")[1:]))
            if f and f != path:
                targets.add(f)
    return targets


def rel(f):
    return os.path.relpath(f, SRC)


def graph(tests=None):
    """Every file's imports; the files compiled for tests only go to `tests`."""
    lib = Crate("lib", os.path.join(SRC, "lib.rs"))
    binc = Crate("bin", os.path.join(SRC, "main.rs"))
    g = {}
    for c in (lib, binc):
        for f in c.file_mod:
            g[rel(f)] = sorted(rel(t) for t in imports(c, lib, f))
        if tests is not None:
            tests.update(rel(f) for f in c.test_only)
    return g


def layer_table(design):
    """The rows of the layer table in `design` ("Layers"), top first: each row's
    name and the prefixes (relative to src/) it names."""
    text = open(design).read()
    m = re.search(r"^## Layers\s*$", text, re.M)
    if not m:
        sys.exit(f"{design}: no \"## Layers\" section")
    block = re.search(r"^```[^\n]*\n(.*?)^```", text[m.end():], re.M | re.S)
    if not block:
        sys.exit(f"{design}: no table under \"## Layers\"")
    rows = []
    for line in block.group(1).splitlines():
        if not line.strip() or line[0].isspace():
            continue
        paths = [p[len("src/"):] for p in re.findall(r"(?<![\w/])src/[\w/.]*\w/?", line)]
        if not paths:
            sys.exit(f"{design}: layer row names no file of src/: {line.strip()}")
        rows.append((re.split(r"\s{2,}", line.strip())[0], paths))
    return rows


def rank(rows, f):
    """The index of the row naming file `f` (the most precise prefix wins), or None."""
    best, best_len = None, -1
    for i, (_, prefixes) in enumerate(rows):
        for p in prefixes:
            if matches(f, p) and len(p) > best_len:
                best, best_len = i, len(p)
    return best


# Imports refused on top of the layer table (to test files too): (importer prefix,
# imported prefix). A prefix ending in "/" is a directory; otherwise an exact file.
FORBIDDEN = [
    ("control/", "ops/"),
    ("refs/", "remote/"), ("refs.rs", "remote/"),
    ("reach/", "session/"),
    ("lifecycle/", "session/"),
    ("lifecycle/", "remote/"),
    ("gc.rs", "remote/"), ("fsck.rs", "remote/"),
    ("ops/", "remote/"),
    ("mcp/", "cli/"),
    ("command/", "control/"), ("command/", "ops/"), ("command/", "cli/"), ("command/", "mcp/"),
    ("session/", "ops/"), ("session/", "daemon/"),
    ("meta/", "session/"), ("meta.rs", "session/"),
    ("tree/", "session/"), ("store/", "session/"),
    ("ops/", "daemon/"), ("control/", "daemon/"),
    ("fs/", "ops/"), ("fs/", "daemon/"),
    # The verb table sits between the daemon and the libraries it routes to.
    ("verbs/", "daemon/"), ("verbs/", "cli/"), ("verbs/", "mcp/"),
    ("control/", "verbs/"), ("ops/", "verbs/"), ("remote/", "verbs/"), ("command/", "verbs/"),
    ("session/", "verbs/"), ("refs/", "verbs/"), ("refs.rs", "verbs/"), ("oplog/", "verbs/"),
]


def matches(f, prefix):
    return f.startswith(prefix) if prefix.endswith("/") else f == prefix


def ancestor_pair(a, b):
    """True when one file is the mod.rs (or crate root) of a module containing the other."""
    def owner_dir(f):
        if os.path.basename(f) in ("mod.rs", "lib.rs", "main.rs"):
            return os.path.dirname(f)
        return None

    for x, y in ((a, b), (b, a)):
        d = owner_dir(x)
        if d is not None and (d == "" or y.startswith(d + "/")):
            return True
        # `a.rs` beside `a/`: the same module as `a/mod.rs`.
        if x.endswith(".rs") and y.startswith(x[:-3] + "/"):
            return True
    return False


def sccs(g):
    index, low, stack, on, out = {}, {}, [], set(), []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in g.get(v, []):
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

    for v in sorted(g):
        if v not in index:
            visit(v)
    return out


def main():
    global SRC
    if "--src" in sys.argv:
        SRC = os.path.normpath(sys.argv[sys.argv.index("--src") + 1])
    design = os.path.join(SRC, "..", "docs", "design.md")
    if "--design" in sys.argv:
        design = sys.argv[sys.argv.index("--design") + 1]
    tests = set()
    g = graph(tests)
    if "--edges" in sys.argv:
        for f in sorted(g):
            print(f + ": " + " ".join(g[f]))
    if "--check" in sys.argv:
        rows = layer_table(design)
        bad = 0
        for f in sorted(g):
            rf = rank(rows, f)
            if rf is None and f != "lib.rs" and f not in tests:
                print(f"not in the layer table: {f}")
                bad += 1
            for t in g[f]:
                if ancestor_pair(f, t):
                    continue
                rt = rank(rows, t)
                up = f not in tests and None not in (rf, rt) and rt < rf
                if up:
                    print(f"upward: {f} -> {t} ({rows[rf][0]} -> {rows[rt][0]})")
                    bad += 1
                elif any(matches(f, a) and matches(t, b) for a, b in FORBIDDEN):
                    print(f"upward: {f} -> {t}")
                    bad += 1
        # Circles, leaving out the edges between a module's root file and its own
        # children (a child's `use super::X`, a mod.rs's `pub use child::X`).
        h = {f: [t for t in ts if not ancestor_pair(f, t)] for f, ts in g.items()}
        for comp in sccs(h):
            print("circle: " + " <-> ".join(comp))
            bad += 1
        print(f"{bad} problem(s)")
        sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
