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
