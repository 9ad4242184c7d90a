# SPDX-License-Identifier: MIT
"""The Python package's benchmark (`make bench`, section "python").

What a Python runtime does with an environment, two ways: through the
package (the C library in-process), and the way it could before, by running
`envlog cat --json` and parsing its lines with Python's json module.

  recording   tune records per second through Session.tune()
  reading     records per second: Env.records() vs cat --json | json.loads
  lookups     winners per second from the live state (Env.winner), and
              the time to the first answer from a cold open, vs the same
              answers from cat --json folded into a dict (first local
              value stands)

Usage: bench_python.py ENVLOG_BINARY [--quick] [--keys N]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import envlog

NS = "tune/bench-py/1/cpu-bench"
CANDS = ["naive", "blocked16", "blocked32", "blocked64"]


def best(fn, reps):
    """The fastest of reps runs: (seconds, result)."""
    runs = []
    for _ in range(reps):
        t = time.perf_counter()
        out = fn()
        runs.append((time.perf_counter() - t, out))
    return min(runs, key=lambda r: r[0])


def fill(path, keys):
    env = envlog.open(path)
    t = time.perf_counter()
    with env.session(label="bench", runtime="bench-py", runtime_version="1") as s:
        for i in range(keys):
            s.tune(NS, f"matmul/m={i}", CANDS, winner=i % 4, margin=0.1,
                   trials=[{"index": j, "samples": 5, "median_ns": 1000.0 + j}
                           for j in range(4)])
    rate = keys / (time.perf_counter() - t)
    env.close()
    return rate


def cat_records(binary, path):
    p = subprocess.Popen([binary, "-C", path, "--json", "cat"], stdout=subprocess.PIPE)
    recs = [json.loads(line) for line in p.stdout]
    if p.wait() != 0:
        sys.exit(f"bench-python: {binary} cat failed")
    return recs


def fold_cat(binary, path):
    """The winners a runtime would keep from `cat --json`: first stored local
    tune of each (namespace, key, checksum) stands."""
    table = {}
    for r in cat_records(binary, path):
        if r.get("kind") == "tune" and r.get("stored"):
            ck = r["checksum"]
            if isinstance(ck, str):  # JSON may show a checksum as "0x..." text
                ck = int(ck, 16)
            table.setdefault((r["namespace"], r["key"], ck), r["candidates"][r["winner"]])
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--keys", type=int)
    a = ap.parse_args()
    keys = a.keys or (20_000 if a.quick else 200_000)
    reps = 1 if a.quick else 3
    tmp = tempfile.mkdtemp(prefix="envlog-bench-py-")
    try:
        path = os.path.join(tmp, "env")
        rec_rate = fill(path, keys)
        n_records = keys + 1
        print(f"== python: {keys} tune keys, {n_records} records "
              f"(best of {reps}; envlog {envlog.__version__})")
        print(f"  {'recording':34s} {rec_rate:12,.0f} records/s  (Session.tune)")

        env = envlog.open(path, create=False)
        s_pkg, got = best(lambda: sum(1 for _ in env.records()), reps)
        assert got == n_records, got
        s_cat, got = best(lambda: len(cat_records(a.binary, path)), reps)
        assert got == n_records, got
        print(f"  {'reading: Env.records()':34s} {n_records / s_pkg:12,.0f} records/s")
        print(f"  {'reading: cat --json | json.loads':34s} {n_records / s_cat:12,.0f} records/s"
              f"  ({s_cat / s_pkg:.1f}x the time)")

        names = [f"matmul/m={i}" for i in range(keys)]
        checksum = envlog.tune_checksum(CANDS)

        def cold_first():
            e = envlog.open(path, create=False)
            w = e.winner(NS, names[-1], checksum)
            e.close()
            return w["winner"]
        s_cold, w_pkg = best(cold_first, reps)
        st = env.state()

        def lookups(get):
            # Each answer is used and dropped, as a runtime does.
            hits = 0
            for k in names:
                hits += get(k) is not None
            return hits
        s_look, hits = best(lambda: lookups(lambda k: st.winner(NS, k, checksum)), reps)
        assert hits == keys
        s_fold, table = best(lambda: fold_cat(a.binary, path), reps)
        assert table[(NS, names[-1], checksum)] == w_pkg
        s_dict, hits = best(lambda: lookups(lambda k: table.get((NS, k, checksum))), reps)
        assert hits == keys
        print(f"  {'lookups: State.winner':34s} {keys / s_look:12,.0f} lookups/s")
        print(f"  {'lookups: dict from cat --json':34s} {keys / s_dict:12,.0f} lookups/s"
              "  (once folded)")
        print(f"  {'first answer: open + winner':34s} {s_cold * 1e3:12,.2f} ms")
        print(f"  {'first answer: cat --json + fold':34s} {s_fold * 1e3:12,.2f} ms"
              f"  ({s_fold / s_cold:.0f}x the time)")
        env.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
