#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""A randomized driver for the harness's control interface (rcd_harness, guest).

  fuzz.py ctl SECONDS SEED
      Writes random commands to ctl for SECONDS: well-formed ones from the
      grammar with random arguments (a small set of connection numbers, so
      that commands meet live connections in every state), mutations of
      them (bytes flipped, cut, repeated, spliced) and random bytes. Every
      write must succeed or fail with an errno from ALLOWED; anything else
      is a failure. Prints counts and exits 1 on a failure.

  fuzz.py data ROUNDS SEED
      The private-data paths: ROUNDS times, a random DREQ payload (0..300
      random bytes) on a fresh connection, then a random DREP payload (0..300)
      from its peer. A length over the field (220, 224) must be EINVAL with
      nothing sent and the connection unchanged; any other must arrive at
      the peer exactly (the bytes, then zeros to the field's size).

Connections use rxe0 on 10.77.0.1 talking to itself, listener 1 on service
0x1000 (set up by the caller).
"""
import errno
import os
import random
import sys
import time

DBG = "/sys/kernel/debug/rcd_harness"
PASSIVE = 1000000

# What a refused command may answer: malformed (EINVAL), too big (E2BIG),
# unknown number (ENOENT), taken number (EEXIST), wrong CM state (EINVAL,
# ENOTCONN, EALREADY), no QP or device (ENODEV), no neighbour or route
# (EHOSTUNREACH, ENETUNREACH; ETIMEDOUT if the resolution reports late),
# queue full (ENOMEM), service id already listened on (EBUSY, from the CM),
# a buffer or SEND over its limit (EMSGSIZE).
ALLOWED = {errno.EINVAL, errno.E2BIG, errno.ENOENT, errno.EEXIST, errno.ENOTCONN,
           errno.EALREADY, errno.ENODEV, errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ETIMEDOUT,
           errno.ENOMEM, errno.EBUSY, errno.EMSGSIZE}


def write(cmd):
    fd = os.open(DBG + "/ctl", os.O_WRONLY)
    try:
        os.write(fd, cmd)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)


def read(name):
    with open(DBG + "/" + name) as f:
        return f.read()


def rand_data(r):
    k = r.randrange(7)
    if k == 0:
        return "-"
    if k == 1:
        return "text:" + "".join(r.choice("abcxyz-_09") for _ in range(r.randrange(40)))
    if k == 2:
        return "hex:" + os.urandom(r.randrange(240)).hex()
    if k == 3:
        return "pat:%d" % r.choice([0, 1, 219, 220, 221, 224, 225, 255, 256, 65536, 1 << 20,
                                    (1 << 20) + 1])
    if k == 4:
        return "fill:%d:%02x" % (r.randrange(300), r.randrange(256))
    if k == 5:
        return r.choice(["hex:abc", "hex:zz", "pat:-1", "fill:3", "fill:3:zzz", "bogus:1", "text:"])
    return "pat:%d" % r.randrange(300)


def rand_num(r):
    n = r.choice([2, 3, 4, 5, 6, 7, 8, 9])
    return n + PASSIVE if r.random() < 0.3 else n


def rand_list(r):
    k = r.randrange(4)
    if k == 0:
        return str(rand_num(r))
    if k == 1:
        return ",".join(str(rand_num(r)) for _ in range(r.randrange(1, 5)))
    if k == 2:
        a = r.choice([2, 3, 5]); return "%d-%d" % (a, a + r.randrange(-2, 8))
    return r.choice(["0-4294967295", "4294967295", "4294967296", "-1", "1,,2", "9-", ""])


def well_formed(r):
    c = r.randrange(12)
    if c < 3:
        opts = []
        for o in r.sample(["auto_drep=" + rand_data(r), "lifetime=%d" % r.randrange(-1, 33),
                           "resp=%d" % r.randrange(-1, 33), "retries=%d" % r.randrange(-1, 17),
                           "port=%d" % r.choice([0, 1, 2]), "cma_port=%d" % r.randrange(70000),
                           "req_data=" + rand_data(r),
                           "on_dreq=" + r.choice(["dreq", "sleep:5", "x"]),
                           "recv=%d:%d" % (r.randrange(70), r.choice([0, 16, 4096, 4097]))],
                          r.randrange(3)):
            opts.append(o)
        dst = r.choice(["10.77.0.1", "10.77.0.9", "10.77.0", "256.1.1.1"])
        svc = r.choice(["0x1000", "0x1000", "tcp:7471", "0x9999", "tcp:99999"])
        # A short neighbour wait: 10.77.0.9 never answers its ARP, and the
        # default (2 s) would leave the fuzzer waiting most of its time.
        opts.append("resolve_ms=%d" % r.choice([50, 50, 50, 1, 0, 60001]))
        return "connect %d %s 10.77.0.1 %s %s %s" % (
            rand_num(r), r.choice(["rxe0", "rxe0", "rxe9", ""]), dst, svc, " ".join(opts))
    if c == 3:
        return "listen %d rxe0 %s %s" % (r.choice([1, 10, 11]),
                                         r.choice(["0x1000", "0x2000", "tcp:1"]),
                                         r.choice(["", "cma=1", "cma=2",
                                                   "auto_drep=" + rand_data(r)]))
    if c in (4, 5):
        return "dreq %s %s" % (rand_list(r), rand_data(r))
    if c == 6:
        return "drep %d %s" % (rand_num(r), rand_data(r))
    if c == 7:
        return "disconnect %s %s" % (rand_list(r), rand_data(r))
    if c == 8:
        opt = r.choice(["", "", "size=%d" % r.choice([0, 16, 1024, 1025, 4096, 4097]),
                        "data=" + rand_data(r), "size=16 data=text:x", "size=-1"])
        return "post %d %d %d %s" % (rand_num(r), r.randrange(4), r.randrange(3), opt)
    if c == 9:
        return "poll %d" % rand_num(r)
    if c == 10:
        return "close %s" % rand_list(r)
    return r.choice(["", " ", "\n", "close", "dreq", "listen 1", "connect 1 rxe0", "bogus 1 2 3"])


def mutate(r, b):
    b = bytearray(b)
    for _ in range(r.randrange(1, 4)):
        k = r.randrange(5)
        if k == 0 and b:
            b[r.randrange(len(b))] = r.randrange(256)
        elif k == 1 and b:
            del b[r.randrange(len(b)):]
        elif k == 2:
            b[r.randrange(len(b) + 1):0] = os.urandom(r.randrange(1, 16))
        elif k == 3 and b:
            i = r.randrange(len(b)); b[i:i] = b[i:i + r.randrange(1, 64)] * r.randrange(1, 80)
        else:
            b += b" " + b[: r.randrange(len(b) + 1)]
    return bytes(b)


def fuzz_ctl(seconds, seed):
    r = random.Random(seed)
    end = time.time() + seconds
    counts, bad, n = {}, [], 0
    while time.time() < end:
        k = r.random()
        if k < 0.6:
            cmd = well_formed(r).encode()
        elif k < 0.9:
            cmd = mutate(r, well_formed(r).encode())
        else:
            cmd = os.urandom(r.choice([1, 7, 100, 4096, 4097, 5000]))
        e = write(cmd)
        n += 1
        name = "OK" if e == 0 else errno.errorcode.get(e, str(e))
        counts[name] = counts.get(name, 0) + 1
        if e and e not in ALLOWED:
            bad.append((name, cmd[:120]))
        if n % 200 == 0:
            # The interface still answers, and reading it works.
            read("conns"); read("events"); read("stats")
    print("# fuzz ctl: seed %d, %d commands in %d s: %s" % (
        seed, n, seconds, " ".join("%s=%d" % kv for kv in sorted(counts.items()))))
    for name, cmd in bad[:10]:
        print("# FAIL: %s for %r" % (name, cmd))
    return 1 if bad else 0


def events_of(num, kind):
    out = []
    for line in read("events").splitlines():
        f = line.split()
        if len(f) >= 2 and f[0] == str(num) and f[1] == kind:
            out.append(dict(kv.split("=", 1) for kv in f[2:]))
    return out


def wait(num, kind, secs=60):
    end = time.time() + secs
    while time.time() < end:
        e = events_of(num, kind)
        if e:
            return e[0]
        time.sleep(0.1)
    raise SystemExit("# FAIL: %d: no %s within %d s" % (num, kind, secs))


def conn_state(num):
    for line in read("conns").splitlines():
        f = line.split()
        if f and f[0] == str(num):
            return dict(kv.split("=", 1) for kv in f[1:] if "=" in kv).get("state")
    return None


def random_message(r, stats, cmd, num, peer, field, state, event):
    """Sends random payloads with CMD from NUM until one fits FIELD: the
    longer ones must be EINVAL with NUM still in STATE and nothing at PEER;
    the one that fits must arrive at PEER (EVENT) byte for byte."""
    while True:
        data = os.urandom(r.randrange(301))
        e = write(b"%s %d hex:%s" % (cmd.encode(), num, data.hex().encode()))
        if len(data) > field:
            if e != errno.EINVAL or conn_state(num) != state or events_of(peer, event):
                print("# FAIL: %s of %d bytes: errno %d, state %s" % (
                    cmd, len(data), e, conn_state(num)))
                return False
            stats[cmd + "_einval"] += 1
            continue
        if e != 0:
            print("# FAIL: %s of %d bytes: errno %d" % (cmd, len(data), e))
            return False
        stats[cmd + "_ok"] += 1
        break
    got = wait(peer, event)["data"]
    if got != (data + bytes(field - len(data))).hex():
        print("# FAIL: %s of %d bytes arrived as %s" % (cmd, len(data), got))
        return False
    return True


def fuzz_data(rounds, seed):
    r = random.Random(seed)
    stats = {"dreq_ok": 0, "dreq_einval": 0, "drep_ok": 0, "drep_einval": 0}
    for i in range(rounds):
        a = 100 + i
        p = a + PASSIVE
        assert write(b"connect %d rxe0 10.77.0.1 10.77.0.1 0x1000" % a) == 0
        wait(a, "ESTABLISHED"); wait(p, "ESTABLISHED")
        # Too long first, sometimes several times: nothing may change.
        if not random_message(r, stats, "dreq", a, p, 220, "ESTABLISHED", "DREQ_RECEIVED"):
            return 1
        if not random_message(r, stats, "drep", p, a, 224, "DREQ_RCVD", "DREP_RECEIVED"):
            return 1
        write(b"close %d" % a); write(b"close %d" % p)
    print("# fuzz data: seed %d, %d rounds: %s" % (
        seed, rounds, " ".join("%s=%d" % kv for kv in sorted(stats.items()))))
    return 0


if __name__ == "__main__":
    mode, n, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    sys.exit(fuzz_ctl(n, seed) if mode == "ctl" else fuzz_data(n, seed))
