# SPDX-License-Identifier: GPL-2.0
#
# Helpers for the guest-side tests. Sourced by tests/guest.sh; every test
# function may use them. A failed check prints why and returns 1.

# The harness's control files (rcd_harness.ko, tests/harness/): the tests
# drive connections through them; the harness sends every DREQ, DREP and
# disconnect through the product's C API (rust_cm_disconnect.ko).
RCD_DBG=/sys/kernel/debug/rcd_harness
# Where things are, in the two places the tests live:
#   out of tree   RCD_TESTS is the repository's tests/, the module's sources
#                 and its .ko one level up;
#   in a kernel   RCD_TESTS is tools/testing/selftests/rdma/rust_cm_disconnect/
#   tree          (the series' last patch), the module's sources
#                 drivers/infiniband/ulp/rust_cm_disconnect/, where an in-tree
#                 build leaves its .ko.
# RCD_TOP: the module's sources (the C API's header). RCD_KO: the module to
# load, else the one built next to its sources, else the installed one
# (modprobe). RCD_MODS: the C test modules (TEST_GEN_MODS_DIR, built there
# by the selftests' make, or by the module's make out of tree).
# RCD_HARNESS_KO: the test harness, built beside the tests (tests/harness/)
# out of tree, in the test modules' directory (modules/harness/) by the
# selftests' make.
RCD_TESTS=${RCD_TESTS:-$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)}
if [ -z "${RCD_TOP:-}" ]; then
	if [ -f "$RCD_TESTS/../rust_cm_disconnect.rs" ]; then
		RCD_TOP=$(cd "$RCD_TESTS/.." && pwd)
	else
		RCD_TOP=$(cd "$RCD_TESTS/../../../../.." && pwd)
		RCD_TOP+=/drivers/infiniband/ulp/rust_cm_disconnect
	fi
fi
[ -n "${RCD_KO:-}" ] || [ ! -f "$RCD_TOP/rust_cm_disconnect.ko" ] ||
	RCD_KO=$RCD_TOP/rust_cm_disconnect.ko
RCD_KO=${RCD_KO:-}
RCD_MODS=$RCD_TESTS/modules
if [ -z "${RCD_HARNESS_KO:-}" ]; then
	RCD_HARNESS_KO=$RCD_TESTS/harness/rcd_harness.ko
	[ -f "$RCD_HARNESS_KO" ] || RCD_HARNESS_KO=$RCD_MODS/harness/rcd_harness.ko
fi
export RCD_TESTS RCD_TOP RCD_KO RCD_HARNESS_KO
KSFT_SKIP=4

log() { echo "# $*"; }
fail() { echo "# FAIL: $*"; return 1; }

# rcd_run FUNCTION SECONDS [OUT]: run a test function in a subshell of this
# shell, its stdin /dev/null, killed after SECONDS as timeout(1) kills
# (TERM, and KILL 10 s later), status 124 then. Its lines go, as they come,
# to OUT (default /run/rcd-test.out) and to stdout, those not yet a comment
# prefixed "# ". A subshell, not a new bash that sources the tests again:
# under TCG on the debug kernel that and timeout(1) cost about 1.5 s of a
# vCPU a test. It starts as a fresh one would: its own SECONDS, the CM
# counters' base read again (cm_base_load). (t_harness.sh:
# harness_timeout_kills_test.)
rcd_run() {
	local _fn=$1 _tmo=$2 _out=${3:-/run/rcd-test.out} _late=/run/rcd-timed-out.$BASHPID
	# rm only when there is something to remove: a process costs the debug
	# guest about 0.17 s under TCG, and this runs twice a test.
	[ ! -e "$_late" ] || rm -f "$_late"
	# The FIFO nap reads, made once here: the watchdog and the tests inherit it.
	nap 0
	{
		local _pid _wd _rc
		# The test in a process group of its own (job control for this
		# one job): what it starts in the background (a peer, a helper
		# loop) is in that group too, and ends with it below, rather than
		# run on into the next test.
		set -m
		(
			SECONDS=0
			cm_base_drop
			set -o pipefail
			"$_fn"
		) </dev/null 2>&1 &
		_pid=$!
		set +m
		(
			nap "$_tmo"
			# What the test waits in: its processes' states and where
			# in the kernel each sleeps, printed once it ends.
			ps -e --forest -o pid,stat,wchan:28,etimes,args > "$_late" 2>&1
			kill -TERM -- -"$_pid" 2>/dev/null
			nap 10
			kill -KILL -- -"$_pid" 2>/dev/null
		) </dev/null >/dev/null 2>&1 &
		_wd=$!
		wait "$_pid"; _rc=$?
		kill "$_wd" 2>/dev/null
		# What the test left running in its group.
		kill -KILL -- -"$_pid" 2>/dev/null
		if [ -e "$_late" ]; then
			_rc=124
			echo "processes at the timeout:"
			sed 's/^/  /' "$_late"
		fi
		[ ! -e "$_late" ] || rm -f "$_late"
		exit "$_rc"
	} | rcd_stream "$_out"
	return "${PIPESTATUS[0]}"
}

# rcd_stream OUT: each line of stdin as it comes, to OUT as it is and to
# stdout as a comment: "# " before a line that is not one, "#" for an
# empty one. A read loop, not sed: the test's few lines cost it less than
# a process start (about 0.17 s of the debug guest's vCPU under TCG).
rcd_stream() {
	local l
	while IFS= read -r l || [ -n "$l" ]; do
		printf '%s\n' "$l" >&3
		case $l in
		'#'*) printf '%s\n' "$l" ;;
		'') echo '#' ;;
		*) printf '# %s\n' "$l" ;;
		esac
	done 3> "$1"
}

# rcd_result NAME RC: the line tests/run.sh reads for test NAME, which
# returned RC (rcd_one). A skip is a failure under RCD_NO_SKIP=1 (make
# check's and make stress's default: a test that cannot run there proves
# nothing, and a missing tool is the setup's bug).
rcd_result() {
	case $2 in
	0) echo "RESULT ok $1" ;;
	4)
		if [ "${RCD_NO_SKIP:-0}" = 1 ]; then
			echo "# skipped ($RCD_REASON), a failure with RCD_NO_SKIP=1"
			echo "RESULT not ok $1"
		else
			echo "RESULT ok $1 # SKIP $RCD_REASON"
		fi ;;
	*) echo "RESULT not ok $1" ;;
	esac
}

# check DESCRIPTION COMMAND...: run a command, fail with DESCRIPTION if it fails.
check() {
	local what=$1; shift
	"$@" || fail "$what"
}

# Under TCG on the debug kernel every process start costs about half a
# second of a vCPU: the helpers below that run often (polls, the clean guest
# between tests) read /sys and debugfs with shell builtins instead.

# cpu_busy: CPU_BUSY, the guest's busy time so far in 1/100 s (USER_HZ):
# /proc/stat's user, nice, system, irq, softirq and steal (not idle, not
# iowait; guest time is already in user). Builtins only. Under TCG a vCPU
# that is busy costs the host a CPU, one that idles almost nothing: the
# guests are CPU-bound, so a test's busy time, not its wall time, is what
# it takes from the others.
cpu_busy() {
	local _c u n s _i _w q sq st _r
	read -r _c u n s _i _w q sq st _r < /proc/stat
	CPU_BUSY=$((u + n + s + q + sq + st))
}

# plant_insmod KO ARG...: insmod tests/modules/rcd_drepleak.ko, which plants
# kmemleak's control object (an object whose only pointer it hides), so
# that the scans that follow can find it. The allocator's frames leave
# stale copies of the object's pointer on the insmod's kernel stack, and
# an exited task's stack is kept for the next fork (kernel/fork.c:
# cached_stacks, two per CPU), a vmalloc area that kmemleak scans: a copy
# left there would reference the control. So the insmod runs on CPU 0 and
# then four processes at once on CPU 0: their forks take both of its
# cached stacks, each zeroed for its reuse. (The other stale copy, in the
# slab allocator's free pointers, is the module's to avoid: see its
# comment.)
plant_insmod() {
	taskset -c 0 insmod "$@" || return 1
	taskset -c 0 sh -c 'sleep 0.1 & sleep 0.1 & sleep 0.1 & sleep 0.1 & wait'
}

# nap SECONDS: sleep without a process (a read that times out on a FIFO
# nobody writes).
nap() {
	if [ -z "${RCD_NAP_FD:-}" ]; then
		local f=/run/rcd-nap.$BASHPID
		mkfifo "$f" && exec {RCD_NAP_FD}<>"$f" && rm -f "$f" || { sleep "$1"; return 0; }
	fi
	read -r -t "$1" -u "$RCD_NAP_FD" _ || true
}

