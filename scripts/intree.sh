#!/usr/bin/env bash
# SPDX-License-Identifier: GPL-2.0
#
# The in-tree build of the module:
#   scripts/intree.sh patch    write the change as git-format-patch series
#                              against a fresh $KERNEL tree (6.12 or 7.3,
#                              scripts/env.sh). 7.3, for the lists: four
#                              series in $RCD_CACHE/intree-7.3/, each with a
#                              cover letter (kernel/7.3/covers/) and To:/Cc:
#                              from get_maintainer.pl: 1-ib-cm/ (linux-rdma),
#                              2-rust/ (rust-for-linux), 3-mm-slub/
#                              (mm), 4-rfc-rust-rdma/ (after the three). 6.12,
#                              the test kernel's: one, intree/series/. A
#                              series has one patch per $KSERIES/*.patch
#                              (with the new files it names from
#                              kernel/tree/); the RFC ends with the module
#                              (drivers/infiniband/ulp/rust_cm_disconnect/, its
#                              Kconfig and Makefile, the wiring in
#                              drivers/infiniband/{Kconfig,ulp/Makefile}),
#                              then its selftests
#                              (tools/testing/selftests/rdma/rust_cm_disconnect/);
#                              each patch with its MAINTAINERS lines for the
#                              files it adds. Check that each applies with
#                              `git am` to a fresh tree (the RFC after the
#                              fixes) and that checkpatch --strict finds
#                              nothing in any patch (else it fails)
#   scripts/intree.sh series-build
#                              write the series, then apply it one patch at a
#                              time to a copy of the cached kernel tree (its
#                              kernel/*.patch reverse-applied: the fresh
#                              source, with the test kernel's configuration
#                              and objects) and build bzImage and modules
#                              after each (incrementally); the selftests'
#                              make after the last. Fails at the first patch
#                              that does not build
#   scripts/intree.sh build    copy the cached kernel tree (once) to
#                              $RCD_CACHE/intree/linux, place the module and
#                              its selftests in it, set
#                              CONFIG_RUST_CM_DISCONNECT=m and build, then the
#                              selftests (the C test modules, sidr_flood,
#                              rcd_mod, rcd_kmsg);
#                              prints the tree last. The test tree itself is
#                              never changed.
# `make check-intree` runs the test suite from that tree's selftests
# directory, which loads the module that tree built.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
. "$here/scripts/env.sh"

rel=drivers/infiniband/ulp/rust_cm_disconnect
sel=tools/testing/selftests/rdma/rust_cm_disconnect
doc=Documentation/infiniband/rust_cm_disconnect.rst
out=$RCD_CACHE/intree
[ "$KERNEL" = 6.12 ] || out=$RCD_CACHE/intree-$KERNEL
mkdir -p "$out"

