#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""check_trace.py - holds an `envlog trace` file to the Trace Event Format
rules, and, given the same environment's `envlog cat --json`, to the records
it draws.

  check_trace.py TRACE [--records CAT.JSONL] [--min-compile-threads N]

The format rules (the Trace Event Format document that Perfetto and
chrome://tracing read): a JSON object with a traceEvents array (or a bare
array); every event an object with a known phase; the fields each phase
needs, with the right types; ts and dur numbers, never negative; B and E
matched on their track; metadata events of the known names with the args
they need, each process and thread named once, and every track that holds
an event named.  Then the rule the viewers draw by: on one track, complete
slices nest; two that overlap without one holding the other cannot be drawn.

With --records: every span, tune and compile record is one slice, and every
trial recorded with its times one slice inside its tune's, on its track;
each slice with a recorded start is placed exactly there (session start +
start_ns, or + open_ns for a span), as long as it lasted, on the track of
the thread the record names, and no track holds two threads; no compile
holds another compile; each mark is one instant.

Exit status 0 when every rule holds, 1 listing what does not.
"""
import json
import re
import sys
from collections import Counter, defaultdict

PHASES = set("BEXiIbneSTpFsftPOND" "CMRcV(){}[]")  # per the format document
META = {"process_name": "name", "thread_name": "name", "process_labels": "labels",
        "process_sort_index": "sort_index", "thread_sort_index": "sort_index"}

problems = []


def bad(msg):
    problems.append(msg)


def is_num(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def ns(v):
    """A ts or dur in microseconds as integer nanoseconds (envlog writes three
    decimals, so this is exact)."""
    return round(v * 1000)


def check_format(doc):
    if isinstance(doc, list):
        events = doc
    elif isinstance(doc, dict):
        events = doc.get("traceEvents")
        if not isinstance(events, list):
            bad("the object has no traceEvents array")
            return []
        unit = doc.get("displayTimeUnit")
        if unit is not None and unit not in ("ms", "ns"):
            bad(f"displayTimeUnit {unit!r} is not ms or ns")
        if "otherData" in doc and not isinstance(doc["otherData"], dict):
            bad("otherData is not an object")
    else:
        bad("the file is neither an object nor an array")
        return []
    pnames, tnames = Counter(), Counter()
    used = set()
    open_b = defaultdict(list)
    for i, e in enumerate(events):
        where = f"event {i}"
        if not isinstance(e, dict):
            bad(f"{where} is not an object")
            continue
        ph = e.get("ph")
        if not isinstance(ph, str) or ph not in PHASES:
            bad(f"{where}: phase {ph!r} is not one of the format's")
            continue
        if "pid" in e and not is_int(e["pid"]):
            bad(f"{where}: pid {e['pid']!r} is not an integer")
        if "tid" in e and not is_int(e["tid"]):
            bad(f"{where}: tid {e['tid']!r} is not an integer")
        if "args" in e and not isinstance(e["args"], dict):
            bad(f"{where}: args is not an object")
        if "cat" in e and not isinstance(e["cat"], str):
            bad(f"{where}: cat is not a string")
        if ph == "M":
            name = e.get("name")
            if name not in META:
                bad(f"{where}: metadata {name!r} is not one the format names")
                continue
            arg = (e.get("args") or {}).get(META[name])
            if META[name] == "name" and not isinstance(arg, str):
                bad(f"{where}: {name} without a string args.name")
            if META[name] == "sort_index" and not is_int(arg):
                bad(f"{where}: {name} without an integer args.sort_index")
            if not is_int(e.get("pid")):
                bad(f"{where}: {name} without a pid")
            if name.startswith("thread_") and not is_int(e.get("tid")):
                bad(f"{where}: {name} without a tid")
            if name == "process_name":
                pnames[e.get("pid")] += 1
            if name == "thread_name":
                tnames[(e.get("pid"), e.get("tid"))] += 1
            continue
        if not isinstance(e.get("name"), str):
            bad(f"{where}: no name")
        if not is_num(e.get("ts")) or e["ts"] < 0:
            bad(f"{where}: ts {e.get('ts')!r} is not a number >= 0")
            continue
        if not is_int(e.get("pid")):
            bad(f"{where}: no pid")
            continue
        scope = e.get("s", "t")
        if ph in ("i", "I") and scope not in ("g", "p", "t"):
            bad(f"{where}: instant scope {scope!r} is not g, p or t")
        needs_tid = ph in ("X", "B", "E") or (ph in ("i", "I") and scope == "t")
        if needs_tid and not is_int(e.get("tid")):
            bad(f"{where}: no tid")
            continue
        used.add((e["pid"], e.get("tid") if "tid" in e else None))
        if ph == "X" and (not is_num(e.get("dur")) or e["dur"] < 0):
            bad(f"{where}: dur {e.get('dur')!r} is not a number >= 0")
        if ph == "B":
            open_b[(e["pid"], e["tid"])].append(e)
        if ph == "E":
            stack = open_b[(e["pid"], e["tid"])]
            if not stack:
                bad(f"{where}: E without its B")
            elif stack[-1]["ts"] > e["ts"]:
                bad(f"{where}: E before its B")
            else:
                stack.pop()
    for track, stack in open_b.items():
        if stack:
            bad(f"track {track}: {len(stack)} B without their E")
    for pid, n in pnames.items():
        if n > 1:
            bad(f"process {pid} named {n} times")
    for key, n in tnames.items():
        if n > 1:
            bad(f"thread {key} named {n} times")
    for pid, tid in used:
        if pid not in pnames:
            bad(f"process {pid} holds events but has no process_name")
        if tid is not None and (pid, tid) not in tnames:
            bad(f"track {(pid, tid)} holds events but has no thread_name")
    names_in = defaultdict(list)
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name":
            names_in[e.get("pid")].append((e.get("args") or {}).get("name"))
    for pid, names in names_in.items():
        for n, k in Counter(names).items():
            if k > 1:
                bad(f"process {pid} has {k} threads named {n!r}")
    return events


def check_nesting(events):
    """On each track, complete slices nest: sorted by start (longer first), a
    slice either lies inside the innermost one still open or after it."""
    tracks = defaultdict(list)
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "X" and is_num(e.get("dur")):
            s = ns(e["ts"])
            tracks[(e["pid"], e["tid"])].append((s, s + ns(e["dur"]), e))
    for track, slices in tracks.items():
        slices.sort(key=lambda x: (x[0], -x[1]))
        stack = []
        for s, end, e in slices:
            while stack and stack[-1][1] <= s:
                stack.pop()
            if stack and stack[-1][1] < end:
                top = stack[-1][2]
                bad(f"track {track}: {e['name']!r} [{s}, {end}] crosses "
                    f"{top['name']!r} [{stack[-1][0]}, {stack[-1][1]}]")
                continue
            if stack and e.get("cat") == "compile" and stack[-1][2].get("cat") == "compile":
                bad(f"track {track}: compile {e['name']!r} drawn inside compile "
                    f"{stack[-1][2]['name']!r}: one thread ran both at once")
            stack.append((s, end, e))


def check_records(doc, events, records, min_threads):
    other = doc.get("otherData") if isinstance(doc, dict) else None
    origin = (other or {}).get("origin_unix_ns")
    if not (isinstance(origin, str) and origin.isdigit()):
        bad("otherData.origin_unix_ns is missing: placements cannot be checked")
        return
    origin = int(origin)
    start = {r["session"]: r["start_unix_ns"] for r in records if r["kind"] == "session"}
    tname = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            tname[(e["pid"], e["tid"])] = e["args"]["name"]
    slices = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            a = e.get("args") or {}
            key = (a.get("session"), a.get("seq"))
            if e.get("cat") == "trial":
                key += (a.get("index"),)
            slices[key].append(e)
    for k, v in slices.items():
        if len(v) > 1:
            bad(f"record {k} drawn {len(v)} times")
    track_threads = defaultdict(set)
    compile_threads = set()

    def placed(e, rec, what, from_ns, dur_ns, thread):
        if ns(e["ts"]) != from_ns - origin:
            bad(f"{what} {rec['session'][:8]}:{rec['seq']} at {ns(e['ts'])} ns, "
                f"recorded at {from_ns - origin}")
        if dur_ns is not None and ns(e["dur"]) != dur_ns:
            bad(f"{what} {rec['session'][:8]}:{rec['seq']} lasts {ns(e['dur'])} ns, "
                f"recorded {dur_ns}")
        name = tname.get((e["pid"], e["tid"]), "")
        if thread is not None:
            m = re.fullmatch(r"thread (\d+)( \(overlapping, \d+\))?", name)
            if not m or int(m.group(1)) != thread:
                bad(f"{what} {rec['session'][:8]}:{rec['seq']} of thread {thread} "
                    f"is on track {name!r}")
            track_threads[(e["pid"], e["tid"])].add(thread)
        elif name.startswith("thread "):
            bad(f"{what} {rec['session'][:8]}:{rec['seq']} without a thread is on "
                f"track {name!r}")

    # A span written as its opening and its close (same id) is one slice,
    # the close's; an opening never closed is drawn from where it opened.
    closed = {(r["session"], r["id"]) for r in records
              if r["kind"] == "span" and not r.get("open")}
    drawn = 0
    for r in records:
        kind = r["kind"]
        if kind not in ("span", "tune", "compile"):
            continue
        s0 = start.get(r["session"])
        got = slices.get((r["session"], r["seq"]), [])
        if kind == "span" and r.get("open"):
            if (r["session"], r["id"]) in closed:
                if got:
                    bad(f"span opening {r['session'][:8]}:{r['seq']} drawn beside its close")
                continue
            if len(got) != 1 or (got[0].get("args") or {}).get("closed") is not False:
                bad(f"span {r['session'][:8]}:{r['seq']}, never closed, is not one slice "
                    "saying so")
                continue
            drawn += 1
            placed(got[0], r, "span", s0 + r["open_ns"], None, r.get("thread"))
            continue
        if len(got) != 1 or got[0].get("cat") != kind:
            bad(f"{kind} record {r['session'][:8]}:{r['seq']} is not one {kind} slice")
            continue
        e = got[0]
        drawn += 1
        if s0 is None:
            continue
        if kind == "span":
            placed(e, r, "span", s0 + r["open_ns"], r["duration_ns"], r.get("thread"))
        elif kind == "compile" and "start_ns" in r:
            compile_threads.add((r["session"], r["thread"]))
            placed(e, r, "compile", s0 + r["start_ns"], r["duration_ns"], r["thread"])
        elif kind == "tune" and "start_ns" in r:
            placed(e, r, "tune", s0 + r["start_ns"], r["wall_ns"], r["thread"])
        if kind == "tune":
            tune_s, tune_e = ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])
            for tr in r.get("trials", []):
                if "start_ns" not in tr:
                    continue
                te = slices.get((r["session"], r["seq"], tr["index"]), [])
                if len(te) != 1:
                    bad(f"trial {tr['name']} of tune {r['seq']} is not one slice")
                    continue
                te = te[0]
                drawn += 1
                placed(te, r, "trial", s0 + tr["start_ns"], tr["wall_ns"], r.get("thread"))
                if (te["pid"], te["tid"]) != (e["pid"], e["tid"]):
                    bad(f"trial {tr['name']} is not on its tune's track")
                a, b = ns(te["ts"]), ns(te["ts"]) + ns(te["dur"])
                if a < tune_s or b > tune_e:
                    bad(f"trial {tr['name']} [{a}, {b}] is not inside its tune "
                        f"[{tune_s}, {tune_e}]")
    n_x = sum(1 for e in events if e.get("ph") == "X")
    if n_x != drawn:
        bad(f"{n_x} slices for {drawn} records and trials")
    for track, th in track_threads.items():
        if len(th) > 1:
            bad(f"track {track} holds threads {sorted(th)}")
    marks = sum(1 for r in records if r["kind"] == "mark")
    instants = sum(1 for e in events if e.get("ph") in ("i", "I"))
    if marks != instants:
        bad(f"{instants} instants for {marks} marks")
    per_session = Counter(s for s, _ in compile_threads)
    if min_threads and (not per_session or max(per_session.values()) < min_threads):
        bad(f"compiles recorded on {max(per_session.values(), default=0)} threads, "
            f"expected at least {min_threads}")
    for s, n in per_session.items():
        print(f"check_trace: session {s[:8]}: compiles on {n} thread(s)")


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__.split("\n\n")[1], file=sys.stderr)
        return 2
    path, records, min_threads = args[0], None, 0
    i = 1
    while i < len(args):
        if args[i] == "--records" and i + 1 < len(args):
            records = [json.loads(l) for l in open(args[i + 1]) if l.strip()]
            i += 2
        elif args[i] == "--min-compile-threads" and i + 1 < len(args):
            min_threads = int(args[i + 1])
            i += 2
        else:
            print(f"check_trace: unexpected argument {args[i]!r}", file=sys.stderr)
            return 2
    try:
        doc = json.load(open(path))
    except ValueError as e:
        print(f"check_trace: {path} is not JSON: {e}")
        return 1
    events = check_format(doc)
    check_nesting(events)
    if records is not None and not problems:
        check_records(doc, events, records, min_threads)
    for p in problems[:50]:
        print(f"check_trace: {path}: {p}")
    if len(problems) > 50:
        print(f"check_trace: ... and {len(problems) - 50} more")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
