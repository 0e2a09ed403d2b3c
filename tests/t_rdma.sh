# SPDX-License-Identifier: GPL-2.0
#
# RDMA READ and WRITE between two module ends: memory
# registered with fast registration (ib_alloc_mr, ib_map_mr_sg, IB_WR_REG_MR)
# for the peer, invalidated locally (IB_WR_LOCAL_INV) to take the buffer
# back, re-registered under a new key; and a disconnect with READs and
# WRITEs outstanding on both sides: every work request comes back, every MR
# is deregistered, every buffer unmapped and freed.

# mr_field NUM IDX PART: state, addr, rkey or len of NUM's MR IDX (conns:
# mrIDX=state:addr:rkey:len); mr_field_v: into REPLY (polls).
mr_field() { local REPLY; mr_field_v "$@"; echo "$REPLY"; }
mr_field_v() {
	local -a p
	conn_field_v "$1" "mr$2"
	IFS=: read -r -a p <<< "$REPLY"
	case $3 in
	state) REPLY=${p[0]} ;;
	addr) REPLY=${p[1]} ;;
	rkey) REPLY=${p[2]} ;;
	len) REPLY=${p[3]} ;;
	esac
}

# mr_valid NUM IDX: after a poll, NUM's MR IDX is registered (for wait_for).
mr_valid() { ctl poll "$1" && mr_field_v "$1" "$2" state && [ "$REPLY" = valid ]; }

# The passive end reads the active end's MR (1024 pattern bytes) and writes
# text into it; the active end invalidates the MR and gets its buffer back
# with the text in it; the MR, registered again, has a new rkey, and the
# old one no longer reaches anything. An MR of another PD is refused; a
# refused registration leaves the MR as it was.
test_rdma_read_write_mr() {
	local n=400 p=$((400 + PASSIVE_BASE)) addr rkey rkey2 done0
	cm_pair $n || return 1
	ctl mr $n reg pat:1024 || return 1
	check "MR registered" wait_for 20 mr_valid $n 0 || return 1
	addr=$(mr_field $n 0 addr); rkey=$(mr_field $n 0 rkey)
	log "MR 0: addr $addr rkey $rkey len $(mr_field $n 0 len); mrs_live $(rcd_stat mrs_live)"
	ctl rdma $p read $addr $rkey 1024 || return 1
	check "READ completed" wait_for 20 polled_is $p completed 1 || return 1
	check "1024 bytes read, the pattern" test \
		"$(conn_field $p rx_bytes)/$(conn_field $p rx_last)" = "1024/$(pat_hex 16 16)" ||
		return 1
	# A registration the kernel crate refuses gives the MR back as it
	# was: still valid, same key, its page untouched (the WRITE below
	# covers 15 of these 16 bytes: the LOCAL_INV hands the 16th back),
	# and the WRITE reaches it.
	expect_errno EBUSY "mr $n reg-at 0 fill:16:ee" || return 1
	check "the MR refused is still valid, key $rkey" \
		test "$(mr_field $n 0 state)/$(mr_field $n 0 rkey)" = "valid/$rkey" || return 1
	ctl rdma $p write $addr $rkey 0 data=text:written-by-peer || return 1
	check "WRITE completed" wait_for 20 polled_is $p completed 2 || return 1
	ctl mr $n inval 0 || return 1
	check "LOCAL_INV completed: the buffer is back" \
		wait_for 20 polled_is $n mr_back 1 || return 1
	check "with the peer's text in it" \
		test "$(conn_field $n mr_last)" = "$(text_hex written-by-peer)10" || return 1
	expect_errno EINVAL "mr $n inval 0" || return 1
	ctl mr $n reg fill:512:ab || return 1
	check "registered again" wait_for 20 mr_valid $n 0 || return 1
	rkey2=$(mr_field $n 0 rkey)
	log "MR 0 again: rkey $rkey2 (was $rkey)"
	check "a new key" test "$rkey2" != "$rkey" || return 1
	# A LOCAL_INV with the send queue full (64 READs of the peer's MR,
	# not polled): ENOMEM, and the MR stays valid with its key.
	ctl mr $p reg pat:64 || return 1
	check "the peer's MR registered" wait_for 20 mr_valid $p 0 || return 1
	done0=$(conn_field $n completed)
	ctl rdma $n read "$(mr_field $p 0 addr)" "$(mr_field $p 0 rkey)" 16 count=64 || return 1
	expect_errno ENOMEM "mr $n inval 0" || return 1
	check "the MR not invalidated is still valid, key $rkey2" \
		test "$(mr_field $n 0 state)/$(mr_field $n 0 rkey)" = "valid/$rkey2" || return 1
	check "the 64 READs completed" \
		wait_for 20 polled_is $n completed $((done0 + 64)) || return 1
	expect_errno EMSGSIZE "mr $n reg pat:$((3 * 4096 + 1))" || return 1
	expect_errno EINVAL "mr $n reg-foreign pat:16" || return 1
	expect_errno EINVAL "rdma $n peek $addr $rkey 16" || return 1
	expect_errno EMSGSIZE "rdma $n read $addr $rkey 4097" || return 1
	expect_errno ENOMEM "rdma $n read $addr $rkey 16 count=65" || return 1
	# The old key: the READ fails at the responder (remote access error)
	# and the QP goes to the error state.
	ctl rdma $p read $addr $rkey 16 || return 1
	check "READ with the old rkey failed" wait_for 20 polled_is $p failed 1 || return 1
	log "active:  $(wr_line $n)"
	log "passive: $(wr_line $p)"
	ctl disconnect $n || return 1
	wait_event 20 $p DISCONNECTED && ctl disconnect $p || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT || return 1
	check "MRs deregistered, buffers unmapped" wait_for 10 nothing_mapped
}

