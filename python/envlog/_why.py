# SPDX-License-Identifier: MIT
"""``Env.why()``: how the winner of a tune key was chosen, as data.

The events are those ``envlog why --json`` prints, one dict per line, in the
same order and with the same fields: every tune of the key in the total
order with the verdict of the fold rules, every forget that touched it, the
entry that stands now (or why none does) and, for a miss under a namespace,
the entries near it and what differs.  The verdicts follow the fold rules of
envlog(5) ("Fold rules"); the entry that stands is the library's own answer
from the folded state, so the two are checked against each other by the
tests.
"""
import datetime


def _time(unix_ns):
    t = datetime.datetime.fromtimestamp(unix_ns // 10**9, datetime.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{unix_ns // 10**6 % 1000:03d}Z"


def _under(ns, prefix):
    return ns == prefix or ns.startswith(prefix + "/")


class _Group:
    __slots__ = ("ns", "checksum", "standing", "imported", "forgotten", "seen")

    def __init__(self, ns, checksum):
        self.ns = ns
        self.checksum = checksum
        self.standing = self.imported = self.forgotten = self.seen = False


class _Why:
    def __init__(self, key, ns, record):
        self.record = record
        self.key = key
        self.ns = ns
        self.groups = {}
        self.tunes = 0
        self.forgets = 0
        self.events = []

    def group(self, ns, checksum):
        g = self.groups.get((ns, checksum))
        if g is None:
            g = self.groups[(ns, checksum)] = _Group(ns, checksum)
        return g

    @staticmethod
    def verdict(g, t):
        imported = t.get("imported", False)
        if not t.get("stored", False):
            return "not-stored", "not stored: the pick was not measured"
        if not g.standing or (g.imported and not imported):
            if not g.standing:
                rule = "imported" if imported else "first-local"
            else:
                rule = "local-replaced-imported"
            g.standing, g.forgotten, g.imported = True, False, imported
            return rule, {"imported": "set: imported",
                          "first-local": "set: first local value"}.get(
                              rule, "set: a local value replaced an imported one")
        if imported:
            return "import-ignored", "ignored: an imported value never replaces an entry"
        return "kept-first", "ignored: the first local value stands"

    def forget(self, rec, t):
        under = rec.get("under")
        if under is not None:
            groups = list(self.groups.values())
        else:
            if (rec.get("table") != "tune" or rec.get("key") != self.key or
                    rec.get("namespace") is None or
                    (self.ns is not None and rec["namespace"] != self.ns)):
                return
            groups = [self.group(rec["namespace"], rec.get("checksum", 0))]
        for g in groups:
            if under is not None and not _under(g.ns, under):
                continue
            had = g.standing
            g.standing = False
            if had or not g.seen:
                g.forgotten = True
            self.forgets += 1
            ev = {"event": "forget", "time": t, "session": rec["session"],
                  "seq": rec["seq"], "namespace": g.ns, "checksum": g.checksum,
                  "removed": had, "history_kept": g.seen}
            if under is not None:
                ev["under"] = under
            if rec.get("reason") is not None:
                ev["reason"] = rec["reason"]
            self.events.append(ev)

    def visit(self, item, unix_ns, session):
        kind = item[2]
        if kind not in (17, 22):  # tune, forget
            return False
        rec = self.record(item)
        t = _time(unix_ns)
        if kind == 22:
            self.forget(rec, t)
            return False
        if rec.get("key") != self.key or (self.ns is not None and rec.get("namespace") != self.ns):
            return False
        g = self.group(rec["namespace"], rec.get("checksum", 0))
        self.tunes += 1
        g.seen = True
        rule, verdict = self.verdict(g, rec)
        s = session or {}
        self.events.append({
            "event": "tune", "time": t, "verdict": verdict, "rule": rule,
            "host": s.get("host") or "", "label": s.get("label") or "",
            "runtime": s.get("runtime") or "",
            "runtime_version": s.get("runtime_version") or "",
            "devices": list(s.get("devices") or []), "record": rec})
        return False


def why(env, key, namespace=None, checksum=None, record=None):
    w = _Why(key, namespace, record)
    env.replay_each(w.visit, check_snapshot=True)
    st = env.replay(check_snapshot=True)
    try:
        standing = 0
        for g in list(w.groups.values()):
            if checksum is not None and g.checksum != checksum:
                continue
            te = st.winner(g.ns, key, g.checksum)
            if te is None:
                w.events.append({"event": "none", "namespace": g.ns, "checksum": g.checksum,
                                 "why": "forgotten" if g.forgotten else "not stored"})
                continue
            standing += 1
            w.events.append({
                "event": "standing", "namespace": te["namespace"], "key": te["key"],
                "checksum": te["checksum"], "winner": te["winner"], "margin": te["margin"],
                "within_noise": te["within_noise"], "origin": te["origin"],
                "rule": te["rule"], "session": te["stamp"]["session"],
                "seq": te["stamp"]["seq"]})
        asked_seen = any(g.checksum == (checksum or 0) for g in w.groups.values())
        if checksum is not None and not asked_seen and w.tunes:
            w.events.append({"event": "none", "namespace": namespace or "",
                             "checksum": checksum, "why": "no tune with this checksum"})
        if namespace is not None and (not standing or checksum is not None):
            for near in st.explain("tune", namespace, key, checksum or 0):
                differs = near["differs"]
                if checksum is None:
                    # Against the entry's own checksum, only the namespace
                    # components are told apart.
                    for again in st.explain("tune", namespace, key, near["checksum"]):
                        if again["checksum"] == near["checksum"] and \
                                again["namespace"] == near["namespace"]:
                            differs = again["differs"]
                w.events.append({"event": "near", "namespace": near["namespace"],
                                 "checksum": near["checksum"], "differs": differs})
        if w.tunes == 0:
            w.events.append({"event": "miss", "key": key,
                             "why": "history not kept" if w.forgets else "never tuned"})
    finally:
        st.close()
    return w.events
