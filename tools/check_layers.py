#!/usr/bin/env python3
"""The layering check (docs/architecture.md): which file uses which file.

Reads a configured and built CMake build directory: compile_commands.json
names every source with its object file; `nm` on the objects gives the
symbols each file defines and uses; the sources' `#include "..."` lines give
the headers each file needs. From these it builds one graph of files and
checks it:

  1. every edge obeys the layer rules (core never uses ops, spec only itself,
     ref only spec, an op only core, spec and the <op>.h of the ops below it,
     tools/bench/examples only the public API and their own files);
  2. the library's global symbols are the public vkattn_* API or internal
     vka_* ones;
  3. there is no dependency cycle between files.

Exit status 0 when both hold, 1 with one line per offending pair otherwise.

  check_layers.py --build BUILD [--source SRC]
  check_layers.py --build BUILD --add-use FILE SYMBOL     (pretend FILE uses SYMBOL)
  check_layers.py --build BUILD --add-include FILE HEADER (pretend FILE includes HEADER)
  check_layers.py --build BUILD --self-test

The --add-* options inject an edge into the real graph. --self-test injects,
one at a time, an edge of each kind the rules forbid (core calling an op, spec
including core, an op including another op's internal header, the reference
calling the runtime, a tool calling an internal function, a cycle) and passes
only when the real graph is clean and every injected edge is reported with
the offending pair: the test suite runs it, so the check itself is tested.
"""
import argparse
import json
import os
import re
import subprocess
import sys

# Ops from the bottom up: an op may use the <op>.h of those before it that
# it lists. linear sits above kvcache because a step's projection appends
# K and V into the cache's pools from its epilogue.
OP_USES = {
    "convert": [],
    "rope": [],
    "attention": [],
    "kvcache": ["attention"],
    "linear": ["kvcache"],
    "mha": ["attention", "kvcache", "linear"],
}

LIBRARY_LAYERS = {"core", "spec", "ref"} | {"ops/" + op for op in OP_USES}

INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
PUBLIC_RE = re.compile(r"VKATTN_API\b[^;{]*?\b(vkattn_\w+)\s*\(", re.S)


def layer_of(path):
    """The layer of a repository-relative path, or None for files the rules
    do not cover."""
    parts = path.split("/")
    if path == "include/vkattn.h" or path.startswith("include/vkattn/"):
        return "public"
    if parts[0] == "src" and len(parts) > 2:
        if parts[1] == "ops" and len(parts) > 3:
            return "ops/" + parts[2]
        if parts[1] in ("core", "spec", "ref"):
            return parts[1]
    if parts[0] == "@shaders":
        return "shaders"
    if parts[0] == "tools":
        return "tools/npy" if len(parts) > 2 and parts[1] == "npy" else "tools"
    if parts[0] in ("bench", "examples", "tests"):
        return parts[0]
    if parts[0] == "@bench-shaders":
        return "bench"
    return None


def allowed_layers(layer):
    """Layers whose files `layer` may use (None: anything)."""
    if layer == "core":
        # shaders: the runtime's own probe kernels (the start-up self-test)
        return {"core", "spec", "public", "shaders"}
    if layer == "spec":
        return {"spec", "public"}
    if layer == "ref":
        return {"ref", "spec", "public"}
    if layer.startswith("ops/"):
        op = layer[4:]
        return {"core", "spec", "public", "shaders", layer} | {"ops/" + o for o in OP_USES[op]}
    if layer == "tools":
        return {"tools", "tools/npy", "public"}
    if layer == "tools/npy":
        return {"tools/npy"}
    if layer in ("bench", "examples"):
        return {layer, "public"}
    return None  # tests, shaders


def rule_text(layer):
    texts = {
        "core": "core uses only core/, spec/ and its own probe shaders",
        "spec": "spec uses only spec/ and the public header",
        "ref": "ref uses only ref/, spec/ and the public header",
        "tools": "tools use only the public API and their own files",
        "tools/npy": "tools/npy uses only its own files",
        "bench": "bench uses only the public API and its own files",
        "examples": "examples use only the public API and their own files",
    }
    if layer in texts:
        return texts[layer]
    op = layer[4:]
    below = ", ".join(OP_USES[op]) or "no other op"
    return f"an op uses core/, spec/, its own folder and the <op>.h of {below}"


