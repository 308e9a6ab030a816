#!/usr/bin/env python3
"""TorchLean's repository lint, as it applies to one Lean file capcheck writes.

TorchLean's `lake lint` runs its repo lint with warnings as failures
(scripts/checks/TorchLeanLint.lean calls scripts/checks/repo_lint.py --fail-on-warn). These are
its rules that can fire on one Lean file, restated from its sources at 3447b74 and 996dda0
(this checker applies both commits' rules: a module that passes here passes either lint):

  width       no line longer than 100 characters (Unicode code points, lines split at "\\n"),
              except a line whose text starts with ":::" (a Verso directive)
  em-dash     no U+2014 anywhere (3447b74: "em-dash in source")
  CR, tab     no carriage return in the file; no tab in a line
  trailing    no line ending in a space (lines as Python's str.splitlines() cuts them)
  quoted path no `NN/...`, `scripts/...`, `csrc/...`, `blueprint/...`, `home_page/...` path in
              backquotes (ending .lean, .md, .py, .json, .sh, .cu, .c, .h, .yml, .yaml) that does
              not exist in TorchLean's tree (here: that is not one of `known_paths`)
  doc math    in a doc comment (/-- or /-! up to the first -/): no \\( or \\[ not preceded by a
              backslash, and no line starting like a list item inside $$...$$
  provenance  no `.runtimeGuard "<...>.c"` (or .cc .cpp .cu .cuh .h .hpp); every `.sourceFile {...}`
              or `.nativeSymbol {...}` must name a path (and symbol) that exists: a generated
              module can point at none, so any is reported
  banned      in code (comments and strings masked): native_decide, sorry, admit, `simp [*]`,
              `set_option maxHeartbeats`, an import of Mathlib.Tactic, @[deprecated], an axiom,
              `set_option linter.X false`, nolint, backward.privateInPublic, warningAsError
              false; 3447b74 also bans "compatibility alias/shim/..." wording in code and a
              list of removed names, of which only those ending in "ModuleSpec" or
              "StateWithLR" can be made of a capsule name
  imports     no import given twice in the header
  under NN/   (rel_path under NN/): "Copyright (c) 2026 TorchLean" within the first ten lines;
              a module docstring (/-!); no Vector or #v[ and no List of numbers in code; and the
              module built by a Lake target: a single new file is reachable only through the
              NNExamples and NNTests globs, so it must lie under NN/Examples/ or NN/Tests/

Ours on top: the file ends in exactly one newline (`git diff --check`, which TorchLean's
contributors run, flags a blank line at the end).

  lean_lint.py FILE.lean [--as REL_PATH]     exit 0 clean, 1 with one line per problem
"""
import re
import sys

WIDTH = 100

QUOTED_PATH = re.compile(r"`((?:NN|blueprint|home_page|scripts|csrc)/[^`\s]+"
                         r"\.(?:lean|md|py|json|sh|cu|c|h|yml|yaml))`")
DOC_COMMENT = re.compile(r"/-(?:!|-).*?-/", re.DOTALL)
MATH_OPEN = re.compile(r"(?<!\\)\\[(\[]")
DISPLAY_MATH = re.compile(r"\$\$(.*?)\$\$", re.DOTALL)
LIST_LINE = re.compile(r"^[ \t]*(?:[-+*]|\d+[.)])[ \t]+", re.MULTILINE)
GUARD_PATH = re.compile(r'\.runtimeGuard\s+"[^"]*\.(?:c|cc|cpp|cu|cuh|h|hpp)"')
PROVENANCE = re.compile(r"\.(?:sourceFile|nativeSymbol)\s*\{[^{}]*\}", re.DOTALL)
IMPORT = re.compile(r"^[ \t]*((?:public[ \t]+)?(?:meta[ \t]+)?import[ \t]+(?:all[ \t]+)?"
                    r"([A-Za-z0-9_.']+))[ \t]*$", re.MULTILINE)