# place TREE: copy the module's sources into TREE/$rel and wire it in.
place() {
	local t=$1
	rm -rf "${t:?}/$rel"
	mkdir -p "$t/$rel/rust_cm_disconnect/shim" "$t/$rel/include"
	cp "$here"/rust_cm_disconnect.rs "$here"/rust_cm_disconnect_exports.c \
		"$here"/rust_cm_disconnect_shim.h "$t/$rel/"
	cp "$here"/rust_cm_disconnect/*.rs "$t/$rel/rust_cm_disconnect/"
	cp "$here"/rust_cm_disconnect/shim/*.rs "$t/$rel/rust_cm_disconnect/shim/"
	cp "$here"/include/rust_cm_disconnect.h "$t/$rel/include/"
	# The same Kbuild as out of tree, less the test modules.
	sed '/RCD_TEST_MODULES\|test modules\|tests\/modules/d' "$here/Kbuild" |
		awk 'NF { while (blank-- > 0) print ""; blank = 0; print; next } { blank++ }' \
		> "$t/$rel/Makefile"
	cat > "$t/$rel/Kconfig" <<'KCONFIG'
# SPDX-License-Identifier: GPL-2.0
config RUST_CM_DISCONNECT
	tristate "Safe disconnect (DREQ/DREP) for IB CM connections, in Rust"
	depends on RUST_RDMA_ABSTRACTIONS && INFINIBAND_ADDR_TRANS
	help
	  Wraps the IB connection manager's struct ib_cm_id in safe Rust:
	  DREQ and DREP private data checked against their fields, DREQ/DREP
	  events with their private data, an rdma_disconnect() that reports
	  every failure, and the same checked paths for C kernel code
	  (rcd_send_dreq, rcd_send_drep, rcd_disconnect). It keeps no
	  state: it acts on its caller's own ib_cm_id and QP.

	  If unsure, say N.
KCONFIG
	# After the last of the ULPs' Kconfigs (6.12: opa_vnic's; 7.3, which
	# has no opa_vnic: rtrs's).
	if ! grep -q rust_cm_disconnect "$t/drivers/infiniband/Kconfig"; then
		awk 'NR == FNR { if (/^source "drivers\/infiniband\/ulp\//) last = FNR; next }
			{ print } FNR == last { print "source \"drivers/infiniband/ulp/rust_cm_disconnect/Kconfig\"" }' \
			"$t/drivers/infiniband/Kconfig" "$t/drivers/infiniband/Kconfig" > "$t/.rcd-Kconfig"
		mv "$t/.rcd-Kconfig" "$t/drivers/infiniband/Kconfig"
		grep -q rust_cm_disconnect "$t/drivers/infiniband/Kconfig" ||
			{ echo "intree: no ULP Kconfig in drivers/infiniband/Kconfig to follow" >&2; exit 1; }
	fi
	grep -q rust_cm_disconnect "$t/drivers/infiniband/ulp/Makefile" ||
		echo 'obj-$(CONFIG_RUST_CM_DISCONNECT)	+= rust_cm_disconnect/' >> "$t/drivers/infiniband/ulp/Makefile"
	# The design document (kept in kernel/tree/, named by no kernel/*.patch:
	# the test kernel does not need it) and its line in the directory's
	# toctree, in its sorted place.
	cp "$here/kernel/tree/$doc" "$t/$doc"
	# Before sysfs (6.12: after opa_vnic, which 7.3 has no more).
	grep -q '^   rust_cm_disconnect$' "$t/Documentation/infiniband/index.rst" ||
		sed -i '/^   sysfs$/i \   rust_cm_disconnect' "$t/Documentation/infiniband/index.rst"
	grep -q '^   rust_cm_disconnect$' "$t/Documentation/infiniband/index.rst" ||
		{ echo "intree: no place for the document in Documentation/infiniband/index.rst" >&2
		  exit 1; }
}

# place_tests TREE: the selftests (what tests/Makefile names, the C test
# modules, and the test harness rcd_harness.ko in modules/harness/, built by
# modules/Makefile against the tree) into TREE/$sel. Not the host's runner
# (run.sh, guest.sh), the demo, the bench or the plan's times.
place_tests() {
	local t=$1
	rm -rf "${t:?}/$sel"
	mkdir -p "$t/$sel/modules/harness/conn"
	cp "$here"/tests/{Makefile,config,settings,rust_cm_disconnect.sh,ksft.sh,lib.sh,fuzz.py,imports.py,freeze_thread.py,sidr_flood.c,rcd_mod.c,rcd_kmsg.c} \
		"$here"/tests/t_*.sh "$t/$sel/"
	# The sources only: an out-of-tree build leaves *.mod.c beside them.
	cp "$here"/tests/modules/{Kbuild,Makefile,*.h} "$t/$sel/modules/"
	for f in "$here"/tests/modules/*.c; do
		[[ $f == *.mod.c ]] || cp "$f" "$t/$sel/modules/"
	done
	cp "$here"/tests/harness/{Kbuild,*.rs,*.md} "$t/$sel/modules/harness/"
	cp "$here"/tests/harness/conn/*.rs "$t/$sel/modules/harness/conn/"
	for f in "$here"/tests/harness/*.c; do
		[[ $f == *.mod.c ]] || cp "$f" "$t/$sel/modules/harness/"
	done
}

# maintainers TREE: MAINTAINERS lines for the files the staged change adds
# to TREE (a git repository): the kernel crate's RDMA files one by one in
# INFINIBAND SUBSYSTEM [RUST], its debugfs in DRIVER CORE, KOBJECTS, DEBUGFS
# AND SYSFS, its OwnedQueue in RUST, the module's and its selftests' directories
# in RUST CM DISCONNECT DRIVER; each entry made, in its sorted place (after
# INFINIBAND SUBSYSTEM, after RUST), by the first patch that needs it.
maintainers() {
	local t=$1
	(cd "$t" && git diff --cached --name-only --diff-filter=A) |
		MAINT=$t/MAINTAINERS IDENT=$ident REL=$rel SEL=$sel DOC=$doc python3 -c '
import os, sys
ident, rel, sel = os.environ["IDENT"], os.environ["REL"], os.environ["SEL"]
doc = os.environ["DOC"]
lists = "L:\tlinux-rdma@vger.kernel.org\nL:\trust-for-linux@vger.kernel.org\nS:\tMaintained\n"
heads = {
    "abs": "INFINIBAND SUBSYSTEM [RUST]\nM:\t" + ident + "\n" + lists,
    "mod": "RUST CM DISCONNECT DRIVER\nM:\t" + ident + "\n" + lists,
}
after = {"abs": "INFINIBAND SUBSYSTEM", "mod": "RUST"}
want = {"abs": set(), "mod": set()}
EXISTING = {
    "rust/kernel/debugfs.rs": "DRIVER CORE, KOBJECTS, DEBUGFS AND SYSFS",
    "rust/kernel/workqueue/owned.rs": "RUST",
}
want_existing = {}
for f in sys.stdin.read().split():
    if f == doc:
        want["mod"].add(f)
        continue
    for d in (rel, sel):
        if f.startswith(d + "/"):
            want["mod"].add(d + "/")
            break
    else:
        if f in EXISTING:
            # Not RDMA: the entry of what it wraps (debugfs: DRIVER CORE,
            # as upstream later did; OwnedQueue: RUST).
            want_existing.setdefault(EXISTING[f], set()).add(f)
        else:
            want["abs"].add(f)
path = os.environ["MAINT"]
lines = open(path).read().split("\n")
for name, fs in want_existing.items():
    for f in sorted(fs):
        i = lines.index(name) + 1
        j = i
        while lines[j]:
            j += 1
        entry = "F:\t" + f
        if entry in lines[i:j]:
            continue
        # Before the first F: line, or after the last that sorts before
        # it; the other lines of the entry stay as they are.
        fl = [n for n in range(i, j) if lines[n].startswith("F:\t")]
        k = fl[0] if fl else j
        for n in fl:
            if lines[n] < entry:
                k = n + 1
        lines[k:k] = [entry]
for key in ("abs", "mod"):
    if not want[key]:
        continue
    name = heads[key].split("\n")[0]
    if name not in lines:
        # After the entry its name sorts next to (MAINTAINERS is not
        # sorted everywhere: a search would land between others).
        i = lines.index(after[key]) + 1
        while lines[i]:
            i += 1
        lines[i + 1:i + 1] = heads[key].rstrip("\n").split("\n") + [""]
    i = lines.index(name) + 1
    j = i
    while lines[j]:
        j += 1
    files = [l[3:] for l in lines[i:j] if l.startswith("F:\t")]
    other = [l for l in lines[i:j] if not l.startswith("F:\t")]
    files = sorted(set(files) | want[key])
    lines[i:j] = other + ["F:\t" + f for f in files]
open(path, "w").write("\n".join(lines))
'
}

# The module's step of the series: its message.
module_msg() {
	cat <<'MSG'
RDMA: add rust_cm_disconnect, a safe IB CM disconnect in Rust

ib_send_cm_dreq() takes its private data length as a u8: a caller's 300
silently becomes 44, and the DREQ field holds 220 bytes. ib_send_cm_drep()
leaked its copy of the data when the length was too long (fixed first in
this series, for the kernels without it), and rdma_cm's
rdma_disconnect() swallows every DREQ/DREP failure.

rust_cm_disconnect wraps struct ib_cm_id in safe Rust so that none of this
can be gotten wrong, and exports the checked paths to C. It uses the
kernel crate's RDMA abstractions (kernel::rdma) for devices and verbs.

MSG
	echo "Signed-off-by: $ident"
}

# The selftests' step: its message.
tests_msg() {
	cat <<'MSG'
selftests: rdma: add rust_cm_disconnect tests

rust_cm_disconnect's tests, over soft-RoCE (rdma_rxe) on veth pairs,
driven through a test harness module (modules/harness/, rcd_harness.ko, in
Rust: connections made from its debugfs control files, whose DREQs, DREPs
and disconnects go through rust_cm_disconnect's C API): the checked
DREQ/DREP private data and its events, rdma_disconnect() semantics, the C
API through a C consumer module, device removal and unload with
connections live, hostile CM peers (crafted MADs from a test module) and
malformed control input, interop with rdma-core's rping, ucmatose, udaddy,
cmtime and rdma_client/rdma_server, and, last, kmemleak and the kernel log.

One program, rust_cm_disconnect.sh, runs every test and reports KTAP
through kselftest/ktap_helpers.sh; rust_cm_disconnect.sh NAME... runs
those. The harness and the C test modules are TEST_GEN_MODS_DIR (the
harness first, against the product this tree built), sidr_flood (a
librdmacm SIDR flood), rcd_mod (insmod and rmmod without kmod's
libraries, for the harness's load and unload around each test) and
rcd_kmsg (a test's kernel log, read once) TEST_GEN_PROGS_EXTENDED.
They need root, the module (config) and rdma-core's tools, so they are
not in the default TARGETS:

  make -C tools/testing/selftests TARGETS=rdma/rust_cm_disconnect run_tests

MSG
	echo "Signed-off-by: $ident"
}

# write_series: the series into $out/series (see patch), checked with git
# am and checkpatch --strict (reported: "checkpatch NAME: total: ...").
write_series() {
	name=$(git -C "$here" config user.name || true)
	email=$(git -C "$here" config user.email || true)
	if [ -n "$name" ] && [ -n "$email" ]; then
		ident="$name <$email>"
	else
		ident="Rust CM Disconnect Developers <rcd@example.org>"
	fi
	git=(git -c user.name="${ident% <*}" -c user.email="$(echo "${ident##*<}" | tr -d '>')"
		-c commit.gpgsign=false -c core.abbrev=12)
	# What the series touches, from a fresh tree, as a git repository.
	subset="MAINTAINERS rust drivers/infiniband include/rdma scripts/checkpatch.pl scripts/get_maintainer.pl
		scripts/spelling.txt scripts/const_structs.checkpatch Documentation/infiniband samples/rust"
	# What 7.3's fixes to upstream touch besides: SLUB's sheaves, and the
	# users of kernel::debugfs its .owner fix updates (samples/rust too).
	[ "$KERNEL" = 6.12 ] || subset="$subset mm/slub.c drivers/gpu/nova-core"
	local version
	case $KERNEL in
	6.12) version=$(dpkg-query -W -f='${Version}' linux-source-6.12) ;;
	*) version=$(cat "${KTARBALL%/usr/src/*}/VERSION") ;;
	esac
	fresh() {
		mkdir -p "$1"
		# shellcheck disable=SC2086
		tar -xf "$KTARBALL" -C "$1" --strip-components=1 \
			$(for f in $subset; do echo "linux-source-$KERNEL/$f"; done)
		(cd "$1" && "${git[@]}" init -q && "${git[@]}" add -A &&
			"${git[@]}" commit -q -m "linux-source-$KERNEL $version")
	}
	fresh "$tmp/git"
	# One commit per kernel/*.patch: its changes to existing files, the new
	# files it names from kernel/tree/ (with those named so far: rdma.rs
	# declares only the modules already there), its message.
	placed=()
	kpatches
	for p in "${kp[@]}"; do
		if grep -q '^+++ ' "$p"; then
			patch -d "$tmp/git" -p1 -s --no-backup-if-mismatch < "$p"
		fi
		# shellcheck disable=SC2207
		placed+=($(sed -n 's/^kernel\/tree: //p' "$p"))
		for f in "${placed[@]}"; do
			mkdir -p "$(dirname "$tmp/git/$f")"
			cp "$here/kernel/tree/$f" "$tmp/git/$f"
		done
		r=$tmp/git/rust/kernel/rdma.rs
		if [ -f "$r" ]; then
			for m in $(sed -n 's/^pub mod \([a-z_]*\);$/\1/p' "$r"); do
				[ -f "$tmp/git/rust/kernel/rdma/$m.rs" ] || sed -i "/^pub mod $m;\$/d" "$r"
			done
		fi
		git mailinfo "$tmp/msg" /dev/null < "$p" > "$tmp/info"
		{ sed -n 's/^Subject: //p' "$tmp/info"; echo; cat "$tmp/msg"; } > "$tmp/commit-msg"
		(cd "$tmp/git" && "${git[@]}" add -A)
		maintainers "$tmp/git"
		(cd "$tmp/git" && "${git[@]}" add -A &&
			"${git[@]}" commit -q --author="$(sed -n 's/^Author: //p' "$tmp/info") <$(sed -n 's/^Email: //p' "$tmp/info")>" \
				-F "$tmp/commit-msg")
	done
	# The module, then its selftests.
	place "$tmp/git"
	module_msg > "$tmp/commit-msg"
	(cd "$tmp/git" && "${git[@]}" add -A)
	maintainers "$tmp/git"
	(cd "$tmp/git" && "${git[@]}" add -A && "${git[@]}" commit -q --author="$ident" -F "$tmp/commit-msg")
	place_tests "$tmp/git"
	tests_msg > "$tmp/commit-msg"
	(cd "$tmp/git" && "${git[@]}" add -A)
	maintainers "$tmp/git"
	(cd "$tmp/git" && "${git[@]}" add -A && "${git[@]}" commit -q --author="$ident" -F "$tmp/commit-msg")
	n=$(( ${#kp[@]} + 2 ))
	rm -rf "$out/series" "$out"/[1-4]-*
	if [ "$KERNEL" = 6.12 ]; then
		# The test kernel's series (its backport, its fixes' 6.12 form):
		# for building and testing, not for the lists.
		(cd "$tmp/git" && "${git[@]}" format-patch -q -o "$out/series" "HEAD~$n")
		fresh "$tmp/check"
		(cd "$tmp/check" && "${git[@]}" am -q "$out"/series/*.patch)
		echo "intree: $out/series: $n patches, apply with git am to a fresh linux-source-$KERNEL tree"
	else
		split_series
	fi
	# checkpatch --strict, patch by patch (all reported, then fatal). The
	# fresh tree has no history: a Fixes: tag's commit id (the CM's fix,
	# kernel/0000-*.patch) cannot be looked up there, hence the ignore.
	local dirty=()
	for s in $(series_patches); do
		r=$(cd "$tmp/check" && perl scripts/checkpatch.pl --no-tree --strict --terse \
			--ignore UNKNOWN_COMMIT_ID "$s" || true)
		# --terse prints nothing for a clean patch.
		echo "checkpatch ${s##*/}: $(echo "$r" | grep '^total:' || echo "total: 0 errors, 0 warnings, 0 checks (clean)")"
		echo "$r" | grep -E '^[^ ]+: (ERROR|WARNING|CHECK):' | head -n 20 | sed 's/^/  /' || true
		! echo "$r" | grep -qE '^[^ ]+: (ERROR|WARNING|CHECK):' || dirty+=("${s##*/}")
	done
	[ ${#dirty[@]} = 0 ] ||
		{ echo "intree: checkpatch --strict is not clean on ${dirty[*]}" >&2; exit 1; }
}

# kpatches: the series' kernel patches into kp[], in the order of the
# lists they go to (group_of), kernel/tree's files placed by each.
kpatches() {
	local g p
	kp=()
	for g in 1 2 3 4; do
		for p in "$KSERIES"/[0-9]*.patch; do
			[ "$(group_of "${p##*/}")" != "$g" ] || kp+=("$p")
		done
	done
}

# group_of NAME: which of 7.3's four series a kernel patch belongs to:
# 1 the IB/cm fixes (linux-rdma), 2 the kernel::debugfs and workqueue fixes
# (rust-for-linux), 3 SLUB's kmemleak fix (mm), 4 the RFC (kernel::rdma,
# then the module and its selftests, which come after all of these).
# 6.12's series is one (its backport is not for the lists): all 4.
group_of() {
	if [ "$KERNEL" = 6.12 ]; then echo 4; return; fi
	case $1 in
	0000-IB-cm-*) echo 1 ;;
	0000-rust-debugfs-* | 0000-rust-workqueue-*) echo 2 ;;
	0000-mm-slub-*) echo 3 ;;
	0000-*) echo "intree: ${1}: no list for this fix (group_of)" >&2; exit 1 ;;
	*) echo 4 ;;
	esac
}

