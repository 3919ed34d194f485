#!/usr/bin/env bash
# Calls and #include lines run downward, for every program: the layering
# map gateway/LAYERS, checked by tests/tools/layers.py against every
# #include "..." line of gateway/, client/, client/agent/, client/attach/
# and contrib/sim/, and every call between the built objects (nm).
# Fixtures first: a tiny tree with one upward #include, one upward call,
# one call up the core's order, and a clean one; the checker must name
# the file, the line and the rule of each, and pass the clean one.
. "$(dirname "$0")/../lib/common.sh"

command -v nm >/dev/null || skip_all "nm not installed"
command -v python3 >/dev/null || skip_all "python3 not installed"
L=$TOP/tests/tools/layers.py
OBJ=$USBGW_BUILD
[ -d "$OBJ/gateway/base" ] || bail_out "no objects in $OBJ/gateway (build first)"

# ---- fixtures ------------------------------------------------------------
F=$T/fx
mkdir -p "$F/gateway/base" "$F/gateway/core" "$F/o/gateway/base" "$F/o/gateway/core"
cat >"$F/gateway/LAYERS" <<'MAP'
unit base uses -
unit core uses base
order core 1 low
order core 2 high
MAP
printf 'int util_x(void);\n' >"$F/gateway/base/util.h"
printf '#include "base/util.h"\nint util_x(void) { return 1; }\n' >"$F/gateway/base/util.c"
printf 'int low_f(void);\n' >"$F/gateway/core/low.h"
printf '#include "core/low.h"\n#include "base/util.h"\nint low_f(void) { return util_x(); }\n' >"$F/gateway/core/low.c"
printf 'int high_f(void);\n' >"$F/gateway/core/high.h"
printf '#include "core/high.h"\n#include "core/low.h"\nint high_f(void) { return low_f(); }\n' >"$F/gateway/core/high.c"
fx_build() {
	local c
	for c in base/util core/low core/high; do
		cc -I"$F/gateway" -c "$F/gateway/$c.c" -o "$F/o/gateway/$c.o" || return 1
	done
}
fx_run() { run -t 120 python3 "$L" --src "$F" --obj "$F/o"; }

fx_build || bail_out "cannot compile the fixture"
fx_run
is "$RC" 0 "fixture: a clean tree passes"
like "$OUT" '3 objects, 0 violations' "... having read its 3 objects"

# an upward #include: base includes a core header
printf '#include "base/util.h"\n#include "core/low.h"\nint util_x(void) { return 1; }\n' >"$F/gateway/base/util.c"
fx_build
fx_run
is "$RC" 1 "fixture: an upward #include fails"
like "$OUT" 'gateway/base/util.c:2: #include "core/low.h": base may not use core' \
    "... naming the file, the line and the rule"

# an upward call: base calls a core function
printf '#include "base/util.h"\nint low_f(void);\nint util_x(void) { return low_f(); }\n' >"$F/gateway/base/util.c"
fx_build
fx_run
is "$RC" 1 "fixture: an upward call fails (no #include needed for it)"
like "$OUT" 'gateway/base/util.c:2: calls low_f\(\) of gateway/core/low.c: base may not use core' \
    "... naming the file, the line and the rule"

# up the core's order: low calls high
printf '#include "base/util.h"\nint util_x(void) { return 1; }\n' >"$F/gateway/base/util.c"
printf '#include "core/low.h"\nint high_f(void);\nint low_f(void) { return high_f(); }\n' >"$F/gateway/core/low.c"
fx_build
fx_run
is "$RC" 1 "fixture: a call up the core's order fails"
like "$OUT" 'gateway/core/low.c:2: calls high_f\(\) of gateway/core/high.c: high \(core line 2\) is above low \(line 1\)' \
    "... naming the file, the line and the order"

# an upward #include with angle brackets is an #include too
printf '#include "base/util.h"\n#include <core/low.h>\nint util_x(void) { return 1; }\n' >"$F/gateway/base/util.c"
fx_run
is "$RC" 1 "fixture: an upward #include <...> fails"
like "$OUT" 'gateway/base/util.c:2: #include "core/low.h": base may not use core' "... named as well"
printf '#include "base/util.h"\nint util_x(void) { return 1; }\n' >"$F/gateway/base/util.c"

# a folder no unit names, and a module of the core not in its order
mkdir -p "$F/gateway/net"
printf 'int net_f(void);\n' >"$F/gateway/net/net.h"
printf 'int mid_f(void);\n' >"$F/gateway/core/mid.h"
fx_run
is "$RC" 1 "fixture: a file in no unit's folder, a module in no order: both fail"
like "$OUT" 'gateway/net/net.h: in no unit of' "... the folder named"
like "$OUT" "gateway/core/mid.h: mid is not in core's order" "... the module named"
rm -r "$F/gateway/net" "$F/gateway/core/mid.h"

# a source without its object, when objects are required
printf 'int x;\n' >"$F/gateway/base/extra.c"
run python3 "$L" --src "$F" --obj "$F/o" --require-objects
is "$RC" 1 "fixture: a .c without its object fails with --require-objects"
like "$OUT" 'gateway/base/extra.c: no object' "... saying which"
rm "$F/gateway/base/extra.c"

# a known edge that no longer exists fails, so the list only shrinks
printf '#include "core/low.h"\nint low_f(void) { return 0; }\n' >"$F/gateway/core/low.c"
fx_build
echo "known gateway/core/low.c gateway/core/high.h" >>"$F/gateway/LAYERS"
fx_run
is "$RC" 1 "fixture: a stale known line fails"
like "$OUT" 'known gateway/core/low.c gateway/core/high.h: no such edge any more' "... saying so"

# a bad map line is named
echo "units core uses base" >>"$F/gateway/LAYERS"
fx_run
is "$RC" 2 "fixture: a bad map line is an error"
like "$ERR$OUT" 'LAYERS:[0-9]+: expected "unit", "order" or "known", got "units"' "... naming its line"

# ---- the tree ----------------------------------------------------------------
run -t 120 python3 "$L" --src "$TOP" --obj "$OBJ" --require-objects
is "$RC" 0 "the tree: every #include and call runs downward (gateway/LAYERS), every .c's object read"
[ "$RC" = 0 ] || diag "$OUT"
n=$(echo "$OUT" | sed -n 's/^layers: [0-9]* files, \([0-9]*\) objects.*/\1/p')
c=$(cd "$TOP" && find gateway client contrib/sim -name '*.c' | wc -l)
is "${n:-0}" "$c" "... the objects of all $c sources"
done_testing
