#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""draw_trace.py - draws an `envlog trace` file as a timeline PNG, the way
Perfetto lays it out: one row per track (a thread of a session), complete
slices as bars nested by depth within their row, marks as ticks.

  draw_trace.py TRACE PNG [TITLE]

For a person to look at (Perfetto's UI needs a browser and the network);
the rules are checked by check_trace.py, not here.  Needs matplotlib
(Debian's python3-matplotlib).
"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"span": "#8fb8de", "tune": "#f2b134", "trial": "#e0672d",
          "compile": "#5aa469", "mark": "#b03a8c"}


def main():
    if len(sys.argv) < 3:
        print("usage: draw_trace.py TRACE PNG [TITLE]", file=sys.stderr)
        return 2
    doc = json.load(open(sys.argv[1]))
    events = doc["traceEvents"] if isinstance(doc, dict) else doc
    pname, tname = {}, {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            pname[e["pid"]] = e["args"]["name"]
        if e.get("ph") == "M" and e.get("name") == "thread_name":
            tname[(e["pid"], e["tid"])] = e["args"]["name"]
    tracks = defaultdict(list)
    marks = defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            tracks[(e["pid"], e["tid"])].append(e)
        elif e.get("ph") in ("i", "I"):
            marks[e["pid"]].append(e)
    rows = sorted(tracks)
    if not rows:
        print("draw_trace: nothing to draw", file=sys.stderr)
        return 1
    # Depth of each slice within its track, as the viewers nest them.
    depth_of = {}
    max_depth = {}
    for key in rows:
        stack = []
        md = 0
        for e in sorted(tracks[key], key=lambda x: (x["ts"], -x["dur"])):
            while stack and stack[-1] <= e["ts"]:
                stack.pop()
            depth_of[id(e)] = len(stack)
            md = max(md, len(stack) + 1)
            stack.append(e["ts"] + e["dur"])
        max_depth[key] = md
    fig_h = 1.2 + 0.42 * sum(max(1, d) for d in max_depth.values())
    fig, ax = plt.subplots(figsize=(16, max(3.0, fig_h)))
    y = 0.0
    ticks, labels = [], []
    for key in reversed(rows):
        md = max(1, max_depth[key])
        h = md * 1.0
        for e in tracks[key]:
            d = depth_of[id(e)]
            # The outermost slice at the bottom of the row, children above.
            bottom = y + d * (h / md)
            ax.broken_barh([(e["ts"] / 1000, max(e["dur"] / 1000, 1e-6))],
                           (bottom + 0.05, h / md - 0.1),
                           facecolors=COLORS.get(e.get("cat"), "#999999"),
                           edgecolors="black", linewidth=0.3)
            if e["dur"] / 1000 > 0:
                ax.text(e["ts"] / 1000, bottom + h / md / 2, " " + e["name"][:28],
                        fontsize=5, va="center", ha="left", clip_on=True)
        for m in marks.get(key[0], []):
            ax.plot([m["ts"] / 1000] * 2, [y, y + h], color=COLORS["mark"], lw=0.6)
        ticks.append(y + h / 2)
        labels.append(f"{pname.get(key[0], key[0])[:28]} | {tname.get(key, key[1])}")
        ax.axhline(y, color="#dddddd", lw=0.5)
        y += h
    ax.set_yticks(ticks)
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_ylim(0, y)
    ax.set_xlabel("time since the first session began (ms)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in COLORS.values()]
    ax.legend(handles, COLORS.keys(), loc="upper right", fontsize=7)
    ax.set_title(sys.argv[3] if len(sys.argv) > 3 else sys.argv[1], fontsize=9)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print(f"draw_trace: drew {sum(len(v) for v in tracks.values())} slices on "
          f"{len(rows)} tracks into {sys.argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