# An MR's size is its user's (Mr::new): the harness's registers up to three
# pages, whose page list the REG_MR fills from one mapping. The peer READs
# 1024 bytes from the third page and 1024 across the first two's boundary:
# each starts with the pattern at its offset (its first 16 bytes compared;
# the kernel crate's MRs once had a page list of two and refused more than
# a page).
test_rdma_read_mr_of_pages() {
	local n=410 p=$((410 + PASSIVE_BASE)) addr rkey off want k
	cm_pair $n || return 1
	ctl mr $n reg pat:$((3 * 4096)) || return 1
	check "an MR of three pages registered" wait_for 20 mr_valid $n 0 || return 1
	addr=$(mr_field $n 0 addr); rkey=$(mr_field $n 0 rkey)
	check "its length" test "$(mr_field $n 0 len)" = $((3 * 4096)) || return 1
	for off in $((2 * 4096 + 100)) $((4096 - 8)); do
		want=
		for ((k = 0; k < 16; k++)); do want+=$(printf '%02x' $(((off + k) % 255 + 1))); done
		ctl rdma $p read "$(printf '0x%x' $((addr + off)))" $rkey 1024 || return 1
		check "READ at offset $off completed" \
			wait_for 20 completed_is $p $((off > 4096 ? 1 : 2)) || return 1
		check "the pattern at offset $off" test "$(conn_field $p rx_last)" = "$want" ||
			{ log "passive: $(wr_line $p)"; return 1; }
	done
}

# mrhold_is V: rcd_mrhold's held parameter is V.
mrhold_is() {
	local v
	read -r v 2>/dev/null < /sys/module/rcd_mrhold/parameters/held && [ "$v" = "$1" ]
}

# A peer's RDMA WRITE that passed rxe's key check before the MR's
# LOCAL_INV completed, copied after it: the buffer handed back must not
# change. rxe checks each packet's rkey, then copies its payload on the
# QP's receive task, while LOCAL_INV runs on its send task and only
# changes the MR's state; rcd_mrhold holds the 333-byte copy between the
# two until the test releases it. kernel::rdma exposes a page of the MR's
# own, copies the caller's bytes in at registration and out at the
# LOCAL_INV, and keeps the page until the MR is freed. Before, it handed
# the registered buffer itself back, and the held copy then wrote the
# peer's bytes into memory the caller owned.
test_mr_late_write_not_handed_back() {
	local n=420 p=$((420 + PASSIVE_BASE)) addr rkey fill11 last now rc=0
	cm_pair $n || return 1
	ctl mr $n reg fill:1024:11 || return 1
	check "MR registered" wait_for 20 mr_valid $n 0 || return 1
	addr=$(mr_field $n 0 addr); rkey=$(mr_field $n 0 rkey)
	insmod "$RCD_MODS/rcd_mrhold.ko" len=333 || return 1
	ctl rdma $p write $addr $rkey 0 data=fill:333:ee || { rmmod rcd_mrhold; return 1; }
	if ! check "the WRITE's copy is held after its key check" wait_for 30 mrhold_is 1; then
		rmmod rcd_mrhold; return 1
	fi
	ctl mr $n inval 0 &&
		check "LOCAL_INV completed, the copy still held" \
			wait_for 20 polled_is $n mr_back 1 || rc=1
	check "the window: the buffer came back before the copy" mrhold_is 1 || rc=1
	echo 1 > /sys/module/rcd_mrhold/parameters/release
	check "the held copy done" wait_for 30 mrhold_is 2 || rc=1
	rmmod rcd_mrhold || rc=1
	[ $rc = 0 ] || return 1
	fill11=$(printf '11%.0s' $(seq 16))
	last=$(conn_field $n mr_last); now=$(conn_field $n mr_now)
	log "handed back: $last; read again after the copy: $now"
	check "handed back with the bytes registered" test "$last" = "$fill11" || return 1
	check "nothing wrote into it afterwards (got $now)" test "$now" = "$last" || return 1
	check "the WRITE itself completed" wait_for 20 polled_is $p completed 1 || return 1
	ctl disconnect $n || return 1
	wait_event 20 $p DISCONNECTED && ctl disconnect $p || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT || return 1
	check "MRs deregistered, buffers unmapped" wait_for 10 nothing_mapped
}