class Graph:
    def __init__(self, source, build):
        self.source = os.path.realpath(source)
        self.build = os.path.realpath(build)
        self.files = {}      # path -> {"layer", "object"}
        self.defines = {}    # symbol -> set of paths
        self.uses = {}       # path -> set of symbols
        self.includes = {}   # path -> set of header paths
        self.public = set()  # exported API

    def rel(self, path):
        path = os.path.realpath(path)
        if path.startswith(self.build + os.sep):
            name = os.path.basename(path)
            if os.sep + "bench" + os.sep in path[len(self.build):]:
                return "@bench-shaders/" + name
            return "@shaders/" + name
        if path.startswith(self.source + os.sep):
            return os.path.relpath(path, self.source)
        return None

    def load(self):
        include = os.path.join(self.source, "include")
        headers = [os.path.join(include, "vkattn.h")] + sorted(
            os.path.join(include, "vkattn", h) for h in os.listdir(os.path.join(include, "vkattn")))
        for h in headers:
            with open(h) as f:
                self.public |= set(PUBLIC_RE.findall(f.read()))
        db_path = os.path.join(self.build, "compile_commands.json")
        if not os.path.exists(db_path):
            sys.exit(f"check_layers: {db_path} is missing (configure with "
                     "CMAKE_EXPORT_COMPILE_COMMANDS=ON)")
        with open(db_path) as f:
            db = json.load(f)
        for entry in db:
            src = os.path.join(entry["directory"], entry["file"])
            rel = self.rel(src)
            if rel is None or layer_of(rel) is None:
                continue
            obj = entry.get("output") or self.object_from_command(entry)
            obj = os.path.join(entry["directory"], obj)
            self.files.setdefault(rel, {"object": None, "dirs": []})
            if os.path.exists(obj):
                self.files[rel]["object"] = obj
            self.files[rel]["dirs"] = self.include_dirs(entry)
        self.read_symbols({info["object"]: rel for rel, info in self.files.items() if info["object"]})
        for rel in list(self.files):
            self.read_includes(rel)

    @staticmethod
    def object_from_command(entry):
        cmd = entry.get("command", "")
        m = re.search(r"\s-o\s+(\S+)", cmd)
        return m.group(1) if m else ""

    def include_dirs(self, entry):
        cmd = entry.get("command") or " ".join(entry.get("arguments", []))
        dirs = re.findall(r"(?:^|\s)-(?:I|isystem\s*)(\S+)", cmd)
        return [os.path.join(entry["directory"], d) for d in dirs]

    def read_symbols(self, objects):
        """Defined and used symbols of every object (one nm run for all)."""
        for rel in objects.values():
            self.uses[rel] = set()
        if not objects:
            return
        out = subprocess.run(["nm", "-P", "-A"] + sorted(objects), capture_output=True, text=True,
                             check=True).stdout
        for line in out.splitlines():
            head, _, rest = line.partition(": ")
            fields = rest.split()
            rel = objects.get(head)
            if rel is None or len(fields) < 2:
                continue
            name, kind = fields[0], fields[1]
            if name.startswith("__"):
                continue  # the compiler's own (sanitizer and coverage instrumentation)
            if kind == "U":
                self.uses[rel].add(name)
            elif kind in "TDBRCVWG" and kind.isupper():
                self.defines.setdefault(name, set()).add(rel)

    def resolve_include(self, rel, name, dirs):
        here = os.path.dirname(os.path.join(self.source, rel)) if not rel.startswith("@") else None
        candidates = ([here] if here else []) + dirs + [os.path.join(self.source, "include")]
        for d in candidates:
            p = os.path.join(d, name)
            if os.path.exists(p):
                return self.rel(p)
        return None

    def read_includes(self, rel, dirs=None):
        if rel in self.includes:
            return
        if dirs is None:
            dirs = self.files.get(rel, {}).get("dirs", [])
        self.includes[rel] = set()
        path = (os.path.join(self.source, rel) if not rel.startswith("@")
                else None)
        if path is None:
            return
        with open(path, errors="replace") as f:
            text = f.read()
        for name in INCLUDE_RE.findall(text):
            target = self.resolve_include(rel, name, dirs)
            if target is None or layer_of(target) is None:
                continue
            self.includes[rel].add(target)
            self.files.setdefault(target, {"object": None, "dirs": dirs})
            self.read_includes(target, dirs)

    def declared_in(self, symbol):
        """Headers that declare `symbol` (a prototype or extern)."""
        if not hasattr(self, "_headers"):
            self._headers = {}
            for rel in self.files:
                if rel.endswith(".h") and not rel.startswith("@"):
                    with open(os.path.join(self.source, rel), errors="replace") as f:
                        self._headers[rel] = set(re.findall(r"\w+", f.read()))
        return {rel for rel, words in self._headers.items() if symbol in words}

    def edges(self):
        """(from, to, how) for every use of one file by another."""
        result = []
        for rel, used in self.uses.items():
            for sym in sorted(used):
                owners = self.defines.get(sym, set()) - {rel}
                # a test's definition of a non-test symbol is a stand-in
                # (tests/fuzz/fuzz_cli_stubs.c for tools/cli/cli_device.c), not
                # a dependency of the code it replaces for
                if layer_of(rel) != "tests":
                    owners = {o for o in owners if layer_of(o) != "tests"}
                # symbols defined once in the tree; tests' main() and the
                # like are defined many times and are nobody's dependency
                if len(owners) == 1:
                    result.append((rel, next(iter(owners)), sym))
        for rel, headers in self.includes.items():
            for h in sorted(headers):
                if h != rel:
                    result.append((rel, h, "#include"))
        return result


