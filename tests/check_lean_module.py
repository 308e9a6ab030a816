#!/usr/bin/env python3
"""Check a module written by `capcheck emit-lean` against TorchLean's signature data and lint.

No Lean toolchain runs here, so this is the check that the text names only what TorchLean has at
the targeted commit (providers/torchlean/<commit>.tsv): the module header and imports, every
namespace, every constructor with its arguments (by type), every structure field (known, none
twice, none without a default missing), every definition used and its argument types; that every
name the code or a doc comment's `quoted code` uses is defined in a module the file imports (the
closure of its public imports); that the module's name, its file and its namespace agree; and
that every line passes TorchLean's own lint (tests/lean_lint.py). On top it checks what
TorchLean's planner would check (KernelCapsule.contractsAligned: each contract's claim matches
its field, op and vjpMode) and what capcheck promises: trustLevel .checked; value and VJP
evidence naming the report in the header (a signed run's: the signer and the manifest the header
names); runtimeGuard names TorchLean has for that provider, device, op and field; unique names;
capsuleModule holding every capsule once; profiles named "<TorchLean's name>+capcheck"; and,
with --results, each capsule's vjpMode equal to the mode the results state for its op (or .none
when no VJP check passed).

  check_lean_module.py TSV MODULE.lean [--results results.jsonl] [--self-test]
  check_lean_module.py --package DIR TSVDIR        (a folder emit-lean --package wrote)
  check_lean_module.py --goldens tests/golden providers/torchlean     (what CTest runs)

--self-test plants one fault at a time into the module and fails unless each is rejected for its
own reason (PLANTED below: an unknown constructor, field, namespace, import or op, a missing
argument, a stray "-/" in a comment, a capsule left out of the module, another report's hash (a
signed run's module: another signer), a field given twice, a line over the width, a missing
import, a constructor absent at that commit, a wrong module path, a trailing space, a quoted
path, DocGen math, an em-dash, a VJP mode other than the one that ran). --goldens checks every
golden module DIR/<run>.<commit7>.lean against TSVDIR/<commit>.tsv and DIR/<run>/results.jsonl,
self-tests each, and requires a golden of every run for every TorchLean commit. Exit 0 when all
is well, 1 with one line per problem.
"""
import glob
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lean_lint  # noqa: E402


class Sig:
    """The TorchLean vocabulary of one commit."""

    def __init__(self, path):
        self.inductive, self.alias, self.structure, self.defs = {}, {}, {}, {}
        self.source = {}  # full name -> the file it is defined in
        self.modules = {}  # module -> (file, public imports)
        self.namespaces, self.headers, self.guards = set(), [], set()
        self.profiles, self.commit, self.repository = {}, None, None
        for line in open(path, encoding="utf-8"):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, name, source, value = line.split("\t", 3)
            if kind in ("inductive", "alias", "structure", "def", "profile", "availability"):
                self.source[name] = source
            if kind == "commit":
                self.commit = value
            elif kind == "repository":
                self.repository = value
            elif kind == "header":
                self.headers.append(value)
            elif kind == "module":
                imports = value.split("=", 1)[1]
                self.modules[name] = (source, [] if imports == "none" else imports.split(","))
            elif kind == "namespace":
                self.namespaces.add(name)
            elif kind == "inductive":
                ctors = {}
                for item in value.split():
                    m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_?]*)(?:\((.*)\))?", item)
                    ctors[m.group(1)] = m.group(2).split(",") if m.group(2) else []
                self.inductive[name] = ctors
            elif kind == "alias":
                self.alias[name] = value
            elif kind == "structure":
                fields = {}
                for item in value.split():
                    fname, ftype = item.split(":", 1)
                    fields[fname] = (ftype.rstrip("="), ftype.endswith("="))
                self.structure[name] = fields
            elif kind == "def":
                self.defs[name] = value
            elif kind in ("profile", "availability"):
                self.defs[name] = "BackendProfile" if kind == "profile" else "Availability"
                if kind == "profile":
                    self.profiles[name] = dict(i.split("=", 1) for i in value.split())
            elif kind == "runtimeGuard":
                self.guards.add((tuple(name.split()), value))
        self.module_of_file = {f: m for m, (f, _i) in self.modules.items()}

    def full(self, short, kinds):
        """The full name of a type or definition written `short` (under NN.Backend)."""
        for prefix in ("", "NN.Backend."):
            name = prefix + short
            for k in kinds:
                if name in getattr(self, k):
                    return name
        return None

    def guard_ok(self, provider, device, op, field, text):
        exact = [g for (key, g) in self.guards if key == (provider, device, op, field)]
        if exact:
            return text in exact
        return any(key == (provider, device, "*", field) and g == text for (key, g) in self.guards)

    def closure(self, imported):
        """Every module the given ones import, transitively (themselves included)."""
        seen, todo = set(), list(imported)
        while todo:
            m = todo.pop()
            if m not in seen:
                seen.add(m)
                todo += self.modules.get(m, ("", []))[1]
        return seen