# wait_for SECONDS COMMAND...: poll until COMMAND succeeds: every 0.2 s
# for 2 s, then every 0.5 s. A poll that starts processes costs the guest
# a good part of a 0.2 s period, taken from what the test waits for; a
# wait that lasts is a timer's or a deletion's, where 0.3 s more is noise.
wait_for() {
	local t=$1; shift
	local start=$SECONDS end=$((SECONDS + t))
	until "$@"; do
		[ $SECONDS -lt $end ] || return 1
		if [ $((SECONDS - start)) -lt 2 ]; then nap 0.2; else nap 0.5; fi
	done
}

# What fails a run in the kernel log (dmesg_clean), and what a test that
# provokes a report on purpose checks for in its window.
DMESG_BAD='BUG:|WARNING:|Oops|Call Trace|sleeping function called from invalid context|KASAN'
DMESG_BAD+='|ODEBUG|possible recursive locking|circular locking|inconsistent lock state'
DMESG_BAD+='|blocked for more than|soft lockup|rcu.*stall'
# The kernel crate's own errors: a CM id destroyed twice, a QP leaked.
DMESG_BAD+="|an id's destroy was queued twice|QP [0-9]+ not destroyed"

# A kernel report a test provokes on purpose lies between two markers in
# the log: expect_reports_begin, then expect_reports_end. The test checks
# the window itself (expected_reports prints the last one); dmesg_clean
# skips closed windows only (a test cut short leaves its window open, and
# then it counts).
# A window also records the taint bits set inside it (a report taints the
# kernel: W for a WARN or a might_sleep report): detectors_armed allows
# those, and only those, beyond RCD_TAINT_OK.
expect_reports_begin() {
	read -r RCD_TAINT_BEFORE < /proc/sys/kernel/tainted
	echo "rcd-test: expected reports begin" > /dev/kmsg
}
expect_reports_end() {
	local t e=0
	echo "rcd-test: expected reports end" > /dev/kmsg
	read -r t < /proc/sys/kernel/tainted
	[ ! -r /run/rcd-taint-expected ] || read -r e < /run/rcd-taint-expected
	echo $((e | (t & ~${RCD_TAINT_BEFORE:-$t}))) > /run/rcd-taint-expected
}
expected_reports() {
	dmesg | awk '/rcd-test: expected reports begin/ { buf = ""; on = 1; next }
		/rcd-test: expected reports end/ { on = 0 } on { buf = buf $0 "\n" }
		END { printf "%s", buf }'
}
dmesg_outside_expected() {
	dmesg | awk '/rcd-test: expected reports begin/ { on = 1; buf = "" }
		!on { print } on { buf = buf $0 "\n" }
		/rcd-test: expected reports end/ { on = 0; buf = "" }
		END { printf "%s", buf }'
}

# holds SECONDS COMMAND...: COMMAND stays true for SECONDS (an absence
# check: "nothing more happens"); fails as soon as it turns false.
holds() {
	local t=$1; shift
	local end=$((SECONDS + t))
	while [ $SECONDS -lt $end ]; do
		"$@" || return 1
		nap 0.2
	done
	"$@"
}

# dreqs_received_above N: rxe0's CM has counted more than N DREQs received
# since the test began (N is a cm_counter value: the same base).
dreqs_received_above() {
	local v
	v=$(cm_counter rxe0 cm_rx_msgs dreq) && [ "$v" -gt "$1" ]
}

# after_peer_destroy N RX0: the peer of N destroyed its ESTABLISHED id. The
# CM sends a DREQ and cancels it at once (cm.c, cm_destroy_id): whether it
# went out is the MAD layer's race. The receiving CM counts a DREQ
# (cm_rx_msgs, RX0 before the destroy) before its work item delivers it:
# if one is counted, wait for N's DREQ_RECEIVED; if none is counted within
# 5 s none was sent (a loopback MAD takes milliseconds).
after_peer_destroy() {
	if wait_for 5 dreqs_received_above "$2"; then
		wait_event 30 "$1" DREQ_RECEIVED
	fi
}

# The tests every guest ends with, in this order, after the queue
# (tests/t_kernel.sh; tests/run.sh reads this line, tests/ksft.sh runs
# them): every device deleted (and no leak warning while they went), then
# kmemleak; then the negative control of the first, verbs_leak_detected,
# whose planted leak must come after kmemleak's scan (it leaves rxe's
# xarray nodes behind) and which only a throwaway guest runs (it taints the
# kernel W: tests/ksft.sh leaves it out of a kselftest run on a machine);
# then the kernel log, and every detector still armed.
RCD_END_TESTS="devices_deleted kmemleak_clean verbs_leak_detected dmesg_clean detectors_armed"

# The taint bits a clean run may set (/proc/sys/kernel/tainted): O (4096)
# an out-of-tree module (this one out of tree, the C test modules), E
# (8192) an unsigned module (a kernel with CONFIG_MODULE_SIG), N (262144)
# KUnit ran tests (the kernel crate's doctests at boot, lib/kunit/test.c).
RCD_TAINT_OK=$((4096 | 8192 | 262144))

# kmsg_first_seq: the sequence number of the oldest record the kernel log
# still holds (0 unless the ring wrapped and lost lines).
kmsg_first_seq() {
	perl -MFcntl -e 'sysopen(my $f, "/dev/kmsg", O_RDONLY | O_NONBLOCK)
			or die "/dev/kmsg: $!\n";
		my $b; defined sysread($f, $b, 8192) or die "/dev/kmsg: $!\n";
		$b =~ /^\d+,(\d+),/ or die "/dev/kmsg: no record\n"; print "$1\n"'
}

# rxe_del_checked DEV...: delete the devices DEV..., and fail if that
# printed a report: above all the warnings of verbs objects left on them,
# which fire only when a device goes (rdma restrack,
# drivers/infiniband/core/restrack.c rdma_restrack_clean: WARN_ON(!xa_empty)
# for each kind of object; rxe, sw/rxe/rxe_pool.c rxe_pool_cleanup:
# WARN_ON(!xa_empty) for each pool, both from ib_dealloc_device, at the end
# of rdma link del). Prints the reports' lines.
RXE_LEAK_BAD='rdma_restrack_clean|rxe_pool_cleanup|rxe_dealloc'
rxe_del_checked() {
	local d mark bad=0 out
	mark="rcd-test: deleting devices $* ($BASHPID $SECONDS)"
	echo "$mark" > /dev/kmsg
	for d; do
		[ -e "/sys/class/infiniband/$d" ] || continue
		rdma link del "$d" || { fail "rdma link del $d: status $?"; bad=1; }
	done
	for d; do
		wait_for 30 test ! -e "/sys/class/infiniband/$d" ||
			{ fail "$d still there 30 s after rdma link del"; bad=1; }
	done
	out=$(dmesg | awk -v m="$mark" 'on { print } index($0, m) { on = 1 }' |
		grep -E "$DMESG_BAD|$RXE_LEAK_BAD")
	if [ -n "$out" ]; then
		echo "$out" | head -30 | sed 's/^/# /'
		fail "deleting $* printed reports: verbs objects were left on it"
		bad=1
	fi
	return $bad
}

# rcd_loaded: the harness is loaded (and with it the product it uses).
rcd_loaded() { [ -d /sys/module/rcd_harness ]; }

# product_loaded: the product, rust_cm_disconnect.ko, is loaded.
product_loaded() { [ -d /sys/module/rust_cm_disconnect ]; }

# rcd_builtin NAME: the module NAME is built into the running kernel (its
# modules.builtin; builtins only). A built-in module without parameters has
# no /sys/module/NAME: ib_cm and rdma_cm on the test kernel.
rcd_builtin() {
	local r l
	read -r r < /proc/sys/kernel/osrelease && [ -r "/lib/modules/$r/modules.builtin" ] ||
		return 1
	while read -r l; do
		[ "${l##*/}" != "$1.ko" ] || return 0
	done < "/lib/modules/$r/modules.builtin"
	return 1
}

# mod_insert FILE [PARAM...], mod_remove NAME: insmod and rmmod through
# tests/rcd_mod.c where it was built (make check's prepare, the selftests'
# make), kmod's otherwise. The harness goes in and out around every test,
# and under TCG on the debug kernel kmod's tools cost about 0.3 s of the
# guest's vCPU a start, rcd_mod about half of that.
RCD_MOD_TOOL=$RCD_TESTS/rcd_mod
[ -x "$RCD_MOD_TOOL" ] || RCD_MOD_TOOL=
mod_insert() {
	if [ -n "$RCD_MOD_TOOL" ]; then "$RCD_MOD_TOOL" insert "$@"; else insmod "$@"; fi
}
mod_remove() {
	if [ -n "$RCD_MOD_TOOL" ]; then "$RCD_MOD_TOOL" remove "$1"; else rmmod "$1"; fi
}