def op_header_ok(target):
    """Another op may use only an op's <op>.h."""
    parts = target.split("/")
    return len(parts) == 4 and parts[3] == parts[2] + ".h"


def check_rules(graph, edges):
    problems = []
    for src, dst, how in edges:
        ls, ld = layer_of(src), layer_of(dst)
        allowed = allowed_layers(ls)
        if allowed is None or ls == ld:
            continue
        what = f"#include \"{dst}\"" if how == "#include" else f"{how} ({dst})"
        if ld not in allowed and not (ld in LIBRARY_LAYERS and how in graph.public and
                                      ls in ("tools", "bench", "examples")):
            if ls in ("tools", "bench", "examples") and ld in LIBRARY_LAYERS:
                problems.append(f"{src} uses {what}: not public API; {rule_text(ls)}")
            else:
                problems.append(f"{src} uses {what}: {rule_text(ls)}")
            continue
        if ls in ("tools", "bench", "examples") and ld in LIBRARY_LAYERS and how not in graph.public:
            problems.append(f"{src} uses {what}: not public API; {rule_text(ls)}")
            continue
        if ls.startswith("ops/") and ld.startswith("ops/"):
            if how == "#include" and not op_header_ok(dst):
                problems.append(f"{src} uses {what}: {rule_text(ls)} (not its internal headers)")
            elif how != "#include":
                decls = {h for h in graph.declared_in(how) if layer_of(h) == ld}
                if decls and not any(op_header_ok(h) for h in decls):
                    problems.append(f"{src} uses {what}, declared in {', '.join(sorted(decls))}: "
                                    f"{rule_text(ls)} (not its internal headers)")
    return problems


def check_prefixes(graph):
    """The library's global symbols: the exported API is vkattn_* and
    declared in include/vkattn.h; everything else is vka_*."""
    problems = []
    for sym, owners in sorted(graph.defines.items()):
        for rel in sorted(owners):
            if layer_of(rel) not in LIBRARY_LAYERS and layer_of(rel) != "shaders":
                continue
            if sym.startswith("vka_") or sym in graph.public:
                continue
            why = ("starts with vkattn_ but the public header does not declare it"
                   if sym.startswith("vkattn_") else "internal symbols start with vka_")
            problems.append(f"{rel} defines global symbol {sym}: {why}")
    return problems


