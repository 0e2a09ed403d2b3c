# SPDX-License-Identifier: GPL-2.0
#
# The module skeleton: load, unload, and the RDMA devices it tracks.

test_load_unload() {
	rcd_load || return 1
	check "debugfs directory" test -r "$RCD_DBG/devices" || return 1
	check "'loaded' in dmesg" sh -c "dmesg | grep -q 'rust_cm_disconnect: loaded'" || return 1
	rcd_unload || return 1
	check "module gone" sh -c "! test -d /sys/module/rust_cm_disconnect" || return 1
	check "debugfs gone" sh -c "! test -e $RCD_DBG" || return 1
	# And again: nothing was left behind that breaks a second load.
	rcd_load && rcd_unload
}

test_device_before_load() {
	rxe_add rxe0 v0 || return 1
	rcd_load || return 1
	cat "$RCD_DBG/devices" | sed 's/^/# devices: /'
	check "rxe0 listed with a RoCE port" grep -qx 'rxe0 port=1 roce=1' "$RCD_DBG/devices" || return 1
	check "one device live" test "$(rcd_stat devices_live)" = 1
}

test_device_after_load() {
	rcd_load || return 1
	check "no device yet" test "$(rcd_stat devices_live)" = 0 || return 1
	rxe_add rxe0 v0 || return 1
	rxe_add rxe1 v1 || return 1
	check "rxe0 seen" rcd_has_device rxe0 || return 1
	check "rxe1 seen" rcd_has_device rxe1 || return 1
	check "two added" test "$(rcd_stat devices_added)" = 2 || return 1
	check "'device rxe1 added' in dmesg" sh -c "dmesg | grep -q 'device rxe1 added'"
}

test_device_deleted_while_loaded() {
	rxe_add rxe0 v0 || return 1
	rxe_add rxe1 v1 || return 1
	rcd_load || return 1
	rxe_del rxe0 || return 1
	check "rxe0 no longer listed" sh -c "! grep -q '^rxe0 ' $RCD_DBG/devices" || return 1
	check "rxe1 still listed" rcd_has_device rxe1 || return 1
	check "one removed" test "$(rcd_stat devices_removed)" = 1 || return 1
	check "one live" test "$(rcd_stat devices_live)" = 1 || return 1
	# The same name can come back and is seen again.
	rxe_add rxe0 v0 || return 1
	check "rxe0 back" rcd_has_device rxe0
}

test_unload_with_devices() {
	rxe_add rxe0 v0 || return 1
	rxe_add rxe1 v1 || return 1
	rcd_load || return 1
	rcd_unload || return 1
	check "both devices let go" sh -c "dmesg | grep -q 'device rxe0 removed' && dmesg | grep -q 'device rxe1 removed'" || return 1
	check "rxe0 still usable by others" sh -c "rdma link show rxe0/1 | grep -q ACTIVE" || return 1
	rcd_load || return 1
	check "seen again on reload" test "$(rcd_stat devices_live)" = 2
}
