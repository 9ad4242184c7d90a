#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""interop.py - reads envlog segments with code that shares nothing with
envlog's: the framing as envlog(5) describes it (32 KiB blocks, 7-byte
fragment headers, XXH3-64 checksums seeded with the segment identity), and
Debian's python3-cbor2 for the payloads.  Every event must decode to the
values `envlog cat --json` prints for it.

    interop.py ENVLOG ENV [ENV...]

Damaged sessions are allowed: there, every record envlog prints must be one
this reader found whole, and this reader must have found the damage too.
Exit status 0 when everything matches, 1 otherwise.
"""
import json
import os
import struct
import subprocess
import sys

import cbor2

try:
    import xxhash
except ImportError:  # python3-xxhash missing: framing only, said loudly
    xxhash = None

BLOCK = 32768
HDR = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4
KIND_HEADER, KIND_SEAL = 1, 2

KINDS = {16: "session", 17: "tune", 18: "compile", 19: "span", 20: "mark",
         21: "import", 22: "forget", 23: "user"}
# envlog(5), "The detail (format 2)": the kinds whose format 2 records keep
# the fields the fold does not read in key 23, a byte string holding a map.
DETAIL_KINDS = {"tune", "compile", "span", "mark", "import"}
DETAIL = 23
ENVELOPE = {0: "kind", 1: "seq", 2: "offset_ns", 3: "effect"}

# Field names and how each shows in JSON, key by key (from envlog(5)).
TRIAL = {0: "name", 1: "index", 2: "samples", 3: "min_ns", 4: "median_ns",
         5: "mean_ns", 6: "max_ns", 7: "stddev_ns", 8: "error", 9: "sample_ns",
         10: "start_ns", 11: "wall_ns"}
PARAM = {0: "name", 1: "value"}
ATTR = {0: "key", 1: "value"}
LEVELS = ["off", "basic", "full"]
OUTCOMES = ["compiled", "loaded", "failed"]
TABLES = ["tune", "kernel"]
SCHEMA = {
    "session": {4: "id", 5: "start_unix_ns", 6: "envlog_version", 7: "runtime",
                8: "runtime_version", 9: "label", 10: "host", 11: "pid", 12: "os",
                13: "arch", 14: "devices", 15: "process_mode", 16: ("level", LEVELS),
                17: "dropped"},
    "tune": {4: "namespace", 5: "key", 6: "checksum", 7: "candidates",
             8: ("trials", TRIAL), 9: "policy", 10: ("params", PARAM), 11: "winner",
             12: "margin", 13: "within_noise", 14: "short_circuit", 15: "wall_ns",
             16: "stored", 17: "imported", 18: "winner_ns", 19: "start_ns",
             20: "thread"},
    "compile": {4: "namespace", 5: "name", 6: "kernel_key", 7: "source_hash",
                8: "options", 9: "compiler_version", 10: "arch",
                11: ("outcome", OUTCOMES), 12: "duration_ns", 13: "binary_hash",
                14: "binary_size", 15: "binary", 16: "log", 17: "source", 18: "ir",
                19: ("tune", "stamp"), 20: "imported", 21: "start_ns", 22: "thread"},
    "span": {4: "name", 5: "id", 6: "parent", 7: "open_ns", 8: "duration_ns",
             9: ("attrs", ATTR), 10: "thread", 11: "open"},
    "mark": {4: "label", 5: "wall_unix_ns"},
    "import": {4: "bundle", 5: "bundle_hash", 6: "manifest", 7: "taken", 8: "skipped",
               9: "rejected"},
    "forget": {4: ("table", TABLES), 5: "namespace", 6: "key", 7: "checksum",
               8: "reason"},
    "user": {4: "user_kind", 5: "body"},
}

failures = []


def fail(msg):
    failures.append(msg)
    print("interop: FAIL: " + msg, file=sys.stderr)


def plain(v):
    """A CBOR value the way envlog's JSON shows one it has no schema for."""
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {(k if isinstance(k, str) else "k%d" % k): plain(x) for k, x in v.items()}
    if isinstance(v, cbor2.CBORTag):
        return plain(v.value)
    if isinstance(v, float) and (v != v or v in (float("inf"), float("-inf"))):
        return None
    if v is cbor2.undefined:
        return None
    return v


