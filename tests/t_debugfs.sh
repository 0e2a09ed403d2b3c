# SPDX-License-Identifier: GPL-2.0
#
# The harness's debugfs files and the module's lifetime. An open
# debugfs file keeps a pointer to the file_operations of the module that
# made it: at close, debugfs's proxy (fs/debugfs/file.c,
# full_proxy_release) reads that table's ->release and ->owner and calls
# the release, whether or not the file was removed meanwhile. Only a table
# whose .owner is the module keeps the module loaded while the file is open
# (fops_get at open); without one (7.3's upstream kernel::debugfs, which
# sets no .owner, without the series' patch 0000-rust-debugfs-keep-the-
# module-loaded...) rmmod succeeds with the file open and the close reads
# the freed module's table.

# rmmod of the harness with a read file (stats) and the written one (ctl)
# open, then a read, a write and the close of each: rmmod must be refused
# until both are closed, and nothing may be reported in the kernel log. The
# files are held by a child, so that a close that faults kills the child,
# not the test.
# Before the rmmod, the open files must hold the module (its refcnt up by
# one per open file, debugfs's fops_get of a table with .owner): without
# .owner (unpatched 7.3 kernel::debugfs) the test fails there, closes the
# files while the module is still loaded and leaves it loaded, instead of
# unloading it under the open files (a close after that froze the 7.3
# guest). The holder's output goes to its files, not the test's pipe.
test_debugfs_open_file_holds_module() {
	local d=/run/rcd-debugfs-open holder rc out st base held
	rcd_load || return 1
	rm -rf "$d" && mkdir -p "$d" || return 1
	read -r base < /sys/module/rcd_harness/refcnt || return 1
	(
		exec >/dev/null 2>&1
		exec 3<"$RCD_DBG/stats" 4>"$RCD_DBG/ctl" || exit 1
		: > "$d/open"
		until [ -e "$d/go" ]; do nap 0.1; done
		# After an rmmod that succeeded these must fail (EIO): the file
		# is removed. With the module held they work.
		read -r -u 3 _ 2>"$d/read.err"; echo $? > "$d/read"
		{ echo "poll 0" >&4; } 2>"$d/write.err"; echo $? > "$d/write"
		exec 3<&- 4>&-
		: > "$d/closed"
	) & holder=$!
	wait_for 10 test -e "$d/open" ||
		{ kill $holder; fail "the holder did not open the files"; return 1; }
	read -r held < /sys/module/rcd_harness/refcnt
	log "rcd_harness refcnt: $base, $held with stats and ctl open"
	if [ "$held" -lt $((base + 2)) ]; then
		: > "$d/go"
		wait $holder
		fail "the open files hold no reference on the module ($held, want $base + 2):" \
			"no .owner in their file_operations; rmmod would unload it under them"
		return 1
	fi
	out=$(rmmod rcd_harness 2>&1); rc=$?
	log "rmmod rcd_harness with stats and ctl open: rc=$rc ${out:-(no message)}"
	: > "$d/go"
	wait $holder; st=$?
	log "holder: exit $st;" \
		"read: $(cat "$d/read" 2>/dev/null) $(cat "$d/read.err" 2>/dev/null);" \
		"write: $(cat "$d/write" 2>/dev/null) $(cat "$d/write.err" 2>/dev/null)"
	nap 1
	if dmesg_has "$DMESG_BAD"; then
		dmesg_test | grep -E -A8 "$DMESG_BAD" | head -30 | sed 's/^/# /'
		fail "a kernel report after the files were closed" || return 1
	fi
	check "the holder closed both files and exited (exit $st)" \
		test "$st" = 0 -a -e "$d/closed" || return 1
	check "rmmod was refused while the files were open (.owner)" test "$rc" != 0 || return 1
	check "the harness unloads once they are closed" rmmod rcd_harness || return 1
	rm -rf "$d"
}
