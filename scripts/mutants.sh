#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# `make mutants`: mutation testing of the product. Each tests/mutants/*.patch
# is a small change of the product's logic (rust_cm_disconnect/,
# rust_cm_disconnect_exports.c) with, in its header, what it changes and
# either the tests that must kill it ("Killed-by: NAME...") or why no test
# can ("Equivalent: REASON", with "Checked-by: NAME..." run against it all
# the same). Each is applied to a copy of the product's sources and built
# against the debug kernel; then one guest runs, for the product as it is
# and then for each mutant (RCD_KO), its tests (tests/mutants/guest.sh),
# and the table says which test killed which mutant:
#   N killed, N survived, N equivalent
# Exits non-zero if a mutant survived, an equivalent one was killed, the
# product itself failed a test, or a mutant did not apply or build.
# Logs: $RCD_CACHE/mutants/ (guest.log, each test's output in NAME.log).
set -uo pipefail
. "$(dirname "$0")/prepare.sh"

dir=$RCD_CACHE/mutants
rm -rf "$dir"
mkdir -p "$dir/logs"
list=$dir/list
: > "$list"
src=(Kbuild rust_cm_disconnect.rs rust_cm_disconnect rust_cm_disconnect_exports.c
	rust_cm_disconnect_shim.h include)
bad=0
n=0
for p in "$here"/tests/mutants/*.patch; do
	name=$(basename "$p" .patch)
	killers=$(sed -n 's/^Killed-by: //p' "$p")
	equiv=$(sed -n 's/^Equivalent: //p' "$p")
	[ -z "$equiv" ] || killers=$(sed -n 's/^Checked-by: //p' "$p")
	if [ -z "$killers" ]; then
		echo "mutants: $name names no Killed-by (or Checked-by) test" >&2; bad=1; continue
	fi
	m=$dir/$name
	mkdir -p "$m"
	(cd "$here" && cp -r "${src[@]}" "$m/")
	if ! patch -d "$m" -p1 -s --no-backup-if-mismatch < "$p"; then
		echo "mutants: $name does not apply" >&2; bad=1; continue
	fi
	if ! make -C "$KDIR" -s "${KMAKE_VARS[@]}" M="$m" CONFIG_RUST_CM_DISCONNECT=m modules \
		> "$m/build.log" 2>&1; then
		echo "mutants: $name does not build ($m/build.log)" >&2; bad=1; continue
	fi
	echo "$name $([ -n "$equiv" ] && echo equivalent || echo mutant) $m/rust_cm_disconnect.ko $killers" >> "$list"
	n=$((n + 1))
done
echo "# mutants: $n built against $KDIR" >&2

# The product as it is first, against every test any mutant names: a
# test that fails on it proves nothing about the mutants.
all=$(awk '{ for (i = 4; i <= NF; i++) print $i }' "$list" | sort -u | tr '\n' ' ')
{ echo "original original $here/rust_cm_disconnect.ko $all"; cat "$list"; } > "$list.run"
start=$SECONDS
RCD_VM_RWDIR=$dir RCD_VM_TIMEOUT=${RCD_VM_TIMEOUT:-5400} bash "$here/scripts/vm.sh" \
	"RCD_KSFT=$KDIR/tools/testing/selftests RCD_KCONFIG=$KDIR/.config bash $here/tests/mutants/guest.sh $list.run $dir/logs" \
	> "$dir/guest.log" 2>&1
vm_rc=$?
echo "# mutants: $((SECONDS - start)) s in the guest (exit $vm_rc)" >&2

# The table: one line a mutant.
killed=0 survived=0 equivalent=0
printf '%-42s %s\n' mutant result
while read -r name kind _ko tests; do
	res=$(sed -n "s/^MUTANT $name //p" "$dir/guest.log" | tail -1)
	case $kind:$res in
	original:passed*) printf '%-42s %s\n' "(the product)" "every test passed: $tests" ;;
	original:*) printf '%-42s %s\n' "(the product)" "FAILED ${res:-no result}"; bad=1 ;;
	mutant:"killed by "*) printf '%-42s %s\n' "$name" "$res"; killed=$((killed + 1)) ;;
	mutant:*) printf '%-42s %s\n' "$name" "SURVIVED ${res:-no result} ($tests)"; survived=$((survived + 1)) ;;
	equivalent:passed*)
		printf '%-42s %s\n' "$name" "equivalent: $(sed -n 's/^Equivalent: //p' "$here/tests/mutants/$name.patch")"
		equivalent=$((equivalent + 1)) ;;
	equivalent:*) printf '%-42s %s\n' "$name" "declared equivalent but ${res:-no result}"; bad=1 ;;
	esac
done < "$list.run"
echo "$killed killed, $survived survived, $equivalent equivalent"
[ "$vm_rc" = 0 ] || { echo "# the guest exited with status $vm_rc ($dir/guest.log)"; bad=1; }
[ "$survived" = 0 ] && [ "$bad" = 0 ]