def find_cycles(edges):
    """Strongly connected components of more than one file (Tarjan)."""
    succ = {}
    how = {}
    for a, b, h in edges:
        succ.setdefault(a, set()).add(b)
        succ.setdefault(b, set())
        how.setdefault((a, b), h)
    index, low, on, stack, comps, counter = {}, {}, set(), [], [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(succ[v]):
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

    for v in sorted(succ):
        if v not in index:
            visit(v)
    problems = []
    for comp in comps:
        members = set(comp)
        # one cycle through the component, for the message
        start = comp[0]
        path, seen, node = [start], {start}, start
        while True:
            nxt = sorted(w for w in succ[node] if w in members)
            step = next((w for w in nxt if w == start), None) or next((w for w in nxt if w not in seen), nxt[0])
            path.append(step)
            if step in seen:
                break
            seen.add(step)
            node = step
        cut = path.index(path[-1])
        cyc = path[cut:]
        text = " -> ".join(f"{a} [{how[(a, b)]}]" for a, b in zip(cyc, cyc[1:])) + f" -> {cyc[-1]}"
        problems.append(f"dependency cycle ({len(comp)} files): {text}")
    return problems


# (file, symbol or header, injected as) -> the pair the report must name.
SELF_TEST_EDGES = [
    ("src/core/context.c", "vka_linear_record", "use", "src/ops/linear/linear_record.c"),
    ("src/spec/attention_shapes.c", "src/core/context.h", "include", "src/core/context.h"),
    ("src/ops/kvcache/kv_attention_api.c", "src/ops/linear/linear_internal.h", "include",
     "src/ops/linear/linear_internal.h"),
    ("src/ops/attention/attention_api.c", "vka_kv_step_check", "use", "src/ops/kvcache/kvcache_step.c"),
    ("src/ref/ref_attention.c", "vka_fail", "use", "src/core/host.c"),
    ("tools/cli/cli_attention.c", "vka_tensor_resolve", "use", "src/core/tensor.c"),
    ("bench/bench_cases.c", "vka_alloc", "use", "src/core/host.c"),
    ("src/core/host.c", "vkattn_context_destroy", "use", "src/core/context.c"),
]


def self_test(args):
    base = Graph(args.source, args.build)
    base.load()
    clean = check_rules(base, base.edges()) + find_cycles(base.edges())
    failures = [f"the real graph is not clean: {p}" for p in clean]
    for src, what, kind, target in SELF_TEST_EDGES:
        g = Graph(args.source, args.build)
        g.files, g.defines, g.public = base.files, base.defines, base.public
        g.uses = {k: set(v) for k, v in base.uses.items()}
        g.includes = {k: set(v) for k, v in base.includes.items()}
        (g.uses if kind == "use" else g.includes).setdefault(src, set()).add(what)
        problems = check_rules(g, g.edges()) + find_cycles(g.edges())
        hit = [p for p in problems if src in p and target in p]
        print(f"check_layers self-test: {src} {kind}s {what}: "
              f"{'reported: ' + hit[0] if hit else 'NOT REPORTED'}")
        if not hit:
            failures.append(f"injected edge {src} -> {target} ({what}) was not reported")
    for f in failures:
        print("check_layers self-test:", f)
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", required=True)
    ap.add_argument("--source", default=os.path.join(os.path.dirname(__file__), ".."))
    ap.add_argument("--add-use", nargs=2, action="append", default=[], metavar=("FILE", "SYMBOL"))
    ap.add_argument("--add-include", nargs=2, action="append", default=[], metavar=("FILE", "HEADER"))
    ap.add_argument("--list", action="store_true", help="print every edge between files")
    ap.add_argument("--self-test", action="store_true", help="inject forbidden edges; all must fail")
    args = ap.parse_args()
    if args.self_test:
        return self_test(args)

    g = Graph(args.source, args.build)
    g.load()
    for f, sym in args.add_use:
        g.uses.setdefault(f, set()).add(sym)
    for f, h in args.add_include:
        g.includes.setdefault(f, set()).add(h)
    edges = g.edges()
    if args.list:
        for a, b, h in edges:
            print(f"{a} -> {b} [{h}]")
    lib_files = sum(1 for f in g.files if layer_of(f) in LIBRARY_LAYERS)
    problems = check_rules(g, edges) + check_prefixes(g) + find_cycles(edges)
    for p in problems:
        print("layering:", p)
    print(f"check_layers: {len(g.files)} files ({lib_files} in the library), {len(edges)} edges, "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