# The four series of 7.3: directory (its cover letter kernel/7.3/covers/DIR.txt)
# and subject prefix.
groups=("1-ib-cm PATCH" "2-rust PATCH" "3-mm-slub PATCH" "4-rfc-rust-rdma RFC PATCH")

# series_patches: the patches of what write_series wrote, in the order
# they apply (no cover letters).
series_patches() {
	if [ "$KERNEL" = 6.12 ]; then
		ls "$out"/series/*.patch
	else
		ls "$out"/[1-4]-*/*.patch | grep -v '/0000-cover-letter\.patch$'
	fi
}

# split_series: 7.3's history in $tmp/git as four git-format-patch series
# with cover letters (kernel/7.3/covers/), To: and Cc: from
# get_maintainer.pl; the three fixes each checked to apply alone to a fresh
# tree with git am, the RFC after the three.
split_series() {
	local commits g dir prefix c d i=0 cnt first last p list to cc
	mapfile -t commits < <(cd "$tmp/git" && git rev-list --reverse "HEAD~$n..HEAD")
	for g in 1 2 3 4; do
		read -r dir prefix <<< "${groups[$((g - 1))]}"
		cnt=0
		for p in "${kp[@]}"; do [ "$(group_of "${p##*/}")" != "$g" ] || cnt=$((cnt + 1)); done
		[ "$g" != 4 ] || cnt=$((cnt + 2))
		[ "$cnt" -gt 0 ] || continue
		first=${commits[$i]}
		last=${commits[$((i + cnt - 1))]}
		i=$((i + cnt))
		# Whom to send it to: get_maintainer.pl on its patches, in the
		# tree they make (the RFC's own MAINTAINERS entries included).
		rm -rf "$tmp/gm" && mkdir "$tmp/gm"
		(cd "$tmp/git" && "${git[@]}" format-patch -q -o "$tmp/gm" "$first^..$last")
		list=$(cd "$tmp/git" && "${git[@]}" checkout -q "$last" &&
			perl scripts/get_maintainer.pl --no-git --no-git-fallback --no-rolestats \
				--no-fixes --no-tree "$tmp"/gm/*.patch; "${git[@]}" checkout -q - )
		to=() cc=()
		while IFS= read -r c; do
			# Not the sender (the RFC's own MAINTAINERS entries).
			[ -n "$c" ] && [ "$c" != "$ident" ] || continue
			if [[ $c == *@vger.kernel.org* || $c == *@lists.* || $c == *@kvack.org* ]]; then
				cc+=(--cc="$c")
			else
				to+=(--to="$c")
			fi
		done <<< "$list"
		(cd "$tmp/git" && "${git[@]}" format-patch -q --cover-letter --subject-prefix="$prefix" \
			--thread=shallow "${to[@]}" "${cc[@]}" -o "$out/$dir" "$first^..$last")
		cover "$out/$dir/0000-cover-letter.patch" "$here/kernel/7.3/covers/$dir.txt"
		# Does it apply alone (the RFC: after the three fixes)?
		rm -rf "$tmp/check"
		fresh "$tmp/check"
		if [ "$g" = 4 ]; then
			for d in "$out"/[1-3]-*; do
				(cd "$tmp/check" && "${git[@]}" am -q $(ls "$d"/*.patch | grep -v 0000-cover))
			done
		fi
		(cd "$tmp/check" && "${git[@]}" am -q $(ls "$out/$dir"/*.patch | grep -v 0000-cover))
		echo "intree: $out/$dir: $cnt patch$([ "$cnt" = 1 ] || echo es) and a cover letter (${#to[@]} To:, ${#cc[@]} Cc:)," \
			"apply with git am to a fresh linux-source-$KERNEL tree$([ "$g" != 4 ] || echo ' after the three fixes')"
	done
	[ "$i" = "$n" ] || { echo "intree: split_series placed $i of $n commits" >&2; exit 1; }
}

# cover LETTER TEXT: the cover letter's subject and blurb from TEXT (its
# first line, the rest), and the kernel it was made against.
cover() {
	[ -f "$2" ] || { echo "intree: no cover letter text ${2#"$here"/}" >&2; exit 1; }
	KVER=$(cat "${KTARBALL%/usr/src/*}/VERSION" 2>/dev/null || echo "$KERNEL") \
		python3 - "$1" "$2" <<'PY'
import os, sys
letter, text = sys.argv[1], open(sys.argv[2]).read().rstrip("\n").split("\n")
s = open(letter).read()
assert "*** SUBJECT HERE ***" in s and "*** BLURB HERE ***" in s
body = "\n".join(text[1:]).strip("\n")
body += "\n\nMade against linux-source-" + os.environ["KVER"] + " (Debian's tarball).\n"
s = s.replace("*** SUBJECT HERE ***", text[0]).replace("*** BLURB HERE ***", body)
open(letter, "w").write(s)
PY
}

# doctest_origins LOG TREE: for each warning LOG has about the kernel
# crate's generated doctests, the file whose example it is (the generated
# file names it in the "location:" line before each test's code), so that
# a warning in a doctest of the series counts as the series'.
doctest_origins() {
	local gen=$2/rust/doctests_kernel_generated.rs l
	grep -oE -- '--> rust/doctests_kernel_generated\.rs:[0-9]+' "$1" | sed 's/.*://' |
		while read -r l; do
			echo "--> $(head -n "$l" "$gen" | grep -oE 'location: [^: ]+' | tail -n 1 |
				sed 's/location: //') (doctest, generated line $l)"
		done
}

# series_build: apply $out/series one patch at a time to a copy of the
# cached kernel tree whose kernel/*.patch is reverse-applied (the fresh
# source, with the test kernel's .config and objects, so each step builds
# incrementally), and build bzImage and modules after each, with
# CONFIG_RUST_CM_DISCONNECT=m and the sample (CONFIG_SAMPLE_RUST_RDMA_CM=m)
# once the series has them; after the last, the
# selftests' make, and the whole series with CLIPPY=1 and rustdoc. Stops at
# the first step that does not build.
series_build() {
	local src t=$out/series-linux log=$out/series-build.log p t0 start=$SECONDS
	src=$(bash "$here/scripts/kernel.sh" | tail -n 1)
	echo "intree: series-build: copying $src to $t, its kernel patches reverse-applied"
	copy_tree "$src" "$t"
	bash "$here/scripts/revert-patch.sh" "$t" "$t/.rcd-applied.patch"
	rm -f "$t/.rcd-applied.patch" "$t/.rcd-stamp"
	step() { # WHAT
		t0=$SECONDS
		if grep -qs RUST_CM_DISCONNECT "$t/$rel/Kconfig"; then
			"$t/scripts/config" --file "$t/.config" --module RUST_CM_DISCONNECT
		fi
		# The sample user of kernel::rdma, once a patch adds it.
		if grep -qs SAMPLE_RUST_RDMA_CM "$t/samples/rust/Kconfig"; then
			"$t/scripts/config" --file "$t/.config" --enable SAMPLES \
				--enable SAMPLES_RUST --module SAMPLE_RUST_RDMA_CM
		fi
		make -C "$t" -s "${KMAKE_VARS[@]}" olddefconfig
		if ! grep -qs RUST_CM_DISCONNECT "$t/$rel/Kconfig" ||
			grep -qx CONFIG_RUST_CM_DISCONNECT=m "$t/.config"; then :; else
			echo "intree: series-build: $1: CONFIG_RUST_CM_DISCONNECT=m did not take" >&2
			exit 1
		fi
		if grep -qs SAMPLE_RUST_RDMA_CM "$t/samples/rust/Kconfig" &&
			! grep -qx CONFIG_SAMPLE_RUST_RDMA_CM=m "$t/.config"; then
			echo "intree: series-build: $1: CONFIG_SAMPLE_RUST_RDMA_CM=m did not take" >&2
			exit 1
		fi
		if ! make -C "$t" -s "${KMAKE_VARS[@]}" -j"$(nproc)" bzImage modules > "$log" 2>&1; then
			tail -n 30 "$log" >&2
			echo "intree: series-build: $1 does not build (log: $log)" >&2
			exit 1
		fi
		# Anything the compilers said (warnings) counts against the step.
		if grep -E 'warning|error' "$log" | head -n 10 | grep .; then
			echo "intree: series-build: $1 builds with warnings (log: $log)" >&2
			exit 1
		fi
		echo "intree: series-build: $1 builds ($((SECONDS - t0)) s)"
	}
	step "the fresh tree"
	for p in $(series_patches); do
		patch -d "$t" -p1 -s --no-backup-if-mismatch < "$p"
		step "${p##*/}"
	done
	if [ -f "$t/$sel/Makefile" ]; then
		t0=$SECONDS
		# Without MAKELEVEL: under `make intree-series-build` it is 1, and
		# the selftests' lib.mk then leaves OUTPUT empty (it sets it only
		# at level 0) and links sidr_flood as /sidr_flood.
		env -u MAKELEVEL make -C "$t/$sel" -s "${KMAKE_VARS[@]}" > "$log" 2>&1 ||
			{ tail -n 30 "$log" >&2; echo "intree: series-build: the selftests' make fails" >&2; exit 1; }
		ls "$t/$sel"/modules/*.ko "$t/$sel/modules/harness/rcd_harness.ko" \
			"$t/$sel/sidr_flood" "$t/$sel/rcd_mod" "$t/$sel/rcd_kmsg" >/dev/null
		echo "intree: series-build: the selftests' make builds the harness, the test modules, sidr_flood, rcd_mod and rcd_kmsg ($((SECONDS - t0)) s)"
	fi
	# The whole series once more with clippy (CLIPPY=1, as the kernel runs
	# it), then the kernel crate's rustdoc: a warning about a Rust file the
	# series adds or changes fails it; the others (6.12's own code with this
	# toolchain) are counted.
	local ours n
	t0=$SECONDS
	ours=$(grep -h '^+++ b/.*\.rs$' $(series_patches) | sed 's|^+++ b/||' | sort -u)
	if ! make -C "$t" -s "${KMAKE_VARS[@]}" CLIPPY=1 -j"$(nproc)" bzImage modules > "$log" 2>&1 ||
		! make -C "$t" -s "${KMAKE_VARS[@]}" rustdoc >> "$log" 2>&1; then
		tail -n 30 "$log" >&2
		echo "intree: series-build: CLIPPY=1 or rustdoc fails (log: $log)" >&2
		exit 1
	fi
	n=$(grep -cE '^(warning|error)' "$log" || true)
	if { grep -E -- '--> ' "$log"; doctest_origins "$log" "$t"; } | grep -F "$ours" | grep .; then
		echo "intree: series-build: clippy or rustdoc warns about the series' files (log: $log)" >&2
		exit 1
	fi
	echo "intree: series-build: CLIPPY=1 and rustdoc: nothing about the series' files" \
		"($n warnings elsewhere, $((SECONDS - t0)) s)"
	echo "intree: series-build: every step builds, $((SECONDS - start)) s"
}

# copy_tree SRC DST: a copy of the built tree SRC that builds on
# incrementally. kbuild compares each object's command line with the one in
# its .cmd file, and those of objtool and of the Rust crates hold absolute
# paths: in a plain copy objtool rebuilds itself, and then every object it
# checks (all of them) is rebuilt, as long as a cold build (measured
# 2026-11-30). The copy's .cmd files are pointed at the copy.
copy_tree() {
	rm -rf "${2:?}"
	cp -a "$1" "$2"
	find "$2" -name '.*.cmd' -print0 | xargs -0 grep -lF "$1/" |
		xargs -r sed -i "s|$1/|$2/|g"
}

tmp=$(mktemp -d "$out/tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

case "${1:-}" in
patch)
	write_series
	;;
series-build)
	write_series
	series_build
	;;
build)
	src=$(bash "$here/scripts/kernel.sh" | tail -n 1)
	KDIR=$out/linux
	if [ "$(cat "$KDIR/.rcd-copied-from" 2>/dev/null)" != "$(cat "$src/.rcd-stamp") $src" ]; then
		echo "intree: copying $src to $KDIR" >&2
		copy_tree "$src" "$KDIR"
		echo "$(cat "$src/.rcd-stamp") $src" > "$KDIR/.rcd-copied-from"
	fi
	place "$KDIR"
	place_tests "$KDIR"
	"$KDIR/scripts/config" --file "$KDIR/.config" --module RUST_CM_DISCONNECT
	make -C "$KDIR" -s "${KMAKE_VARS[@]}" olddefconfig
	grep -qx 'CONFIG_RUST_CM_DISCONNECT=m' "$KDIR/.config" ||
		{ echo "intree: CONFIG_RUST_CM_DISCONNECT=m did not take" >&2; exit 1; }
	# A config change rebuilds the Rust crates of vmlinux too: build both.
	make -C "$KDIR" -s "${KMAKE_VARS[@]}" -j"$(nproc)" bzImage modules >&2
	# The selftests' own make: the C test modules against this tree,
	# sidr_flood, rcd_mod, rcd_kmsg.
	env -u MAKELEVEL make -C "$KDIR/$sel" -s "${KMAKE_VARS[@]}" >&2
	echo "$KDIR $KDIR/$rel/rust_cm_disconnect.ko $KDIR/$sel"
	;;
*)
	echo "usage: $0 patch|series-build|build" >&2
	exit 2
	;;
esac