# ---- Lean text -------------------------------------------------------------------------------

TOKEN = re.compile(r'"(?:[^"\\]|\\[\s\S])*"|#\[|:=|×|[A-Za-z_][A-Za-z0-9_?!.]*'
                   r"|\.[A-Za-z_][A-Za-z0-9_]*|[(){}\[\],:@]|\S")
ESCAPE = re.compile(r'\\(?:(["\\nt])|x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|\n[ \t\n]*)')


def decode(body):
    """A string literal's body as Lean reads it (escapes, string gaps), or None when Lean would
    not read it the same way (an escape it does not know, a raw line break)."""
    out, i = [], 0
    while i < len(body):
        if body[i] == "\\":
            m = ESCAPE.match(body, i)
            if not m:
                return None
            if m.group(1):
                out.append({"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)))
            elif m.group(2) or m.group(3):
                out.append(chr(int(m.group(2) or m.group(3), 16)))
            i = m.end()
        elif body[i] == "\n":
            return None
        else:
            out.append(body[i])
            i += 1
    return "".join(out)


def strip_comments(text, problems):
    """The text without comments (Lean's block comments nest); the comments' texts."""
    out, comments, i, n = [], [], 0, len(text)
    while i < n:
        if text.startswith("/-", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/-", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("-/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            if depth:
                problems.append("a comment never closes")
            comments.append(text[i:j])
            out.append(" ")
            i = j
        elif text.startswith("--", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text[i] == '"':
            m = re.compile(r'"(?:[^"\\\n]|\\[\s\S])*"').match(text, i)
            if not m:
                problems.append("a string literal never closes")
                return "".join(out), comments
            out.append(m.group(0))
            i = m.end()
        else:
            out.append(text[i])
            i += 1
    return "".join(out), comments


class Checker:
    def __init__(self, sig, text, results, path=None):
        self.sig, self.problems, self.results, self.path = sig, [], results, path
        self.local = {}  # our definitions: name -> type
        self.opened, self.used = [], set()  # used: the signature names the module uses
        self.capsules = []  # (def name, fields)
        self.strings = []
        code, self.comments = strip_comments(text, self.problems)
        self.text = text
        self.toks = TOKEN.findall(code)
        self.pos = 0
        self.namespace = None

    def bad(self, msg):
        self.problems.append(msg)

    # tokens
    def peek(self, k=0):
        return self.toks[self.pos + k] if self.pos + k < len(self.toks) else None

    def take(self, want=None):
        t = self.peek()
        if t is None or (want is not None and t != want):
            raise SyntaxError(f"expected {want!r}, found {t!r} (token {self.pos})")
        self.pos += 1
        return t

    # names
    def resolve(self, name, kinds):
        full = self.sig.full(name, kinds)
        if full is None:
            for ns in self.opened:
                full = self.sig.full(ns + "." + name, kinds)
                if full:
                    break
        if full:
            self.used.add(full)
        return full

    def norm_type(self, t):
        """A type as the signature data writes it: short names, Array(T)."""
        t = t.strip()
        m = re.fullmatch(r"Array\s*\(?\s*(.+?)\s*\)?", t)
        if t.startswith("Array"):
            return "Array(" + self.norm_type(m.group(1)) + ")"
        if t.startswith("List"):
            return re.sub(r"\s+", "", t)
        full = self.resolve(t, ("structure", "inductive"))
        if full is None and t not in ("String", "Bool"):
            self.bad(f"unknown type {t}")
        return t if full is None else full.replace("NN.Backend.", "")

    # expressions, checked against their expected type
    def expr(self, want):
        t = self.peek()
        if want.startswith("Array("):
            self.take("#[")
            inner = want[6:-1]
            while self.peek() != "]":
                self.expr(inner)
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return None
        if want.startswith("List"):
            self.take("[")
            while self.peek() != "]":
                self.take("(")
                self.string()
                self.take(",")
                self.string()
                self.take(")")
                if self.peek() == ",":
                    self.take(",")
            self.take("]")
            return None
        if want == "String":
            return self.string()
        if want == "Bool":
            v = self.take()
            if v not in ("true", "false"):
                self.bad(f"{v} is not a Bool")
            return v
        full = "NN.Backend." + want if "NN.Backend." + want in self.sig.inductive or \
            "NN.Backend." + want in self.sig.structure else want
        if full in self.sig.inductive:
            self.used.add(full)
            return self.ctor(full)
        if full in self.sig.structure:
            self.used.add(full)
            if t == "{":
                return self.structure(full)
            return self.application(want)
        self.bad(f"unknown type {want}")
        self.take()
        return None

    def string(self):
        s = self.take()
        if not (s.startswith('"') and s.endswith('"')):
            self.bad(f"{s} is not a string literal")
            return s
        value = decode(s[1:-1])
        if value is None:
            self.bad(f"string literal Lean does not read as written: {s[:60]}")
            return s
        self.strings.append(value)
        return value

    def ctor(self, full):
        t = self.take()
        if not t.startswith("."):
            self.bad(f"expected a constructor of {full}, found {t}")
            return None
        name = t[1:]
        ctors = self.sig.inductive[full]
        if name not in ctors:
            alias = self.sig.alias.get(full + "." + name)
            if alias is None:
                self.bad(f".{name} is not a constructor of {full} at TorchLean {self.sig.commit[:7]}")
                return (name, [])
            name = alias
        args = []
        for atype in ctors.get(name, []):
            nxt = self.peek()
            if nxt is None or not (nxt.startswith(".") or nxt.startswith('"')):
                self.bad(f".{name} of {full} takes {len(ctors[name])} arguments")
                break
            args.append(self.expr(atype))
        return (name, args)

    def structure(self, full, base=None):
        """{ [X with] field := value ... } as structure `full`."""
        self.take("{")
        fields = dict(base or {})
        given = set()
        if self.peek(1) == "with":
            src = self.take()
            if self.local_or_sig_type(src) != full.replace("NN.Backend.", ""):
                self.bad(f"{src} is not a {full}")
            fields["__with__"] = src
            self.take("with")
            given = set(self.sig.structure[full])
        self.fields(full, fields, given, "}")
        self.take("}")
        return fields

    def fields(self, full, out, given, end):
        spec = self.sig.structure[full]
        while self.peek() not in (end, None) and self.peek(1) == ":=":
            fname = self.take()
            self.take(":=")
            if fname not in spec:
                self.bad(f"{fname} is not a field of {full}")
                self.skip_value(end)
                continue
            if fname in out:
                self.bad(f"field {fname} of {full} given twice")
            out[fname] = self.expr(spec[fname][0])
            given.add(fname)
            if self.peek() == ",":
                self.take(",")
        for fname, (_t, has_default) in spec.items():
            if fname not in given and not has_default:
                self.bad(f"{full} without its field {fname}")
        return out

    def skip_value(self, end):
        depth = 0
        while self.peek() is not None:
            t = self.peek()
            if depth == 0 and (t == end or self.peek(1) == ":="):
                return
            depth += t in ("{", "[", "#[", "(")
            depth -= t in ("}", "]", ")")
            self.take()

    def local_or_sig_type(self, name):
        if name in self.local:
            return self.local[name]
        full = self.resolve(name, ("defs",))
        if full is None:
            self.bad(f"unknown name {name}")
            return None
        return self.sig.defs[full].split("->")[-1].strip()

    def application(self, want):
        f = self.take()
        if f in self.local:
            if self.local[f] != want:
                self.bad(f"{f} is a {self.local[f]}, not a {want}")
            return f
        full = self.resolve(f, ("defs",))
        if full is None:
            self.bad(f"unknown name {f}")
            return None
        parts = [p.strip() for p in self.sig.defs[full].split("->")]
        result = []
        for atype in parts[:-1]:
            result.append(self.expr(atype))
        if parts[-1] != want:
            self.bad(f"{f} gives a {parts[-1]}, not a {want}")
        return (f, result)

    # declarations
    def run(self):
        self.check_header()
        try:
            self.module()
        except SyntaxError as e:
            self.bad(f"cannot read the module: {e}")
        self.check_capsules()
        self.check_profiles()
        self.check_doc_names()
        self.check_imports()
        self.check_module_path()
        for p in lean_lint.lint(self.text, self.rel_path, self.known_paths()):
            self.bad(f"lint: line {p}")
        return self.problems

    def known_paths(self):
        return {f for f, _i in self.sig.modules.values()}

    def check_header(self):
        lines = [l for l in strip_comments(self.text, [])[0].splitlines() if l.strip()]
        want = self.sig.headers
        if lines[:1] != [want[0]]:
            self.bad(f"the module does not start with {want[0]!r}")
        self.imports = [l for l in lines if l.startswith("public import") or l.startswith("import")]
        for l in self.imports:
            if not l.startswith("public import ") or l.split()[-1] not in self.sig.modules:
                self.bad(f"import of a module TorchLean {self.sig.commit[:7]} does not have: {l}")
        for w in want[1:]:
            if w.startswith("public import") and w not in self.imports:
                self.bad(f"no {w!r}")
        if want[-1] not in lines:
            self.bad(f"no {want[-1]!r}")
        m = re.search(r"TorchLean:\s+.*\s+at commit ([0-9a-f]{40})", self.text)
        if not m or m.group(1) != self.sig.commit:
            self.bad(f"the header names no TorchLean commit {self.sig.commit}")
        m = re.search(r"Report:\s+sha256:([0-9a-f]{64})", self.text)
        self.report = m.group(1) if m else None
        if not m:
            self.bad("the header names no report sha256")
        # a signed run's module names who vouched for it: the key and the manifest it signed
        m = re.search(r"Signed:\s+by\s+the\s+key\s+(SHA256:[A-Za-z0-9+/]{43});\s+its\s+manifest"
                      r"\s+sha256:([0-9a-f]{64})", self.text)
        self.suite = (f"capcheck run signed by {m.group(1)} manifest sha256:{m.group(2)}" if m else
                      f"capcheck report sha256:{self.report}")
        m = re.search(r"Module:\s+([A-Za-z0-9_.]+), the file\s+(\S+)", self.text)
        self.module_name, self.module_file = (m.group(1), m.group(2)) if m else (None, None)
        self.rel_path = self.module_file if self.module_name and \
            self.module_name.startswith("NN.") else None

    def module(self):
        self.take("module")
        while self.peek() == "public" and self.peek(1) == "import":
            self.take(), self.take(), self.take()
        for t in ("@", "[", "expose", "]", "public", "section"):
            self.take(t)
        self.take("namespace")
        ns = self.namespace = self.take()
        while self.peek() == "open":
            self.take()
            name = self.take()
            if name not in self.sig.namespaces:
                self.bad(f"namespace {name} is not TorchLean's")
            self.opened.append(name)
        while self.peek() == "def":
            self.definition()
        self.take("end")
        if self.take() != ns:
            self.bad("namespace and end differ")
        if self.peek() is not None:
            self.bad(f"text after the namespace ends: {self.peek()}")

    def definition(self):
        self.take("def")
        name = self.take()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            self.bad(f"{name} is not a plain Lean identifier")
        if name in self.local:
            self.bad(f"{name} is defined twice")
        self.take(":")
        tys = []
        while self.peek() not in (":=", "where"):
            tys.append(self.take())
        ty = self.norm_type(" ".join(tys))
        self.local[name] = ty
        full = "NN.Backend." + ty
        if self.take() == "where":
            fields = self.fields(full, {}, set(), "def")
        else:
            fields = self.expr(ty)
        if ty == "KernelCapsule":
            self.capsules.append((name, fields))
        if name == "capsuleModule":
            self.module_members = fields
        if ty == "BackendProfile":
            self.profile_defs = getattr(self, "profile_defs", []) + [(name, fields)]

    # what TorchLean's planner and capcheck's promises need
    def check_capsules(self):
        names = set()
        for ident, f in self.capsules:
            if not isinstance(f, dict) or "op" not in f:
                continue
            op, mode = f["op"][0], f.get("vjpMode", ("none", []))[0]
            if f["name"] in names:
                self.bad(f"capsule name {f['name']} twice")
            names.add(f["name"])
            if f.get("trustLevel", ("?",))[0] != "checked":
                self.bad(f"{ident}: trustLevel is not .checked")
            claims = {k: f[k]["claim"] for k in ("shapeContract", "layoutContract", "valueContract",
                                                   "vjpContract") if isinstance(f.get(k), dict)}
            want = {"shapeContract": "shapeSafety", "layoutContract": "layoutCompatibility",
                    "valueContract": "valueRefinement"}
            for k, c in want.items():
                if k in claims and (claims[k][0] != c or claims[k][1][0][0] != op):
                    self.bad(f"{ident}: {k} claims {claims[k][0]} of another op or kind")
            vjp = claims.get("vjpContract")
            if vjp and not ((mode != "none" and vjp[0] == "vjpRefinement" and vjp[1][0][0] == op and
                             vjp[1][1][0] == mode) or
                            (mode == "none" and vjp[0] == "vjpUnavailable" and vjp[1][0][0] == op)):
                self.bad(f"{ident}: vjpContract does not match vjpMode .{mode} (contractsAligned)")
            for k in ("shapeContract", "layoutContract", "valueContract", "vjpContract"):
                ev = f.get(k, {}).get("evidence") if isinstance(f.get(k), dict) else None
                if not ev:
                    continue
                kind, args = ev
                if kind == "testSuite" and args[0] != self.suite:
                    self.bad(f"{ident}: {k} names another suite: {args[0]}")
                if kind == "runtimeGuard":
                    field = {"shapeContract": "shape", "layoutContract": "layout"}.get(k)
                    if not field or not self.sig.guard_ok(f["provider"][0], f["device"][0], op, field,
                                                          args[0]):
                        self.bad(f"{ident}: {k} names a guard TorchLean does not have there")
                if kind == "trustedBoundary":
                    self.bad(f"{ident}: {k} rests on a trusted boundary")
            if self.results is not None:
                recs = [r for r in self.results if r["op"] == op]
                modes = {r.get("vjp_mode") for r in recs}
                checked = any(r.get("checked_vjp") and r["status"] == "pass" for r in recs)
                ran = modes.pop() if len(modes) == 1 else None
                if not recs:
                    self.bad(f"{ident}: no result of op {op}")
                elif ran is None:
                    self.bad(f"{ident}: the results state several VJP modes for {op}")
                elif mode != (ran if checked else "none"):
                    self.bad(f"{ident}: vjpMode .{mode}, but the results state {ran} for {op}")
        members = getattr(self, "module_members", None)
        idents = [i for i, _ in self.capsules]
        if members is None:
            self.bad("no capsuleModule")
        elif not self.capsules_listed(idents):
            self.bad("capsuleModule does not hold every capsule exactly once")

    def capsules_listed(self, idents):
        m = re.search(r"def capsuleModule[^#]*#\[([^\]]*)\]", self.text)
        listed = [x.strip() for x in m.group(1).split(",") if x.strip()] if m else []
        return sorted(listed) == sorted(idents) and len(set(listed)) == len(listed)

    def check_profiles(self):
        """Each profile extends the one TorchLean maintains for a device, named <its name>+capcheck,
        and holds capsuleModule."""
        maintained = {n.replace("NN.Backend.", ""): p for n, p in self.sig.profiles.items()}
        for name, f in getattr(self, "profile_defs", []):
            app = f if isinstance(f, tuple) else None
            base = app[1][0] if app and app[1] and isinstance(app[1][0], dict) else {}
            src = base.get("__with__")
            if src not in maintained:
                self.bad(f"{name} extends {src}, not a profile TorchLean maintains at "
                         f"{self.sig.commit[:7]} ({', '.join(sorted(maintained))})")
                continue
            want = maintained[src]["name"] + "+capcheck"
            if base.get("name") != want:
                self.bad(f"{name} is named {base.get('name')!r}, not {want!r}")
            if "capsuleModule" not in self.text[self.text.find(f"def {name} "):]:
                self.bad(f"{name} does not hold capsuleModule")

    def doc_names(self):
        """The identifiers in the quoted code of the doc comments (/-- and /-!)."""
        for c in self.comments:
            if not (c.startswith("/--") or c.startswith("/-!")):
                continue
            for span in re.findall(r"`([^`]*)`", c):
                span = re.sub(r'"(?:[^"\\]|\\.)*"', " ", span)
                yield from re.findall(r"\.?[A-Za-z_][A-Za-z0-9_?!]*(?:\.[A-Za-z_][A-Za-z0-9_?!]*)*",
                                      span)

    def check_doc_names(self):
        for name in self.doc_names():
            if name.startswith("."):
                owners = [t for t, cs in self.sig.inductive.items() if name[1:] in cs]
                if not owners:
                    self.bad(f"`{name}` in a doc comment is no constructor TorchLean "
                             f"{self.sig.commit[:7]} has")
                self.used.update(owners[:1])
                continue
            parts = name.split(".")
            if parts[0] in self.local:
                ty = self.local[parts[0]]
                for p in parts[1:]:
                    full = self.sig.full(f"{ty}.{p}", ("defs",))
                    if not full:
                        self.bad(f"`{name}` in a doc comment: {ty} has no {p} at TorchLean "
                                 f"{self.sig.commit[:7]}")
                        break
                    self.used.add(full)
                    ty = self.sig.defs[full].split("->")[-1].strip()
                continue
            full = self.resolve(name, ("inductive", "structure", "defs", "alias"))
            if not full and len(parts) > 1:  # Type.constructor
                owner = self.sig.full(".".join(parts[:-1]), ("inductive",))
                if owner and parts[-1] in self.sig.inductive[owner]:
                    full = owner
                    self.used.add(owner)
            if not full:
                self.bad(f"`{name}` in a doc comment names nothing TorchLean "
                         f"{self.sig.commit[:7]} has")

    def check_imports(self):
        """Every name used is defined in a module the file imports (or one those import)."""
        reach = self.sig.closure(l.split()[-1] for l in self.imports)
        for name in sorted(self.used):
            file = self.sig.source.get(name)
            module = self.sig.module_of_file.get(file)
            if module is None:
                self.bad(f"{name} comes from {file}, which is no module of the signature data")
            elif module not in reach:
                self.bad(f"{name} is defined in {module}, which the module does not import")

    def check_module_path(self):
        """The header's module name, its file, the namespace and (given) the file's own path
        agree: Capcheck.Evidence.Report_<sha16> (NN.Tests. before it in TorchLean's tree)."""
        if not self.module_name:
            self.bad("the header names no module (Module: NAME, the file PATH)")
            return
        ns = f"Capcheck.Evidence.Report_{(self.report or '')[:16]}"
        if self.namespace != ns:
            self.bad(f"the namespace is {self.namespace}, not {ns}")
        if self.module_name not in (ns, "NN.Tests." + ns):
            self.bad(f"the module is {self.module_name}, not {ns} (or NN.Tests.{ns})")
        if self.module_file != self.module_name.replace(".", "/") + ".lean":
            self.bad(f"module {self.module_name} is no file {self.module_file}")
        if self.path and not os.path.normpath(self.path).endswith(os.path.normpath(self.module_file)):
            self.bad(f"{self.path} is not where module {self.module_name} lies ({self.module_file})")


def check(sig, text, results, path=None):
    return Checker(sig, text, results, path).run()


def other_ctor(sig, all_sigs):
    """A BackendOp constructor of another TorchLean commit that this one lacks (a351909's
    scaledDotProductAttention when every other commit's are here too)."""
    here = set(sig.inductive["NN.Backend.BackendOp"])
    others = sorted(c for s in all_sigs for c in s.inductive["NN.Backend.BackendOp"] if c not in here)
    return others[0] if others else "scaledDotProductAttention"


def planted(sig, all_sigs, signed=False):
    """(what, pattern, replacement, a words of the reason it must be rejected for)."""
    c7 = sig.commit[:7]
    return [
        ("an unknown constructor", r"trustLevel := \.checked", "trustLevel := .verified",
         "not a constructor of NN.Backend.TrustLevel"),
        ("an unknown field", r"numericalPolicy :=", "numericPolicy :=", "not a field of"),
        ("an unknown namespace", r"open NN\.Backend\n", "open NN.Backends\n", "is not TorchLean's"),
        ("an unknown import", r"public import NN\.Backend\.Profile\n",
         "public import NN.Backend.Profiles\n", "does not have"),
        ("an unknown op", r"\.shapeSafety \.(\w+)", ".shapeSafety .\\1x",
         "not a constructor of NN.Backend.BackendOp"),
        ("a missing argument", r"\.layoutCompatibility \.(\w+) \.\w+", ".layoutCompatibility .\\1",
         "takes 2 arguments"),
        ("a stray -/ in a comment", r"/-- ", "/-- a -/ b ", ""),
        ("a capsule outside capsuleModule", r"capsules := #\[cap_\w+,?\s*", "capsules := #[",
         "does not hold every capsule"),
        ("another report's hash", r'"capcheck report sha256:[0-9a-f]',
         '"capcheck report sha256:g', "names another suite") if not signed else
        ("another signer", r'(\.testSuite "capcheck run signed by (?:\\\n\s*)?SHA256:)',
         "\\1Z", "names another suite"),
        ("a field given twice", r"(  supportsForward := true\n)", "\\1\\1", "given twice"),
        ("a line over the width", r"/-- The capsules this report upgrades",
         "/-- The capsules (this line is far too long for the hundred columns TorchLean's lint "
         "allows) this report upgrades", "line exceeds 100"),
        ("a missing import", r"public import NN\.Backend\.Report\n", "",
         "NN.Backend.Report, which the module does not import"),
        ("a constructor absent at that commit", r"  op := \.\w+",
         f"  op := .{other_ctor(sig, all_sigs)}", f"NN.Backend.BackendOp at TorchLean {c7}"),
        ("a wrong module path", r"Module:    Capcheck\.Evidence\.",
         "Module:    Capcheck.Evidences.", "module"),
        ("a trailing space", r"\nmodule\n", "\nmodule \n", "trailing whitespace"),
        ("a quoted path", r"`notEmitted`(\s+)lists", "`NN/Capcheck/Gone.lean`\\1lists",
         "dead local source reference"),
        ("DocGen math", r"/-- The upgraded capsules", "/-- The \\(upgraded\\) capsules",
         "doc comment"),
        ("an em-dash", r'name := "capcheck\.', 'name := "capcheck.\u2014', "em-dash"),
        ("a profile under TorchLean's own name", r'name := "(\w+)\+capcheck"', 'name := "\\1"',
         "+capcheck"),
    ]


def self_test(sig, text, results, all_sigs):
    found = check(sig, text, results)
    if found:
        return ["the unplanted module does not pass: " + "; ".join(found)]
    failures = []
    for what, pattern, repl, reason in planted(sig, all_sigs, "\nSigned:    by the key " in text):
        text2, n = re.subn(pattern, repl, text, count=1)
        found = check(sig, text2, results) if n else []
        if n == 0:
            failures.append(f"could not plant {what}")
        elif not any(reason in p for p in found):
            failures.append(f"{what} was not rejected for its reason ({reason!r}): {found}")
    # a VJP mode other than the one that ran, consistently in vjpMode and the claim
    m = re.search(r"vjpMode := \.(torchLeanTape|backendVJP)\n(?:.*\n)*?.*\.vjpRefinement \.\w+ \.\1", text)
    if m:
        other = "backendVJP" if m.group(1) == "torchLeanTape" else "torchLeanTape"
        text2 = text[:m.start()] + m.group(0).replace(m.group(1), other) + text[m.end():]
        if not any("results state" in p for p in check(sig, text2, results)):
            failures.append("a VJP mode other than the one that ran was not rejected")
    else:
        failures.append("no capsule with a VJP to plant a mode into")
    return failures


def load_sigs(tdir):
    return {os.path.basename(t)[:-4]: Sig(t) for t in sorted(glob.glob(os.path.join(tdir, "*.tsv")))}


def goldens(gdir, tdir):
    problems, runs, sigs = [], set(), load_sigs(tdir)
    by7 = {c[:7]: s for c, s in sigs.items()}
    checked = 0
    for path in sorted(glob.glob(os.path.join(gdir, "*.lean"))):
        m = re.fullmatch(r"(.+)\.([0-9a-f]{7})\.lean", os.path.basename(path))
        if not m or m.group(2) not in by7:
            problems.append(f"{path}: not <run>.<commit7>.lean of a TorchLean commit in {tdir}")
            continue
        runs.add(m.group(1))
        sig = by7[m.group(2)]
        res = os.path.join(gdir, m.group(1), "results.jsonl")
        results = [json.loads(l) for l in open(res, encoding="utf-8") if l.strip()]
        text = open(path, encoding="utf-8").read()
        found = check(sig, text, results) or self_test(sig, text, results, sigs.values())
        problems += [f"{path}: {p}" for p in found]
        checked += 1
    for run in sorted(runs):
        for c7 in by7:
            if not os.path.exists(os.path.join(gdir, f"{run}.{c7}.lean")):
                problems.append(f"{gdir}: no golden {run}.{c7}.lean for TorchLean {c7}")
    for p in problems:
        print(p)
    if not problems:
        print(f"{checked} golden modules check against {len(by7)} TorchLean commits and pass "
              "TorchLean's lint; every planted fault rejected for its reason")
    return 1 if problems or not checked else 0


def check_package(pkg, tdir):
    """The folder `emit-lean --package` wrote: its lakefile requires TorchLean at a commit capcheck
    has data for, its Capcheck library's one root is a module lying at the root's path, and that
    module checks against the commit's data; the README says `lake build` builds it."""
    problems, sigs = [], load_sigs(tdir)
    lake = open(os.path.join(pkg, "lakefile.lean"), encoding="utf-8").read()
    req = re.search(r'require\s+TorchLean\s+from\s+git\s+"([^"]+)"\s*@\s*"([0-9a-f]{40})"', lake)
    lib = re.search(r"lean_lib\s+Capcheck\s+where\s+roots\s*:=\s*#\[([^\]]*)\]", lake)
    roots = [r.strip().lstrip("`") for r in lib.group(1).split(",")] if lib else []
    if not req or req.group(2) not in sigs:
        return [f"{pkg}/lakefile.lean requires no TorchLean commit capcheck has data for"]
    sig = sigs[req.group(2)]
    if req.group(1) != sig.repository:
        problems.append(f"lakefile.lean requires {req.group(1)}, not {sig.repository}")
    if len(roots) != 1:
        return problems + [f"lakefile.lean: the Capcheck library has roots {roots}, not one module"]
    path = os.path.join(pkg, roots[0].replace(".", "/") + ".lean")
    if not os.path.exists(path):
        return problems + [f"no {path} for the root {roots[0]}"]
    text = open(path, encoding="utf-8").read()
    c = Checker(sig, text, None, os.path.relpath(path, pkg))
    problems += [f"{path}: {p}" for p in c.run()]
    if c.module_name != roots[0]:
        problems.append(f"the root is {roots[0]}, the module says it is {c.module_name}")
    problems += [f"lakefile.lean:{p}" for p in lean_lint.lint(lake)]
    readme = open(os.path.join(pkg, "README.md"), encoding="utf-8").read()
    for want in ("lake build", roots[0], sig.commit):
        if want not in readme:
            problems.append(f"README.md does not say {want!r}")
    return problems


def main(argv):
    if argv[:1] == ["--goldens"] and len(argv) == 3:
        return goldens(argv[1], argv[2])
    if argv[:1] == ["--package"] and len(argv) == 3:
        problems = check_package(argv[1], argv[2])
        for p in problems:
            print(p)
        if not problems:
            print(f"{argv[1]}: the lakefile, the module's path and its imports agree")
        return 1 if problems else 0
    args, results, selftest = [], None, False
    i = 0
    while i < len(argv):
        if argv[i] == "--results":
            results = [json.loads(l) for l in open(argv[i + 1], encoding="utf-8") if l.strip()]
            i += 2
        elif argv[i] == "--self-test":
            selftest, i = True, i + 1
        else:
            args.append(argv[i])
            i += 1
    if len(args) != 2:
        print(__doc__.strip().splitlines()[0] + "\nusage: check_lean_module.py TSV MODULE.lean "
              "[--results results.jsonl] [--self-test]", file=sys.stderr)
        return 2
    sig = Sig(args[0])
    text = open(args[1], encoding="utf-8").read()
    all_sigs = load_sigs(os.path.dirname(os.path.abspath(args[0]))).values()
    problems = self_test(sig, text, results, all_sigs) if selftest else check(sig, text, results)
    for p in problems:
        print(f"{args[1]}: {p}")
    if not problems:
        n = len(re.findall(r": KernelCapsule where", text))
        print(f"{args[1]}: {'self-test: every planted fault rejected' if selftest else 'ok'} "
              f"({n} KernelCapsules, TorchLean {sig.commit[:7]})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