BANNED = [
    (re.compile(r"\bnative_decide\b"), "native_decide"),
    (re.compile(r"\bsorry\b"), "sorry"),
    (re.compile(r"\badmit\b"), "admit"),
    (re.compile(r"\bsimp\s*\[\s*\*(\s*[,\]])"), "simp [*]"),
    (re.compile(r"\bset_option\s+maxHeartbeats\b"), "a maxHeartbeats override"),
    (re.compile(r"^\s*(?:public\s+)?import\s+Mathlib\.Tactic\b", re.MULTILINE),
     "an import of Mathlib.Tactic"),
    (re.compile(r"@\[\s*deprecated\b"), "@[deprecated]"),
    (re.compile(r"^\s*(?:@\[[^\]]*\]\s*)*(?:(?:public|private|protected|noncomputable|unsafe)\s+)*"
                r"axiom\s+[^\s:({]+", re.MULTILINE), "an axiom"),
    (re.compile(r"set_option\s+linter\.[A-Za-z0-9_]+\s+false"), "a suppressed linter"),
    (re.compile(r"(?:@\[\s*|attribute\s+\[\s*)nolint\b"), "nolint"),
    (re.compile(r"\bbackward\.privateInPublic(?:\.warn)?\b"), "a private-in-public override"),
    (re.compile(r"set_option\s+warningAsError\s+false"), "warnings-as-errors switched off"),
    (re.compile(r"\b(?:compatibility (?:alias|shim|wrapper|layer|re-export)|legacy (?:alias|name|"
                r"spelling)|deprecated alias|migration shim|kept for compatibility)\b", re.I),
     "compatibility wording (3447b74)"),
    (re.compile(r"\b[A-Za-z0-9_]*(?:ModuleSpec|StateWithLR)\b"), "a removed name (3447b74)"),
]
NN_ONLY = [
    (re.compile(r"\b(?:List\.)?Vector\b|#v\["), "a Vector (TorchLean wants Tensor or Array)"),
    (re.compile(r"\bList\s+(?:Float|Rat|Int|Bool|UInt8|UInt16|UInt32|UInt64)\b"),
     "a List of numbers (TorchLean wants Array)"),
]


def mask(text):
    """The text with Lean comments (nested /- -/, and --) and string contents blanked, newlines
    kept, so code patterns cannot match inside them. A string's backslash escapes the next
    character (a string gap's newline included); a newline ends an unclosed string."""
    out, i, n, depth, in_str, in_line = list(text), 0, len(text), 0, False, False
    while i < n:
        two = text[i:i + 2]
        if in_line:
            if text[i] == "\n":
                in_line = False
            else:
                out[i] = " "
            i += 1
        elif depth:
            if two in ("/-", "-/"):
                depth += 1 if two == "/-" else -1
                out[i] = out[i + 1] = " "
                i += 2
            else:
                if text[i] != "\n":
                    out[i] = " "
                i += 1
        elif in_str:
            if text[i] == "\n":
                in_str = False
            elif text[i] == "\\" and i + 1 < n:
                out[i] = " "
                if text[i + 1] != "\n":
                    out[i + 1] = " "
                i += 2
                continue
            else:
                out[i] = " "
                in_str = text[i] != '"'
            i += 1
        elif two == "--":
            out[i] = out[i + 1] = " "
            in_line, i = True, i + 2
        elif two == "/-":
            out[i] = out[i + 1] = " "
            depth, i = 1, i + 2
        elif text[i] == '"':
            out[i] = " "
            in_str, i = True, i + 1
        else:
            i += 1
    return "".join(out)


def line_of(text, offset):
    return text.count("\n", 0, offset) + 1


