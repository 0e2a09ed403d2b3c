#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
#
# freeze_thread.py TID FLAG [SECONDS]: stops the one thread TID
# (PTRACE_SEIZE, PTRACE_INTERRUPT) while the other threads of its process
# run on, at a moment it waits in read(2) (tried again until it is, for up
# to 90 s), prints "frozen", and lets it go (PTRACE_DETACH) once the file
# FLAG exists or SECONDS (default 60) have passed since. For t_rping.sh's
# rping_end_tells_hangs: rping's CQ thread held, between two completions,
# while its peer disconnects.
import ctypes
import os
import sys
import time

PTRACE_DETACH, PTRACE_SEIZE, PTRACE_INTERRUPT = 17, 0x4206, 0x4207
__WALL = 0x40000000

libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]


def ptrace(req, tid):
    if libc.ptrace(req, tid, None, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"ptrace {req:#x} {tid}: {os.strerror(err)}")


def main():
    tid, flag = int(sys.argv[1]), sys.argv[2]
    hold = float(sys.argv[3]) if len(sys.argv) > 3 else 60
    tries, give_up = 0, time.monotonic() + 90
    while True:
        tries += 1
        ptrace(PTRACE_SEIZE, tid)
        ptrace(PTRACE_INTERRUPT, tid)
        os.waitpid(tid, __WALL)
        with open(f"/proc/{tid}/syscall") as f:
            nr = f.read().split()[0]
        if nr == "0":
            break
        ptrace(PTRACE_DETACH, tid)
        if time.monotonic() > give_up:
            sys.exit(f"never found in read(2) in {tries} tries (last in syscall {nr})")
        time.sleep(0.05)
    print(f"frozen (try {tries})", flush=True)
    end = time.monotonic() + hold
    while not os.path.exists(flag) and time.monotonic() < end:
        time.sleep(0.1)
    ptrace(PTRACE_DETACH, tid)
    print("thawed", flush=True)


main()