# Each end registers a 4096-byte MR and posts 30 RDMA READs and 30 RDMA
# WRITEs of 4096 bytes at the other's; the active end disconnects at once,
# with them in flight on both sides. Every request comes back (completed,
# flushed, or failed by the peer's QP going away), none dropped; one
# DISCONNECTED each; every MR deregistered and buffer freed at timewait exit.
# The MRs' fields are read first, so that the five writes (the ctl builtin)
# follow each other with no process between them; and the test checks that
# the disconnect found requests in flight (some flushed or failed), or it
# would have tested nothing.
test_rdma_disconnect_mid_flight() {
	local n=410 p=$((410 + PASSIVE_BASE)) k=30 e an kn ap kp cut
	cm_pair $n || return 1
	ctl mr $n reg fill:4096:11 && ctl mr $p reg fill:4096:22 || return 1
	check "MRs registered" wait_for 20 mr_valid $n 0 && wait_for 20 mr_valid $p 0 || return 1
	an=$(mr_field $n 0 addr) && kn=$(mr_field $n 0 rkey) &&
		ap=$(mr_field $p 0 addr) && kp=$(mr_field $p 0 rkey) || return 1
	ctl rdma $n read $ap $kp 4096 count=$k &&
	ctl rdma $n write $ap $kp 4096 count=$k &&
	ctl rdma $p read $an $kn 4096 count=$k &&
	ctl rdma $p write $an $kn 4096 count=$k &&
	ctl disconnect $n || return 1
	log "mapped at the disconnect: $(rcd_stat wr_bufs_mapped), MRs $(rcd_stat mrs_live)"
	wait_event 20 $p DISCONNECTED && ctl disconnect $p || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT || return 1
	cut=0
	for e in $n $p; do
		log "$e: $(wr_line $e)"
		# tests/t_rping.sh: fails on a line without the counters too.
		all_back $e || return 1
		cut=$((cut + $(conn_field $e flushed) + $(conn_field $e failed)))
	done
	check "the disconnect caught requests in flight ($cut flushed or failed)" \
		test $cut -gt 0 || return 1
	exactly_once DISCONNECTED $n $n && exactly_once DISCONNECTED $p $p || return 1
	check "MRs deregistered, buffers unmapped" wait_for 10 nothing_mapped
}

# hook_steps HOOK N: the test hook HOOK logged N steps, each "ok".
hook_steps() {
	local n
	log "$(dmesg_test | grep "rcd_harness: $1:")"
	n=$(dmesg_test | grep -c "rcd_harness: $1: .*: ok$")
	check "its $2 steps as expected ($n logged)" test "$n" = "$2"
}

# QPs on one CQ (kernel::rdma::verbs::Cq), in `shared_cq rxe0 rxe1` (a test
# hook, conn/test_hooks.rs): a QP reserves its entries of the CQ (the next
# is refused beyond them). A QP freed while the CQ's work is held (in
# another QP's waker), its flushed receive's completion not taken, keeps
# that entry reserved and leaves its completions with the CQ, which
# delivers that one after the QP is gone: then the entry comes back. A QP
# freed during its waker's call waits for the call. A new QP gets no
# completion of another; a PD of another device cannot use the CQ.
test_verbs_shared_cq() {
	local cqs qps
	rxe_add rxe0 v0 && rxe_add rxe1 v1 && rcd_load || return 1
	cqs=$(rdma_res cq) qps=$(rdma_res qp)
	ctl shared_cq rxe0 rxe1 || { hook_steps shared_cq 9; return 1; }
	hook_steps shared_cq 9 || return 1
	check "its CQ and QPs freed ($cqs CQs, $qps QPs before)" \
		test "$(rdma_res cq)/$(rdma_res qp)" = "$cqs/$qps"
}

