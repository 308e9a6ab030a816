#!/usr/bin/env python3
"""Check a module written by `capcheck emit-lean` against TorchLean's signature data.

No Lean toolchain runs here, so this is the check that the text names only what TorchLean has at
the targeted commit (providers/torchlean/<commit>.tsv): the module header and imports, every
namespace, every constructor with its arguments (by type), every structure field (known, none
twice, none without a default missing), every definition used and its argument types. On top it
checks what TorchLean's planner would check (KernelCapsule.contractsAligned: each contract's claim
matches its field, op and vjpMode) and what capcheck promises: trustLevel .checked; value and VJP
evidence naming the report in the header; runtimeGuard names that TorchLean has for that
provider, device, op and field; unique names; capsuleModule holding every capsule once; and, with
--results, each capsule's vjpMode equal to the mode the results state for its op (or .none when
no VJP check passed).

  check_lean_module.py TSV MODULE.lean [--results results.jsonl] [--self-test]
  check_lean_module.py --goldens tests/golden providers/torchlean     (what CTest runs)

--self-test plants one fault at a time into the module (an unknown constructor, field, namespace,
import, op, arity, a stray "-/" in a comment, a capsule left out of the module, another report
hash, a VJP mode other than the one that ran) and fails unless each is rejected. --goldens checks
every golden module DIR/<run>.<commit7>.lean against TSVDIR/<commit>.tsv and DIR/<run>/results.jsonl,
self-tests each that holds a capsule, and requires a golden of every run for every TorchLean
commit targeted. Exit 0 when all is well, 1 with one line per problem.
"""
import glob
import os
import json
import re
import sys


class Sig:
    """The TorchLean vocabulary of one commit."""

    def __init__(self, path):
        self.inductive, self.alias, self.structure, self.defs = {}, {}, {}, {}
        self.modules, self.namespaces, self.headers, self.guards = set(), set(), [], set()
        self.commit = None
        for line in open(path, encoding="utf-8"):
            line = line.rstrip("\n")
            if not line or line.startswith("#"):
                continue
            kind, name, _source, value = line.split("\t", 3)
            if kind == "commit":
                self.commit = value
            elif kind == "header":
                self.headers.append(value)
            elif kind == "module":
                self.modules.add(name)
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
            elif kind == "runtimeGuard":
                self.guards.add((tuple(name.split()), value))

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


# ---- Lean text -------------------------------------------------------------------------------

TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|#\[|:=|×|[A-Za-z_][A-Za-z0-9_?!.]*|\.[A-Za-z_][A-Za-z0-9_]*'
                   r"|[(){}\[\],:@]|\S")


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
            m = re.compile(r'"(?:[^"\\\n]|\\.)*"').match(text, i)
            if not m:
                problems.append("a string literal never closes")
                return "".join(out), comments
            out.append(m.group(0))
            i = m.end()
        else:
            out.append(text[i])
            i += 1
    return "".join(out), comments


STRING_ESCAPE = re.compile(r'\\(?:["\\nt]|x[0-9a-fA-F]{2})')


class Checker:
    def __init__(self, sig, text, results):
        self.sig, self.problems, self.results = sig, [], results
        self.local = {}  # our definitions: name -> type
        self.opened = []
        self.capsules = []  # (def name, fields)
        code, self.comments = strip_comments(text, self.problems)
        self.header_text = text
        self.toks = TOKEN.findall(code)
        self.pos = 0

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
            return self.ctor(full)
        if full in self.sig.structure:
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
        body = s[1:-1]
        if re.search(r"\\(?![\"\\nt]|x[0-9a-fA-F]{2})", body):
            self.bad(f"string literal with an escape Lean does not read: {s[:60]}")
        return re.sub(r"\\x([0-9a-fA-F]{2})", lambda m: chr(int(m.group(1), 16)),
                      body.replace('\\"', '"').replace("\\\\", "\\").replace("\\n", "\n").replace("\\t", "\t"))

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
        for atype in parts[:-1]:
            self.expr(atype)
        if parts[-1] != want:
            self.bad(f"{f} gives a {parts[-1]}, not a {want}")
        return f

    # declarations
    def run(self):
        self.check_header()
        try:
            self.module()
        except SyntaxError as e:
            self.bad(f"cannot read the module: {e}")
        self.check_capsules()
        return self.problems

    def check_header(self):
        lines = [l for l in strip_comments(self.header_text, [])[0].splitlines() if l.strip()]
        want = self.sig.headers
        if lines[:1] != [want[0]]:
            self.bad(f"the module does not start with {want[0]!r}")
        imports = [l for l in lines if l.startswith("public import") or l.startswith("import")]
        for l in imports:
            if not l.startswith("public import ") or l.split()[-1] not in self.sig.modules:
                self.bad(f"import of a module TorchLean {self.sig.commit[:7]} does not have: {l}")
        if want[1] not in imports:
            self.bad(f"no {want[1]!r}")
        if want[2] not in lines:
            self.bad(f"no {want[2]!r}")
        m = re.search(r"TorchLean: .* at commit ([0-9a-f]{40})", self.header_text)
        if not m or m.group(1) != self.sig.commit:
            self.bad(f"the header names no TorchLean commit {self.sig.commit}")
        m = re.search(r"Report:\s+sha256:([0-9a-f]{64})", self.header_text)
        self.report = m.group(1) if m else None
        if not m:
            self.bad("the header names no report sha256")

    def module(self):
        self.take("module")
        while self.peek() == "public" and self.peek(1) == "import":
            self.take(), self.take(), self.take()
        for t in ("@", "[", "expose", "]", "public", "section"):
            self.take(t)
        self.take("namespace")
        ns = self.take()
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
                if kind == "testSuite" and args[0] != f"capcheck report sha256:{self.report}":
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
        listed = (members or {}).get("capsules", None)
        idents = [i for i, _ in self.capsules]
        if members is None:
            self.bad("no capsuleModule")
        elif not self.capsules_listed(idents):
            self.bad("capsuleModule does not hold every capsule exactly once")

    def capsules_listed(self, idents):
        m = re.search(r"def capsuleModule[^#]*#\[([^\]]*)\]", self.header_text)
        listed = [x.strip() for x in m.group(1).split(",") if x.strip()] if m else []
        return sorted(listed) == sorted(idents) and len(set(listed)) == len(listed)


