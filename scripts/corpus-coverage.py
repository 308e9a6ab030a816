#!/usr/bin/env python3
"""scripts/corpus-coverage.py - branch coverage of reference/ by the case corpus, each branch the
corpus cannot reach named with its reason.

  scripts/corpus-coverage.py COVERAGE.json [--list] [--fail-under PERCENT]

COVERAGE.json is gcovr's --json of a build whose reference/ ran only the smoke and nightly cases
(scripts/coverage does that). A branch no case took is "unreachable from a case line" when one
of the rules below says why; every rule is narrow (a pattern of the branch's own source line, or
a whole helper that no op calls) and a branch the corpus did take is never excluded. Prints:

  corpus branch coverage: T of R reachable branches (P %); all branches: T of N (Q %)
  unreachable from a case line, by reason:  <count>  <reason>
  reached by no case yet: file:line  (one per line; these are what a new case line should hit)

--list also prints every excluded branch with its reason. Exit 1 when P < --fail-under.
"""
import collections
import json
import re
import sys

# a magnitude or gradient pointer itself tested (if (m), gmag ? ..., mx && ...), not its value
# (also as a member of a job or a picks struct: t->mags, pk->mag.worst, pk[t].mag.worst, t->mA;
# mags, mp[k], m[t][f], mag->dtype, gmag[k].worst, abs_sum: the three planes of ref.h's ref_mag,
# the worst case, the dtype share and the probabilistic form, are asked for together)
MEMBER = r"(\w+(\[\w+\])?(->|\.))?"
PLANE = r"((->|\.)(worst|dtype|prob))?"
MAG = (MEMBER + r"(mags?|gmag(\[\w+\])?|m(\[\w+\]){0,2}|mp(\[\w+\])?|mW(\[\w+\])?|mx|mw|mb|mg|mS|"
       r"mV|mA|mB|mrow|gm|fwd_mag|abs_sum)" + PLANE)
GRAD = MEMBER + r"(grad\[\w+\]\.v|dA|dB|dx|dW|db|dS)"
MAGNITUDES = r"(^\s*|\(|&& |\|\| |, |; |= |return )!?" + MAG + r"\s*(\)|\?|&&|\|\||;)"
GRADS = r"(\(|&& |\|\| |, |; |= )!?" + GRAD + r"\s*(\)|\?|&&|\|\||;)"

# (reason, predicate(file, function, line text, statement text))
RULES = [
    ("shape and parameter validation: a case line that parses has passed the op's shape rule, "
     "so its error branches (and the ternaries in their messages) are not taken again",
     lambda f, fn, t, stmt: "ref_err_set" in stmt or re.search(r"return REF_EINVAL", stmt)),
    ("the op's own validation run again inside forward/VJP (geometry, index range, log's "
     "domain): the case was validated before it ran",
     lambda f, fn, t, stmt: re.search(r"(cv_geometry|pl_geom_of|mm_geometry|attn_geometry|"
                                      r"indices_valid|log_domain_ok|check_inputs)\(", t)),
    ("magnitudes are always asked for: the runner passes mag and gmag for every output",
     lambda f, fn, t, stmt: re.search(MAGNITUDES, t) and "alloc" not in t
     and "ENOMEM" not in stmt),
    ("the runner asks for the gradient of exactly the data inputs, so each such test goes one "
     "way for a given input position",
     lambda f, fn, t, stmt: re.search(GRADS, t)),
    ("allocation failure (malloc/calloc returning NULL) and the status of helpers that fail "
     "only for it",
     lambda f, fn, t, stmt: re.search(r"alloc|ENOMEM|\bint ok = |!ok\b|twiddles_make|"
                                      r"attn_row_alloc|st != REF_OK|st == REF_OK", t)
     or re.search(r"if \(!\w+(\[\w+\])?(->\w+)?( \|\| !\w+(\[\w+\])?(->\w+)?)*\)", t)
     or re.search(r"if \(!\w+->\w+ \|\|", t)),
    ("statistical test helpers (Kolmogorov-Smirnov, binomial) of the random ops' unit tests, "
     "not part of any op",
     lambda f, fn, t, stmt: f.endswith("ref_random.c") and fn not in
     ("rand_uniform_forward", "rand_uniform_shape", "bernoulli_forward", "bernoulli_shape",
      "sample_random", "sample_bernoulli")),
    ("the custom-op registry: plugins register their own ops; the corpus runs the built-in "
     "custom ops only",
     lambda f, fn, t, stmt: f.endswith("ref_custom.c") and fn.startswith(
         ("ref_custom_find", "ref_custom_register", "ref_custom_impl", "custom_impl",
          "builtin_at", "ref_custom_op"))),
    ("registry lookups with a NULL, empty or unknown name or index: the parser resolves op "
     "names first",
     lambda f, fn, t, stmt: f.endswith(("ref_util.c", "ref_custom.c")) and re.search(
         r"name \?|!name|!\*name|\(i >= 0 && i <|for \(int f = 0|find_in_families|op && k--|"
         r"if \(e\)|n > used \?|ref_is_backend_op|not_backend_ops|strcmp\(op->name", t)),
    ("shape helpers' guards for extents the parser already refused (negative, beyond 2^48, "
     "rank above 8)",
     lambda f, fn, t, stmt: re.search(r"rank < 0|rank > REF_MAX_RANK|dim\[\w+\] < 0|"
                                      r"INT64_MAX|281474976710656", t)),
]


