#!/bin/bash
# `make bench-compare BASE=REV`: the relay and scale benchmarks of two
# builds, side by side in one run, for a change that must not move them
# (a refactor): REV built in a worktree under
# build-compare/, this tree's build/, then COMPARE_ROUNDS rounds (default
# 3) that run each benchmark on both, alternating which goes first.  The
# figures are each RESULT field's median over the rounds, and new/base.
# Not a test: exits 1 only when a benchmark or the base's build failed.
#   COMPARE_ROUNDS   rounds (3)
#   SCALE_DEVICES    the scale benchmark's sizes (default here: 1000)
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
base=${BASE:?BASE=REV: the revision to compare this tree with}
rounds=${COMPARE_ROUNDS:-3}
case $rounds in ''|*[!0-9]*|0) echo "bench-compare: COMPARE_ROUNDS: expected a count >= 1, got '$rounds'" >&2; exit 2 ;; esac
new=${USBGW_BUILD:-$top/build}
w=$top/build-compare
rev=$(git -C "$top" rev-parse --verify "$base^{commit}") ||
	{ echo "bench-compare: BASE=$base is not a revision" >&2; exit 2; }
mkdir -p "$w"
git -C "$top" worktree prune
if [ ! -d "$w/src-$rev" ]; then
	git -C "$top" worktree add --detach "$w/src-$rev" "$rev" >/dev/null 2>&1 ||
		{ echo "bench-compare: cannot check $rev out in $w" >&2; exit 1; }
fi
echo "bench-compare: building $base ($rev) in $w/src-$rev"
make -s -C "$w/src-$rev" -j"$(nproc)" all >"$w/build-$rev.log" 2>&1 ||
	{ echo "bench-compare: the base did not build: $w/build-$rev.log" >&2; exit 1; }
old=$w/src-$rev/build
export SCALE_DEVICES=${SCALE_DEVICES:-1000}

rc=0
declare -A V	# V[which,field] = "v1 v2 ..."
one() {		# one WHICH BUILD SCRIPT
	local out line kv
	out=$(USBGW_BUILD=$2 bash "$top/tests/bench/$3" 2>&1) || rc=1
	line=$(printf '%s\n' "$out" | grep '^RESULT ' | tail -n 1)
	[ -n "$line" ] || { echo "bench-compare: $3 on $1 printed no RESULT" >&2; rc=1; }
	for kv in ${line#RESULT }; do
		V[$1,$3:${kv%%=*}]="${V[$1,$3:${kv%%=*}]:-} ${kv#*=}"
	done
}
for i in $(seq 1 "$rounds"); do
	for s in relay.sh scale.sh; do
		if [ $((i % 2)) = 1 ]; then one base "$old" $s; one new "$new" $s
		else one new "$new" $s; one base "$old" $s; fi
	done
	echo "bench-compare: round $i of $rounds done"
done
median() { tr ' ' '\n' | grep -E '^-?[0-9.]+$' | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
printf '\n%-34s %12s %12s %9s   (medians of %d rounds; base %s)\n' field base new new/base "$rounds" "$base"
for k in $(printf '%s\n' "${!V[@]}" | sed -n 's/^base,//p' | sort); do
	b=$(echo "${V[base,$k]}" | median) n=$(echo "${V[new,$k]:-}" | median)
	r=$(awk -v b="$b" -v n="$n" 'BEGIN { if (b != 0 && n != "") printf "%.3f", n / b; else print "-" }')
	printf '%-34s %12s %12s %9s\n' "$k" "$b" "${n:--}" "$r"
done
exit $rc