# mod_remove_why NAME: mod_remove, its error's first line into REPLY (no
# command substitution: the clean-up runs it for every test).
mod_remove_why() {
	REPLY=
	mod_remove "$1" 2> /run/rcd-rmmod.err && return 0
	read -r REPLY < /run/rcd-rmmod.err
	return 1
}

# product_load: the product alone (kept if already loaded).
product_load() {
	# Built in on the test kernel (no process needed: they have no
	# /sys/module entry, and a modprobe of each cost about a second of
	# the guest's vCPU in every test that loads the harness); modules
	# elsewhere.
	[ -d /sys/module/ib_cm ] || rcd_builtin ib_cm || modprobe ib_cm || return 1
	[ -d /sys/module/rdma_cm ] || rcd_builtin rdma_cm || modprobe rdma_cm || return 1
	product_loaded && return 0
	if [ -n "$RCD_KO" ]; then
		mod_insert "$RCD_KO" || fail "insmod $RCD_KO"
	else
		modprobe rust_cm_disconnect ||
			fail "modprobe rust_cm_disconnect (no RCD_KO, no .ko next to the sources)"
	fi
}

# rcd_load: the product, then the harness, its consumer.
rcd_load() {
	product_load || return 1
	mod_insert "$RCD_HARNESS_KO" || fail "insmod $RCD_HARNESS_KO"
}

# rcd_unload: the harness, then the product.
rcd_unload() {
	if rcd_loaded; then
		mod_remove rcd_harness || { fail "rmmod rcd_harness"; return 1; }
	fi
	product_loaded || return 0
	mod_remove rust_cm_disconnect || fail "rmmod rust_cm_disconnect"
}

# stat NAME: a counter from the stats file.
rcd_stat() { rcd_stat_v "$1" && echo "$REPLY"; }

# rcd_stat_v NAME: the counter into REPLY (no subshell: polls use it).
rcd_stat_v() {
	local k v
	REPLY=
	while read -r k v; do
		[ "$k" != "$1" ] || { REPLY=$v; return 0; }
	done < "$RCD_DBG/stats"
}

# stat_is NAME VALUE: the counter NAME is VALUE (for wait_for); stat_ge:
# at least VALUE; stat_above: more than VALUE (an absent counter is 0).
stat_is() { rcd_stat_v "$1"; [ "$REPLY" = "$2" ]; }
stat_ge() { rcd_stat_v "$1"; [ "$REPLY" -ge "$2" ]; }
stat_above() { rcd_stat_v "$1" && [ "${REPLY:-0}" -gt "$2" ]; }

# nothing_mapped: no buffer mapped for a device and no MR left (for
# wait_for: an end's QP freed at its timewait exit is destroyed by a job
# just after the callback).
nothing_mapped() { stat_is wr_bufs_mapped 0 && stat_is mrs_live 0; }

rcd_has_device() { text_in "$RCD_DBG/devices" $'\n'"$1 "; }

# The veth pair both topologies use: v0 10.77.0.1 <-> v1 10.77.0.2.
veth_up() {
	[ ! -d /sys/class/net/v0 ] || return 0
	ip link add v0 type veth peer name v1 &&
	ip addr add 10.77.0.1/24 dev v0 &&
	ip addr add 10.77.0.2/24 dev v1 &&
	ip link set v0 up && ip link set v1 up
}

# rxe_add NAME NETDEV: rxe device NAME on NETDEV, port active. A device
# the guest already has (kept by cleanup) is used as it is; one on another
# netdev is replaced.
rxe_add() {
	if [ -d "/sys/class/infiniband/$1" ]; then
		! rxe_on "$1" "$2" || return 0
		rxe_del "$1"
	fi
	[ -d /sys/module/rdma_rxe ] || modprobe rdma_rxe || return 1
	veth_up || return 1
	rdma link add "$1" type rxe netdev "$2" || return 1
	# A new device counts from zero.
	cm_base_forget "$1"
	wait_for 10 port_active "$1" && wait_for 10 gid_v4 "$1"
}

# gid_v4 DEV: DEV's GID table has an IPv4 address (RoCE v2). The IB core
# adds the netdev's addresses from a work item after the device registered:
# until then its port is ACTIVE but rxe drops every packet sent to the
# address (no GID matches), and a REQ with a short timeout runs out of
# tries (a slowed guest: "req tx 16/15" and nothing received).
gid_v4() {
	local i g
	for i in 0 1 2 3 4 5 6 7; do
		read -r g 2>/dev/null < "/sys/class/infiniband/$1/ports/1/gids/$i" || continue
		[ "${g#0000:0000:0000:0000:0000:ffff:}" = "$g" ] || return 0
	done
	return 1
}

# rxe_on DEV NETDEV: DEV is an rxe device on NETDEV (its first GID's
# netdev), with its port active.
rxe_on() {
	local n
	read -r n 2>/dev/null < "/sys/class/infiniband/$1/ports/1/gid_attrs/ndevs/0" &&
		[ "$n" = "$2" ] && port_active "$1"
}

# port_active DEV: port 1 of DEV is ACTIVE.
port_active() {
	local s
	read -r s 2>/dev/null < "/sys/class/infiniband/$1/ports/1/state" && [ "${s#*: }" = ACTIVE ]
}

rxe_del() { rdma link del "$1" 2>/dev/null; }

