# SPDX-License-Identifier: GPL-2.0
#
# rust_cm_disconnect: every target sets up what it needs (packages, the
# cached kernel tree) on first use. See README.md.
#
#   make            build rust_cm_disconnect.ko (and the test harness
#                   rcd_harness.ko, the test modules)
#   make check      the KTAP test suite in QEMU guests over rdma_rxe: all of
#                   it on 7.3, beside it a core set on 6.12 (tests/check.sh),
#                   as one report; with KERNEL= or T=regex, one kernel's run
#   make stress     the full-size stress runs (10,000 cycles, 1,000 at once, ...)
#   make check-slow the 7.3 suite with both guests on one host CPU: each at
#                   about half its speed, as on a machine twice as slow
#   make check-intree  the same against the module built in the kernel tree
#   make intree-patch  the change as patch series against fresh trees (7.3: four, for the lists)
#                   (both kernels' series, unless KERNEL= names one)
#   make intree-series-build  each patch of the series builds, one after another
#   make demo       the main job, in a guest
#   make bench      module vs C baseline vs cmtime, ratios from one guest run
#   make mutants    each tests/mutants/*.patch applied to the product, built,
#                   and its tests run in a guest: which test kills it
#   make rdma-selftests  the test kernel's own rdma selftests, in a guest
#   make clean      remove build outputs from this directory
#   make rustfmt    format the Rust sources; make rustfmtcheck checks them
#   make CLIPPY=1   build with clippy as the kernel does
#
# KERNEL=7.3|6.12 picks the kernel (default 7.3; scripts/env.sh), each with
# its own series and cached trees. RCD_NO_HARNESS=1 builds the product and
# the C test modules without the test harness.
# KDIR=<built kernel tree> uses that tree instead of the cached one.
# RCD_CACHE=<dir> moves the cache (default ~/.cache/rust-cm-disconnect).

export KERNEL RCD_NO_HARNESS

RUST_SOURCES := rust_cm_disconnect.rs $(wildcard rust_cm_disconnect/*.rs rust_cm_disconnect/*/*.rs) \
	$(wildcard tests/harness/*.rs tests/harness/*/*.rs) \
	$(wildcard kernel/tree/rust/kernel/*.rs kernel/tree/rust/kernel/*/*.rs kernel/tree/rust/kernel/*/*/*.rs) \
	$(wildcard kernel/tree/samples/rust/*.rs)
RUSTFMT_CMD = /usr/bin/rustfmt --edition 2021 \
	--config-path $$(bash scripts/kernel.sh | tail -n 1)/.rustfmt.toml

all modules:
	bash scripts/build.sh modules $(if $(CLIPPY),CLIPPY=1)

check:
	$(if $(KERNEL)$(T),RCD_TIER=check bash tests/run.sh '$(T)',RCD_TIER=check bash tests/check.sh)

stress:
	RCD_TIER=stress bash tests/run.sh '$(T)'

check-slow:
	RCD_VM_HOST_CPUS=0 RCD_VM_TIMEOUT=7200 RCD_LOG=check-slow RCD_TIER=check bash tests/run.sh '$(T)'

check-intree:
	set -e; set -- $$(bash scripts/intree.sh build | tail -n 1); \
	KDIR=$$1 RCD_TESTS=$$3 bash tests/run.sh '$(T)'

intree-series-build:
	bash scripts/intree.sh series-build

# Both series unless KERNEL= names one: 7.3's, then 6.12's (the backport).
intree-patch:
	$(if $(KERNEL),bash scripts/intree.sh patch,KERNEL=7.3 bash scripts/intree.sh patch && KERNEL=6.12 bash scripts/intree.sh patch)

demo:
	bash scripts/demo.sh

bench:
	bash scripts/bench.sh

mutants:
	bash scripts/mutants.sh

rdma-selftests:
	bash scripts/rdma-selftests.sh

kernel:
	bash scripts/setup.sh && bash scripts/kernel.sh

clean:
	rm -rf *.o *.ko *.mod *.mod.c .*.cmd .*.d modules.order Module.symvers \
		rust_cm_disconnect/.*.cmd tests/modules/*.o tests/modules/*.ko \
		tests/harness/*.o tests/harness/*.ko tests/harness/*.mod \
		tests/harness/*.mod.c tests/harness/.*.cmd tests/harness/modules.order \
		tests/modules/*.mod tests/modules/*.mod.c tests/modules/.*.cmd \
		tests/modules/modules.order .tmp_versions

rustfmt:
	$(RUSTFMT_CMD) $(RUST_SOURCES)

rustfmtcheck:
	$(RUSTFMT_CMD) --check $(RUST_SOURCES)

.PHONY: all modules check check-slow stress check-intree intree-patch intree-series-build demo bench mutants rdma-selftests kernel clean rustfmt rustfmtcheck