def check(sig, text, results):
    return Checker(sig, text, results).run()


PLANTED = [
    ("an unknown constructor", r"trustLevel := \.checked", "trustLevel := .verified"),
    ("an unknown field", r"numericalPolicy :=", "numericPolicy :="),
    ("an unknown namespace", r"open NN\.Backend\n", "open NN.Backends\n"),
    ("an unknown import", r"public import NN\.Backend\.Profile", "public import NN.Backend.Profiles"),
    ("an unknown op", r"\.shapeSafety \.(\w+)", ".shapeSafety .\\1x"),
    ("a missing argument", r"\.layoutCompatibility \.(\w+) \.\w+", ".layoutCompatibility .\\1"),
    ("a stray -/ in a comment", r"/-- ", "/-- a -/ b "),
    ("a capsule outside capsuleModule", r"capsules := #\[cap_\w+,?\s*", "capsules := #["),
    ("another report's hash", r'"capcheck report sha256:[0-9a-f]', '"capcheck report sha256:g'),
    ("a field given twice", r"(  supportsForward := true\n)", "\\1\\1"),
]


def self_test(sig, text, results):
    if check(sig, text, results):
        return ["the unplanted module does not pass: " + "; ".join(check(sig, text, results))]
    failures = []
    for what, pattern, repl in PLANTED:
        planted, n = re.subn(pattern, repl, text, count=1)
        if n == 0:
            failures.append(f"could not plant {what}")
        elif not check(sig, planted, results):
            failures.append(f"{what} was not rejected")
    # a VJP mode other than the one that ran, consistently in vjpMode and the claim
    m = re.search(r"vjpMode := \.(torchLeanTape|backendVJP)\n(?:.*\n)*?.*\.vjpRefinement \.\w+ \.\1", text)
    if m:
        other = "backendVJP" if m.group(1) == "torchLeanTape" else "torchLeanTape"
        planted = text[:m.start()] + m.group(0).replace(m.group(1), other) + text[m.end():]
        if not any("results state" in p for p in check(sig, planted, results)):
            failures.append("a VJP mode other than the one that ran was not rejected")
    else:
        failures.append("no capsule with a VJP to plant a mode into")
    return failures


def goldens(gdir, tdir):
    problems, runs, commits = [], set(), {}
    for tsv in sorted(glob.glob(os.path.join(tdir, "*.tsv"))):
        commits[os.path.basename(tsv)[:7]] = tsv
    checked = 0
    for path in sorted(glob.glob(os.path.join(gdir, "*.lean"))):
        m = re.fullmatch(r"(.+)\.([0-9a-f]{7})\.lean", os.path.basename(path))
        if not m or m.group(2) not in commits:
            problems.append(f"{path}: not <run>.<commit7>.lean of a TorchLean commit in {tdir}")
            continue
        runs.add(m.group(1))
        sig = Sig(commits[m.group(2)])
        res = os.path.join(gdir, m.group(1), "results.jsonl")
        results = [json.loads(l) for l in open(res, encoding="utf-8") if l.strip()]
        text = open(path, encoding="utf-8").read()
        found = check(sig, text, results)
        if not found and ": KernelCapsule where" in text:
            found = self_test(sig, text, results)
        problems += [f"{path}: {p}" for p in found]
        checked += 1
    for run in sorted(runs):
        for c7 in commits:
            if not os.path.exists(os.path.join(gdir, f"{run}.{c7}.lean")):
                problems.append(f"{gdir}: no golden {run}.{c7}.lean for TorchLean {c7}")
    for p in problems:
        print(p)
    if not problems:
        print(f"{checked} golden modules check against {len(commits)} TorchLean commit(s); every "
              "planted fault rejected")
    return 1 if problems or not checked else 0


def main(argv):
    if argv[:1] == ["--goldens"] and len(argv) == 3:
        return goldens(argv[1], argv[2])
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
    problems = self_test(sig, text, results) if selftest else check(sig, text, results)
    for p in problems:
        print(f"{args[1]}: {p}")
    if not problems:
        n = len(re.findall(r": KernelCapsule where", text))
        print(f"{args[1]}: {'self-test: every planted fault rejected' if selftest else 'ok'} "
              f"({n} KernelCapsules, TorchLean {sig.commit[:7]})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