# Back to a clean guest: the harness and the test modules out, no qdisc,
# no policy routes, no rdma-core program left running, and no rxe device
# other than rxe0 on v0 and rxe1 on v1. Those two stay (with the veth pair
# and its addresses): a device costs 2-3 s to add and as much to delete under TCG, and a test on
# two devices paid 10-12 s for them. What a test could read from a device's
# past, its CM counters, starts from zero again: a test that reads them
# records them first (cm_base) and cm_counter subtracts them. A test that needs no
# device, or a fresh one, says so (rxe_none). RCD_KEEP_DEVICES=0 deletes
# them every time, as before. The hosts' NIC (two-host tests) keeps its
# address.
#
# What cleanup could not undo fails it (the reasons printed, the rest still
# done): a module that does not unload, a left-over tool that does not die,
# a device that is not deleted. The runner then fails the test it cleaned
# for (tests/ksft.sh), rather than run it on what the last test left. The
# kernel log gets a marker at the end (dmesg_test: the log since it), and
# the IB CM's tracepoints are switched off and their buffer emptied
# (cm_trace_off).
#
# The product (rust_cm_disconnect.ko, which keeps no state) goes too,
# except between the tests of make check's queue (RCD_KEEP_PRODUCT=1,
# tests/ksft.sh: rcd_queue): a rmmod and an insmod cost about 1.7 s a test
# under TCG. There it stays loaded, and a reference on it that outlives its
# consumers (a module reference the product leaked) fails the clean guest
# as a failed rmmod would. The queue's end tests get it unloaded, which
# fails there if it cannot be; its load and unload are tests of their own
# (t_devices.sh, t_capi.sh).
cleanup() {
	local d p c m bad= pids=
	cm_trace_off
	for m in rcd_consumer rcd_peer rcd_fuzzpeer rust_rdma_cm; do
		[ -d /sys/module/$m ] || continue
		mod_remove_why $m || bad+="; rmmod $m: $REPLY"
	done
	if rcd_loaded; then
		mod_remove_why rcd_harness || bad+="; rmmod rcd_harness: $REPLY"
	fi
	if product_loaded && [ "${RCD_KEEP_PRODUCT:-0}" = 1 ]; then
		# (A harness that did not unload holds it: said above.)
		if ! rcd_loaded; then
			read -r c < /sys/module/rust_cm_disconnect/refcnt
			[ "$c" = 0 ] ||
				bad+="; rust_cm_disconnect held (refcnt $c) without its consumers"
		fi
	elif product_loaded; then
		mod_remove_why rust_cm_disconnect || bad+="; rmmod rust_cm_disconnect: $REPLY"
	fi
	# A user-space peer a failed or timed-out test left (timeout kills the
	# test's shell, not what it started in the background): it would hold
	# its port and ids on a device that now stays. Builtins only. Waited
	# for: until it has exited its ids are live, and the DREQs and DREPs
	# of their destruction would land in the next test's counters.
	# Only the processes made since the last clean-up (each read of a comm
	# costs the debug guest about 2 ms, and 150 were there from the boot):
	# /proc/loadavg's last field is the last PID made; a PID below the
	# floor means the PIDs wrapped, and all are read.
	local floor=0 last
	[ ! -r /run/rcd-pid-floor ] || read -r floor < /run/rcd-pid-floor
	read -r _ _ _ _ last < /proc/loadavg
	[ "$last" -ge "$floor" ] || floor=0
	for p in /proc/[0-9]*; do
		[ "${p#/proc/}" -gt "$floor" ] || continue
		read -r c 2>/dev/null < "$p/comm" || continue
		case $c in
		cmtime|ucmatose|udaddy|rping|rdma_server|rdma_client|sidr_flood)
			kill -9 "${p#/proc/}" 2>/dev/null && pids+=" ${p#/proc/}";;
		esac
	done
	[ -z "$pids" ] || wait_for 20 procs_gone $pids ||
		bad+="; killed but still running:$pids"
	# One tc for both ends (and the hosts' NIC, tests/t_hosts.sh), whatever
	# a test left there.
	# Only when a netem qdisc exists (each holds a reference on sch_netem):
	# a tc costs about a second in the guest, and most tests add none.
	local n=0
	[ ! -e /sys/module/sch_netem/refcnt ] || read -r n < /sys/module/sch_netem/refcnt
	# And then the neighbours of those links: a test that dropped every
	# packet (ARP's too) leaves its entries INCOMPLETE or FAILED, and the
	# next test's first packets wait for a probe's retry, a second or
	# more: a REQ with a short timeout runs out of tries while its REPs
	# wait behind it (device_deleted_under_100 right after dreq_unanswered:
	# "4200: no ESTABLISHED", REPs received after the REQ_ERROR).
	# A peer's MAC a two-host test pinned (t_hosts.sh: pin_peer) goes too:
	# "nud all" takes permanent entries.
	if [ "$n" != 0 ]; then
		printf 'qdisc del dev %s root\n' v0 v1 ${RCD_NIC:-} |
			tc -force -batch - >/dev/null 2>&1
	fi
	if [ "$n" != 0 ] || [ -e /run/rcd-neigh-pinned ]; then
		printf 'neigh flush dev %s nud all\n' v0 v1 ${RCD_NIC:-} |
			ip -force -batch - >/dev/null 2>&1
		rm -f /run/rcd-neigh-pinned
	fi
	veth_cross_routes_undo >/dev/null 2>&1
	for d in /sys/class/infiniband/*; do
		[ -e "$d" ] || continue
		d=${d##*/}
		# The two-host tests' rxe0 on the hosts' NIC stays from one to the
		# next (tests/guest.sh: run_host_test sets RCD_KEEP_NIC).
		if [ "${RCD_KEEP_DEVICES:-1}" = 1 ] && [ -n "${RCD_KEEP_NIC:-}" ] &&
			[ "$d" = rxe0 ] && rxe_on rxe0 "$RCD_KEEP_NIC"; then
			continue
		fi
		if [ "${RCD_KEEP_DEVICES:-1}" = 1 ] &&
			{ { [ "$d" = rxe0 ] && rxe_on rxe0 v0; } ||
			{ [ "$d" = rxe1 ] && rxe_on rxe1 v1; }; }; then
			continue
		fi
		rxe_del "$d" || bad+="; rdma link del $d failed"
	done
	cm_settle
	echo "${RCD_QUIET% }" > /run/rcd-cm-quiet
	: > /run/rcd-cm-base
	cm_base_drop
	read -r _ _ _ _ last < /proc/loadavg
	echo "$last" > /run/rcd-pid-floor
	dmesg_mark
	[ -z "$bad" ] || { echo "# FAIL: cleanup: ${bad#; }"; return 1; }
}

# procs_gone PID...: each PID has exited (gone, or a zombie: its files, and
# so its RDMA ids, already closed). For wait_for.
procs_gone() {
	local p st
	for p in "$@"; do
		st=
		{ read -r _ _ st _ < "/proc/$p/stat"; } 2>/dev/null || continue
		[ "$st" = Z ] || return 1
	done
}

# The kernel log of this test only: cleanup ends with a marker, and
# dmesg_test prints what came after the last one (nothing if there is
# none: a check for a line then fails rather than pass on an older test's
# line). A test may set a marker of its own (dmesg_mark) to narrow it.
# Where tests/rcd_kmsg.c was built, the marker also opens /dev/kmsg for
# the test's shells to share (RCD_KMSG_FD), and each look reads only what
# the last one did not, into RCD_KMSG_FILE; otherwise dmesg and an awk
# over the whole log, about a second of the debug guest's vCPU once the
# log has some thousand lines.
RCD_DMESG_MARK='rcd-test: clean guest'
RCD_KMSG_TOOL=$RCD_TESTS/rcd_kmsg
[ -x "$RCD_KMSG_TOOL" ] || RCD_KMSG_TOOL=
RCD_KMSG_FILE=/run/rcd-kmsg.test
dmesg_mark() {
	echo "$RCD_DMESG_MARK" > /dev/kmsg
	[ -n "$RCD_KMSG_TOOL" ] || return 0
	[ -z "${RCD_KMSG_FD:-}" ] || exec {RCD_KMSG_FD}<&-
	exec {RCD_KMSG_FD}< /dev/kmsg && : > "$RCD_KMSG_FILE" || RCD_KMSG_FD=
}

# kmsg_lines: this test's log lines into KMSG (an array), through
# rcd_kmsg; fails where that cannot be had.
kmsg_lines() {
	[ -n "${RCD_KMSG_FD:-}" ] &&
		"$RCD_KMSG_TOOL" "$RCD_DMESG_MARK" "$RCD_KMSG_FILE" <&"$RCD_KMSG_FD" &&
		mapfile -t KMSG < "$RCD_KMSG_FILE"
}

dmesg_test() {
	local -a KMSG
	if kmsg_lines; then
		[ ${#KMSG[@]} = 0 ] || printf '%s\n' "${KMSG[@]}"
		return 0
	fi
	dmesg_after_mark
}
# dmesg_after_mark: the same from dmesg, the whole log read.
dmesg_after_mark() {
	dmesg | awk -v m="$RCD_DMESG_MARK" 'index($0, m) { buf = ""; seen = 1; next }
		seen { buf = buf $0 "\n" } END { printf "%s", buf }'
}

# dmesg_count ERE: how many lines of this test's kernel log match ERE, into
# REPLY. dmesg_has ERE: at least one does (REPLY left as it was: polls
# read a counter before the log). (Without rcd_kmsg: the ERE from the
# environment, which awk takes as it is, where -v would read escapes.)
dmesg_count() {
	local -a KMSG
	local l n=0
	if kmsg_lines; then
		for l in "${KMSG[@]}"; do
			[[ ! $l =~ $1 ]] || n=$((n + 1))
		done
		REPLY=$n
		return 0
	fi
	REPLY=$(dmesg_after_mark |
		RCD_ERE=$1 awk '$0 ~ ENVIRON["RCD_ERE"] { n++ } END { print n + 0 }')
}
dmesg_has() { local REPLY; dmesg_count "$1" && [ "$REPLY" -gt 0 ]; }

# rxe_none: no rxe device (for a test of the module's device tracking).
rxe_none() {
	local d
	for d in /sys/class/infiniband/*; do
		[ ! -e "$d" ] || rxe_del "${d##*/}"
	done
	# Their counters go with them: a test reads the new ones' from its
	# cm_base after it made them.
	: > /run/rcd-cm-base
	cm_base_drop
}

# cm_settle: waits (3 s at most) until no device sent or received a packet
# for 0.2 s, so that the MADs the cleanup set off are out before the next
# test: an id destroyed in ESTABLISHED sends a DREQ, and the CM answers a
# DREQ for an id it no longer knows with a DREP. A CI run counted such a
# DREP in the next test (interop_rdma_server: 1 DREQ, 2 DREPs). Each rxe
# device's packet counters (hw_counters: loopback included) tell it in 2
# reads, where the CM's messages take 22; a device without them, its CM's
# messages. Builtins only; RCD_QUIET: the counters as last read.
cm_quiet_now() {
	local d f v w
	RCD_QUIET=
	for d in /sys/class/infiniband/*; do
		if { read -r v < "$d/ports/1/hw_counters/sent_pkts" &&
			read -r w < "$d/ports/1/hw_counters/rcvd_pkts"; } 2>/dev/null; then
			RCD_QUIET+="${d##*/}:$v:$w "
			continue
		fi
		# A device without them (not rxe): its CM's messages.
		for f in "$d"/ports/1/cm_tx_msgs/* "$d"/ports/1/cm_rx_msgs/*; do
			read -r v 2>/dev/null < "$f" && RCD_QUIET+="$v "
		done
	done
}
cm_settle() {
	local before i
	cm_quiet_now
	for ((i = 0; i < 15; i++)); do
		before=$RCD_QUIET
		nap 0.2
		cm_quiet_now
		[ "$RCD_QUIET" != "$before" ] || return 0
	done
}

# The CM's counters as lines "CM_BASE[DEV/DIR/MSG]=VALUE" for cm_counter
# (builtins only), into /run/rcd-cm-base: 88 files on two devices, read
# only for a test that reads the counters (cm_base), not in every clean-up.
CM_DIRS="cm_tx_msgs cm_tx_retries cm_rx_msgs cm_rx_duplicates"
cm_base_record() {
	local d dir f v
	# Never empty (cm_base_load: empty is no base), also with no device:
	# one made later counts from zero.
	{
		echo "# the CM's counters at the test's start"
		for d in /sys/class/infiniband/*; do
			[ -e "$d/ports/1/cm_tx_msgs" ] || continue
			for dir in $CM_DIRS; do
				for f in "$d/ports/1/$dir"/*; do
					read -r v < "$f" || continue
					echo "CM_BASE[${d##*/}/$dir/${f##*/}]=$v"
				done
			done
		done
	} > /run/rcd-cm-base
}

