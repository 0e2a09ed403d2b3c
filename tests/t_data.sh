# SPDX-License-Identifier: GPL-2.0
#
# Payloads: receives with real buffers (kernel memory mapped for the device,
# the PD's local DMA lkey), SENDs of up to the path MTU, and the ownership
# of those buffers. A posted work request owns its buffer until its
# completion (success or flush) is polled; whatever is still posted when a
# QP is freed (timewait exit, device removal) is flushed first; nothing stays
# mapped (stats: wr_bufs_mapped) and nothing leaks (kmemleak_clean).

# polled_is NUM FIELD VALUE: after a poll of NUM's CQ, its FIELD is VALUE.
polled_is() { ctl poll "$1" && conn_field_v "$1" "$2" && [ "$REPLY" = "$3" ]; }

# text_hex TEXT: TEXT's bytes in hex.
text_hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }

# wr_line NUM: NUM's work-request and data counters, for the log.
wr_line() {
	grep "^$1 " "$RCD_DBG/conns" |
		grep -oE '(posted|completed|flushed|failed|dropped|rx_[a-z]+|tx_[a-z]+)=[^ ]*' |
		tr '\n' ' '
}

# balanced NUM: every work request NUM posted came back: posted ==
# completed + flushed, none failed or dropped.
balanced() {
	local line
	# What is on the CQ is counted first (fails harmlessly once freed).
	echo "poll $1" 2>/dev/null > "$RCD_DBG/ctl" || true
	line=$(grep "^$1 " "$RCD_DBG/conns")
	awk -v n="$1" '{ for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
		END {
			# An absent field would compare equal to 0.
			if (!("posted" in v) || !("completed" in v) || !("flushed" in v) ||
			    !("failed" in v) || !("dropped" in v) || v["posted"] + 0 == 0) {
				print "# FAIL: " n ": no work-request counters (posted=" \
					v["posted"] ")"
				exit 1
			}
			ok = v["posted"] == v["completed"] + v["flushed"] &&
				v["failed"] == 0 && v["dropped"] == 0
			if (!ok)
				print "# FAIL: " n ": posted " v["posted"] " != completed " \
					v["completed"] " + flushed " v["flushed"] " (failed " \
					v["failed"] ", dropped " v["dropped"] ")"
			exit !ok
		}' <<< "$line"
}

# arrived FROM TO BYTES MSGS: TO received BYTES in MSGS messages of the
# pattern, and what FROM sent is what arrived (FNV-1a).
arrived() {
	check "$2 received $3 bytes in $4 messages" \
		test "$(conn_field $2 rx_bytes)/$(conn_field $2 rx_msgs)" = "$3/$4" || return 1
	check "what $1 sent is what arrived (FNV-1a)" \
		test "$(conn_field $1 tx_sum)" = "$(conn_field $2 rx_sum)" || return 1
	check "the messages start with the pattern" \
		test "$(conn_field $2 rx_last)" = "$(pat_hex 16 16)"
}

# 10 SENDs of 1024 bytes (the path MTU of rxe on a 1500-byte veth) from each
# end into the other's 1024-byte receives: every byte arrives (count and
# FNV-1a checksum equal on both sides), one SEND of text lands as sent, and
# bad posts are refused with nothing posted.
test_data_module_to_module() {
	local n=300 p=$((300 + PASSIVE_BASE)) t0 sz=1024 k=10
	cm_base
	cm_pair $n || return 1
	t0=$SECONDS
	ctl post $p $k 0 size=$sz && ctl post $n $k 0 size=$sz || return 1
	check "$k buffers mapped on each side" stat_is wr_bufs_mapped $((2 * k)) || return 1
	ctl post $n 0 $k size=$sz && ctl post $p 0 $k size=$sz || return 1
	check "active: $k sent, $k received" \
		wait_for 20 polled_is $n completed $((2 * k)) || return 1
	check "passive: $k sent, $k received" \
		wait_for 20 polled_is $p completed $((2 * k)) || return 1
	log "$k x $sz B each way in $((SECONDS - t0)) s"
	log "active:  $(wr_line $n)"
	log "passive: $(wr_line $p)"
	arrived $n $p $((k * sz)) $k || return 1
	check "and the other way" \
		test "$(conn_field $p tx_sum)" = "$(conn_field $n rx_sum)" || return 1
	check "nothing mapped any more" wait_for 10 stat_is wr_bufs_mapped 0 || return 1
	# DATA as the payload; a receive larger than the message.
	ctl post $p 1 0 size=64 && ctl post $n 0 1 data=text:hello-rdma || return 1
	check "the text arrived" \
		wait_for 20 polled_is $p rx_last "$(text_hex hello-rdma)" || return 1
	check "10 bytes more" test "$(conn_field $p rx_bytes)" = $((k * sz + 10)) || return 1
	# Refused, nothing posted.
	expect_errno EMSGSIZE "post $n 0 1 size=$((sz + 1))" || return 1
	expect_errno EMSGSIZE "post $n 0 1 data=pat:2000" || return 1
	expect_errno EMSGSIZE "post $n 1 0 size=4097" || return 1
	expect_errno ENOMEM "post $n 65 0 size=16" || return 1
	expect_errno ENOMEM "post $n 0 65" || return 1
	expect_errno EINVAL "post $n 1 0 size=x" || return 1
	expect_errno EINVAL "post $n 1 0 colour=blue" || return 1
	expect_errno E2BIG "post $n 1 0 size=99999999" || return 1
	check "nothing posted by the refused ones" \
		test "$(conn_field $n posted)" = $((2 * k + 1)) || return 1
	check "still established" test "$(conn_state $n)" = ESTABLISHED || return 1
	log "what an endpoint holds:" \
		"$(grep -E '^endpoint_(fixed_bytes|bytes_avg) ' $RCD_DBG/stats | tr '\n' ' ')"
	balanced $n && balanced $p
}

