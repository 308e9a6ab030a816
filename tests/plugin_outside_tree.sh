#!/usr/bin/env bash
# tests/plugin_outside_tree.sh CC ROOT CAPCHECK — a plugin author's build, outside the project:
# example_plugin.c copied to a fresh folder, compiled with nothing but -I<capcheck> (the command
# its comment gives), then run by capcheck. Twice: as shipped (abi/capcheck_provider.h) and as a
# plugin written before the ABI moved would include it (providers/provider.h, the forwarding
# header). Each must build and pass its add cases: 0 failed, some passed (the rest unsupported).
set -euo pipefail
cc=$1 root=$2 capcheck=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/plugin_outside_tree.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
fail() { echo "plugin_outside_tree: $*" >&2; exit 1; }

build_and_run() { # NAME SOURCE
    "$cc" -std=c11 -O2 -fPIC -shared -I"$root" "$2" -o "$1.so" ||
        fail "$2 does not build with -I$root alone"
    rc=0
    "$capcheck" run --provider-lib "./$1.so" --op add --out "$1.out" > "$1.log" 2>&1 || rc=$?
    # 125: nothing failed, some cases could not be judged (unsupported: harness/run/exit_code.h)
    ((rc == 125)) || fail "$1: capcheck run exited $rc, wanted 125 (passes and unsupported): $(tail -3 "$1.log")"
    grep -Eq ' [1-9][0-9]* passed, 0 failed, [1-9][0-9]* unsupported, 0 errors' "$1.log" ||
        fail "$1: not every add case passed: $(grep 'cases on' "$1.log")"
    echo "plugin_outside_tree: $1: $(grep -o '[0-9]* passed, 0 failed' "$1.log")"
}

cp "$root/providers/plugins/example_plugin.c" shipped.c
grep -q '#include "abi/capcheck_provider.h"' shipped.c || fail "example_plugin.c no longer includes abi/capcheck_provider.h"
build_and_run shipped shipped.c
sed 's@#include "abi/capcheck_provider.h"@#include "providers/provider.h"@' shipped.c > old_include.c
grep -q '#include "providers/provider.h"' old_include.c || fail "the old include was not planted"
build_and_run old_include old_include.c
