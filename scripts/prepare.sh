# SPDX-License-Identifier: GPL-2.0
#
# Sourced by the scripts that boot a guest (demo, bench, tests/run.sh):
# install what is missing, build or reuse the cached kernel (KDIR, exported)
# and build the modules against it. Defines $here and the env.sh variables.
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
. "$here/scripts/env.sh"
bash "$here/scripts/setup.sh" >/dev/null || exit 1
KDIR=${KDIR:-$(bash "$here/scripts/kernel.sh" | tail -n 1)} || exit 1
export KDIR
bash "$here/scripts/build.sh" -s modules || { echo "module build failed" >&2; exit 1; }
# The suite's one user-space helper, built here: gcc in the guest costs
# about 25 s under TCG on the debug kernel (the guest runs the host's
# binaries, so the host's gcc and librdmacm are the guest's too).
f=$here/tests/sidr_flood
if [ ! -x "$f" ] || [ "$f.c" -nt "$f" ]; then
	gcc -O1 -Wall -o "$f" "$f.c" /usr/lib/x86_64-linux-gnu/librdmacm.so.1 ||
		{ echo "tests/sidr_flood.c: build failed" >&2; exit 1; }
fi