# Requests of several buffers and unsignalled SENDs (RcQp::post_recv_sg,
# post_send_sg): 4 SENDs of 1024 pattern bytes, each in 3 buffers, the
# first 3 unsignalled, into receives of 3 buffers: every byte arrives, in
# order (FNV-1a equal on both sides); the device completes the receives
# and the one signalled SEND only (a kprobe event counts rxe_cq_post()),
# whose completion hands the 3 before it back first. Two unsignalled SENDs
# with none after them stay the QP's (their 6 buffers mapped, not
# completed) until a signalled one's completion. More buffers than the
# QP's (4) is EINVAL before the device (rxe logs what it refuses).
test_data_scatter_gather_unsignaled() {
	local n=320 p=$((320 + PASSIVE_BASE)) sz=1024 hits
	cm_base
	cm_pair $n || return 1
	ctl post $p 7 0 size=$sz sge=3 || return 1
	check "7 receives of 3 buffers mapped" stat_is wr_bufs_mapped 21 || return 1
	kcount rxe_cq_post on || return 1
	ctl post $n 0 4 size=$sz sge=3 unsig=3 || return 1
	check "passive: 4 received" wait_for 20 polled_is $p completed 4 || return 1
	check "active: 4 SENDs completed" wait_for 20 polled_is $n completed 4 || return 1
	hits=$(kcount_hits rxe_cq_post)
	kcount rxe_cq_post off
	check "5 completions from the device: 4 receives, 1 SEND ($hits)" \
		test "$hits" = 5 || return 1
	arrived $n $p $((4 * sz)) 4 || return 1
	ctl post $n 0 2 size=$sz sge=3 unsig=2 || return 1
	check "passive: 2 more received" wait_for 20 polled_is $p completed 6 || return 1
	check "active: the 2 unsignalled not back" polled_is $n completed 4 || return 1
	check "their 6 buffers and a receive's 3 mapped" stat_is wr_bufs_mapped 9 || return 1
	ctl post $n 0 1 size=$sz || return 1
	check "active: all 7 back" wait_for 20 polled_is $n completed 7 || return 1
	check "passive: 7 received" wait_for 20 polled_is $p completed 7 || return 1
	check "all of it arrived" \
		test "$(conn_field $n tx_sum)" = "$(conn_field $p rx_sum)" || return 1
	check "nothing mapped" wait_for 10 stat_is wr_bufs_mapped 0 || return 1
	expect_errno EINVAL "post $n 0 1 size=$sz sge=5" || return 1
	expect_errno EINVAL "post $n 1 0 size=$sz sge=5" || return 1
	expect_errno EINVAL "post $n 0 1 size=2 sge=3" || return 1
	expect_errno EINVAL "post $n 0 1 unsig=2" || return 1
	expect_errno ENOMEM "post $n 0 64 unsig=64" || return 1
	check "nothing posted by the refused ones" test "$(conn_field $n posted)" = 7 ||
		return 1
	ctl post $p 1 0 size=$sz && ctl post $n 0 1 size=$sz sge=4 || return 1
	check "the QP still sends" wait_for 20 polled_is $n completed 8 || return 1
	check "(received)" wait_for 20 polled_is $p completed 8 || return 1
	check "rxe never saw the 5 buffers (it logs what it refuses)" \
		eval '! dmesg_test | grep -q "num_sge > max_sge"' || return 1
	balanced $n && balanced $p
}

# A SEND with data before the QP has a path (INIT: the REP has not come)
# is ENOTCONN; receives may be posted (they wait for the connection). A
# REG_MR the device refuses (rxe: a QP before RTS) gives the MR back free
# and uses up no key: the next one offers the same.
test_data_send_before_connected() {
	local k1 k2
	rxe_add rxe0 v0 && rcd_load || return 1
	ctl listen 1 rxe0 0x1000 || return 1
	# on_rep=ignore: the active end does nothing with the REP, its QP stays
	# in INIT.
	ctl connect 2 rxe0 10.77.0.1 10.77.0.1 0x1000 on_rep=ignore recv=4:256 || return 1
	expect_errno ENOTCONN "post 2 0 1 size=16" || return 1
	expect_errno EINVAL "mr 2 reg pat:16" || return 1
	k1=$(conn_field 2 mr0 | cut -d: -f3)
	expect_errno EINVAL "mr 2 reg-at 0 pat:16" || return 1
	k2=$(conn_field 2 mr0 | cut -d: -f3)
	check "refused twice, the same key offered, $k1 (got $k2)" \
		test "$(conn_field 2 mr0 | cut -d: -f1)/$k2" = "free/$k1" || return 1
	check "4 receives posted before the REQ" test "$(conn_field 2 posted)" = 4 || return 1
	check "4 buffers mapped" stat_is wr_bufs_mapped 4 || return 1
	ctl close 2 || return 1
	check "closed: nothing mapped" wait_for 10 stat_is wr_bufs_mapped 0
}

