#!/usr/bin/env python3
"""CTest extents_table: docs/extents.md's generated table is what the suites draw now
(scripts/extents-table measured once), and the comparison has teeth: a page with one figure
changed, or a threshold the suites stop reaching, is a drift.

    tests/extents_table_check.py --bin build/capcheck
"""
import argparse
import importlib.machinery
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    a = ap.parse_args()
    script = importlib.machinery.SourceFileLoader(
        "extents_table", os.path.join(ROOT, "scripts", "extents-table")).load_module()
    head, block, tail = script.split_page(open(script.PAGE).read())
    table = "\n" + script.table(a.bin)
    if block != table:
        print("docs/extents.md drifted from the suites: run scripts/extents-table", file=sys.stderr)
        return 1
    # teeth: one figure changed on the page, and the suites without one threshold size
    planted = block.replace("| 1–16 |", "| 1–15 |", 1)
    assert planted != block and planted != table, "the planted page equals the table"
    seen = {2**12 - 1, 2**12, 2**12 + 1, 5}
    assert script.k_ranges(seen) == "12", script.k_ranges(seen)
    assert script.k_ranges(seen - {2**12 + 1}) == "none"
    assert script.k_ranges({1, 2, 3, 4, 5}) == "1–2"
    assert script.split_page("no markers") is None
    print(f"extents_table: docs/extents.md is the suites' ({table.count(chr(10)) - 2} rows)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