def named(m, table):
    out = {}
    for k, v in m.items():
        spec = table.get(k) if isinstance(k, int) else None
        if spec is None:
            out[k if isinstance(k, str) else "k%d" % k] = plain(v)
        elif isinstance(spec, str):
            out[spec] = plain(v)
        else:
            name, how = spec
            if how == "stamp":
                out[name] = {"session": v[0].hex(), "seq": v[1], "offset_ns": v[2]}
            elif isinstance(how, list):
                out[name] = how[v] if v < len(how) else v
            else:
                out[name] = [named(x, how) for x in v]
    return out


def with_detail(kind, rec):
    """The record's map with its detail's pairs in place of key 23, or, when
    the detail does not hold one map, the names envlog(5)'s JSON RENDERING
    gives its problem (the problem's words are envlog's own: any text)."""
    if kind not in DETAIL_KINDS or DETAIL not in rec:
        return rec, None
    out = {}
    problem = None
    for k, v in rec.items():
        if k != DETAIL:
            out[k] = v
            continue
        if not isinstance(v, bytes):
            fail("key 23 of a %s record is not a byte string" % kind)
            continue
        try:
            d = cbor2.loads(v)
        except Exception:  # noqa: BLE001 - not one item: the detail's problem
            d = None
        if not isinstance(d, dict) or any(k2 in rec for k2 in d):
            problem = v.hex()
            continue
        out.update(d)
    return out, problem


def expected_json(session_hex, rec):
    kind = KINDS.get(rec[0], rec[0])
    out = {"session": session_hex}
    rec, problem = with_detail(kind, rec)
    body = {k: v for k, v in rec.items() if not (isinstance(k, int) and k < 4)}
    for k in range(4):
        if k in rec:
            v = rec[k]
            if k == 0:
                v = kind
            elif k == 3:
                v = "changed" if v else "observed"
            out[ENVELOPE[k]] = v
    out.update(named(body, SCHEMA.get(kind, {})))
    if problem is not None:
        out["detail_problem"] = None  # any text: see same()
        out["detail"] = problem
    # envlog(1), JSON OUTPUT: every line says what it is, and a 64-bit hash
    # is the hex text the plain output shows.
    if isinstance(out.get("checksum"), int):
        out["checksum"] = "0x%016x" % out["checksum"]
    out["type"] = "record"
    out["schema_version"] = 1
    return out