# A disconnect with receives posted: each end's 16 receives (1024-byte
# buffers) come back flushed, after 4 SENDs each way that completed:
# posted == completed + flushed on both ends, nothing mapped. A third
# connection's receives, posted on an end that answers the peer's DREQ by
# itself (auto_drep, no disconnect() of its own), are flushed when its QP
# is freed at timewait exit.
test_data_disconnect_flushes_buffers() {
	local n=310 p=$((310 + PASSIVE_BASE)) m=311 q=$((311 + PASSIVE_BASE)) k=16
	cm_pair $n || return 1
	CONNECT_OPTS=auto_drep=- cm_pair $m || return 1
	ctl post $n 4 4 size=512 && ctl post $p 4 4 size=512 || return 1
	check "4 + 4 completed on each side" wait_for 20 polled_is $n completed 8 || return 1
	check "(passive)" wait_for 20 polled_is $p completed 8 || return 1
	ctl post $n $k 0 size=1024 && ctl post $p $k 0 size=1024 &&
		ctl post $m $k 0 size=1024 || return 1
	check "$((3 * k)) buffers mapped" stat_is wr_bufs_mapped $((3 * k)) || return 1
	ctl disconnect $n || return 1
	check "initiator: $k flushed" wait_for 10 polled_is $n flushed $k || return 1
	wait_event 20 $p DISCONNECTED || return 1
	ctl disconnect $p || return 1
	check "responder: $k flushed" wait_for 10 polled_is $p flushed $k || return 1
	ctl dreq $q text:bye || return 1
	wait_event 20 $q DREP_RECEIVED || return 1
	wait_event 30 $n TIMEWAIT_EXIT && wait_event 30 $p TIMEWAIT_EXIT &&
		wait_event 30 $m TIMEWAIT_EXIT || return 1
	check "auto_drep end: its $k receives flushed at timewait exit" \
		test "$(conn_field $m flushed)" = $k || return 1
	log "initiator: $(wr_line $n)"
	log "responder: $(wr_line $p)"
	log "auto_drep: $(wr_line $m)"
	balanced $n && balanced $p && balanced $m || return 1
	check "nothing mapped" wait_for 10 stat_is wr_bufs_mapped 0 || return 1
	exactly_once DISCONNECTED $n $n && exactly_once DISCONNECTED $p $p &&
		exactly_once DISCONNECTED $m $m
}

# Device removal and unload with buffers posted: 10 connections over the
# veth (rxe0 -> rxe1), 8 receives with 1024-byte buffers on each end and 2
# SENDs each way in flight. rdma link del rxe1 frees rxe1's ends with every
# request flushed (none dropped); rxe0's stay posted and the module unloads
# with them (the QPs' destroy frees them: kmemleak_clean checks).
test_data_device_removed_and_unload() {
	local a=320 b=329 pa=$((320 + PASSIVE_BASE)) pb=$((329 + PASSIVE_BASE)) i t0
	pair2_range $a $b $FAST || return 1
	for ((i = a; i <= b; i++)); do
		ctl post $i 8 2 size=1024 &&
			ctl post $((i + PASSIVE_BASE)) 8 2 size=1024 || return 1
	done
	log "mapped before: $(rcd_stat wr_bufs_mapped)"
	t0=$SECONDS
	check "rdma link del rxe1 returns" timeout 120 rdma link del rxe1 || return 1
	log "rxe1 deleted in $((SECONDS - t0)) s"
	check "all of rxe1's ends freed" test "$(state_count FREED $pa $pb)" = 10 || return 1
	for ((i = pa; i <= pb; i++)); do balanced $i || return 1; done
	log "rxe1's ends: flushed $(awk -v a=$pa -v b=$pb '$1 >= a && $1 <= b {
			for (i = 2; i <= NF; i++)
				if ($i ~ /^(flushed|completed)=/) {
					split($i, kv, "="); s[kv[1]] += kv[2]
				}
		}
		END { print s["flushed"] ", completed " s["completed"] }' "$RCD_DBG/conns")"
	log "mapped after: $(rcd_stat wr_bufs_mapped) (rxe0's receives," \
		"and its SENDs not yet polled)"
	t0=$SECONDS
	check "the module unloads with buffers posted" \
		timeout 120 rmmod rcd_harness || return 1
	log "unloaded in $((SECONDS - t0)) s"
	check "no QP of ours left" \
		test "$(rdma resource show qp 2>/dev/null | grep -c rcd_harness)" = 0
}