# cm_base: this test reads the CM's counters (cm_counter): their base is
# now, before its first message. Called at the test's start; cm_counter
# takes it itself if nothing was sent or received since the clean-up, and
# fails the test if something was (it would count from a base it cannot
# know: the test lacks its cm_base).
declare -A CM_BASE
cm_base() {
	cm_base_record
	cm_base_drop
	cm_base_load
}

# cm_base_drop: this shell forgets the base it read (the next cm_counter
# reads the file again).
cm_base_drop() {
	unset CM_BASE_LOADED
	CM_BASE=()
}

# cm_base_load: the base cm_base recorded (for this test since its
# clean-up: cleanup empties the file), read once by the test's shell.
cm_base_load() {
	local q
	[ -z "${CM_BASE_LOADED:-}" ] || return 0
	if [ ! -s /run/rcd-cm-base ]; then
		[ -r /run/rcd-cm-quiet ] ||
			{ fail "no clean-up recorded the devices' traffic"; return 1; }
		read -r q < /run/rcd-cm-quiet
		cm_quiet_now
		[ "${RCD_QUIET% }" = "$q" ] || {
			fail "the CM's counters read with no base (cm_base) after traffic"
			return 1
		}
		cm_base_record
	fi
	CM_BASE_LOADED=1
	. /run/rcd-cm-base
}

