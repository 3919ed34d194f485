#!/usr/bin/env bash
# Calls run downward: every call between the daemon's modules, read from
# the built objects' symbol tables (nm), goes to the same layer or a
# lower one of gateway/LAYERS.  A module missing from LAYERS fails too.
. "$(dirname "$0")/../lib/common.sh"

LAYERS=$TOP/gateway/LAYERS
OBJ=$USBGW_BUILD/gateway
[ -d "$OBJ" ] || bail_out "no objects in $OBJ (build first)"
command -v nm >/dev/null || skip_all "nm not installed"

# module -> layer
declare -A layer
while read -r n mods; do
	case $n in ''|'#'*) continue ;; esac
	for m in $mods; do layer[$m]=$n; done
done <"$LAYERS"
[ "${#layer[@]}" -gt 20 ]
check $? "gateway/LAYERS lists the modules (${#layer[@]})"

# symbol -> defining module
declare -A def
for o in "$OBJ"/*.o; do
	m=$(basename "$o" .o)
	while read -r _ _ s; do def[$s]=$m; done < <(nm -g --defined-only "$o")
done

for src in "$TOP"/gateway/*.c; do
	m=$(basename "$src" .c)
	if [ -z "${layer[$m]:-}" ]; then
		fail "$m is in gateway/LAYERS"
		continue
	fi
	[ -f "$OBJ/$m.o" ] || { fail "$m.o built"; continue; }
	up=""
	while read -r _ s; do
		t=${def[$s]:-}
		[ -n "$t" ] && [ "$t" != "$m" ] || continue
		if [ "${layer[$t]}" -gt "${layer[$m]}" ]; then
			up="$up $t:$s"
		fi
	done < <(nm -u "$OBJ/$m.o")
	is "${up# }" "" "$m (layer ${layer[$m]}) calls nothing above it"
done

done_testing