def same(a, b):
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(
            k == "detail_problem" or same(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    return a == b


def read_segment(path, seed):
    """Whole records of one segment file, as (offset, payload), and whether
    any damage was met (framing as envlog(5) describes it)."""
    data = open(path, "rb").read()
    recs, damaged, pos, parts, start = [], False, 0, None, 0
    while pos < len(data):
        left = BLOCK - pos % BLOCK
        if left < HDR:
            pos += left
            continue
        hdr = data[pos:pos + HDR]
        if len(hdr) < HDR or hdr == b"\0" * HDR:
            if len(hdr) < HDR or data[pos:].strip(b"\0"):
                damaged = True
            break
        csum, length, ftype = struct.unpack("<IHB", hdr)
        ok = ftype in (FULL, FIRST, MIDDLE, LAST) and HDR + length <= left and \
            pos + HDR + length <= len(data)
        if ok and xxhash is not None:
            want = xxhash.xxh3_64_intdigest(data[pos + 4:pos + HDR + length], seed)
            ok = (want & 0xffffffff) == csum
        if ok and (ftype in (FULL, FIRST)) != (parts is None):
            ok = False
        if not ok:
            damaged = True
            parts = None
            pos = (pos // BLOCK + 1) * BLOCK  # resync at the next block
            continue
        payload = data[pos + HDR:pos + HDR + length]
        if ftype == FULL:
            recs.append((pos, payload))
        elif ftype == FIRST:
            parts, start = [payload], pos
        else:
            parts.append(payload)
            if ftype == LAST:
                recs.append((start, b"".join(parts)))
                parts = None
        pos += HDR + length
    if parts is not None:
        damaged = True
    return recs, damaged


def read_session(sdir, sid):
    """Every event of a session directory, in order, and whether damage was
    found; HEADER and SEAL records are checked on the way."""
    segs = sorted(n for n in os.listdir(sdir) if n.endswith(".log"))
    events, damaged = [], False
    for name in segs:
        segno, first = int(name[:8]), int(name[9:25])
        seed = xxhash.xxh3_64_intdigest(sid + struct.pack("<I", segno), 0) if xxhash else 0
        recs, bad = read_segment(os.path.join(sdir, name), seed)
        damaged |= bad
        count = 0
        for off, payload in recs:
            try:
                rec = cbor2.loads(payload)
            except Exception as e:  # noqa: BLE001 - any decode failure is damage
                fail("%s/%s@%d: cbor2 cannot decode: %s" % (sdir, name, off, e))
                continue
            if not isinstance(rec, dict) or list(rec.keys())[0] != 0:
                fail("%s/%s@%d: a record is a map whose first key is its kind" %
                     (sdir, name, off))
                continue
            if rec[0] == KIND_HEADER:
                if off != 0 or rec.get(4) != "envlog-log" or rec.get(5) not in (1, 2) or \
                        rec.get(6) != sid or rec.get(7) != segno or rec.get(8) != first:
                    fail("%s/%s: bad HEADER %r" % (sdir, name, rec))
                continue
            if rec[0] == KIND_SEAL:
                if rec.get(4) != count:
                    fail("%s/%s: SEAL counts %r records, %d read" %
                         (sdir, name, rec.get(4), count))
                continue
            count += 1
            events.append(rec)
    return events, damaged


def cat_json(envlog, env, sid_hex):
    p = subprocess.run([envlog, "-C", env, "cat", "--json", sid_hex],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, check=False)
    if p.returncode not in (0, 1):
        fail("envlog cat %s: exit %d: %s" % (sid_hex, p.returncode, p.stderr.decode()))
    return [json.loads(line) for line in p.stdout.decode().splitlines()], p.returncode


def main():
    if len(sys.argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    envlog = sys.argv[1]
    if xxhash is None:
        print("interop: python3-xxhash is missing: checksums NOT verified "
              "(apt-get install python3-xxhash)", file=sys.stderr)
    n_events = n_sessions = 0
    kinds = set()
    for env in sys.argv[2:]:
        sroot = os.path.join(env, "sessions")
        for sid_hex in sorted(os.listdir(sroot)):
            sid = bytes.fromhex(sid_hex)
            events, damaged = read_session(os.path.join(sroot, sid_hex), sid)
            printed, rc = cat_json(envlog, env, sid_hex)
            n_sessions += 1
            mine = [expected_json(sid_hex, e) for e in events]
            if not damaged:
                if rc != 0:
                    fail("%s: envlog reports damage this reader did not find" % sid_hex)
                if len(mine) != len(printed):
                    fail("%s: %d events here, envlog printed %d" %
                         (sid_hex, len(mine), len(printed)))
                for a, b in zip(mine, printed):
                    if not same(a, b):
                        fail("%s seq %s differs:\n  cbor2:  %s\n  envlog: %s" %
                             (sid_hex, a.get("seq"), json.dumps(a, sort_keys=True),
                              json.dumps(b, sort_keys=True)))
            else:
                if rc != 1:
                    fail("%s: damage found here, envlog exit %d" % (sid_hex, rc))
                by_seq = {m["seq"]: m for m in mine}
                for b in printed:
                    if b["seq"] not in by_seq or not same(by_seq[b["seq"]], b):
                        fail("%s: envlog printed seq %s, not whole here" %
                             (sid_hex, b["seq"]))
            n_events += len(printed)
            kinds.update(m["kind"] for m in mine)
    missing = set(KINDS.values()) - kinds
    if missing:
        fail("no record of kind(s) %s was checked" % ", ".join(sorted(missing)))
    print("interop: %d sessions, %d events decoded by cbor2 match envlog cat --json%s" %
          (n_sessions, n_events, "" if xxhash else " (checksums not verified)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