# cm_base_forget DEV: DEV was created in this test, after its base: its
# counters are its own.
cm_base_forget() {
	local k
	[ -s /run/rcd-cm-base ] || return 0
	cm_base_load || return 0
	for k in "${!CM_BASE[@]}"; do
		[[ $k != "$1"/* ]] || unset "CM_BASE[$k]"
	done
}

# --- the control interface -------------------------------------------------

# ctl CMD...: one command to the module; fails (printing the errno) if the
# module refuses it.
ctl() {
	# The first write's own error, from bash's message (no second write: a
	# command that failed half way, a DREQ among several, must not run
	# again to tell why), read with builtins (no process).
	local m
	{ echo "$*" > "$RCD_DBG/ctl"; } 2> /run/rcd-ctl.err && return 0
	read -r m < /run/rcd-ctl.err
	fail "ctl '$*': $(errno_name "$m")"
}

# errno_name MESSAGE: the errno's name (EINVAL, ENOENT, ...) in bash's
# message for a failed write ("...: write error: Invalid argument"), from
# glibc's strerror text; a message outside the table as it is.
errno_name() {
	case $1 in
	*": write error: "*) ;;
	*) echo "${1#*: }"; return 0 ;;
	esac
	case $1 in
	*": Argument list too long") echo E2BIG ;;
	*": Resource temporarily unavailable") echo EAGAIN ;;
	*": Operation already in progress") echo EALREADY ;;
	*": Device or resource busy") echo EBUSY ;;
	*": Operation canceled") echo ECANCELED ;;
	*": Connection refused") echo ECONNREFUSED ;;
	*": File exists") echo EEXIST ;;
	*": Bad address") echo EFAULT ;;
	*": Interrupted system call") echo EINTR ;;
	*": Invalid argument") echo EINVAL ;;
	*": Input/output error") echo EIO ;;
	*": Transport endpoint is already connected") echo EISCONN ;;
	*": Message too long") echo EMSGSIZE ;;
	*": No such device") echo ENODEV ;;
	*": No such file or directory") echo ENOENT ;;
	*": Cannot allocate memory") echo ENOMEM ;;
	*": No space left on device") echo ENOSPC ;;
	*": Function not implemented") echo ENOSYS ;;
	*": Transport endpoint is not connected") echo ENOTCONN ;;
	*": No such device or address") echo ENXIO ;;
	*": Operation not supported") echo ENOTSUP ;;
	*": Value too large for defined data type") echo EOVERFLOW ;;
	*": Operation not permitted") echo EPERM ;;
	*": Protocol error") echo EPROTO ;;
	*": Numerical result out of range") echo ERANGE ;;
	*": Connection timed out") echo ETIMEDOUT ;;
	*) echo "${1##*: write error: }" ;;
	esac
}

# ctl_errno CMD: prints OK or the errno name (EINVAL, ENOENT, ...) the
# module answered the write with. One write(2) of exactly CMD's bytes. Perl,
# not Python: under TCG on the debug kernel a python3 start costs about two
# seconds, a perl start a tenth of that, and some tests make fifty of these.
ctl_errno() {
	# Short commands with the printf builtin (one write(2) of CMD's bytes:
	# stdout's buffer is a page) and the errno's name from its message
	# (errno_name): a perl start cost about 0.7 s, and some tests make
	# dozens of these. Longer commands (t_hostile.sh writes 4,096 and
	# 4,097 bytes) as before.
	if [ ${#1} -le 1024 ]; then
		local m
		m=$( { printf '%s' "$1" > "$RCD_DBG/ctl"; } 2>&1 ) && { echo OK; return 0; }
		case $m in
		*": write error: "*) errno_name "$m"; return 0 ;;
		*) echo "${m#*: }" >&2; return 2 ;;
		esac
	fi
	perl -MErrno -e 'open(my $f, ">", $ARGV[0]) or die "$ARGV[0]: $!\n";
		if (defined syswrite($f, $ARGV[1])) { print "OK\n"; exit 0 }
		for (sort keys %!) { if ($!{$_}) { print "$_\n"; exit 0 } }
		print 0 + $!, "\n"' "$RCD_DBG/ctl" "$1"
}

# expect_errno ERRNO CMD: the module must refuse CMD with ERRNO.
expect_errno() {
	local got
	got=$(ctl_errno "$2")
	[ "$got" = "$1" ] || fail "ctl '$2': expected $1, got $got"
}

# expect_errnos: lines ERRNO|CMD on stdin (blank lines skipped): each CMD,
# one write(2) each, must be refused with ERRNO (OK: accepted). One perl for
# all of them: under TCG on the debug kernel a perl start costs 0.7 s.
expect_errnos() {
	local out
	out=$(perl -MErrno -e 'my ($ctl, $bad) = ($ARGV[0], 0);
		while (my $l = <STDIN>) {
			chomp $l; next if $l eq "";
			my ($want, $cmd) = split(/\|/, $l, 2);
			open(my $f, ">", $ctl) or die "$ctl: $!\n";
			my $got = "OK";
			if (!defined syswrite($f, $cmd)) {
				$got = 0 + $!;
				for (sort keys %!) { if ($!{$_}) { $got = $_; last } }
			}
			close($f);
			if ($got ne $want) {
				print "ctl '\''$cmd'\'': expected $want, got $got\n"; $bad++
			}
		}
		exit($bad ? 1 : 0)' "$RCD_DBG/ctl") ||
		{ echo "$out" | sed 's/^/# FAIL: /'; return 1; }
}

# conn_field NUM FIELD: a field of NUM's line in conns (state, role, ...).
# conn_field_v: into REPLY (empty if absent), for polls (conn_state_is,
# pings_at_least): builtins only, no subshell either.
conn_field_v() {
	local -a l f
	local x kv
	REPLY=
	mapfile -t l 2>/dev/null < "$RCD_DBG/conns"
	for x in "${l[@]}"; do
		[[ $x == "$1 "* ]] || continue
		read -r -a f <<< "${x#* }"
		for kv in "${f[@]}"; do
			[[ $kv != "$2="* ]] || { kv=${kv#*=}; REPLY=${kv%%=*}; }
		done
	done
}
conn_field() { local REPLY; conn_field_v "$1" "$2"; [ -z "$REPLY" ] || echo "$REPLY"; }

conn_state() { conn_field "$1" state; }

# completed_is NUM COUNT: NUM's CQ, polled, has given COUNT successful
# completions (for wait_for).
completed_is() { ctl poll "$1" && conn_field_v "$1" completed && [ "$REPLY" = "$2" ]; }

# text_in FILE TEXT: a line of FILE (conns, events, stats) contains TEXT;
# "$'\n'2 " is a line that begins with "2 ". text_count FILE TEXT: how many
# lines do. Builtins only, for polls (as has_event).
text_in() {
	local -a l
	local IFS=$'\n'
	mapfile -t l 2>/dev/null < "$1" || return 1
	[[ $'\n'"${l[*]}"$'\n' == *"$2"* ]]
}
text_count() {
	local -a l
	local x n=0
	mapfile -t l 2>/dev/null < "$1"
	for x in "${l[@]}"; do
		[[ $x != *"$2"* ]] || n=$((n + 1))
	done
	echo $n
}

# conn_gone NUM: conns is there and has no line for NUM (builtins, for polls).
conn_gone() { [ -r "$RCD_DBG/conns" ] && ! text_in "$RCD_DBG/conns" $'\n'"$1 "; }

# count_events KIND: how many endpoints saw an event KIND.
count_events() { text_count "$RCD_DBG/events" " $1 "; }

# count_state STATE: how many endpoints are in STATE.
count_state() { text_count "$RCD_DBG/conns" " state=$1 "; }

# has_event NUM KIND: NUM saw an event KIND. Builtins only: wait_event
# polls it five times a second, and a grep process each time took the
# guest's one vCPU from what the test waits for. (mapfile reads the
# file in blocks; read would seek back after every line, and the seq_file
# makes all of it again for each seek.)
has_event() {
	local -a l
	local IFS=$'\n'
	mapfile -t l 2>/dev/null < "$RCD_DBG/events" || return 1
	[[ $'\n'"${l[*]}" == *$'\n'"$1 $2 "* ]]
}

# event_count NUM KIND (builtins only, as the helpers below: each is
# called dozens of times a run, and a process start costs the debug guest
# about 0.17 s under TCG)
event_count() {
	local -a l
	local x n=0
	mapfile -t l 2>/dev/null < "$RCD_DBG/events"
	for x in "${l[@]}"; do
		[[ $x != "$1 $2 "* ]] || n=$((n + 1))
	done
	echo $n
}

# event_field NUM KIND FIELD: FIELD (status, len, data) of NUM's first KIND
# that has it.
event_field() {
	local -a l f
	local x kv IFS=$' \t\n'
	mapfile -t l 2>/dev/null < "$RCD_DBG/events"
	for x in "${l[@]}"; do
		[[ $x == "$1 $2 "* ]] || continue
		read -r -a f <<< "$x"
		for kv in "${f[@]:2}"; do
			[[ $kv != "$3="* ]] || { kv=${kv#*=}; echo "${kv%%=*}"; return 0; }
		done
	done
}

# wait_event SECONDS NUM KIND
# On failure it prints the endpoint's events, so that the log says how far
# it got.
wait_event() {
	wait_for "$1" has_event "$2" "$3" && return 0
	fail "$2: no $3 within $1 s; its events: $(awk -v n="$2" \
		'$1 == n { printf " %s %s;", $2, $3 }' "$RCD_DBG/events" 2>/dev/null | tail -c 400)"
}

# pat_hex N TOTAL: hex of the module's pat:N bytes (1, 2, ..., 255, 1, ...)
# followed by zeros up to TOTAL bytes: what a peer sees of pat:N.
pat_hex() {
	local i
	for ((i = 0; i < $2; i++)); do
		if [ $i -lt $1 ]; then printf '%02x' $((i % 255 + 1)); else printf '00'; fi
	done
}

# A port counter of the IB CM since the test began (cleanup keeps devices:
# what they counted before is subtracted): cm_counter DEV DIR MSG (DIR:
# cm_tx_msgs, ...).
cm_counter() { cm_counter_v "$@" && echo "$REPLY"; }

# cm_counter_v DEV DIR MSG: the counter into REPLY (no subshell).
cm_counter_v() {
	local v
	cm_base_load || return 1
	REPLY=
	read -r v < "/sys/class/infiniband/$1/ports/1/$2/$3" || return 1
	REPLY=$((v - ${CM_BASE[$1/$2/$3]:-0}))
}

# counter_ge DEV DIR MSG N: the counter has reached N (for wait_for).
counter_ge() { cm_counter_v "$1" "$2" "$3" && [ "$REPLY" -ge "$4" ]; }

# counter_is DEV DIR MSG VALUE: for wait_for (the counter is read each time).
counter_is() { cm_counter_v "$1" "$2" "$3" && [ "$REPLY" = "$4" ]; }

# sent DEV MSG: messages sent, retransmissions not counted (cm.c adds
# 1 + retries to cm_tx_msgs when a send completes).
sent() { local REPLY; sent_v "$1" "$2" && echo "$REPLY"; }
sent_v() {
	local t
	cm_counter_v "$1" cm_tx_msgs "$2" || return 1
	t=$REPLY
	cm_counter_v "$1" cm_tx_retries "$2" || return 1
	REPLY=$((t - REPLY))
}

# sent_is DEV MSG VALUE: for wait_for.
sent_is() { sent_v "$1" "$2" && [ "$REPLY" = "$3" ]; }

# drep_sent_once TX DUP: rxe0 sent one DREP since TX, and at most one more
# for each duplicate DREQ it received since DUP (its CM's counts).
drep_sent_once() {
	local s d
	s=$(sent rxe0 drep) && d=$(( $(cm_counter rxe0 cm_rx_duplicates dreq) - $2 )) || return 1
	[ "$s" -ge $(($1 + 1)) ] && [ "$s" -le $(($1 + 1 + d)) ]
}

# cm_pair ACTIVE [LISTENER_OPTS]: rxe0 on v0, listener 1 on service 0x1000
# (created once), and connection ACTIVE from 10.77.0.1 to itself, both ends
# ESTABLISHED. The passive end is ACTIVE + 1000000.
PASSIVE_BASE=1000000
cm_pair() {
	local a=$1; shift
	if ! rcd_loaded; then
		rxe_add rxe0 v0 && rcd_load || return 1
	fi
	text_in "$RCD_DBG/conns" $'\n1 ' || ctl listen 1 rxe0 0x1000 "$@" || return 1
	ctl connect "$a" rxe0 10.77.0.1 10.77.0.1 0x1000 ${CONNECT_OPTS:-} || return 1
	wait_event 20 "$a" ESTABLISHED && wait_event 20 $((a + PASSIVE_BASE)) ESTABLISHED
}

# --- two rxe devices on the two ends of the veth pair ------------------------
#
# Both ends live in this one network namespace, so by default traffic from
# 10.77.0.1 to 10.77.0.2 takes the local route over lo, where no rxe device
# listens. Policy routing sends locally generated traffic for the other end
# out of the veth instead, and the peer end accepts a local source address.
veth_cross_routes() {
	local c
	echo on > /run/rcd-cross-routes
	# /proc and one ip for all of it: a process costs 0.25 s in the guest.
	for c in all v0 v1; do
		echo 1 > /proc/sys/net/ipv4/conf/$c/accept_local &&
			echo 0 > /proc/sys/net/ipv4/conf/$c/rp_filter || return 1
	done
	# Without -force, ip stops at the first command that fails, and fails.
	ip -batch - <<-EOF
	route add 10.77.0.2 dev v0 src 10.77.0.1 table 100
	route add 10.77.0.1 dev v1 src 10.77.0.2 table 101
	rule add pref 10 iif lo to 10.77.0.2 lookup 100
	rule add pref 10 iif lo to 10.77.0.1 lookup 101
	rule add pref 100 lookup local
	rule del pref 0 lookup local
	EOF
}

veth_cross_routes_undo() {
	[ -s /run/rcd-cross-routes ] || return 0
	ip -force -batch - 2>/dev/null <<-EOF
	rule add pref 0 lookup local
	rule del pref 100 lookup local
	rule del pref 10 iif lo to 10.77.0.2 lookup 100
	rule del pref 10 iif lo to 10.77.0.1 lookup 101
	route flush table 100
	route flush table 101
	EOF
	: > /run/rcd-cross-routes
}

# cm_pair2 ACTIVE [LISTENER_OPTS]: rxe0 on v0 and rxe1 on v1, listener 1 on
# rxe1, connection ACTIVE from 10.77.0.1 (rxe0) to 10.77.0.2 (rxe1).
cm_pair2() {
	local a=$1; shift
	if ! rcd_loaded; then
		rxe_add rxe0 v0 && rxe_add rxe1 v1 && veth_cross_routes && rcd_load || return 1
	fi
	text_in "$RCD_DBG/conns" $'\n''1 ' || ctl listen 1 rxe1 0x1000 "$@" || return 1
	ctl connect "$a" rxe0 10.77.0.1 10.77.0.2 0x1000 ${CONNECT_OPTS:-} || return 1
	wait_event 30 "$a" ESTABLISHED && wait_event 30 $((a + PASSIVE_BASE)) ESTABLISHED ||
		{ handshake_why "$a" rxe0 rxe1; return 1; }
}

# handshake_why ACTIVE DEV_A DEV_P: after a handshake that did not come up,
# what each side's CM sent and received (messages/retries/duplicates), and
# the events of both ends with their status, to tell a peer that was slow
# from one that never answered.
handshake_why() {
	local d m line CM_BASE_LOADED=${CM_BASE_LOADED:-}
	# A test with no base of its own (cm_base): the counters since boot.
	if ! cm_base_load >/dev/null; then
		local -A CM_BASE=()
		CM_BASE_LOADED=1
		log "(the counters below since boot: this test took no cm_base)"
	fi
	for d in "$2" "$3"; do
		line="$d:"
		for m in req mra rep rtu rej; do
			line+=" $m tx $(cm_counter $d cm_tx_msgs $m)"
			line+="/$(cm_counter $d cm_tx_retries $m)"
			line+=" rx $(cm_counter $d cm_rx_msgs $m)"
			line+="/$(cm_counter $d cm_rx_duplicates $m);"
		done
		log "$line"
	done
	log "events: $(awk -v a="$1" -v p=$(($1 + PASSIVE_BASE)) '$1 == a || $1 == p' \
		"$RCD_DBG/events" 2>/dev/null | tr '\n' ';' | tail -c 600)"
}

# --- many connections ---------------------------------------------------------

# events_in KIND FIRST LAST: events KIND of the endpoints FIRST..LAST.
events_in() {
	awk -v k="$1" -v a="$2" -v b="$3" '$2 == k && $1 >= a && $1 <= b { n++ }
		END { print n + 0 }' "$RCD_DBG/events"
}

# events_at_least KIND FIRST LAST N: for wait_for. Builtins only, as
# events_in counts (lines "NUM KIND ..."): no awk at each poll.
events_at_least() {
	local -a l
	local x num n=0
	mapfile -t l 2>/dev/null < "$RCD_DBG/events" || return 1
	(($4 > 0)) || return 0
	for x in "${l[@]}"; do
		num=${x%% *} x=${x#* }
		[ "${x%% *}" = "$1" ] || continue
		case $num in '' | *[!0-9]*) continue ;; esac
		((num >= $2 && num <= $3)) && ((++n >= $4)) && return 0
	done
	return 1
}

# wait_events SECONDS KIND FIRST LAST N: N events KIND among FIRST..LAST.
# On failure it names the ends that had none, with their state and events.
wait_events() {
	wait_for "$1" events_at_least "$2" "$3" "$4" "$5" && return 0
	fail "$(events_in "$2" "$3" "$4") of $5 $2 in $3-$4 within $1 s"
	ends_without "$2" "$3" "$4"
	return 1
}

# ends_by_state [PATTERN]: the module's ends (in conns) whose line matches
# the awk PATTERN (every end by default), counted by state: "STATE=N ...".
ends_by_state() {
	awk -v pat="${1:-.}" '$0 ~ pat {
		for (i = 2; i <= NF; i++) if ($i ~ /^state=/) c[substr($i, 7)]++ }
		END { for (k in c) printf "%s=%d ", k, c[k] }' "$RCD_DBG/conns"
}

# ends_without KIND FIRST LAST [MAX]: the endpoints of FIRST..LAST (in conns)
# without a KIND event, at most MAX (8) of them, each with its state and
# its events in order, for the log.
ends_without() {
	awk -v k="$1" -v a="$2" -v b="$3" -v max="${4:-8}" '
		FILENAME ~ /events$/ {
			if ($1 >= a && $1 <= b) { ev[$1] = ev[$1] " " $2; if ($2 == k) got[$1] = 1 }
			next
		}
		$1 >= a && $1 <= b {
			if ($1 in got) { m++; next }
			st = "?"; for (i = 2; i <= NF; i++) if ($i ~ /^state=/) st = substr($i, 7)
			if (n++ < max)
				printf "#   %s state=%s events:%s\n", $1, st,
					($1 in ev) ? ev[$1] : " none"
		}
		END {
			if (n > max) printf "#   ... and %d more without %s\n", n - max, k
			if (!n) {
				printf "#   each of the %d ends of %s-%s has one: ", m, a, b
				printf "the count waited for is more than the range holds\n"
			}
		}' \
		"$RCD_DBG/events" "$RCD_DBG/conns" 2>/dev/null
}

# twice_in KIND FIRST LAST: endpoints of FIRST..LAST that saw KIND more than once.
twice_in() {
	awk -v k="$1" -v a="$2" -v b="$3" '$2 == k && $1 >= a && $1 <= b { c[$1]++ }
		END { for (e in c) if (c[e] > 1) n++; print n + 0 }' "$RCD_DBG/events"
}

# crossed_in FIRST LAST: endpoints of FIRST..LAST whose DREQ crossed the
# peer's: they sent a DREQ (DREQ_SENT: sent from ESTABLISHED, the module
# records it under the endpoint's lock) and then got the peer's
# (DREQ_RECEIVED: the CM takes a DREQ in DREQ_SENT too).
crossed_in() {
	awk -v a="$1" -v b="$2" '$1 >= a && $1 <= b && $2 == "DREQ_SENT" { s[$1] = 1 }
		$1 >= a && $1 <= b && $2 == "DREQ_RECEIVED" && s[$1] { n++; s[$1] = 0 }
		END { print n + 0 }' "$RCD_DBG/events"
}

# local_ids FIRST LAST: "NUM LOCAL_ID" (the CM's local id, decimal, as its
# trace prints it) for each endpoint of FIRST..LAST that has an id.
local_ids() {
	local -a l
	local x kv n
	mapfile -t l 2>/dev/null < "$RCD_DBG/conns"
	for x in "${l[@]}"; do
		n=${x%% *}
		[[ $n =~ ^[0-9]+$ ]] && ((n >= $1 && n <= $2)) || continue
		for kv in $x; do
			[[ $kv != local_id=* ]] || echo "$n $((${kv#local_id=}))"
		done
	done
}

# crossed_on_wire IDS: of the ends in file IDS (local_ids' lines), those
# whose DREQ crossed the peer's, as the CM's trace (cm_trace_on before the
# disconnect) shows it on the wire: the end sent a DREQ (icm_send_dreq),
# then a DREP (icm_send_drep) on the same local id, which it does only
# after taking the peer's DREQ. (The CM's DREP from TIMEWAIT to a repeated
# DREQ is not traced.) Not the harness's records: they say what it meant
# to send.
crossed_on_wire() {
	awk 'FNR == NR { want[$2] = 1; next }
		/^#/ { next }
		{
			ev = ""
			for (i = 1; i <= NF; i++)
				if ($i == "icm_send_dreq:" || $i == "icm_send_drep:") {
					ev = $i; break
				}
			if (ev == "") next
			id = ""
			for (j = i + 1; j <= NF; j++)
				if ($j ~ /^local_id=/) { id = substr($j, 10); break }
			if (!(id in want)) next
			if (ev == "icm_send_dreq:") sent[id] = 1
			else if (sent[id] && !(id in done)) { done[id] = 1; n++ }
		}
		END { print n + 0 }' "$1" $RCD_TRACING/trace
}

# exactly_once KIND FIRST LAST: every endpoint of FIRST..LAST saw KIND once.
exactly_once() {
	local n=$(($3 - $2 + 1)) got dup
	# events_in and twice_in in one awk (a process less).
	read -r got dup < <(awk -v k="$1" -v a="$2" -v b="$3" \
		'$2 == k && $1 >= a && $1 <= b { n++; c[$1]++ }
		END { for (e in c) if (c[e] > 1) d++; print n + 0, d + 0 }' "$RCD_DBG/events")
	[ "$got" = "$n" ] && [ "$dup" = 0 ] ||
		fail "$1 in $2-$3: $got events for $n endpoints, $dup endpoints more than once"
}

# state_count STATE FIRST LAST: endpoints of FIRST..LAST in STATE.
state_count() {
	awk -v s="state=$1" -v a="$2" -v b="$3" '$1 >= a && $1 <= b {
		for (i = 2; i <= NF; i++) if ($i == s) n++
	} END { print n + 0 }' "$RCD_DBG/conns"
}

# connect_range FIRST LAST DST [OPTS...]: connections FIRST..LAST from rxe0
# (10.77.0.1) to DST on service 0x1000.
connect_range() {
	local i first=$1 last=$2 dst=$3; shift 3
	for ((i = first; i <= last; i++)); do
		ctl connect $i rxe0 10.77.0.1 "$dst" 0x1000 "$@" || return 1
	done
}

# cma_listening PORT: a user-space rdma_cm listener (cmtime -b, ucmatose)
# is bound to TCP port PORT. Peers' tools start in seconds or in tens of
# seconds on a busy one-vCPU guest: wait for this, never for a fixed time.
cma_listening() {
	local -a l
	local x re="state LISTEN .*src-addr [0-9.]*:$1 "
	mapfile -t l < <(rdma resource show cm_id 2>/dev/null)
	for x in "${l[@]}"; do
		[[ ! $x =~ $re ]] || return 0
	done
	return 1
}

# slab_kb: the kernel's slab memory (Slab in /proc/meminfo), in kB.
slab_kb() { awk '$1 == "Slab:" { print $2 }' /proc/meminfo; }

# rdma_res KIND [link DEV/PORT]: the RDMA resources of KIND (qp, cq, pd) on
# every device (or on that link): rdma's lines, counted without a grep (a
# process less; tests poll this). rdma_res_cmp OP N KIND...: for wait_for,
# the count compared (OP: -eq, -le, ...) with N.
rdma_res() { rdma_res_match '?*' "$@" && echo "$REPLY"; }

# rdma_res_match GLOB KIND [link DEV/PORT]: how many of those lines match
# GLOB, into REPLY (builtins but for rdma itself).
rdma_res_match() {
	local -a l
	local x n=0 g=$1
	shift
	mapfile -t l < <(rdma resource show "$@" 2>/dev/null)
	for x in "${l[@]}"; do
		# shellcheck disable=SC2053
		[[ $x != $g ]] || n=$((n + 1))
	done
	REPLY=$n
}
rdma_res_cmp() { [ "$(rdma_res "${@:3}")" "$1" "$2" ]; }

# stats_line: the module's counters that matter for leaks, on one line.
stats_line() {
	local -a l
	local x out=
	mapfile -t l 2>/dev/null < "$RCD_DBG/stats"
	for x in "${l[@]}"; do
		case ${x%% *} in
		dreq_sent|drep_sent|drep_received|cm_ids_live|endpoints_live|events_lost)
			out+="$x " ;;
		esac
	done
	printf '%s' "$out"
}

# --- the IB CM's own tracepoints (events/ib_cma, drivers/infiniband/core/
# cm_trace.h) ------------------------------------------------------------------
#
# What the counters cannot tell: which message the CM sent on which id, and
# in what state, or which call it refused. The CM traces each send before it
# posts it (icm_send_req, _rep, _rtu, _mra, _dreq, _drep, _rej, ...: the id's
# local_id, remote_id and state at that moment; a DREQ's state is the one
# it was sent from, ESTABLISHED, a DREP's already TIMEWAIT), each refusal
# (icm_dreq_skipped: a DREQ asked for outside ESTABLISHED; icm_send_drep_err:
# a DREP outside DREQ_RCVD) and each failed MAD send whose id still waits for
# it (icm_mad_send_err: the state, the completion status). A test turns them
# on (cm_trace_on), asks (cm_trace_expect, cm_trace_none) and turns them off
# (cm_trace_off); cleanup turns them off too, so the next test starts with
# none. The debug kernel has them (CONFIG_FTRACE, kernel/debug.config; the
# suite's config fragment tests/config asks for them): without them the
# checks fail, they are not skipped.
RCD_TRACING=/sys/kernel/tracing

# kcount FUNC on|off: a kprobe event (rcd_count/FUNC) that counts the calls
# of the kernel function FUNC in kprobe_profile, or none; kcount_hits FUNC:
# that count.
kcount() {
	local ev=$RCD_TRACING/kprobe_events
	[ -d $RCD_TRACING/events ] || mount -t tracefs nodev $RCD_TRACING 2>/dev/null
	echo 0 2>/dev/null > "$RCD_TRACING/events/rcd_count/$1/enable"
	echo "-:rcd_count/$1" >> "$ev" 2>/dev/null
	[ "$2" = on ] || return 0
	echo "p:rcd_count/$1 $1" >> "$ev" &&
		echo 1 > "$RCD_TRACING/events/rcd_count/$1/enable" ||
		{ fail "no kprobe event on $1"; return 1; }
}
kcount_hits() { awk -v e="$1" '$1 == e { print $2 }' $RCD_TRACING/kprobe_profile; }

# cm_trace_on: the ib_cma events recorded from now on, in an empty buffer.
cm_trace_on() {
	[ -d $RCD_TRACING/events ] || mount -t tracefs nodev $RCD_TRACING 2>/dev/null
	[ -d $RCD_TRACING/events/ib_cma ] ||
		fail "no $RCD_TRACING/events/ib_cma: a kernel without CONFIG_FTRACE" || return 1
	cm_trace_off && echo 1 > $RCD_TRACING/events/ib_cma/enable &&
		echo 1 > $RCD_TRACING/tracing_on || fail "cannot enable events/ib_cma"
}

# cm_trace_off: the ib_cma events off, the buffer emptied.
cm_trace_off() {
	[ -d $RCD_TRACING/events/ib_cma ] || return 0
	echo 0 > $RCD_TRACING/events/ib_cma/enable && : > $RCD_TRACING/trace
}

# cm_trace EVENT [FIELD=VALUE...]: the recorded EVENTs (icm_send_dreq, ...)
# whose printed fields include every FIELD=VALUE, one a line
# ("local_id=.. remote_id=.. state=.."), in the order they happened.
cm_trace() {
	cm_trace_match "$@"
	[ ${#CM_TRACE[@]} = 0 ] || printf '%s\n' "${CM_TRACE[@]}"
}

# cm_trace_count EVENT [FIELD=VALUE...]
cm_trace_count() { cm_trace_match "$@"; echo ${#CM_TRACE[@]}; }

# cm_trace_match EVENT [FIELD=VALUE...]: those lines into the array
# CM_TRACE. Builtins only: a test asks a dozen times, and each awk and
# grep cost the debug guest about 0.17 s under TCG.
cm_trace_match() {
	local ev=" $1: " x r w IFS=$' \t\n'
	local -a l f
	shift
	CM_TRACE=()
	mapfile -t l 2>/dev/null < $RCD_TRACING/trace
	for x in "${l[@]}"; do
		[[ $x != '#'* && " $x" == *"$ev"* ]] || continue
		r=" $x"
		read -r -a f <<< "${r#*"$ev"}"
		r="${f[*]}"
		for w; do
			[[ " $r " == *" $w "* ]] || continue 2
		done
		CM_TRACE+=("$r")
	done
}

# cm_trace_dump: the recorded ib_cma events, for the log.
cm_trace_dump() {
	grep -v '^#' $RCD_TRACING/trace | sed 's/^ *//; s/^/#   trace: /' | head -${1:-40}
}

# cm_trace_expect COUNT EVENT [FIELD=VALUE...]: exactly COUNT such events.
cm_trace_expect() {
	local want=$1 got; shift
	cm_trace_match "$@"
	got=${#CM_TRACE[@]}
	[ "$got" = "$want" ] && return 0
	fail "$want x $* expected in the CM's trace, $got found; the trace:"
	cm_trace_dump
	return 1
}

# cm_trace_none EVENT [FIELD=VALUE...]: no such event.
cm_trace_none() { cm_trace_expect 0 "$@"; }

# cm_local_id NUM: NUM's CM local_id as the trace prints it (decimal).
cm_local_id() {
	local h
	h=$(conn_field "$1" local_id)
	[ -n "$h" ] || { fail "$1 has no CM id"; return 1; }
	echo $((h))
}