def lint(text, rel_path=None, known_paths=()):
    """Problems of one Lean file, as "LINE: what"; rel_path is where it would lie in TorchLean's
    tree (None: outside NN/), known_paths the backquoted paths that exist there."""
    problems = []
    if "\r" in text:
        problems.append("0: contains a carriage return (TorchLean wants LF only)")
    for no, line in enumerate(text.split("\n"), 1):
        if len(line) > WIDTH and not line.lstrip().startswith(":::"):
            problems.append(f"{no}: line exceeds {WIDTH} characters ({len(line)})")
        if "\u2014" in line:
            problems.append(f"{no}: em-dash (3447b74 bans it)")
    for no, line in enumerate(text.splitlines(), 1):
        if "\t" in line:
            problems.append(f"{no}: tab character")
        if line.endswith(" "):
            problems.append(f"{no}: trailing whitespace")
    if not text.endswith("\n") or text.endswith("\n\n"):
        problems.append(f"{line_of(text, len(text))}: the file does not end in exactly one newline")
    for m in QUOTED_PATH.finditer(text):
        if m.group(1).split("#")[0] not in known_paths:
            problems.append(f"{line_of(text, m.start())}: quoted path `{m.group(1)}` that TorchLean's "
                            "tree need not have (dead local source reference)")
    for c in DOC_COMMENT.finditer(text):
        for m in MATH_OPEN.finditer(c.group()):
            problems.append(f"{line_of(text, c.start() + m.start())}: \\( or \\[ in a doc comment "
                            "(DocGen does not keep it)")
        for d in DISPLAY_MATH.finditer(c.group()):
            for m in LIST_LINE.finditer(d.group(1)):
                problems.append(f"{line_of(text, c.start() + d.start(1) + m.start())}: a line in "
                                "$$...$$ starts like a list item")
    for m in GUARD_PATH.finditer(text):
        problems.append(f"{line_of(text, m.start())}: a runtimeGuard named by a native source path")
    for m in PROVENANCE.finditer(text):
        problems.append(f"{line_of(text, m.start())}: source provenance a generated module cannot "
                        "point at")
    code = mask(text)
    for rx, what in BANNED + (NN_ONLY if rel_path and rel_path.startswith("NN/") else []):
        for m in rx.finditer(code):
            problems.append(f"{line_of(text, m.start())}: {what}")
    seen = {}
    for m in IMPORT.finditer(header_block(code)):
        directive = " ".join(m.group(1).split())
        if directive in seen:
            problems.append(f"{line_of(text, m.start())}: duplicate import {m.group(2)} (first on "
                            f"line {seen[directive]})")
        seen.setdefault(directive, line_of(text, m.start()))
    if rel_path and rel_path.startswith("NN/"):
        if "Copyright (c) 2026 TorchLean" not in "\n".join(text.splitlines()[:10]):
            problems.append("1: no TorchLean copyright header in the first ten lines (every file "
                            "under NN/ needs `Copyright (c) 2026 TorchLean`)")
        if "/-!" not in text:
            problems.append("1: no module docstring (/-! ... -/)")
        if not rel_path.startswith(("NN/Examples/", "NN/Tests/")):
            problems.append(f"0: {rel_path} is reachable from no Lake target (a new file under NN/ "
                            "is built only under NN/Examples/ or NN/Tests/, by their globs)")
    return problems


def header_block(masked):
    """The module header: the leading lines that are blank, `module`, `prelude` or imports."""
    lines = []
    for line in masked.splitlines(keepends=True):
        stripped = line.strip()
        if not stripped or stripped in ("module", "prelude") or IMPORT.fullmatch(line.rstrip("\r\n")):
            lines.append(line)
        else:
            break
    return "".join(lines)


def main(argv):
    if len(argv) not in (1, 3) or (len(argv) == 3 and argv[1] != "--as"):
        print("usage: lean_lint.py FILE.lean [--as REL_PATH]", file=sys.stderr)
        return 2
    text = open(argv[0], encoding="utf-8").read()
    problems = lint(text, argv[2] if len(argv) == 3 else None)
    for p in problems:
        print(f"{argv[0]}:{p}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