# no_kasan: no KASAN report in the test's part of the kernel log.
no_kasan() { ! dmesg_test | grep -q KASAN; }

# A QP's move to a port its device does not have (rxe has port 1 only) is
# refused before the RDMA core reads the device's port array at that index
# (_ib_modify_qp: rdma_ib_or_roce(), before the driver's own check): KASAN
# sees the read past the array of port 2.
test_verbs_qp_port_checked() {
	rxe_add rxe0 v0 && rcd_load || return 1
	ctl qp_ports rxe0 || { hook_steps qp_ports 3; return 1; }
	hook_steps qp_ports 3 || return 1
	check "no KASAN report" no_kasan
}

# The moves of a QP only its owner may make, in `qp_refusals rxe0`:
# through a borrowed QpRef neither RESET (it drops posted requests without
# completions) nor an address vector (the core swaps its GID references
# unlocked), EINVAL; through the owner no RESET while a request is posted,
# EBUSY. Each refusal comes before ib_modify_qp(), whose calls a kprobe
# event counts: to INIT, to the error state and the last RESET, 3.
test_verbs_qp_refusals() {
	local hits rc
	rxe_add rxe0 v0 && rcd_load && kcount ib_modify_qp on || return 1
	ctl qp_refusals rxe0; rc=$?
	hits=$(kcount_hits ib_modify_qp)
	kcount ib_modify_qp off
	[ $rc = 0 ] || { hook_steps qp_refusals 5; return 1; }
	hook_steps qp_refusals 5 || return 1
	check "ib_modify_qp() called 3 times ($hits)" test "$hits" = 3
}

# The sizes an MR is made with, in `mr_sizes rxe0`: three pages (its
# capacity), a size not of whole pages; not 0 bytes, nor more pages than the
# device's fast-registration page list takes (EINVAL, before any memory).
test_verbs_mr_sizes() {
	rxe_add rxe0 v0 && rcd_load || return 1
	ctl mr_sizes rxe0 || { hook_steps mr_sizes 4; return 1; }
	hook_steps mr_sizes 4
}

# RcQp::drain() is the core's ib_drain_qp() (a kprobe event counts its
# one call), in `qp_drain rxe0`: a QP of 1 + 1 with its receive queue full
# (the user's one receive posted) is drained: the drain's own receive fits
# in the room the QP keeps for it (else the core warns and does not wait),
# and the user's receive comes back flushed, with its buffer, nothing left.
test_verbs_qp_drain() {
	local hits rc
	rxe_add rxe0 v0 && rcd_load && kcount ib_drain_qp on || return 1
	ctl qp_drain rxe0; rc=$?
	hits=$(kcount_hits ib_drain_qp)
	kcount ib_drain_qp off
	[ $rc = 0 ] || { hook_steps qp_drain 3; return 1; }
	hook_steps qp_drain 3 || return 1
	check "ib_drain_qp() called once ($hits)" test "$hits" = 1 || return 1
	check "no warning" eval '! dmesg_test | grep -q "WARNING:"'
}

# A QP's scatter/gather entries and unsignalled SENDs, in `qp_sgl rxe0`
# (QPs of 1 + 1 in INIT, two entries a request): a receive of three buffers
# refused, nothing posted; one of two holds both, and the drain hands both
# back in order; an unsignalled SEND where no signalled one could follow it
# is ENOMEM, where a signalled one reaches the device (EINVAL in INIT).
test_verbs_qp_sgl() {
	rxe_add rxe0 v0 && rcd_load || return 1
	ctl qp_sgl rxe0 || { hook_steps qp_sgl 5; return 1; }
	hook_steps qp_sgl 5
}

# A QP whose waker owns the QP's last other reference, the waker cleared
# during a call of it: the clear waits for the call, so that the CQ's
# work, dropping its clone of the waker, never frees the QP (the free
# would wait for the call the work is in, for ever); the owner frees it.
test_verbs_waker_owns_qp() {
	local qps
	rxe_add rxe0 v0 && rcd_load || return 1
	qps=$(rdma_res qp)
	ctl waker_owns_qp rxe0 || { hook_steps waker_owns_qp 2; return 1; }
	hook_steps waker_owns_qp 2 || return 1
	check "its QP freed ($qps QPs before)" test "$(rdma_res qp)" = "$qps"
}