def functions_of(src):
    """The name of the function each line belongs to (0-based line index)."""
    names, cur = [], "?"
    for line in src:
        m = re.match(r"^(?:static\s+)?(?:inline\s+)?[A-Za-z_][\w\s\*]*?\b(\w+)\s*\(", line)
        if m and not line.startswith((" ", "}", "#", "/")):
            cur = m.group(1)
        names.append(cur)
    return names


def statement_at(src, i):
    """The text from line i to the end of its statement (up to 6 lines), and the lines before it
    that continue the same call (an argument list of ref_err_set split over lines)."""
    text = src[i]
    j = i
    while ";" not in src[j] and "{" not in src[j] and j < i + 6 and j + 1 < len(src):
        j += 1
        text += src[j]
    k = i
    while k > 0 and not re.search(r"[;{}]\s*$", src[k - 1]) and k > i - 4:
        k -= 1
        text = src[k] + text
    if re.match(r"\s*(\} )?(if|else if)\b", src[i]):  # the body's first statement too
        for k in range(j + 1, min(j + 5, len(src))):
            text += src[k]
            if ";" in src[k]:
                break
    return text


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    listing = "--list" in args
    fail_under = None
    if "--fail-under" in args:
        fail_under = float(args[args.index("--fail-under") + 1])
    data = json.load(open(args[0]))
    total = taken = 0
    excluded = collections.Counter()
    listed, open_branches = [], []
    for f in data["files"]:
        path = f["file"]
        src = open(path).read().split("\n")
        fnames = functions_of(src)
        for line in f["lines"]:
            br = line.get("branches", [])
            if not br:
                continue
            n = line["line_number"] - 1
            text, stmt = src[n], statement_at(src, n)
            for b in br:
                total += 1
                if b["count"] > 0:
                    taken += 1
                    continue
                why = next((r for r, ok in RULES if ok(path, fnames[n], text, stmt)), None)
                if why:
                    excluded[why] += 1
                    listed.append((path, n + 1, why))
                else:
                    open_branches.append((path, n + 1, text.strip()))
    reachable = total - sum(excluded.values())
    pct = 100.0 * taken / reachable if reachable else 100.0
    print("corpus branch coverage: %d of %d reachable branches (%.1f %%); all branches: %d of %d "
          "(%.1f %%)" % (taken, reachable, pct, taken, total, 100.0 * taken / max(total, 1)))
    print("unreachable from a case line, by reason:")
    for why, k in excluded.most_common():
        print("  %5d  %s" % (k, why))
    print("reached by no case yet (%d):" % len(open_branches))
    for path, ln, t in open_branches:
        print("  %s:%d  %s" % (path, ln, t[:100]))
    if listing:
        print("every excluded branch:")
        for path, ln, why in listed:
            print("  %s:%d  %s" % (path, ln, why.split(":")[0]))
    if fail_under is not None and pct < fail_under:
        print("corpus branch coverage %.1f %% is under %.1f %%" % (pct, fail_under))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
