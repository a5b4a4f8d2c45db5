# SPDX-License-Identifier: LGPL-2.1-or-later
"""The benchmark parts: the oracle, workloads 1-7 (rightsize against an unmanaged twin), and
workload 8 (two guests on a simulated small host: rightsize's arbitration, MoM's default
balloon policy, and no rightsizing).  Each part writes a markdown section, a JSON file with
its figures and its plots into the output directory."""

import argparse
import json
import os
import re
import shlex
import statistics
import tempfile
import time

import benchlib as bl
from benchlib import MIB, GUEST_MIB, fmt, log, table

GOAL_ERROR = 0.05          # estimate error, workloads 1-5 and 7
GOAL_MEDIAN = 1.05         # pass time managed / twin, median, workloads 1-5
GOAL_MEAN = 1.25           # and mean
GOAL_AMORTIZED = 0.01      # cost per re-probe cycle / the shipped hold-time, workloads 1-5
# Quoted by the page's header only: no part judges it, since a share of the reclaimable memory
# rewards an estimate below the set. The held size's two bounds (held_bounds) are judged instead.
GOAL_RETURNED = 0.90
PRESET_MARGIN = 0.10       # the balanced preset's margin (etc/policies/balanced.conf), which every part keeps
# Held size at the end: at least the oracle's set (no starvation), at most the set plus the
# preset's margin plus one step of the oracle's bisection (no waste beyond what the margin asks).
HELD_STEP_MIB = bl.ORACLE_RESOLUTION
# A noisy figure (pass ratios, amortized cost) gets a mark on its worst repetition alone from this
# many repetitions on; with fewer, only when the goal still holds with part calibrate's noise band.
SPREAD_REPETITIONS = 3
PRESET_FLOOR_MIB = max(256, GUEST_MIB * 10 // 100)  # and its floor: 256M or 10 % of the guest
GOAL_SLOWDOWN = 0.02       # workload 8's worst pass-time ratio against no rightsizing
CONVERGED = 0.10
CYCLE_AFTER_S = 60         # a probe cycle's cost window lasts at most this long after it reaches hold
ERROR_GOAL_WORKLOADS = {"anon", "file", "mixed", "grow", "shrink", "idle"}
SLOW_GOAL_WORKLOADS = {"anon", "file", "mixed", "grow", "shrink"}


def parse_args(argv):
    p = argparse.ArgumentParser()
    p.add_argument("--out", required=True, help="the markdown section to write (DIR/NAME.md)")
    p.add_argument("--smoke", action="store_true", help="short version for CI")
    p.add_argument("--workdir", help="scratch directory for guests (default: a temporary one)")
    p.add_argument("--render-only", action="store_true",
                   help="workloads 1-7: write the section again from DIR/NAME.json, run nothing")
    return p.parse_args(argv)


def setup(argv):
    a = parse_args(argv)
    a.outdir = os.path.dirname(os.path.abspath(a.out))
    os.makedirs(a.outdir, exist_ok=True)
    a.name = os.path.splitext(os.path.basename(a.out))[0]
    if not a.workdir:
        a.workdir = tempfile.mkdtemp(prefix="rs-bench-", dir="/tmp")
    # Rendering from the JSON runs neither the daemon nor a guest.
    for exe in () if a.render_only else ("rightsized", "rightsizectl"):
        if not os.access(os.path.join(bl.TOP_BUILDDIR, exe), os.X_OK):
            raise bl.HarnessError(f"{bl.TOP_BUILDDIR}/{exe} not built (run make first)")
    if not a.render_only and not os.path.exists(os.path.join(bl.GUEST_DIR, "initrd.gz")):
        raise bl.HarnessError(f"no guest image in {bl.GUEST_DIR} (make guest/initrd.gz)")
    a.commit = bl.git_commit()
    return a


def repro(a):
    cmd = f"tests/bench/bench-{a.name} --out DIR/{a.name}.md" + (" --smoke" if a.smoke else "")
    return (f"`top_srcdir=SRC top_builddir=BUILD {cmd}` (from the source tree, after `make`; "
            f"`make bench` runs every part)")


def write_part(a, md, data):
    # Every part's JSON records the commit it measured (-dirty: with uncommitted changes).
    data = dict(data)
    data.setdefault("commit", a.commit)
    with open(a.out, "w") as f:
        f.write(md)
    with open(os.path.join(a.outdir, a.name + ".json"), "w") as f:
        json.dump(data, f, indent=1, default=str)


def pc(v, digits=1):
    """A fraction as a percentage, "12.3 %"."""
    return "–" if v is None else f"{v * 100:.{digits}f} %"


def mib(v):
    return None if v is None else v / MIB


def goal(ok):
    return "✅" if ok else "❌"


# ---- oracle part --------------------------------------------------------------------------

def oracle_main(argv):
    a = setup(argv)
    configs = ["anon"] if a.smoke else bl.ORACLE_CONFIGS
    results = {}
    for name in configs:
        results[name] = bl.get_oracle(a.outdir, a.workdir, name, a.smoke)
    rows = []
    for name, r in results.items():
        lo, hi = r["bracket"]
        b1, b2 = r["base"], r["base2"]
        never_short = not any(not p["enough"] for p in r["probes"])
        # The same bisection judged by the refault criterion alone (a stalled or unreached probe
        # fails it): shows which verdicts rest on pass time only, the noisier signal under TCG.
        def refaults_ok(p):
            base = r["base"]
            return (p.get("reached") and not p.get("stalled") and p.get("passes") and
                    all((p.get(k) or 0) <= (base.get(k) or 0) * (1 + bl.ORACLE_TOL) + bl.ORACLE_ABS_REFAULTS
                        for k in ("refault_anon_rate", "refault_file_rate")))
        failing = [p["size"] for p in r["probes"] if not refaults_ok(p)]
        passing = [p["size"] for p in r["probes"] if refaults_ok(p) and p["size"] > max(failing, default=0)]
        by_refaults = (f"{min(passing)} ({max(failing)}–{min(passing)})" if failing and passing else
                       f"≤ {min(passing)}" if passing else "–")
        ws_text = f"**≤ {r['ws_mib']}**" if never_short else f"**{r['ws_mib']}**"
        rows.append([name, f"`{bl.workload_args(name)}`", ws_text, f"{lo}–{hi}" + (" (low end not probed)" if never_short else ""),
                     f"±{(hi - lo) / 2 / r['ws_mib'] * 100:.1f} %", f"{b1.get('min_ms', 0):.0f} / {b2.get('min_ms', 0):.0f}",
                     f"{b1['median_ms']:.0f} / {b2['median_ms']:.0f}",
                     f"{r['noise_ms_rel'] * 100:.0f} %",
                     f"{fmt(b1.get('refault_rate'), '{:.0f}')} / {fmt(b2.get('refault_rate'), '{:.0f}')}",
                     by_refaults, len(r["probes"]), r["seconds"], r["oom_kills"]])
    probe_rows = []
    for name, r in results.items():
        for p in r["probes"]:
            probe_rows.append([name, p["size"], p["actual"], f"{fmt(p.get('min_ms'))} ({fmt(p.get('ref_min_ms'))})",
                               fmt(p.get("median_ms")),
                               fmt(p.get("refault_anon_rate")), fmt(p.get("refault_file_rate")),
                               fmt(p.get("swapins")), p["passes"],
                               ("enough" if p["enough"] else "short") + (" (stalled)" if p.get("stalled") else "")
                               + ("" if p.get("reached") else " (balloon not reached)")
                               + (" (workload stopped while inflating)" if p.get("paused") else "")
                               + (f" (by {p['judged_by']}: hot set fastest {fmt(p.get('hot_min_ms'))} ms vs "
                                  f"{fmt(p.get('ref_hot_min_ms'))}, stream {fmt(p.get('stream_mibps_median'))} vs "
                                  f"{fmt(p.get('ref_stream_mibps'))} MiB/s)" if p.get("judged_by") else "")])
    md = f"""## The oracle: true working sets

For a guest and a workload, the **true working set** is the smallest balloon size at which the
workload runs with a refault rate and pass time within a stated tolerance of its unconstrained
run. The oracle finds it by bisection over fixed balloon sizes (QMP `balloon`), running the
workload at each size:

- the guest (1 GiB, 512 MiB swap, the workload started at boot) first runs unconstrained at
  1024 MiB for a window of at least {6 if not a.smoke else 4} s and 3 passes (2 for the stream);
- each probe first returns the guest to 1024 MiB until a pass runs at normal speed again (so that no
  probe pays for the swap-ins of the one before), then sets the balloon, waits until it is reached (a
  balloon that does not come within 8 MiB of its size in 60 s counts as too small; one still far from
  it after 10 s gets the workload stopped with SIGSTOP through the guest agent until it is there; no probe
  of this run needed that), lets 2 passes go by (at most
  6 s), then measures a window of the same length; a pass still running after 3× a normal pass
  (1.5× the unconstrained median) plus 1 s ends the window at once, as too small;
- the workload runs with `--no-hugepage` everywhere in this benchmark: a squeeze splits transparent
  huge pages, which would change the pass time at full size after the first probe, and so the
  unconstrained reference;
- a size is **enough** when the fastest pass of its window is at most {int(bl.ORACLE_TOL * 100)} % slower than the
  fastest of 3 unconstrained passes at 1024 MiB taken right before the probe, plus {bl.ORACLE_ABS_MS} ms, and the guest-wide anonymous and file refault rates
  (`workingset_refault_anon`, `workingset_refault_file` from the guest's /proc/vmstat, printed by
  `rs-workload --vmstat` after every pass) are each at most {int(bl.ORACLE_TOL * 100)} % above the unconstrained
  ones plus {bl.ORACLE_ABS_REFAULTS:.0f} pages/s. The fastest pass, not the median: the 2 cores are shared with
  other jobs' TCG guests, which make single passes 2-3x slower at random, while a size below the working set
  makes every pass slow (each one faults its set back in). A stream's file refaults are high even
  unconstrained, so its hot set shows in the anonymous ones;
- workload 6 streams 2 GiB through a 1 GiB guest, where page cache beyond the stream's readahead
  cannot help the stream: its right size is the hot set plus whatever keeps the stream's throughput
  within {int(bl.ORACLE_TOL * 100)} % of unconstrained. When the workload times its stream apart
  (`stream_ms=` on its pass lines), a size is **enough** for it when the hot set's fastest pass (pass
  time − stream time) is at most {int(bl.ORACLE_TOL * 100)} % slower than right before at 1024 MiB
  (plus {bl.ORACLE_ABS_MS} ms), its anonymous refault rate passes the test above, and the stream's median
  throughput (MiB / stream time) is at least {100 - int(bl.ORACLE_TOL * 100)} % of the one right before at
  1024 MiB; the stream's own pass time and file refaults are not judged (their run-to-run noise is larger
  than the tolerance);
- the bracket starts at [{bl.ORACLE_LOW_DEFAULT} (idle: {bl.ORACLE_LOW['idle']}), 1024] MiB and is halved
  (below about 200 MiB the guest kernel panics, "System is deadlocked on memory", even idle and with
  swap: measured at 184 MiB idle and at 160 MiB under a 300 MiB set) until it is
  {bl.ORACLE_RESOLUTION} MiB wide or {4 if a.smoke else 6} probes are spent; the working set is the upper end
  (the smallest size shown to be enough);
- the unconstrained run is measured again at the end. **Run-to-run noise** is how far the fastest
  unconstrained pass moved over the whole oracle run (start, end and before every probe): (max − min) / min.
  It is large, and it is why every probe is judged against the full-size passes right before it: once a
  squeeze has swapped the set out, its passes stay up to 2x slower even back at full size and with no
  refaults at all (measured for workload 1: fastest pass 11 ms before, 20 ms after).

*By the refault criterion alone*: the same probes judged only by their refault rates; where it differs
from the working set, the verdicts in between rest on pass time alone, which is the noisier signal here
(the stream's unconstrained passes vary by more than the 10 % tolerance).

A working set marked ≤ was enough at every size probed: the true one is at most that (the bracket's
low end is not probed, for the kernel panic above).

**Oracle uncertainty** = the final bracket (the answer lies in it) plus the run-to-run noise. Sizes are
in balloon terms (the whole guest: kernel, init, agent and the workload), as rightsize's estimate is.

{table(["workload", "rs-workload arguments", "working set MiB", "bracket MiB", "bracket ±", "unconstrained fastest pass ms (start / end)", "unconstrained median pass ms (start / end)", "run-to-run noise (fastest pass)", "unconstrained refaults/s (start / end)", "by the refault criterion alone", "probes", "seconds", "OOM kills"], rows)}
<details><summary>Every probe</summary>

{table(["workload", "balloon MiB", "reached MiB", "fastest pass ms (at 1024 just before)", "median ms", "refaults/s anon", "refaults/s file", "swap-ins", "passes", "verdict"], probe_rows)}
</details>

Measured at commit {", ".join(sorted(set(f"`{r.get('commit', 'unknown (an older cache entry)')}`" for r in results.values())))}. An oracle runs no rightsize code (fixed balloon sizes on a bare guest), so `make bench` keeps the oracles in `docs/bench/oracle-cache.json` and measures only those missing ({", ".join(f"{n}: {r.get('commit', 'an earlier run')}" for n, r in results.items())}).
Reproduce: {repro(a)}; the guest command line of each oracle run is in `{a.name}.json` (`command`).
"""
    write_part(a, md, results)
    return 0


# ---- workloads 1-7 ------------------------------------------------------------------------

# Parts that run a workload under another policy: part name -> (workload, policy).
VARIANTS = {"shipped": ("anon", "shipped"), "shipped-file": ("file", "shipped")}


def first_stable(samples, key, t_from, t_to, pred):
    """Earliest sample time in [t_from, t_to] from which pred(value) holds to t_to."""
    pts = [(r["t"], r[key]) for r in samples if t_from <= r["t"] <= t_to]
    found = None
    for t, v in pts:
        if v is not None and pred(v):
            if found is None:
                found = t
        else:
            found = None
    return found


def end_state(samples, t_from, t_to):
    """What rightsized held at the end of [t_from, t_to]: the last sample's estimate, target and
    balloon when it is in `hold`.  A span that ends in any other state ended mid-cycle: its figures
    are then those of the last `hold` sample in the span (None when there is none), and mid_cycle
    names the state it ended in and since when, so that the page says so."""
    span = [r for r in samples if t_from <= r["t"] <= t_to]
    if not span:
        return {"t": None, "estimate": None, "target": None, "actual": None, "mid_cycle": None}
    last = span[-1]
    held = last if last.get("state") == "hold" else next((r for r in reversed(span) if r.get("state") == "hold"), None)
    mid = None
    if held is not last:
        since = last["t"]
        for r in reversed(span):
            if r.get("state") == "hold":
                break
            since = r["t"]
        mid = {"state": last.get("state"), "since_s": since, "at_s": last["t"]}
    pick = held or {}
    return {"t": pick.get("t"), "estimate": pick.get("estimate"), "target": pick.get("target"),
            "actual": pick.get("actual"), "mid_cycle": mid}


def held_bounds(held, oracle):
    """The held size against the oracle's set: (no starvation: held >= oracle, no waste: held <=
    oracle x (1 + the preset's margin) + one oracle step, the upper bound in MiB)."""
    upper = oracle * (1 + PRESET_MARGIN) + HELD_STEP_MIB
    if held is None:
        return None, None, upper
    # The balloon's sizes are reported to a fraction of a MiB; the oracle's set is whole MiB.
    return held >= oracle - 0.5, held <= upper, upper


def phase_figures(samples, oracle, t_from, t_to):
    end = end_state(samples, t_from, t_to)
    est, tgt = end["estimate"], end["target"]
    err = abs(est - oracle) / oracle if est is not None else None
    conv = first_stable(samples, "estimate", t_from, t_to, lambda v: abs(v - oracle) <= CONVERGED * oracle)
    conv_size = None
    if tgt:
        # First time the balloon is within 10 % of the target held at the end (later re-probes
        # leave it for a few seconds and come back).
        conv_size = next((r["t"] for r in samples if t_from <= r["t"] <= t_to and r.get("actual")
                          and abs(r["actual"] - tgt) <= CONVERGED * tgt), None)
    starved_ok, waste_ok, upper = held_bounds(tgt, oracle)
    return {"oracle": oracle, "estimate": est, "target": tgt, "actual": end["actual"], "error": err,
            "signed_error": (est - oracle) / oracle if est is not None else None,
            "read_at_s": end["t"], "mid_cycle": end["mid_cycle"],
            "held_ok": starved_ok, "waste_ok": waste_ok, "held_upper": upper,
            "converge_s": None if conv is None else conv - t_from,
            "size_converge_s": None if conv_size is None else conv_size - t_from}


# ---- the cost of estimation: probe cycles ----

def probe_cycles(samples, t_end, after_s=CYCLE_AFTER_S):
    """Probe cycles from the 1 s samples of rightsized's state.  A cycle starts at the first
    sample in `probe` after any state but probe and backoff (learn, hold, grow, emergency, ...)
    and ends at the first sample in `hold` after that.  Its cost window runs from its start until
    the next cycle starts or after_s after its end, whichever comes first (cut at the end of the
    run: then it is not complete)."""
    starts, prev = [], None
    for r in samples:
        st = r.get("state")
        if st is None:
            continue
        if st == "probe" and prev not in ("probe", "backoff"):
            starts.append(r["t"])
        prev = st
    cycles = []
    for i, t0 in enumerate(starts):
        nxt = starts[i + 1] if i + 1 < len(starts) else None
        end = next((r["t"] for r in samples if r["t"] > t0 and (nxt is None or r["t"] < nxt)
                    and r.get("state") == "hold"), None)
        limit = end + after_s if end is not None else float("inf")
        if nxt is not None and nxt <= limit:
            w1, complete = nxt, True
        elif limit <= t_end:
            w1, complete = limit, True
        else:
            w1, complete = t_end, False
        cycles.append({"n": i + 1, "start": t0, "end": end, "window_end": w1, "complete": complete,
                       "reached_hold": end is not None})
    return cycles


def cycle_costs(r, samples, oracle_at):
    """The cost of each probe cycle, managed against the twin over the same window:
    extra workload seconds = sum of the managed passes in the window - the twin's mean pass in the
    window x the number of managed passes; refaults and swap-ins = the managed guest's counters'
    growth minus the twin's; the lowest balloon size in the window against the oracle."""
    t_end = samples[-1]["t"] if samples else 0
    cycles = probe_cycles(samples, t_end)
    # A phased workload's set jumps once: the first cycle that starts after the jump finds the new
    # set (growth, or a set that shrank), and the cycle whose window the jump fell in carries the
    # change's first seconds at the old size: the reaction to a change, paid once per change, not
    # the cost of re-checking a known set on a timer.
    jump = r.get("jump")
    if jump is not None:
        for c in cycles:
            if c["start"] <= jump <= c["window_end"]:
                c["after_jump"] = True
        reaction = next((c for c in cycles if c["start"] > jump), None)
        if reaction is not None:
            reaction["after_jump"] = True
    mp, tp = r["passes"]["managed"], r["passes"]["twin"]
    mv, tv = r["vmstat"]["managed"], r["vmstat"]["twin"]
    twin_all = [ms for _, ms in tp]
    twin_all_mean = statistics.fmean(twin_all) if twin_all else None
    for c in cycles:
        w0, w1 = c["start"], c["window_end"]
        m = [ms for t, ms in mp if w0 < t <= w1]
        tw = [ms for t, ms in tp if w0 < t <= w1]
        ref = statistics.fmean(tw) if tw else twin_all_mean
        c["managed_passes"], c["twin_passes"] = len(m), len(tw)
        c["managed_ms"] = sum(m)
        c["twin_mean_ms"] = ref
        c["twin_mean_from_run"] = not tw
        c["extra_s"] = (sum(m) - ref * len(m)) / 1000 if ref is not None else None
        for key, col in (("refaults", 1), ("swapins", 2), ("majfaults", 3)):
            a, b = bl.counter_delta(mv, w0, w1, col), bl.counter_delta(tv, w0, w1, col)
            c["managed_" + key] = a
            c[key] = None if a is None or b is None else a - b
        oracle = oracle_at(w0)
        c["oracle"] = oracle
        inside = [s for s in samples if w0 <= s["t"] <= w1 and s.get("actual")]
        c["lowest"] = min((s["actual"] for s in inside), default=None)
        c["below_oracle_mib"] = None if c["lowest"] is None else oracle - c["lowest"]
        below = 0.0
        for s, s2 in zip(inside, inside[1:]):
            if s["actual"] < oracle:
                below += s2["t"] - s["t"]
        c["below_oracle_s"] = below
    # The steady skew: how much slower the managed guest's passes are than the twin's outside every
    # cost window (held, nothing probing or recovering). It is the daemon's monitoring and the machine
    # (two TCG guests on two cores, each with its own speed), not the probe: each cycle's net cost
    # subtracts it, per managed pass in the window.
    first_hold = next((c["end"] for c in cycles if c.get("end") is not None), None)
    outside = lambda t: (first_hold is not None and t > first_hold and
                         not any(c["start"] <= t <= c["window_end"] for c in cycles))
    m_out = [ms for t, ms in mp if outside(t)]
    t_out = [ms for t, ms in tp if outside(t)]
    if len(m_out) >= 20 and len(t_out) >= 20:
        skew, basis = statistics.fmean(m_out) - statistics.fmean(t_out), f"{len(m_out)} held passes outside the cost windows"
    elif mp and tp:
        skew = statistics.median([ms for _, ms in mp]) - statistics.median([ms for _, ms in tp])
        basis = "the whole run's medians (too few held passes outside the cost windows)"
    else:
        skew, basis = None, None
    for c in cycles:
        c["skew_ms"] = skew
        c["skew_basis"] = basis
        c["extra_net_s"] = (None if c["extra_s"] is None or skew is None
                            else c["extra_s"] - skew * c["managed_passes"] / 1000)
    return cycles


def amortize(cycles, interval_factor, hold_s=bl.SHIPPED_HOLD_S, band_per_work=None):
    """Cost per re-probe cycle spread over the shipped hold-time: every re-probe counts, the one
    the end of the run cut included (it is cut where it costs most, before its swap-ins are
    paid back).  The first descent and the reactions to a set's change are not re-probes: they
    are paid once per event, and events() gives them their own line.  interval_factor: shipped
    poll-interval / the run's (10 for the 1 s bench, 1 for the shipped run); the time a cycle
    spends below the working set scales with it, so cost x factor is an upper bound of the cost at
    the shipped interval.  band_per_work: part calibrate's no-probe noise as a share of the
    workload time in a window; each cycle's noise band is that share of its managed pass time."""
    usable = [c for c in cycles if c.get("extra_s") is not None]
    chosen = [c for c in usable[1:] if not c.get("after_jump")]
    if not chosen:
        return None
    cut = sum(1 for c in chosen if not c["complete"])
    basis = "re-probe" + (f" ({cut} cut by the end of the run, counted)" if cut else "")
    mean = lambda k: (statistics.fmean([c[k] for c in chosen if c.get(k) is not None])
                      if any(c.get(k) is not None for c in chosen) else None)
    gross = mean("extra_s")
    net = mean("extra_net_s")
    cost = net if net is not None else gross
    band = None
    if band_per_work is not None:
        band = statistics.fmean([band_per_work * c["managed_ms"] / 1000 for c in chosen])
    return {"basis": basis, "cycles": [c["n"] for c in chosen], "cut": cut, "extra_s": cost, "extra_gross_s": gross,
            "skew_ms": chosen[0].get("skew_ms"), "skew_basis": chosen[0].get("skew_basis"),
            "refaults": mean("refaults"), "swapins": mean("swapins"),
            "below_oracle_s": mean("below_oracle_s"), "hold_s": hold_s, "interval_factor": interval_factor,
            "measured": cost / hold_s, "shipped": cost * interval_factor / hold_s,
            "band_s": band, "band_shipped": None if band is None else band * interval_factor / hold_s}


def events(cycles):
    """The cycles paid once per event rather than once per hold-time: the first descent, and each
    reaction to a set's change.  [{kind, cycles, extra_s, refaults, swapins, complete}] per event
    (a reaction's cycles together: the one the change fell in and the one that found the new set)."""
    usable = [c for c in cycles if c.get("extra_s") is not None]
    out = []
    if usable:
        out.append(("first descent", [usable[0]]))
    reaction = [c for c in usable[1:] if c.get("after_jump")]
    if reaction:
        out.append(("reaction to the set's change", reaction))
    total = lambda cs, k: (sum(c[k] for c in cs if c.get(k) is not None)
                           if any(c.get(k) is not None for c in cs) else None)
    return [{"kind": kind, "cycles": [c["n"] for c in cs],
             "extra_s": total(cs, "extra_net_s") if total(cs, "extra_net_s") is not None else total(cs, "extra_s"),
             "refaults": total(cs, "refaults"), "swapins": total(cs, "swapins"),
             "complete": all(c["complete"] for c in cs)} for kind, cs in out]


def calibration_noise(outdir):
    """Part calibrate's no-probe noise: how far workload 1's pass ratios (managed / twin, median
    and mean) read from 1 in its windows with no probe at all.  The largest departure of each is
    the band a single run's ratio is judged with; the mean's is also the share of a window's
    workload time that a cost with no probe in it reads (its band).  None without calibrate.json."""
    try:
        with open(os.path.join(outdir, "calibrate.json")) as f:
            c = json.load(f)
    except (OSError, ValueError):
        return None
    band = {}
    for k in ("median", "mean"):
        vals = [w["first"][k + "_ms"] / w["twin"][k + "_ms"] for w in c.get("windows", [])
                if w.get("first", {}).get(k + "_ms") and w.get("twin", {}).get(k + "_ms")]
        if vals:
            band[k] = max(abs(v - 1) for v in vals)
    if not band:
        return None
    band["windows"] = len(c.get("windows", []))
    band["commit"] = c.get("commit", "unknown")
    return band


def noisy_verdict(values, ok, band=None):
    """A noisy figure's mark over its repetitions (values, one a run; ok(v): the goal): False when
    any run misses it; True when every run meets it and there are SPREAD_REPETITIONS runs or more;
    with fewer, True only when the worst run still meets it moved by the noise band (band: the
    amount added to a value against it), else None (no mark: the run cannot tell)."""
    vals = [v for v in values if v is not None]
    if not vals or len(vals) < len(values):
        return None
    if not all(ok(v) for v in vals):
        return False
    if len(vals) >= SPREAD_REPETITIONS:
        return True
    if band is None or not all(ok(v + band) for v in vals):
        return None
    return True


def run_pair(a, name, duration, phase_at=None, policy=bl.POLICY, stop=None):
    run = os.path.join(a.workdir, f"run-{a.name}")
    managed = bl.Guest(os.path.join(run, "m"), "managed", name, phase_at, label="rightsize")
    twin = bl.Guest(os.path.join(run, "t"), "twin", name, phase_at, label="twin")
    bl.boot_all([managed, twin])
    try:
        managed.wait_passes(3, 240)
        twin.wait_passes(3, 240)
        d = bl.Daemon(os.path.join(run, "d"), [os.path.join(run, "m", "*.qmp")], policy=policy)
        rss0 = {g.label: g.rss() for g in (managed, twin)}
        d.start()
        t0 = d.t_start
        cpu0 = d.cpu_seconds() or 0.0

        def show(row):
            s = row["guests"]["rightsize"]
            if int(row["t"]) % 15 == 0:
                log(f"{a.name} t={row['t']:.0f}s state={s.get('state')} target={fmt(mib(s.get('target')))} "
                    f"actual={fmt(mib(s.get('actual')))} estimate={fmt(mib(s.get('estimate')))}")
        raw = bl.sample_loop(duration, t0, d, [managed, twin], every=show, stop=stop)
        t_end = time.monotonic()
        cpu = (d.cpu_seconds() or 0.0) - cpu0
        d.stop()
        rss1 = {g.label: g.rss() for g in (managed, twin)}
        result = {"t0": t0, "t_end": t_end, "rss0": rss0, "rss1": rss1, "daemon_cpu_s": cpu,
                  "daemon_command": " ".join(shlex.quote(c) for c in d.command),
                  "boot_command": " ".join(shlex.quote(c) for c in managed.boot_cmd),
                  "config": open(d.config).read(), "policy": policy}
        samples = []
        for r in raw:
            s = r["guests"]["rightsize"]
            samples.append({"t": r["t"], "estimate": mib(s.get("estimate")), "target": mib(s.get("target")),
                            "actual": mib(s.get("actual")), "state": s.get("state"),
                            "rss": mib(s.get("rss")), "twin_rss": mib(r["guests"]["twin"].get("rss"))})
        result["samples"] = samples
        result["jump"] = managed.phases[0][0] - t0 if managed.phases else None
        result["twin_jump"] = twin.phases[0][0] - t0 if twin.phases else None
        result["managed"] = bl.window_stats(managed, t0, t_end)
        result["twin"] = bl.window_stats(twin, t0, t_end)
        # Every pass and counter line of the run (seconds since rightsized started), for the cost
        # per probe cycle; --render-only recomputes it from these.
        result["passes"] = {"managed": [p for p in bl.pass_series(managed, t0) if p[0] <= t_end - t0],
                            "twin": [p for p in bl.pass_series(twin, t0) if p[0] <= t_end - t0]}
        result["vmstat"] = {"managed": bl.vmstat_series(managed, t0), "twin": bl.vmstat_series(twin, t0)}
        result["oom"] = {"rightsize": managed.oom_kills(), "twin": twin.oom_kills()}
        result["oom_lines"] = managed.oom_lines[:5] + twin.oom_lines[:5]
        result["leading"] = leading_signs(d.log_path)
        for k in ("managed", "twin"):
            result[k].pop("ms", None)
        return result
    finally:
        managed.stop()
        twin.stop()


_LOG_LINE = re.compile(r"\[(?P<state>\w+)\]: target [^(]*\(actual (?P<actual>[\d.]+) (?P<unit>[KMG]i?B)[^)]*\): "
                       r"(?P<reason>.*)$")
_UNITS = {"KiB": 1 / 1024, "MiB": 1, "GiB": 1024, "B": 1 / (1024 * 1024)}


def leading_signs(log_path):
    """How early the leading signs fired in the first descent (policies/README.md): from rightsized's
    decision log, the size at which each sign first made the probe take a small step, and the size of
    the first refaulting sample it backed off from.  Sizes in MiB (the balloon's actual size when the
    sample was judged); steps_before: decisions between the sign and the first refault."""
    try:
        lines = open(log_path, errors="replace").read().splitlines()
    except OSError:
        return None
    seen, order, knee = {}, 0, None
    for line in lines:
        m = _LOG_LINE.search(line)
        if not m:
            continue
        size = float(m["actual"]) * _UNITS.get(m["unit"], 1)
        reason = m["reason"]
        small = re.search(r"\(small step: (.*)\)$", reason)
        for sign in (small[1].split("; also ") if m["state"] == "probe" and small else []):
            if sign not in seen:
                seen[sign] = {"sign": sign, "at_mib": round(size, 1), "order": order}
        if m["state"] == "backoff" and " at once" in reason:
            bad = re.search(r" at ([\d.]+) MiB, clean at", reason)
            knee = {"at_mib": float(bad[1]) if bad else round(size, 1), "order": order,
                    "why": reason.split(" at ", 1)[0]}
            break
        order += 1
    signs = sorted(seen.values(), key=lambda x: x["order"])
    for x in signs:
        x["mib_above_refault"] = None if knee is None else round(x["at_mib"] - knee["at_mib"], 1)
        x["steps_before"] = None if knee is None else knee["order"] - x["order"]
    return {"signs": signs, "first_refault": knee}


def leading_markdown(lead):
    if not lead:
        return []
    k = lead["first_refault"]
    rows = [[x["sign"], fmt(x["at_mib"], "{:.1f}"), fmt(x["mib_above_refault"], "{:+.1f}"), fmt(x["steps_before"], "{:d}")]
            for x in lead["signs"]]
    head = ("\n**Leading signs in the first descent** (from rightsized's decision log: where each sign first made "
            "the probe take small steps, against the first refaulting sample"
            + (f", at {k['at_mib']:.1f} MiB: {k['why']}" if k else ", none in this run") + "):\n")
    if not rows:
        return [head, "no leading sign fired before the first refault.\n"]
    return [head, table(["sign", "first at MiB", "MiB above the first refault", "decisions before it"], rows)]


def shipped_stop(after_s=CYCLE_AFTER_S):
    """For the shipped run: stop once the second probe cycle (the first timed re-probe) has
    reached hold and after_s more have gone by."""
    def stop(raw):
        samples = [{"t": r["t"], "state": r["guests"]["rightsize"].get("state")} for r in raw]
        cycles = probe_cycles(samples, raw[-1]["t"], after_s)
        return len(cycles) >= 2 and cycles[1]["complete"]
    return stop


def run_figures(r, w, oracles, oracle_names, interval_factor, noise):
    """One repetition's figures from its record r (run_pair's result): each phase's end state
    against its oracle, the reaction to a jump, every probe cycle's cost, the amortized cost and
    the once-per-event costs, the pass ratios, the host's gain and its marks as one run."""
    phased = "phase" in w
    samples = r["samples"]
    t_total = samples[-1]["t"] if samples else 0
    o1 = oracles[oracle_names[0]]["ws_mib"]
    phases = []
    if phased and r.get("jump") is not None:
        o2 = oracles[oracle_names[1]]["ws_mib"]
        phases.append(dict(label=f"before the jump ({w['phase'][0]} MiB)", **phase_figures(samples, o1, 0, r["jump"])))
        phases.append(dict(label=f"after the jump ({w['phase'][1]} MiB)",
                           **phase_figures(samples, o2, r["jump"], t_total)))
        steps = [(0, r["jump"], o1), (r["jump"], t_total, o2)]
    else:
        phases.append(dict(label="whole run", **phase_figures(samples, o1, 0, t_total)))
        steps = [(0, t_total, o1)]
    # Reaction: from the workload's jump (its phase line, host time) to the target covering it.
    reaction = None
    if phased and r.get("jump") is not None:
        o2 = oracles[oracle_names[1]]["ws_mib"]
        if w["phase"][1] > w["phase"][0]:
            t = next((s["t"] for s in samples if s["t"] >= r["jump"] and s["target"] and s["target"] >= o2), None)
            t_act = next((s["t"] for s in samples if s["t"] >= r["jump"] and s["actual"] and s["actual"] >= o2), None)
            reaction = {"kind": "grow", "target_covers_s": None if t is None else t - r["jump"],
                        "actual_covers_s": None if t_act is None else t_act - r["jump"]}
        else:
            reaction = {"kind": "shrink", "returned_s": phases[1]["size_converge_s"]}
    m, tw = r["managed"], r["twin"]
    ratio = m["mean_ms"] / tw["mean_ms"] if m.get("mean_ms") and tw.get("mean_ms") else None
    med_ratio = m["median_ms"] / tw["median_ms"] if m.get("median_ms") and tw.get("median_ms") else None

    # The cost of estimation: per probe cycle, amortized over the shipped hold-time, and per event.
    oracle_at = lambda t: next((o for _, t1_, o in steps if t < t1_), steps[-1][2])
    cycles = cycle_costs(r, samples, oracle_at) if r.get("passes") else None
    amort = amortize(cycles, interval_factor, band_per_work=noise and noise.get("mean")) if cycles else None
    once = events(cycles) if cycles else []
    if amort and r.get("passes"):
        # The twin's busy share: the fraction of wall time its workload spends in passes (the rest
        # is its sleep between passes).  The amortized figure is per wall second, as the goal
        # defines it; per second of work it is larger by 1 / this share.
        tp_in = [ms for t, ms in r["passes"]["twin"] if 0 < t <= t_total]
        amort["twin_busy_share"] = sum(tp_in) / 1000 / t_total if t_total > 0 and tp_in else None
        if amort["twin_busy_share"]:
            amort["shipped_per_work"] = amort["shipped"] / amort["twin_busy_share"]
    # The host's real gain: what the managed guest's QEMU holds less than its twin's.
    rss1 = r["rss1"]
    gain_end = (mib(rss1["twin"]) - mib(rss1["rightsize"])) if rss1.get("twin") and rss1.get("rightsize") else None
    tail = [s["twin_rss"] - s["rss"] for s in samples if s["t"] >= t_total - 30 and s.get("rss") and s.get("twin_rss")]
    gain_30 = statistics.fmean(tail) if tail else None
    last = phases[-1]
    returned = GUEST_MIB - last["target"] if last["target"] else None
    return {"phases": phases, "reaction": reaction, "steps": steps, "t_total": t_total,
            "slowdown_mean": ratio, "slowdown_median": med_ratio, "cycles": cycles, "amortized": amort,
            "events": once, "host_gain_end_mib": gain_end, "host_gain_30s_mib": gain_30,
            "returned_mib": returned, "reclaimable_mib": GUEST_MIB - last["oracle"]}


def spread(values, spec="{:.0f}", none="–"):
    """Median, and min–max when there is more than one value: "12 (10–15)".  spec: a format
    string or a function of the value."""
    vals = [v for v in values if v is not None]
    if not vals:
        return none
    f = spec if callable(spec) else spec.format
    med = statistics.median(vals)
    return f(med) + (f" ({f(min(vals))}–{f(max(vals))})" if len(vals) > 1 else "")


def part_summary(title, shipped, number, what, figs, interval_factor, noise, wl, r_oom):
    """The figures of every repetition for the page's summary: each noisy figure as the list of
    its runs' values (run-all shows median and min–max) and its mark from noisy_verdict; the end
    state's error and held bounds marked only when every run meets them."""
    n = len(figs)
    idle = wl == "idle"
    error_goal = wl in ERROR_GOAL_WORKLOADS
    slow_goal = wl in SLOW_GOAL_WORKLOADS
    last = lambda f: f["phases"][-1]
    amorts = [f["amortized"] for f in figs]
    have_amort = all(a is not None for a in amorts)
    # A cost below zero is read as zero: the twin ran slower, which no probe pays for; the noise
    # band says how much a zero could be.
    cost_vals = [max(a["shipped"], 0.0) for a in amorts] if have_amort else [None]
    cost_band = (max(a["band_shipped"] for a in amorts) if have_amort and all(a.get("band_shipped") is not None
                                                                             for a in amorts) else None)
    med_vals = [f["slowdown_median"] for f in figs]
    mean_vals = [f["slowdown_mean"] for f in figs]
    checks = {
        "error": all(p["error"] is not None and p["error"] <= GOAL_ERROR for f in figs for p in f["phases"])
        if error_goal else None,
        "held": all(p["held_ok"] for f in figs for p in f["phases"]),
        "waste": all(p["waste_ok"] for f in figs for p in f["phases"]),
        "median": noisy_verdict(med_vals, lambda v: v <= GOAL_MEDIAN, noise and noise.get("median"))
        if slow_goal else None,
        "mean": noisy_verdict(mean_vals, lambda v: v <= GOAL_MEAN, noise and noise.get("mean")) if slow_goal else None,
        "amortized": (noisy_verdict(cost_vals, lambda v: v <= GOAL_AMORTIZED, cost_band) if have_amort else False)
        if slow_goal else None,
        "oom": r_oom == 0,
    }
    per_phase = lambda key: [[f["phases"][i][key] for f in figs] for i in range(len(figs[0]["phases"]))]
    ev = {}
    for f in figs:
        for e in f["events"]:
            x = ev.setdefault(e["kind"], {"extra_s": [], "swapins": [], "refaults": []})
            for k in ("extra_s", "swapins", "refaults"):
                x[k].append(e[k])
    out = {
        "label": title.split(" (")[0] if not shipped else f"{number}. {what.split(' (')[0]}, preset as shipped",
        "runs": n,
        "oracle": [p["oracle"] for p in figs[0]["phases"]],
        "estimate": [statistics.median([v for v in vals if v is not None]) if any(v is not None for v in vals) else None
                     for vals in per_phase("estimate")],
        "estimate_runs": per_phase("estimate"),
        "error": [max((v for v in vals if v is not None), default=None) for vals in per_phase("error")],
        "held": [statistics.median([v for v in vals if v is not None]) if any(v is not None for v in vals) else None
                 for vals in per_phase("target")],
        "held_runs": per_phase("target"), "held_upper": [p["held_upper"] for p in figs[0]["phases"]],
        "mid_cycle": sum(1 for f in figs for p in f["phases"] if p["mid_cycle"]),
        "cycles": [len(f["cycles"]) if f["cycles"] is not None else None for f in figs],
        "cut_counted": [a["cut"] if a else None for a in amorts],
        "extra_s": [a and a["extra_s"] for a in amorts], "refaults": [a and a["refaults"] for a in amorts],
        "swapins": [a and a["swapins"] for a in amorts],
        "amortized": [a and a["shipped"] for a in amorts], "amortized_band": cost_band,
        "amortized_measured": [a and a["measured"] for a in amorts],
        "amortized_basis": [a and a["basis"] for a in amorts], "events": ev,
        "interval_factor": interval_factor,
        "median": None if idle else med_vals, "mean": None if idle else mean_vals,
        "noise": noise,
        "gain_end": [f["host_gain_end_mib"] for f in figs], "gain_30": [f["host_gain_30s_mib"] for f in figs],
        "returned": [f["returned_mib"] for f in figs], "reclaimable": figs[0]["reclaimable_mib"],
        "oom": r_oom, "checks": checks,
    }
    # Each figure of the runs stays under NAME_runs; NAME is their median, the one number that
    # readers of a single run's summary (the smoke, the experiments' side-by-side tables) take.
    for k in ("cycles", "extra_s", "refaults", "swapins", "amortized", "amortized_measured", "median", "mean",
              "gain_end", "gain_30", "returned"):
        vals = out[k]
        out[k + "_runs"] = vals
        known = [v for v in vals or [] if v is not None]
        out[k] = statistics.median(known) if known else None
    return out


def workload_main(name, argv):
    a = setup(argv)
    variant = VARIANTS.get(name)
    wl = variant[0] if variant else name
    shipped = bool(variant and variant[1] == "shipped")
    w = bl.WORKLOADS[wl]
    number, what = w["title"].split(". ", 1)
    title = (f"{number}, shipped preset. {what}, the balanced preset as shipped "
             f"({bl.SHIPPED_POLL_S} s interval, {bl.SHIPPED_HOLD_S // 60} min hold)" if shipped else w["title"])
    poll_s = bl.SHIPPED_POLL_S if shipped else bl.BENCH_POLL_S
    hold_s = bl.SHIPPED_HOLD_S if shipped else bl.BENCH_HOLD_S
    interval_factor = bl.SHIPPED_POLL_S / poll_s
    phased = "phase" in w
    oracle_names = w.get("oracles", (wl,))
    if a.render_only:
        # Render only: never boot a guest, not even for a missing oracle.
        cache = bl.load_oracles(a.outdir)
        missing = [o for o in oracle_names if bl.oracle_key(o, a.smoke) not in cache]
        if missing:
            raise bl.HarnessError(f"--render-only: no oracle for {', '.join(missing)} in "
                                  f"{bl.oracle_cache_path(a.outdir)}")
        oracles = {o: cache[bl.oracle_key(o, a.smoke)] for o in dict.fromkeys(oracle_names)}
    else:
        oracles = {o: bl.get_oracle(a.outdir, a.workdir, o, a.smoke) for o in dict.fromkeys(oracle_names)}
    stop = None
    if shipped:
        # Long enough for the first descent at 10 s a step, the 10 min hold, the timed re-probe and
        # 60 s after it (about 17 min under TCG); stopped as soon as that has been seen.
        duration, phase_at = (150, None) if a.smoke else (1500, None)
        stop = shipped_stop()
    elif a.smoke:
        duration, phase_at = 80, None
    elif phased:
        duration, phase_at = 280, 150
    else:
        duration, phase_at = 150, None
    if a.render_only:
        with open(os.path.join(a.outdir, a.name + ".json")) as f:
            j = json.load(f)
        # A part's JSON is one run, or several under "repetitions" (each one run's record).
        runs = j.get("repetitions") or [j]
        for x in runs:
            x.setdefault("commit", j.get("commit", "unknown (recorded before parts were stamped)"))
    else:
        log(f"part {a.name} (workload {wl}): rightsize and an unmanaged twin for up to {duration} s")
        policy = bl.shipped_policy() if shipped else bl.POLICY
        runs = [run_pair(a, wl, duration, phase_at, policy=policy, stop=stop)]
    for x in runs:
        x.setdefault("commit", a.commit)
    noise = calibration_noise(a.outdir)
    figs = [run_figures(x, w, oracles, oracle_names, interval_factor, noise) for x in runs]
    oom_total = sum(x["oom"]["rightsize"] for x in runs)
    summary = part_summary(title, shipped, number, what, figs, interval_factor, noise, wl, oom_total)
    # The top level keeps the first run's record and figures (what older readers of the JSON use);
    # every run's is under "repetitions" when there are more than one.
    keep = lambda x, f: {**x, **{k: v for k, v in f.items() if k not in ("steps", "t_total")}}
    result = {**keep(runs[0], figs[0]), "workload": wl, "part": a.name, "title": title,
              "oracles": {k: v["ws_mib"] for k, v in oracles.items()},
              "oracle_commits": {k: v.get("commit", "unknown (an older cache entry)") for k, v in oracles.items()},
              "summary": summary, "poll_interval_s": poll_s, "hold_time_s": hold_s}
    if len(runs) > 1:
        result["repetitions"] = [keep(x, f) for x, f in zip(runs, figs)]
    ctx = dict(a=a, wl=wl, w=w, title=title, shipped=shipped, poll_s=poll_s, duration=duration, phase_at=phase_at,
               interval_factor=interval_factor, oracles=oracles, oracle_names=oracle_names, noise=noise)
    interval_text = (f"the `balanced` preset exactly as shipped: {bl.SHIPPED_POLL_S} s interval, "
                     f"{bl.SHIPPED_HOLD_S // 60} min hold" if shipped else
                     f"{bl.BENCH_POLL_S} s interval, {bl.BENCH_HOLD_S} s hold")
    md = [f"## {title}\n",
          f"Guest: 1 GiB, 512 MiB swap{', data disk ' + w['data'] if w.get('data') else ''}, "
          f"`rs-workload {bl.workload_args(wl, phase_at)}`. Two guests booted together: one managed by "
          f"rightsized ({interval_text}), one unmanaged twin running the same workload side by side. "
          + (f"{len(runs)} runs (repetitions)." if len(runs) > 1 else
             "**1 run**: a noisy figure (pass ratios, amortized cost) is marked only when its goal holds with "
             "part calibrate's noise band added, since one run cannot show its spread.")
          + f" Commit `{runs[0].get('commit', '?')}`.\n"]
    if len(runs) > 1:
        md += spread_markdown(summary, figs)
    for i, (x, f) in enumerate(zip(runs, figs)):
        md += run_markdown(ctx, x, f, i + 1 if len(runs) > 1 else None, summary["checks"])
    md.append(f"\nReproduce: {repro(a)}. Guest: `{runs[0]['boot_command']}`.\n")
    write_part(a, "\n".join(md), result)
    return 0


def spread_markdown(summary, figs):
    """The section's table over the repetitions: median and min–max of each figure, the marks of
    part_summary (worst run)."""
    ck = summary["checks"]
    mk = lambda k: "" if ck.get(k) is None else " " + goal(ck[k])
    rows = []
    for i, o in enumerate(summary["oracle"]):
        rows.append([figs[0]["phases"][i]["label"], o, spread(summary["estimate_runs"][i]),
                     spread([f["phases"][i]["error"] for f in figs], pc) + mk("error"),
                     spread(summary["held_runs"][i]) + mk("held") + mk("waste") + f" (≥ {o}; ≤ {summary['held_upper'][i]:.0f})"])
    md = ["**Over the repetitions** (median, min–max; a mark only when the worst run meets the goal):\n",
          table(["phase", "oracle MiB", "estimate at the end MiB", f"error (≤ {pc(GOAL_ERROR, 0)})",
                 "held at the end MiB"], rows),
          "\n" + table(["amortized at shipped settings", "median pass ratio", "mean pass ratio"],
                       [[spread([max(v, 0.0) for v in summary["amortized_runs"] if v is not None], lambda v: pc(v, 2))
                         + mk("amortized"),
                         spread(summary["median_runs"] or [], "{:.3f}") + mk("median"),
                         spread(summary["mean_runs"] or [], "{:.3f}") + mk("mean")]])]
    return md


def run_markdown(ctx, r, f, rep, checks):
    """One run's tables: end state and convergence, leading signs, the cost of every probe cycle,
    memory and slowdown; rep: the repetition's number (None for a part of one run)."""
    a, wl, w, title, shipped, poll_s = ctx["a"], ctx["wl"], ctx["w"], ctx["title"], ctx["shipped"], ctx["poll_s"]
    oracles, oracle_names = ctx["oracles"], ctx["oracle_names"]
    idle = wl == "idle"
    error_goal = wl in ERROR_GOAL_WORKLOADS
    samples, phases, t_total = r["samples"], f["phases"], f["t_total"]
    suffix = "" if rep is None else f"-{rep}"
    plot_name = f"{a.name}{suffix if rep and rep > 1 else ''}.svg"
    series = {"rightsize target": [(s["t"], s["target"]) for s in samples],
              "balloon actual": [(s["t"], s["actual"]) for s in samples],
              "rightsize estimate": [(s["t"], s["estimate"]) for s in samples]}
    have_plot = bl.plot(os.path.join(a.outdir, plot_name), title.replace("'", ""), series, f["steps"])
    rows = []
    for p in phases:
        ok = p["error"] is not None and p["error"] <= GOAL_ERROR
        reason = ""
        if not ok:
            reason = ("no estimate" if p["estimate"] is None else
                      f"estimate {p['signed_error'] * 100:+.0f} % off the oracle")
            # A guest whose set fits under the policy's floor is held there: the probe never goes
            # lower, so its estimate is the floor, an upper bound, and a set below the floor
            # cannot be told more closely without a lower floor.
            if (p["estimate"] is not None and p["target"] is not None and p["oracle"] < PRESET_FLOOR_MIB
                    and p["target"] <= PRESET_FLOOR_MIB + 1):
                reason += (f"; held at the preset's floor, {PRESET_FLOOR_MIB} MiB, below which it never "
                           f"probes: the estimate there is the floor, and the set fits under it")
        mc = p["mid_cycle"]
        read = (f"{fmt(p['read_at_s'], '{:.0f} s', 'no hold in the phase')}" +
                (f"; **ended mid-cycle** ({mc['state']} since {mc['since_s']:.0f} s): the last hold's figures"
                 if mc else ", in a hold"))
        rows.append([p["label"], p["oracle"], read, fmt(p["estimate"]), fmt(p["target"]), fmt(p["actual"]),
                     pc(p["error"]) + (" " + goal(ok) + (f" ({reason})" if reason else "")
                                       if error_goal else " (no goal for this workload)"),
                     f"{fmt(p['target'])} ≥ {p['oracle']} {goal(p['held_ok']) if p['held_ok'] is not None else ''}; "
                     f"≤ {p['held_upper']:.0f} {goal(p['waste_ok']) if p['waste_ok'] is not None else ''}",
                     ("not within 10 %" if p["converge_s"] is None else
                      f"{p['converge_s']:.0f} s = {p['converge_s'] / poll_s:.0f} intervals"),
                     "–" if p["size_converge_s"] is None else f"{p['size_converge_s']:.0f} s"])
    m, tw = r["managed"], r["twin"]
    ratio, med_ratio = f["slowdown_mean"], f["slowdown_median"]
    noise = ctx["noise"]
    single = rep is None

    def mark(key):
        if not single:
            return ""
        if checks.get(key) is None:
            return " (1 run: the goal does not hold with the noise band added, no mark)" if slow_goal else ""
        return " " + goal(checks[key])
    md = [] if rep is None else [f"\n### Run {rep} of the repetitions\n"]
    md += [f"Run: {t_total:.0f} s of rightsized" +
           (f"; the set jumps at {r['jump']:.0f} s." if r.get("jump") is not None else ".") +
           (" The run stops 60 s after the first timed re-probe reaches hold (at most "
            f"{ctx['duration']} s)." if shipped else "") + "\n",
           f"**End state, estimate error and convergence** (read at the end of each phase, in a hold: the last "
           f"sample's estimate, target and balloon; a phase that ends in any other state ended mid-cycle, and its "
           f"figures are the last hold's. Held: the target at the end, against the oracle's set (≥: no starvation) "
           f"and the set × (1 + the preset's {pc(PRESET_MARGIN, 0)} margin) + one oracle step of {HELD_STEP_MIB} MiB "
           f"(≤: no waste). Convergence: from the full size until the estimate stays within 10 % of the oracle; "
           f"balloon at its size: until the balloon first comes within 10 % of the target held at the end):\n",
           table(["phase", "oracle MiB", "read at", "estimate MiB", "target MiB", "actual MiB",
                  f"error (goal ≤ {pc(GOAL_ERROR, 0)})", "held MiB: ≥ oracle; ≤ oracle × 1.1 + step",
                  "convergence", "balloon at its size"], rows)]
    md += leading_markdown(r.get("leading"))
    slow_goal = wl in SLOW_GOAL_WORKLOADS
    md += cost_markdown(f["cycles"], f["amortized"], ctx["interval_factor"], poll_s, shipped, f["events"],
                        checks.get("amortized") if single else None, single and slow_goal)
    rss0, rss1 = r["rss0"], r["rss1"]
    gain_end, gain_30 = f["host_gain_end_mib"], f["host_gain_30s_mib"]
    returned, reclaimable = f["returned_mib"], f["reclaimable_mib"]
    band_text = (f"; part calibrate's no-probe band: median ±{noise['median']:.3f}, mean ±{noise['mean']:.3f}"
                 if noise and single and not idle else "")
    md += ["\n**Memory returned, the host's real gain and the workload slowdown** (over the whole managed run, "
           "against the twin; the host's real gain = twin QEMU RSS − managed QEMU RSS; returned is shown, not "
           "judged: the held size's bounds above are the goal):\n",
           table(["returned: 1024 − the target held at the end", "QEMU RSS at start → end",
                  "twin RSS at end", "host's real gain at the end; mean of the last 30 s",
                  f"pass time managed / twin: median (≤ {GOAL_MEDIAN}); mean (≤ {GOAL_MEAN})",
                  "extra major faults", "extra refaults", "extra swap-ins", "OOM kills (goal 0)"],
                 [[f"{fmt(returned)} MiB of the {reclaimable} MiB above the oracle's set",
                   f"{fmt(mib(rss0['rightsize']))} → {fmt(mib(rss1['rightsize']))} MiB "
                   f"({fmt(mib((rss1['rightsize'] or 0) - (rss0['rightsize'] or 0)), '{:+.0f}')})",
                   f"{fmt(mib(rss1['twin']))} MiB",
                   f"{fmt(gain_end, '{:+.0f}')} MiB; {fmt(gain_30, '{:+.0f}')} MiB",
                   ("n/a (idle: no work)" if idle else
                    f"{fmt(med_ratio, '{:.3f}')}{mark('median')}; {fmt(ratio, '{:.3f}')}{mark('mean')} "
                    f"(mean pass {fmt(m.get('mean_ms'))} ms vs {fmt(tw.get('mean_ms'))} ms; slowest "
                    f"{fmt(m.get('max_ms'))} ms vs {fmt(tw.get('max_ms'))} ms{band_text})"),
                   fmt((m.get("majfaults") or 0) - (tw.get("majfaults") or 0), "{:+d}"),
                   fmt((m.get("refaults") or 0) - (tw.get("refaults") or 0), "{:+d}"),
                   fmt((m.get("swapins") or 0) - (tw.get("swapins") or 0), "{:+d}"),
                   f"{r['oom']['rightsize']} {goal(r['oom']['rightsize'] == 0)} (twin {r['oom']['twin']})"]])]
    reaction = f["reaction"]
    if reaction:
        if reaction["kind"] == "grow":
            md.append(f"\n**Reaction** to the jump: the target covered the new working set "
                      f"({oracles[oracle_names[1]]['ws_mib']} MiB) after "
                      f"{fmt(reaction['target_covers_s'], '{:.0f} s', 'never')}, the balloon after "
                      f"{fmt(reaction['actual_covers_s'], '{:.0f} s', 'never')}.\n")
        else:
            md.append(f"\n**Reaction** to the halving: the balloon came within 10 % of its final size "
                      f"{fmt(reaction['returned_s'], '{:.0f} s', '(not within the run)')} after the jump.\n")
    if r["oom_lines"]:
        md.append("\nOOM lines on the consoles:\n\n```\n" + "\n".join(r["oom_lines"]) + "\n```\n")
    if have_plot:
        md.append(f"\n![{title}](PLOTDIR/{plot_name})\n")
    md.append(f"\nrightsized used {r['daemon_cpu_s']:.2f} CPU seconds in this run.\n")
    return md


def cost_markdown(cycles, amort, interval_factor, poll_s, shipped, once, verdict, judged_single):
    """The section's cost per probe cycle: every cycle, the amortized slowdown of the re-probes
    (verdict: its mark, None for none; judged_single: a part of one run with a goal for it, which
    says why a None gives no mark), and the cost of each event paid once (once: events())."""
    md = [f"\n**Cost per probe cycle.** A cycle starts when rightsized's state (read every second) enters "
          f"`probe` from any state but `backoff` (learn, hold, grow, emergency), and ends when it reaches `hold`; "
          f"its cost window runs from its start until the next cycle starts or {CYCLE_AFTER_S} s after its end, "
          f"whichever comes first. Extra workload seconds = the managed guest's pass times summed over the window "
          f"− the twin's mean pass time in the same window × the number of managed passes (pass lines from the "
          f"serial consoles, timestamped on the host when they arrive). Refaults (`workingset_refault_anon` + "
          f"`_file`) and swap-ins (`pswpin`) are the managed guest's growth over the window minus the twin's, "
          f"from the vmstat line the workload prints after every pass. Lowest: the smallest balloon size in the "
          f"window, and how far below the oracle's working set it went. Every re-probe is amortized, the one the "
          f"end of the run cut included. The first descent, and in a phased workload the cycle the jump falls in "
          f"and the one that finds the new set after it (the reaction to the change), are paid once per event, "
          f"not once per hold-time: each gets its own line, the cost per event.\n"]
    if cycles is None:
        md.append("\nNot recorded: this part's JSON predates the per-pass record (rerun the part).\n")
        return md
    if not cycles:
        md.append("\nNo probe cycle in this run.\n")
        return md
    rows = []
    for c in cycles:
        kind = "first descent" if c["n"] == 1 else "the jump: old set to new" if c.get("after_jump") else "re-probe"
        rows.append([c["n"], kind,
                     f"{c['start']:.0f} → {fmt(c['end'], '{:.0f}', 'no hold')}",
                     f"{c['window_end'] - c['start']:.0f}" + ("" if c["complete"] else " (cut by the end of the run)"),
                     f"{c['managed_passes']} / {c['twin_passes']}",
                     f"{fmt(c['managed_ms'] / 1000 if c['managed_passes'] else None, '{:.1f}')} vs "
                     f"{fmt(c['twin_mean_ms'], '{:.0f}')} ms" + (" (twin's run mean)" if c["twin_mean_from_run"] else ""),
                     f"{fmt(c['extra_s'], '{:+.1f}')}; net {fmt(c.get('extra_net_s'), '{:+.1f}')}",
                     fmt(c["refaults"], "{:+d}"), fmt(c["swapins"], "{:+d}"),
                     f"{fmt(c['lowest'])} ({fmt(c['below_oracle_mib'], '{:+.0f}')})",
                     f"{c['below_oracle_s']:.0f}"])
    md.append("\n" + table(["cycle", "kind", "probe → hold (s since start)", "window s", "passes managed / twin",
                            "managed pass s in window vs twin's mean pass",
                            "extra workload s: gross; net of the steady skew",
                            "refaults (managed − twin)", "swap-ins (managed − twin)",
                            "lowest balloon MiB (below the oracle: +)", "s below the oracle"], rows))
    skew = cycles[0].get("skew_ms")
    if skew is not None:
        md.append(f"\nSteady skew: outside every cost window the managed guest's passes ran {skew:+.1f} ms against "
                  f"the twin's ({cycles[0]['skew_basis']}): the daemon's monitoring and the machine, not a probe. "
                  f"The net cost subtracts it for each managed pass in the window, and is what is amortized below.\n")
    md += events_markdown(once)
    if not amort:
        md.append("\nNo re-probe in this run: nothing to amortize over the hold-time (the first descent is above).\n")
        return md
    basis = (f"the mean of {len(amort['cycles'])} {amort['basis']} cycle{'s' if len(amort['cycles']) > 1 else ''} "
             f"({', '.join(str(n) for n in amort['cycles'])})")
    mark = "" if verdict is None else f" {goal(verdict)}"
    band = amort.get("band_shipped")
    noise = ("" if band is None else
             f" ± {pc(band, 2)} (the noise band: part calibrate's no-probe mean pass ratio, as a share of the "
             f"cycles' workload time)")
    if judged_single and verdict is None:
        mark = (" (1 run: the goal does not hold with the noise band added, no mark)" if band is not None else
                " (1 run and no noise band: part calibrate not run, no mark)")

    def shown(v):
        # A cost below zero is read as zero: the twin ran slower, which no probe pays for.
        return f"**{pc(v, 2)}**" if v >= 0 else f"**0** (measured {pc(v, 2)}, read as 0)"
    work = ""
    if amort.get("shipped_per_work") is not None:
        work = (f"\nPer second of work rather than of wall time (the twin's workload is busy "
                f"{pc(amort['twin_busy_share'])} of the time, sleeping between passes): "
                f"{pc(max(amort['shipped'], 0), 2)} / {pc(amort['twin_busy_share'])} = "
                f"{pc(max(amort['shipped_per_work'], 0), 1)}"
                + ("" if shipped else " at the shipped interval (upper bound)") + ".\n")
    if shipped:
        md.append(f"\n**Amortized slowdown at the shipped hold-time**: cost per cycle {amort['extra_s']:+.1f} s of "
                  f"workload time, net of the steady skew (gross {fmt(amort.get('extra_gross_s'), '{:+.1f}')} s; {basis}; {fmt(amort['refaults'], '{:+.0f}')} refaults, "
                  f"{fmt(amort['swapins'], '{:+.0f}')} swap-ins) / {amort['hold_s']} s = "
                  f"{shown(amort['shipped'])}{noise}{mark} (goal ≤ {pc(GOAL_AMORTIZED, 0)}), measured at the shipped "
                  f"{poll_s} s interval: no scaling.\n" + work)
    else:
        md.append(f"\n**Amortized slowdown at the shipped hold-time** ({bl.SHIPPED_HOLD_S // 60} min): cost per "
                  f"cycle {amort['extra_s']:+.1f} s of workload time, net of the steady skew (gross "
                  f"{fmt(amort.get('extra_gross_s'), '{:+.1f}')} s; {basis}; {fmt(amort['refaults'], '{:+.0f}')} "
                  f"refaults, {fmt(amort['swapins'], '{:+.0f}')} swap-ins, {amort['below_oracle_s']:.0f} s below the "
                  f"oracle per cycle).\n\n"
                  f"- measured at this run's {poll_s} s interval: {amort['extra_s']:+.1f} s / {amort['hold_s']} s = "
                  f"{pc(amort['measured'], 2)};\n"
                  f"- derived for the shipped {bl.SHIPPED_POLL_S} s interval (upper bound): "
                  f"{amort['extra_s']:+.1f} s × {interval_factor:.0f} / {amort['hold_s']} s = "
                  f"{shown(amort['shipped'])}{noise}{mark} (goal ≤ {pc(GOAL_AMORTIZED, 0)}). Derivation: a probe moves "
                  f"one step per interval, so at the shipped interval every size of the descent is held "
                  f"{interval_factor:.0f}× longer, and the time spent below the working set, which is what costs "
                  f"the workload, scales by {interval_factor:.0f}× at most (the depth per step is the same; the "
                  f"swap-in after the return does not scale); the cost of a cycle therefore scales by at most "
                  f"{interval_factor:.0f}×. `bench-shipped` measures it at the shipped settings directly.\n" + work)
    return md


def events_markdown(once):
    """The cost of each event paid once: the first descent, a reaction to the set's change."""
    if not once:
        return []
    return ["\n**Cost per event** (paid once, not amortized over the hold-time): " + "; ".join(
        f"{e['kind']} (cycle{'s' if len(e['cycles']) > 1 else ''} {', '.join(str(n) for n in e['cycles'])}"
        + ("" if e["complete"] else ", cut by the end of the run") + f"): {fmt(e['extra_s'], '{:+.1f}')} s of "
        f"workload time net of the steady skew, {fmt(e['refaults'], '{:+.0f}')} refaults, "
        f"{fmt(e['swapins'], '{:+.0f}')} swap-ins" for e in once) + ".\n"]


# ---- workload 8: several guests, a small host, three controllers ---------------------------

SIM_TOTAL_MIB = 1536
SIM_HOST_USED_MIB = 128
SIM_RESERVE = "256M"
MULTI = (("a", "anon"), ("b", "mixed"))


def run_multi(a, controller, duration):
    run = os.path.join(a.workdir, f"multi-{controller}")
    os.makedirs(run, exist_ok=True)
    guests = [bl.Guest(os.path.join(run, label), label, wl, label=label) for label, wl in MULTI]
    bl.boot_all(guests)
    fake = bl.FakeHost(os.path.join(run, "meminfo"), SIM_TOTAL_MIB, SIM_HOST_USED_MIB)
    d = mom = None
    try:
        for g in guests:
            g.wait_passes(3, 240)
        fake.write(len(guests) * GUEST_MIB)
        if controller == "rightsize":
            d = bl.Daemon(os.path.join(run, "d"), [os.path.join(run, label, "*.qmp") for label, _ in MULTI],
                          host_reserve=SIM_RESERVE, fake_host=fake)
            d.start()
            t0 = d.t_start
        else:
            t0 = time.monotonic()
            if controller == "mom":
                mom = bl.MomBalloonPolicy(guests, fake)

        class Plain:
            # No controller: the harness only reads the balloon sizes for the simulated host.
            def __init__(self):
                self.q = {g.label: g.qmp() for g in guests}

            def step(self, row):
                for g in guests:
                    row["guests"][g.label]["actual"] = self.q[g.label].balloon_actual()

        ctl = mom if mom else (Plain() if controller == "baseline" else None)

        def show(row):
            if int(row["t"]) % 20 == 0:
                log(f"multi/{controller} t={row['t']:.0f}s free={row.get('host_free_mib', 0):.0f} " +
                    " ".join(f"{k}:{fmt(mib(v.get('target')))}/{fmt(mib(v.get('actual')))}"
                             for k, v in row["guests"].items()))
        raw = bl.sample_loop(duration, t0, d, guests, fake_host=fake, controller=ctl, every=show)
        t_end = time.monotonic()
        if d:
            d.stop()
        res = {"controller": controller, "guests": {}, "samples": raw}
        for g, (label, wl) in zip(guests, MULTI):
            st = bl.window_stats(g, t0, t_end)
            st.pop("ms", None)
            final_actual = statistics.median([mib(r["guests"][label].get("actual")) or GUEST_MIB
                                              for r in raw if r["t"] >= raw[-1]["t"] - 10])
            res["guests"][label] = {"workload": wl, "stats": st, "final_actual": final_actual,
                                    "rss_end": mib(g.rss()), "oom": g.oom_kills()}
        res["free_end"] = raw[-1].get("host_free_mib")
        res["min_free"] = min(r.get("host_free_mib", 0) for r in raw)
        if mom:
            res["mom_actions"] = mom.actions
            res["mom_policy_runs"] = mom.policy_runs
            res["mom_revision"] = bl.MOM_REVISION
            mom.close()
        if ctl and not mom:
            for q in ctl.q.values():
                q.close()
        if d:
            res["daemon_command"] = " ".join(shlex.quote(c) for c in d.command)
            res["config"] = open(d.config).read()
        return res
    finally:
        if d:
            d.stop()
        for g in guests:
            g.stop()


def multi_main(argv):
    a = setup(argv)
    # MoM runs its policy every 10 s on 50 s averages and moves a balloon 5 % a run: 240 s lets it
    # get from 1024 MiB to its floor (about 12 runs).
    duration = 90 if a.smoke else 240
    oracles = {wl: bl.get_oracle(a.outdir, a.workdir, wl, a.smoke)["ws_mib"] for _, wl in MULTI}
    runs = {}
    for c in ("rightsize", "mom", "baseline"):
        log(f"workload 8 with {c} for {duration} s")
        runs[c] = run_multi(a, c, duration)
    base = runs["baseline"]
    rows, grows = [], []
    for c, res in runs.items():
        held = sum(g["final_actual"] for g in res["guests"].values())
        returned = len(MULTI) * GUEST_MIB - held
        slow = []
        for label, gres in res["guests"].items():
            b = base["guests"][label]["stats"]
            ratio = gres["stats"].get("mean_ms", 0) / b["mean_ms"] if b.get("mean_ms") else None
            slow.append(ratio)
            grows.append([c, f"{label} ({gres['workload']}, oracle {oracles[gres['workload']]} MiB)",
                          f"{gres['final_actual']:.0f}", fmt(gres["rss_end"]),
                          f"{gres['stats'].get('mean_ms', 0):.0f}", fmt(ratio, "{:.3f}"),
                          fmt((gres["stats"].get("majfaults") or 0) - (b.get("majfaults") or 0), "{:+d}"),
                          fmt((gres["stats"].get("refaults") or 0) - (b.get("refaults") or 0), "{:+d}"),
                          gres["oom"]])
        free = SIM_TOTAL_MIB - SIM_HOST_USED_MIB - held
        worst = max((s for s in slow if s), default=None)
        rows.append([c, f"{held:.0f}", f"{returned:.0f}", f"{free:.0f}",
                     fmt(worst, "{:.3f}") + (" " + goal(worst <= 1 + GOAL_SLOWDOWN) if worst and c != "baseline" else ""),
                     sum(g["oom"] for g in res["guests"].values())])
    # Plot: each guest's balloon under each controller.
    series, line_styles = {}, {}
    colors = {"rightsize": "#1f77b4", "mom": "#ff7f0e", "baseline": "#7f7f7f"}
    for c, res in runs.items():
        for i, (label, wl) in enumerate(MULTI):
            key = f"{c}: guest {label} balloon"
            series[key] = [(r["t"], mib(r["guests"][label].get("actual"))) for r in res["samples"]]
            line_styles[key] = f"lw 2 lc rgb '{colors[c]}'" + (" dt 2" if i else "")
    plot_name = f"{a.name}.svg"
    have_plot = bl.plot(os.path.join(a.outdir, plot_name),
                        f"8. Two guests on a {SIM_TOTAL_MIB} MiB simulated host (a solid, b dashed)",
                        series, None, line_styles=line_styles)
    sum_oracle = sum(oracles.values())
    budget = SIM_TOTAL_MIB - SIM_HOST_USED_MIB - int(SIM_RESERVE.rstrip("M"))
    md = f"""## 8. Several guests on a small host: arbitration, and the peer (oVirt MoM) and no rightsizing

Two 1 GiB guests at once (512 MiB swap each): guest **a** runs workload 1 (`{bl.workload_args('anon')}`,
oracle {oracles['anon']} MiB) and guest **b** workload 3 (`{bl.workload_args('mixed')}`, oracle {oracles['mixed']} MiB).
The host is a **simulated small host**: rightsized runs in its own mount namespace
(`unshare -m` + `mount --bind FILE /proc/meminfo`) where /proc/meminfo says MemTotal = {SIM_TOTAL_MIB} MiB
and MemAvailable = {SIM_TOTAL_MIB} − {SIM_HOST_USED_MIB} (the host's own use) − the two guests' balloon sizes,
rewritten by the harness every second. With `host-reserve = {SIM_RESERVE}` the guests may hold
{budget} MiB together: less than their 2048 MiB, and less than their oracle working sets plus rightsize's
10 % margin ({sum_oracle} MiB + 10 % = {sum_oracle * 1.1:.0f} MiB), so rightsized's arbitration has to decide.
The same simulated host drives the other two runs, one after the other on fresh guests:

- **MoM**: oVirt MoM's default balloon policy, **reimplemented from the rules of {bl.MOM_REVISION}**
  (`MomBalloonPolicy` in tests/bench/benchlib.py; MoM itself needs libvirt's Python bindings and its own
  daemon, and no MoM code is copied or run here). Host under pressure when the mean of the last 10 samples
  of (MemFree + Buffers + Cached) / MemTotal is < 20 % (critical at ≤ 5 %); then each guest shrinks by 5 %
  of its balloon per policy run, but never below max(balloon_min, used + guest_free_percent × balloon),
  where used = StatAvg(balloon) − StatAvg(free), guest_free_percent = 20 % × host_free / 20 % (host_free
  − 5 % when critical) and libvirt's balloon_min (`<min_guarantee>`) is 0; without pressure each guest
  grows by 5 % per run, at least to used + 20 % of its balloon, up to its maximum; changes of 0.25 % or
  less are skipped. At MoM's own rates: guest and host stats every 5 s (the balloon's stats period set to
  5 s, as MoM's libvirt interface does), the policy every 10 s, StatAvg over a history of 10 samples
  (`sample-history-length`; defaults of mom/__init__.py and doc/mom-balloon+ksm.conf).
- **baseline**: no rightsizing; nobody touches the balloons.

Slowdown here is against the baseline run of the same guest (the pass times of the three runs are measured one
after the other, not side by side: four or six TCG guests at once would not fit on 2 cores).

{table(["controller", "guests hold at the end MiB", "returned MiB", "simulated host free at the end MiB (negative: overcommitted)", "worst pass-time ratio vs baseline (goal ≤ 1.02)", "OOM kills"], rows)}
{table(["controller", "guest", "final balloon MiB", "QEMU RSS at end MiB", "mean pass ms", "vs baseline", "extra major faults", "extra refaults", "OOM kills"], grows)}
"""
    if runs["mom"].get("mom_actions") is not None:
        md += (f"\nMoM's rules ran {runs['mom'].get('mom_policy_runs', '?')} times and set "
               f"{runs['mom']['mom_actions']} balloon targets during its run.\n")
    if have_plot:
        md += f"\n![workload 8](PLOTDIR/{plot_name})\n"
    md += f"\nCommit `{a.commit}`. Reproduce: {repro(a)}.\n"
    write_part(a, md, {"oracles": oracles, "mom_revision": bl.MOM_REVISION, "runs": {c: {k: v for k, v in r.items() if k != "samples"}
                                                     for c, r in runs.items()},
                       "samples": {c: r["samples"] for c, r in runs.items()}})
    return 0


def main(part, argv):
    try:
        if part == "oracle":
            return oracle_main(argv)
        if part == "multi":
            return multi_main(argv)
        return workload_main(part, argv)
    except (bl.HarnessError, OSError) as e:
        log(f"bench-{part}: harness failure: {e}")
        return 1
