# SPDX-License-Identifier: LGPL-2.1-or-later
"""The rightsize benchmark harness: real QEMU guests (contrib/boot-guest), the real daemon
(rightsized on a private D-Bus bus, read through rightsizectl --json), QMP for the balloon,
and the workload's own pass and /proc/vmstat lines from the serial console.

Only the Python standard library is used.  Every guest, daemon and bus this module starts
is registered and stopped at exit, whatever failed.
"""

import atexit
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

MIB = 1024 * 1024
GUEST_MIB = 1024

TOP_SRCDIR = os.path.abspath(os.environ.get("top_srcdir") or
                             os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
TOP_BUILDDIR = os.path.abspath(os.environ.get("top_builddir") or os.getcwd())
GUEST_DIR = os.environ.get("RIGHTSIZE_GUEST_DIR") or os.path.join(TOP_BUILDDIR, "guest")
BOOT_GUEST = os.path.join(TOP_SRCDIR, "contrib", "boot-guest")


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class HarnessError(Exception):
    pass


def git_commit(srcdir=None):
    """The commit measured: `git describe --always --dirty --abbrev=7` of top_srcdir ("unknown"
    outside a git checkout).  A -dirty suffix means the tree had uncommitted changes.  Under
    run-all, the commit it found before its first part (RIGHTSIZE_BENCH_COMMIT): the parts write
    into docs/bench, which would make the tree look dirty to the parts after them."""
    if os.environ.get("RIGHTSIZE_BENCH_COMMIT"):
        return os.environ["RIGHTSIZE_BENCH_COMMIT"]
    try:
        out = subprocess.run(["git", "-C", srcdir or TOP_SRCDIR, "describe", "--always", "--dirty", "--abbrev=7"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else "unknown"


# ---- cleanup of everything we start ------------------------------------------------------

_guests = []
_procs = []


def _cleanup():
    for p in list(_procs):
        try:
            if p.poll() is None:
                p.terminate()
                try:
                    p.wait(5)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
        except OSError:
            pass
    _procs.clear()
    for g in list(_guests):
        g.stop()


atexit.register(_cleanup)


def _on_signal(sig, frame):
    _cleanup()
    signal.signal(sig, signal.SIG_DFL)
    os.kill(os.getpid(), sig)


for _s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(_s, _on_signal)


# ---- workloads ----------------------------------------------------------------------------

DATA = "/dev/disk/by-id/virtio-data"

# Each workload: the rs-workload arguments, the disks, and (for phased ones) the phase.
# scatter: rs-workload --scatter-mib, the set written into single free pages in random order
# (bench-placement only).
# "oracle" names the steady configurations whose true working sets the oracle measures.
WORKLOADS = {
    "anon": dict(title="1. Steady anonymous set (300 MiB in a 1 GiB guest)",
                 args="--anon-mib 300", swap="512M"),
    "file": dict(title="2. File-cache set (300 MiB of a virtio-blk data disk, read every pass)",
                 args=f"--file {DATA} --file-mib 300", swap="512M", data="1G"),
    "mixed": dict(title="3. Mixed anonymous and file (200 MiB + 200 MiB)",
                  args=f"--anon-mib 200 --file {DATA} --file-mib 200", swap="512M", data="1G"),
    "grow": dict(title="4. The set doubling mid-run (300 -> 600 MiB anonymous)",
                 args="--anon-mib 300", swap="512M", phase=(300, 600),
                 oracles=("anon", "anon600")),
    "shrink": dict(title="5. The set halving mid-run (600 -> 300 MiB anonymous)",
                   args="--anon-mib 600", swap="512M", phase=(600, 300),
                   oracles=("anon600", "anon")),
    "stream": dict(title="6. Streaming a 2 GiB file through a 1 GiB guest, plus a 100 MiB hot set",
                   args=f"--anon-mib 100 --stream {DATA} --stream-mib 2048", swap="512M", data="2200M"),
    "idle": dict(title="7. Idle guest", args="--anon-mib 0", swap="512M", sleep_ms=2000),
    "anon600": dict(title="(oracle only) steady anonymous 600 MiB", args="--anon-mib 600", swap="512M"),
    "anon-scattered": dict(title="(bench-placement only) workload 1 with its set scattered in physical memory",
                           args="--anon-mib 300", swap="512M", scatter=600),
}
ORACLE_CONFIGS = ["anon", "anon600", "file", "mixed", "stream", "idle"]


def workload_args(name, phase_at=None):
    w = WORKLOADS[name]
    # --no-hugepage: a squeeze splits transparent huge pages, which changes pass times even back
    # at full size; with 4 KiB pages from the start, pass times measure memory pressure, not THP.
    args = f"{w['args']} --sleep-ms {w.get('sleep_ms', 500)} --no-hugepage --vmstat"
    if w.get("scatter"):
        args += f" --scatter-mib {w['scatter']}"
    if phase_at is not None and "phase" in w:
        args += f" --phase {int(phase_at)}:{w['phase'][1]}"
    return args


def boot_options(name):
    w = WORKLOADS[name]
    opts = ["--mem", f"{GUEST_MIB}M"]
    if w.get("swap"):
        opts += ["--swap", w["swap"]]
    if w.get("data"):
        opts += ["--data", w["data"]]
    return opts


# ---- QMP ----------------------------------------------------------------------------------

class Qmp:
    def __init__(self, path, timeout=10):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        if "QMP" not in self._recv():
            raise HarnessError("no QMP greeting")
        self.command("qmp_capabilities")

    def _recv(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise HarnessError("QMP connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return json.loads(line)

    def command(self, name, arguments=None):
        msg = {"execute": name}
        if arguments is not None:
            msg["arguments"] = arguments
        self.sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            reply = self._recv()
            if "event" in reply:
                continue
            if "error" in reply:
                raise HarnessError(f"{name}: {reply['error']}")
            return reply.get("return")

    def balloon_actual(self):
        return self.command("query-balloon")["actual"]

    def set_balloon(self, size):
        self.command("balloon", {"value": int(size)})

    def close(self):
        self.sock.close()


def agent_exec(path, argv, timeout=20):
    """Runs argv in the guest through its agent socket (guest-exec); returns the exit code."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect(path)
    buf = b""

    def call(msg):
        nonlocal buf
        sock.sendall(json.dumps(msg).encode() + b"\n")
        while True:
            while b"\n" not in buf:
                chunk = sock.recv(65536)
                if not chunk:
                    raise HarnessError("agent connection closed")
                buf += chunk
            line, buf = buf.split(b"\n", 1)
            line = line.strip(b"\xff \r\t")
            if line:
                reply = json.loads(line)
                if msg.get("arguments", {}).get("id") is not None and reply.get("return") != msg["arguments"]["id"]:
                    continue
                if "error" in reply:
                    raise HarnessError(f"agent {msg['execute']}: {reply['error']}")
                return reply.get("return")
    try:
        sync_id = int(time.time() * 1000) % 2**31
        sock.sendall(b"\xff")
        call({"execute": "guest-sync-delimited", "arguments": {"id": sync_id}})
        pid = call({"execute": "guest-exec", "arguments": {"path": argv[0], "arg": argv[1:]}})["pid"]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            st = call({"execute": "guest-exec-status", "arguments": {"pid": pid}})
            if st.get("exited"):
                return st.get("exitcode", 1)
            time.sleep(0.05)
        raise HarnessError(f"agent: {argv[0]} still running after {timeout} s")
    finally:
        sock.close()


# ---- guests -------------------------------------------------------------------------------

PASS_RE = re.compile(r"rs-workload: pass=(\d+) t=([\d.]+) anon_mib=(\d+) file_mib=(\d+) ms=([\d.]+) majflt=(-?\d+)")
VMSTAT_RE = re.compile(r"rs-workload: vmstat pass=(\d+) (.*)")
PHASE_RE = re.compile(r"rs-workload: phase=(\d+) t=([\d.]+) anon_mib=(\d+)")
# Workload 6's pass lines end in stream_mib=N and, from a workload that times its stream apart,
# stream_ms=N: the hot set's time is then ms - stream_ms.
STREAM_RE = re.compile(r" stream_mib=(\d+)(?: stream_ms=([\d.]+))?")
OOM_RE = re.compile(r"Out of memory|oom-kill:|Killed process")


def tail_lines(path, stop, on_line):
    """Follows a console log until stop (a threading.Event) is set, calling on_line(host
    monotonic time, line) for every complete line as it shows up (polled every 0.2 s)."""
    pos, partial = 0, ""
    while not stop.is_set():
        try:
            with open(path, "rb") as f:
                f.seek(pos)
                data = f.read()
                pos += len(data)
        except OSError:
            data = b""
        if data:
            now = time.monotonic()
            lines = (partial + data.decode("utf-8", "replace")).split("\n")
            partial = lines.pop()
            for line in lines:
                on_line(now, line.strip("\r"))
        stop.wait(0.2)


def smaps_mib(pid):
    """(RSS, AnonHugePages) of process pid, in MiB: what the host spends on a guest, and how much of
    it sits on transparent huge pages."""
    with open(f"/proc/{pid}/smaps_rollup") as f:
        t = f.read()
    get = lambda k: int(re.search(rf"^{k}:\s+(\d+)", t, re.M)[1]) // 1024
    return get("Rss"), get("AnonHugePages")


def set_balloons(guests, mib, deadline_s=90):
    """Every guest's balloon to mib MiB, waiting until each is within 8 MiB of it."""
    qs = [g.qmp() for g in guests]
    try:
        for q in qs:
            q.set_balloon(mib * MIB)
        end = time.monotonic() + deadline_s
        while any(abs(q.balloon_actual() / MIB - mib) > 8 for q in qs):
            if time.monotonic() > end:
                raise HarnessError(f"the balloon did not reach {mib} MiB in {deadline_s} s")
            time.sleep(0.5)
    finally:
        for q in qs:
            q.close()


def process_rss(pid):
    """A process's resident set in bytes (None when it is gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


class Guest:
    """One QEMU guest from contrib/boot-guest, with a thread that reads its console log and
    timestamps every workload line with the host's monotonic clock when it shows up."""

    def __init__(self, rundir, name, workload, phase_at=None, label=None):
        self.rundir = rundir
        self.name = name
        self.workload = workload
        self.label = label or name
        self.phase_at = phase_at
        self.passes = []   # (host time, pass, ms, majflt, anon_mib, stream_mib, stream_ms); the last two None
                           # without a stream, stream_ms None from a workload that does not print it
        self.vmstat = []   # (host time, pass, dict)
        self.phases = []   # (host time, anon_mib)
        self.oom_lines = []
        self.exited = False
        self.pid = None
        self._stop = threading.Event()
        self._thread = None
        self._boot = None

    @property
    def qmp_path(self):
        return os.path.join(self.rundir, f"{self.name}.qmp")

    def agent_path(self):
        p = os.path.join(self.rundir, f"{self.name}.qga")
        return p if os.path.exists(p) else None

    def start_boot(self):
        os.makedirs(self.rundir, exist_ok=True)
        cmd = [BOOT_GUEST, "--dir", self.rundir, "--name", self.name, "--image-dir", GUEST_DIR,
               *boot_options(self.workload), "--workload", workload_args(self.workload, self.phase_at)]
        self.boot_cmd = cmd
        _guests.append(self)
        self._boot = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def finish_boot(self):
        out, err = self._boot.communicate()
        if self._boot.returncode != 0:
            raise HarnessError(f"boot-guest {self.label} failed:\n{err[-2000:]}")
        with open(os.path.join(self.rundir, "qemu.pid")) as f:
            self.pid = int(f.read().strip())
        with open(os.path.join(self.rundir, "accel")) as f:
            self.accel = f.read().strip()
        self._thread = threading.Thread(target=self._tail, daemon=True)
        self._thread.start()

    def _tail(self):
        tail_lines(os.path.join(self.rundir, "console.log"), self._stop, self._parse)

    def _parse(self, now, line):
        m = PASS_RE.search(line)
        if m:
            s = STREAM_RE.search(line)
            self.passes.append((now, int(m[1]), float(m[5]), int(m[6]), int(m[3]),
                                int(s[1]) if s else None, float(s[2]) if s and s[2] else None))
            return
        m = VMSTAT_RE.search(line)
        if m:
            vals = dict(kv.split("=") for kv in m[2].split())
            self.vmstat.append((now, int(m[1]), {k: int(v) for k, v in vals.items()}))
            return
        m = PHASE_RE.search(line)
        if m:
            self.phases.append((now, int(m[3])))
            return
        if OOM_RE.search(line):
            self.oom_lines.append(line)
        if "RIGHTSIZE-WORKLOAD-EXIT" in line:
            self.exited = True

    def wait_passes(self, n, timeout=180):
        deadline = time.monotonic() + timeout
        while len(self.passes) < n:
            if time.monotonic() > deadline:
                raise HarnessError(f"{self.label}: only {len(self.passes)} workload passes after {timeout} s")
            if self.exited:
                raise HarnessError(f"{self.label}: the workload exited")
            time.sleep(0.3)

    def rss(self):
        return process_rss(self.pid)

    def qmp(self):
        return Qmp(self.qmp_path)

    def oom_kills(self):
        """OOM kills seen: the guest's oom_kill counter, or the console's kernel lines."""
        counted = self.vmstat[-1][2].get("oom_kill", 0) if self.vmstat else 0
        return max(counted, len([l for l in self.oom_lines if "Killed process" in l]))

    def stop(self):
        self._stop.set()
        if self._boot is not None and self._boot.poll() is None:
            self._boot.kill()
            self._boot.wait()
        subprocess.run([BOOT_GUEST, "--stop", self.rundir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # If the run directory went away, boot-guest cannot find the pid: kill ours by pid,
        # after checking that it still is our QEMU.
        if self.pid:
            try:
                with open(f"/proc/{self.pid}/cmdline", "rb") as f:
                    if self.rundir.encode() in f.read():
                        os.kill(self.pid, signal.SIGKILL)
            except OSError:
                pass
        if self in _guests:
            _guests.remove(self)


def boot_all(guests):
    for g in guests:
        g.start_boot()
    for g in guests:
        g.finish_boot()
    log("booted " + ", ".join(f"{g.label} (pid {g.pid}, {g.accel})" for g in guests))


def stream_figures(passes):
    """For passes whose stream is timed apart (stream_ms): the hot set's pass times (ms -
    stream_ms) and the stream's throughput in MiB/s.  {} for other passes."""
    timed = [p for p in passes if len(p) > 6 and p[6] is not None]
    if not timed:
        return {}
    hot = [max(p[2] - p[6], 0) for p in timed]
    mibps = [p[5] * 1000 / max(p[6], 1) for p in timed]
    return {"hot_min_ms": min(hot), "hot_median_ms": statistics.median(hot),
            "stream_mibps_median": statistics.median(mibps), "stream_mibps_max": max(mibps)}


def window_stats(guest, t0, t1):
    """Pass times and counter rates of guest between host times t0 and t1."""
    inside = [p for p in guest.passes if t0 <= p[0] <= t1]
    ms = [p[2] for p in inside]
    vm = [v for v in guest.vmstat if t0 <= v[0] <= t1]
    out = {"passes": len(ms), "ms": ms, **stream_figures(inside)}
    if ms:
        out["median_ms"] = statistics.median(ms)
        out["mean_ms"] = statistics.fmean(ms)
        out["max_ms"] = max(ms)
        out["min_ms"] = min(ms)
    if len(vm) >= 2:
        dt = max(vm[-1][0] - vm[0][0], 1e-3)
        a, b = vm[0][2], vm[-1][2]
        ref = lambda d: d.get("refault_anon", 0) + d.get("refault_file", 0)
        out["refaults"] = ref(b) - ref(a)
        out["majfaults"] = b.get("pgmajfault", 0) - a.get("pgmajfault", 0)
        out["swapins"] = b.get("pswpin", 0) - a.get("pswpin", 0)
        out["refault_rate"] = out["refaults"] / dt
        out["majfault_rate"] = out["majfaults"] / dt
        if "pgscan_kswapd" in b:  # workloads built before the scan counters print none
            scans = lambda d: d.get("pgscan_kswapd", 0) + d.get("pgscan_direct", 0)
            out["scan_rate"] = (scans(b) - scans(a)) / dt
    return out


def pass_series(guest, t0):
    """The guest's passes as [[seconds since t0, pass ms], ...] (host time of the pass line)."""
    return [[round(p[0] - t0, 3), p[2]] for p in guest.passes]


def vmstat_series(guest, t0):
    """The guest's cumulative counters as [[seconds since t0, refaults (anon + file), pswpin,
    pgmajfault], ...], one per vmstat line (host time of the line)."""
    return [[round(v[0] - t0, 3), v[2].get("refault_anon", 0) + v[2].get("refault_file", 0),
             v[2].get("pswpin", 0), v[2].get("pgmajfault", 0)] for v in guest.vmstat]


def counter_delta(series, t0, t1, col):
    """How much cumulative column col of a vmstat_series grew between t0 and t1: from the last
    line at or before t0 (the first line after it when there is none) to the last line at or
    before t1.  None when no line falls in that span."""
    base = last = None
    for row in series:
        if row[0] <= t0:
            base = row
        elif base is None:
            base = row
        if row[0] <= t1:
            last = row
    if base is None or last is None or last[0] < base[0]:
        return None
    return last[col] - base[col]


# ---- the oracle ---------------------------------------------------------------------------

# A size is enough when, in a measurement window there, the median pass time is within
# TOL of the unconstrained run (plus ABS_MS for timer noise under TCG) and the refault rate
# (anon + file refaults, guest-wide) is within TOL of it plus ABS_REFAULTS pages/s.
ORACLE_TOL = 0.10
ORACLE_ABS_MS = 5
ORACLE_ABS_REFAULTS = 50.0
# Below about 200 MiB the guest kernel panics ("System is deadlocked on memory"), even idle and
# with swap (measured: idle at 184 MiB, a 300 MiB set at 160 MiB): the bracket starts above that.
ORACLE_LOW = {"idle": 224}
ORACLE_LOW_DEFAULT = 256
ORACLE_RESOLUTION = 16


def bl_sleep_ms(name):
    return WORKLOADS[name].get("sleep_ms", 500)


def oracle_cache_path(outdir):
    return os.path.join(outdir, "oracle-cache.json")


def load_oracles(outdir):
    try:
        with open(oracle_cache_path(outdir)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def save_oracle(outdir, key, result):
    cache = load_oracles(outdir)
    cache[key] = result
    tmp = oracle_cache_path(outdir) + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1, sort_keys=True)
    os.replace(tmp, oracle_cache_path(outdir))


def oracle_key(name, smoke):
    return name + ("-smoke" if smoke else "")


def measure_at(guest, qmp, size_mib, window_s, min_passes, settle_passes=2, reach_timeout=60,
               threshold_ms=None, sleep_ms=500, recover_ms=None, recover_s=40):
    """Balloons the guest to size_mib, waits for it and for settle_passes fresh passes (at most
    6 s), then measures a window of at least window_s seconds and min_passes passes.  With
    threshold_ms, a pass still running after 3x the threshold (plus 1 s) ends the window at
    once: the size is plainly too small, and waiting for thrashing passes would take minutes."""
    t_set = time.monotonic()
    if recover_ms is not None:
        # Every probe starts from the full size with the workload back to normal speed, so that
        # a probe never pays for the swap-ins of the one before it.
        qmp.set_balloon(GUEST_MIB * MIB)
        n = len(guest.passes)
        while time.monotonic() < t_set + recover_s:
            if any(p[2] <= recover_ms for p in guest.passes[n:]):
                break
            time.sleep(0.2)
        # The reference for this probe: the fastest of 3 passes at full size right before it.
        n = len(guest.passes)
        t_ref = time.monotonic()
        while len(guest.passes) < n + 3 and time.monotonic() < t_ref + 15:
            time.sleep(0.2)
        ref_passes = [p[2] for p in guest.passes[n:]]
        ref_stream = stream_figures(guest.passes[n:])
    qmp.set_balloon(size_mib * MIB)
    t_inflate = time.monotonic()
    reached = paused = False
    while time.monotonic() - t_inflate < reach_timeout:
        if not paused and time.monotonic() > t_inflate + 10 and \
           abs(qmp.balloon_actual() - size_mib * MIB) > 8 * MIB and guest.agent_path():
            # A balloon still far from its size after 10 s (a guest streaming through its page
            # cache can hold it off): stop the workload while it inflates, so that the probe
            # measures the size asked for.
            paused = agent_exec(guest.agent_path(), ["/bin/sh", "-c", "kill -STOP $(cat /run/rs-workload.pid)"]) == 0
        if abs(qmp.balloon_actual() - size_mib * MIB) <= 8 * MIB:
            reached = True
            break
        time.sleep(0.3)
    if paused:
        agent_exec(guest.agent_path(), ["/bin/sh", "-c", "kill -CONT $(cat /run/rs-workload.pid)"])
    reach_s = time.monotonic() - t_inflate
    actual = qmp.balloon_actual() / MIB
    n0 = len(guest.passes)
    t_settle = time.monotonic()
    while len(guest.passes) < n0 + settle_passes and time.monotonic() < t_settle + 6:
        time.sleep(0.2)
    t0 = time.monotonic()
    n1 = len(guest.passes)
    stalled = False
    while time.monotonic() < t0 + 60:
        now = time.monotonic()
        if now >= t0 + window_s and len(guest.passes) >= n1 + min_passes:
            break
        if threshold_ms is not None and now >= t0 + window_s:
            last = guest.passes[-1][0] if guest.passes else t0
            running_ms = (now - max(last, t0)) * 1000 - sleep_ms
            if running_ms > 3 * threshold_ms + 1000:
                stalled = True
                break
        time.sleep(0.2)
    t1 = time.monotonic()
    st = window_stats(guest, t0, t1)
    # Counter rates from the last vmstat line before the window, so that slow passes still count.
    before = [v for v in guest.vmstat if v[0] < t0]
    inside = [v for v in guest.vmstat if t0 <= v[0] <= t1]
    if before and inside:
        a, b = before[-1], inside[-1]
        dt = max(b[0] - a[0], 1e-3)
        refaults = lambda d: d.get("refault_anon", 0) + d.get("refault_file", 0)
        st["refaults"] = refaults(b[2]) - refaults(a[2])
        st["majfaults"] = b[2].get("pgmajfault", 0) - a[2].get("pgmajfault", 0)
        st["swapins"] = b[2].get("pswpin", 0) - a[2].get("pswpin", 0)
        st["refault_rate"] = st["refaults"] / dt
        st["majfault_rate"] = st["majfaults"] / dt
        for k in ("refault_anon", "refault_file"):
            st[k + "_rate"] = (b[2].get(k, 0) - a[2].get(k, 0)) / dt
    ms = st.get("ms") or []
    if len(ms) >= 2 and st.get("median_ms"):
        st["spread"] = (max(ms) - min(ms)) / max(st["median_ms"], 1)
    if recover_ms is not None and ref_passes:
        st["ref_min_ms"] = min(ref_passes)
        if ref_stream:
            st["ref_hot_min_ms"] = ref_stream["hot_min_ms"]
            st["ref_stream_mibps"] = ref_stream["stream_mibps_median"]
    st.update(size=size_mib, actual=round(actual), reached=reached, stalled=stalled, reach_s=round(reach_s, 1),
              paused=paused,
              seconds=round(time.monotonic() - t_set, 1))
    st.pop("ms", None)
    return st


def tolerance(base):
    return ORACLE_TOL


def threshold_ms(base):
    """The pass time a probe's fastest pass may take: the unconstrained fastest pass plus the tolerance."""
    return base["min_ms"] * (1 + ORACLE_TOL) + ORACLE_ABS_MS


def normal_ms(base):
    """A pass at normal speed (for recovery and for calling a probe stalled): a looser bound on
    the median, as other jobs on the host slow single passes down."""
    return base["median_ms"] * 1.5 + ORACLE_ABS_MS


def enough(st, base):
    if not st.get("reached") or not st.get("passes") or st.get("stalled"):
        return False
    tol = tolerance(base)
    if st.get("hot_min_ms") is not None and st.get("ref_stream_mibps"):
        # A stream bigger than the guest (workload 6), timed apart from its hot set: page cache
        # beyond the stream's readahead does not help it, so the size is enough when the hot set
        # runs as fast as at full size (its fastest pass and its anonymous refaults, judged as
        # below) and the stream's median throughput stays within the tolerance of the one at full
        # size right before.  The stream's own file refaults and pass time are not judged: their
        # run-to-run noise is larger than the tolerance.
        ok_hot = st["hot_min_ms"] <= st["ref_hot_min_ms"] * (1 + tol) + ORACLE_ABS_MS
        ok_stream = st["stream_mibps_median"] >= st["ref_stream_mibps"] * (1 - tol)
        ok_ref = st.get("refault_anon_rate", 0) <= base.get("refault_anon_rate", 0) * (1 + tol) + ORACLE_ABS_REFAULTS
        st["judged_by"] = "hot set + stream throughput"
        return ok_hot and ok_stream and ok_ref
    ref = dict(base, min_ms=st["ref_min_ms"]) if st.get("ref_min_ms") is not None else base
    ok_ms = st["min_ms"] <= threshold_ms(ref)
    # Anonymous and file refaults each: a stream's file refaults would hide a hot set's anon ones.
    ok_ref = all(st.get(k, 0) <= base.get(k, 0) * (1 + tol) + ORACLE_ABS_REFAULTS
                 for k in ("refault_anon_rate", "refault_file_rate"))
    return ok_ms and ok_ref


BASE_KEYS = ("median_ms", "min_ms", "mean_ms", "max_ms", "spread", "refault_rate", "refault_anon_rate", "refault_file_rate",
             "hot_min_ms", "hot_median_ms", "stream_mibps_median",
             "majfault_rate", "passes")


def run_oracle(name, workdir, smoke=False):
    """Bisection over fixed balloon sizes, running the workload at each size."""
    window_s, min_passes = (4, 3) if smoke else (6, 3)
    if name == "stream":
        min_passes = 2
    max_probes = 4 if smoke else 6
    # How long a probe waits at full size for a pass at normal speed: after a squeeze, passes can
    # stay several times slower at full size for minutes under TCG, and the smoke version must
    # stay under 4 minutes (each probe is still judged against the passes right before it).
    recover_s = 15 if smoke else 40
    t_start = time.monotonic()
    g = Guest(os.path.join(workdir, f"oracle-{name}"), "oracle", name, label=f"oracle {name}")
    boot_all([g])
    try:
        g.wait_passes(3, timeout=240)
        q = g.qmp()
        q.command("qom-set", {"path": "/machine/peripheral/balloon0", "property": "guest-stats-polling-interval",
                              "value": 1})
        lo, hi = ORACLE_LOW.get(name, ORACLE_LOW_DEFAULT), GUEST_MIB
        base1 = measure_at(g, q, GUEST_MIB, window_s, min_passes, settle_passes=1)
        probes = []
        while hi - lo > ORACLE_RESOLUTION and len(probes) < max_probes:
            mid = (lo + hi) // 2 // 4 * 4
            st = measure_at(g, q, mid, window_s, min_passes, threshold_ms=normal_ms(base1),
                            sleep_ms=bl_sleep_ms(name), recover_ms=normal_ms(base1), recover_s=recover_s)
            st["enough"] = enough(st, base1)
            probes.append(st)
            log(f"oracle {name}: {mid} MiB -> {'enough' if st['enough'] else 'short'} "
                f"(fastest pass {st.get('min_ms')} ms vs {st.get('ref_min_ms')} at full size just before, refaults anon/file "
                f"{st.get('refault_anon_rate', 0):.0f}/{st.get('refault_file_rate', 0):.0f} per s vs "
                f"{base1.get('refault_anon_rate', 0):.0f}/{base1.get('refault_file_rate', 0):.0f})")
            if st["enough"]:
                hi = mid
            else:
                lo = mid
        base2 = measure_at(g, q, GUEST_MIB, window_s, min_passes, recover_ms=normal_ms(base1), recover_s=recover_s)
        q.close()
        # Run-to-run noise: how much the fastest unconstrained pass moved over the oracle run.
        refs = [base1["min_ms"], base2["min_ms"]] + [p["ref_min_ms"] for p in probes if p.get("ref_min_ms") is not None]
        noise_ms = (max(refs) - min(refs)) / max(min(refs), 1)
        result = {
            "workload": name, "ws_mib": hi, "bracket": [lo, hi], "probes": probes,
            "base": {k: base1.get(k) for k in BASE_KEYS}, "base2": {k: base2.get(k) for k in BASE_KEYS},
            "tolerance": tolerance(base1), "threshold_ms": threshold_ms(base1),
            "noise_ms_rel": noise_ms,
            "seconds": round(time.monotonic() - t_start),
            "window_s": window_s, "smoke": smoke, "oom_kills": g.oom_kills(),
            "command": " ".join(shlex.quote(c) for c in g.boot_cmd),
            "commit": git_commit(),
        }
        log(f"oracle {name}: working set {hi} MiB (bracket {lo}-{hi}, unconstrained fastest pass "
            f"{base1['min_ms']}/{base2['min_ms']} ms), {result['seconds']} s")
        return result
    finally:
        g.stop()


def get_oracle(outdir, workdir, name, smoke=False):
    key = oracle_key(name, smoke)
    cache = load_oracles(outdir)
    if key in cache:
        return cache[key]
    if smoke:
        # The working set is the guest's and the workload's, not rightsize's: the full oracle
        # committed with BENCHMARKS.md is the better yardstick.  The shortened oracle read
        # 592 MiB where the full one reads 520 (after its first squeeze even full-size passes
        # stayed slow), which put a correct estimate at the edge of smoke's 15 % check.
        committed = load_oracles(os.path.join(TOP_SRCDIR, "docs", "bench"))
        if name in committed and not committed[name].get("smoke"):
            r = dict(committed[name], source="the full oracle committed in docs/bench/oracle-cache.json")
            save_oracle(outdir, key, r)
            return r
    r = run_oracle(name, workdir, smoke)
    save_oracle(outdir, key, r)
    return r


# ---- the daemon ---------------------------------------------------------------------------

POLICY = """[policy]
match = *
mode = rightsize
poll-interval = 1s
hold-time = 30s
"""


def shipped_policy():
    """The balanced preset exactly as shipped (etc/policies/balanced.conf), matching every guest:
    no poll-interval or hold-time override."""
    with open(os.path.join(TOP_SRCDIR, "etc", "policies", "balanced.conf")) as f:
        text = f.read()
    if "\n[policy]\n" not in "\n" + text:
        raise HarnessError("etc/policies/balanced.conf has no [policy] section")
    return re.sub(r"^\[policy\]\n", "[policy]\nmatch = *\n", text, count=1, flags=re.M)


# The shipped balanced preset's intervals (etc/policies/balanced.conf), which the accelerated
# parts scale down to POLICY's.
SHIPPED_POLL_S = 10
SHIPPED_HOLD_S = 600
BENCH_POLL_S = 1
BENCH_HOLD_S = 30


class FakeHost:
    """A simulated small host: a meminfo file bind-mounted over /proc/meminfo in rightsized's
    own mount namespace.  MemAvailable = total - host_used - the guests' balloon sizes."""

    def __init__(self, path, total_mib, host_used_mib):
        self.path, self.total, self.used = path, total_mib, host_used_mib
        self.guest_mib = 0.0
        self.write(0)

    def free_mib(self, guests_mib):
        return max(0.0, self.total - self.used - guests_mib)

    def write(self, guests_mib):
        self.guest_mib = guests_mib
        free = int(self.free_mib(guests_mib) * 1024)
        text = (f"MemTotal:       {self.total * 1024:12d} kB\n"
                f"MemFree:        {free:12d} kB\n"
                f"MemAvailable:   {free:12d} kB\n"
                f"Buffers:        {0:12d} kB\n"
                f"Cached:         {0:12d} kB\n")
        mode = "r+" if os.path.exists(self.path) else "w"
        # In place, same length: the bind mount keeps pointing at this inode.
        with open(self.path, mode) as f:
            f.seek(0)
            f.write(text)
            f.truncate()


def bench_controller():
    """The core every rightsized of this run decides with: RIGHTSIZE_BENCH_CONTROLLER (probe or
    cost, the policy key `controller`), or None for the policy's own (the shipped default)."""
    c = os.environ.get("RIGHTSIZE_BENCH_CONTROLLER") or None
    if c not in (None, "probe", "cost"):
        raise HarnessError(f"RIGHTSIZE_BENCH_CONTROLLER={c}: probe or cost")
    return c


def with_controller(policy):
    """policy with every [policy] section deciding by bench_controller()'s core, when one is set."""
    c = bench_controller()
    if c is None:
        return policy
    return re.sub(r"^\[policy\]\n", f"[policy]\ncontroller = {c}\n", policy, flags=re.M)


class Daemon:
    """rightsized with POLICY (or policy) in policies/bench.conf, managing the QMP guests of
    sock_globs and, with libvirt_uri, the domains there that opt in with <rightsize:policy>,
    their agents read through libvirt."""

    def __init__(self, rundir, sock_globs, host_reserve="256M", fake_host=None, policy=POLICY, libvirt_uri=None):
        self.rundir = rundir
        os.makedirs(os.path.join(rundir, "policies"), exist_ok=True)
        os.makedirs(os.path.join(rundir, "state"), exist_ok=True)
        with open(os.path.join(rundir, "policies", "bench.conf"), "w") as f:
            f.write(with_controller(policy))
        self.config = os.path.join(rundir, "rightsized.conf")
        with open(self.config, "w") as f:
            f.write(f"[daemon]\npolicy-dir = {rundir}/policies\nstate-dir = {rundir}/state\nlog-level = info\n"
                    f"host-reserve = {host_reserve}\nmetrics-path = {rundir}/rightsize.prom\n"
                    f"shutdown-action = keep\nread-group =\n"
                    f"[qemu]\nqmp-sockets = {' '.join(sock_globs)}\nagent-socket-pattern = %d/%n.qga\n")
            if libvirt_uri:
                f.write(f"[libvirt]\nenabled = yes\nuri = {libvirt_uri}\nmanage-all = no\nagent = yes\n")
            else:
                f.write("[libvirt]\nenabled = no\n")
        self.fake_host = fake_host
        self.bus = self.daemon = None

    def start(self):
        conf = os.path.join(self.rundir, "bus.conf")
        with open(conf, "w") as f:
            f.write('<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"\n'
                    ' "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">\n'
                    f'<busconfig><listen>unix:path={self.rundir}/bus</listen><auth>EXTERNAL</auth>\n'
                    '<policy context="default"><allow user="root"/><allow own="*"/><allow send_destination="*"/>'
                    '<allow receive_sender="*"/></policy></busconfig>\n')
        r, w = os.pipe()
        self.bus = subprocess.Popen(["dbus-daemon", f"--config-file={conf}", "--nofork", "--nopidfile",
                                     f"--print-address={w}"], pass_fds=(w,))
        _procs.append(self.bus)
        os.close(w)
        with os.fdopen(r) as f:
            self.address = f.readline().strip()
        if not self.address:
            raise HarnessError("dbus-daemon did not start")
        self.env = dict(os.environ, DBUS_SYSTEM_BUS_ADDRESS=self.address)
        self.env.pop("NOTIFY_SOCKET", None)
        exe = os.path.join(TOP_BUILDDIR, "rightsized")
        cmd = [exe, "--config", self.config]
        if self.fake_host:
            cmd = ["unshare", "-m", "--propagation", "private", "sh", "-c",
                   'mount --bind "$0" /proc/meminfo && exec "$@"', self.fake_host.path] + cmd
        self.command = cmd
        self.log_path = os.path.join(self.rundir, "rightsized.log")
        self.daemon = subprocess.Popen(cmd, env=self.env, stdout=subprocess.DEVNULL,
                                       stderr=open(self.log_path, "w"))
        _procs.append(self.daemon)
        self.t_start = time.monotonic()

    def ctl(self, *args):
        out = subprocess.run([os.path.join(TOP_BUILDDIR, "rightsizectl"), "--json", *args], env=self.env,
                             capture_output=True, text=True, timeout=10)
        if out.returncode != 0:
            return None
        try:
            return json.loads(out.stdout)
        except ValueError:
            return None

    def guests(self):
        d = self.ctl("list")
        return {g["name"]: g for g in d["guests"]} if d else {}

    def cpu_seconds(self):
        try:
            with open(f"/proc/{self.daemon.pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        except (OSError, IndexError, ValueError):
            return None

    def stop(self):
        for p in (self.daemon, self.bus):
            if p and p.poll() is None:
                p.terminate()
                try:
                    p.wait(10)
                except subprocess.TimeoutExpired:
                    p.kill()
                    p.wait()
            if p in _procs:
                _procs.remove(p)


# ---- sampling -----------------------------------------------------------------------------

def sample_loop(duration, t0, daemon, guests, fake_host=None, controller=None, interval=1.0, every=None, stop=None):
    """Samples every interval until t0 + duration: rightsize's view of each managed guest
    (when a daemon runs), each guest's QEMU RSS and, for a simulated host, its memory.
    stop(samples), when given, ends the loop early once it returns true."""
    samples = []
    next_t = time.monotonic()
    while time.monotonic() < t0 + duration:
        now = time.monotonic()
        row = {"t": now - t0, "guests": {}}
        view = daemon.guests() if daemon else {}
        for g in guests:
            s = {"rss": g.rss()}
            v = view.get(g.name)
            if v:
                for k in ("estimate", "estimate-lower", "estimate-upper", "target", "actual", "state", "reason"):
                    s[k] = v.get(k)
            row["guests"][g.label] = s
        if controller:
            controller.step(row)
        if fake_host:
            total = 0
            for g in guests:
                a = row["guests"][g.label].get("actual")
                total += (a / MIB) if a else GUEST_MIB
            fake_host.write(total)
            row["host_free_mib"] = fake_host.free_mib(total)
        samples.append(row)
        if every:
            every(row)
        if stop and stop(samples):
            break
        next_t += interval
        time.sleep(max(0.0, next_t - time.monotonic()))
    return samples


# ---- MoM's default balloon policy, reimplemented ------------------------------------------

# The oVirt MoM revision whose rules and defaults MomBalloonPolicy reproduces (read with git show
# from github.com/oVirt/mom; nothing of it is copied or run here).
MOM_REVISION = ("oVirt/mom 3de1c8e (2025-07-07, after mom-0.6.5); doc/balloon.rules as last changed "
                "by e0f3d3b (2013-11-26, \"Reorder limit checks in grow quest\", after 8974f3d "
                "\"policy: Fix balloon policy syntax and semantics\"); defaults from mom/__init__.py "
                "and doc/mom-balloon+ksm.conf")


class MomBalloonPolicy:
    """oVirt MoM's default balloon policy (doc/balloon.rules) with the libvirt collectors it ships
    with, reimplemented from the rules' text (MOM_REVISION).  Units are kB as in MoM.

    Collected every 5 s (guest-monitor-interval and host-monitor-interval; libvirt's memory stats
    period is set to the same 5 s, as MoM's libvirt interface does), the policy evaluated every
    10 s (policy-engine-interval), StatAvg = the mean over the last 10 samples
    (sample-history-length).  Host (HostMemory): mem_free = MemFree + Buffers + Cached,
    mem_available = MemTotal.  Guest (GuestBalloon, GuestMemory): balloon_cur = the balloon
    size, balloon_max = the configured size, balloon_min = libvirt's <min_guarantee> (absent
    here: 0), mem_unused = libvirt's "unused" (the balloon's stat-free-memory).

    host_free_percent = Host.StatAvg(mem_free) / Host.mem_available; below pressure_threshold
    every guest shrinks, otherwise every guest grows:
      shrink: guest_free_percent = host_free_percent - 0.05 when host_free_percent <=
              pressure_critical, else min_guest_free_percent * host_free_percent / pressure_threshold;
              used = StatAvg(balloon_cur) - StatAvg(mem_unused);
              balloon_min = max(guest.balloon_min, used + guest_free_percent * balloon_cur);
              size = max(balloon_cur * (1 - max_balloon_change_percent), balloon_min);
              set it when size <= balloon_cur and the change is big enough.
      grow (only when balloon_cur < balloon_max):
              balloon_min = max(guest.balloon_min, used + min_guest_free_percent * balloon_cur);
              size = max(balloon_cur * (1 + max_balloon_change_percent), balloon_min),
              capped at balloon_max; set it when the change is big enough.
      big enough: |size - balloon_cur| > min_balloon_change_percent * balloon_cur."""

    pressure_threshold = 0.20
    pressure_critical = 0.05
    min_guest_free_percent = 0.20
    max_balloon_change_percent = 0.05
    min_balloon_change_percent = 0.0025
    history = 10            # sample-history-length
    monitor_interval = 5    # guest-monitor-interval = host-monitor-interval, seconds
    policy_interval = 10    # policy-engine-interval, seconds

    def __init__(self, guests, fake_host, tick_s=1, balloon_max_mib=GUEST_MIB):
        self.guests = guests
        self.host = fake_host
        self.balloon_max_mib = balloon_max_mib
        self.qmps = {}
        for g in guests:
            q = g.qmp()
            q.command("qom-set", {"path": "/machine/peripheral/balloon0",
                                  "property": "guest-stats-polling-interval", "value": self.monitor_interval})
            self.qmps[g.label] = q
        self.samples = {g.label: [] for g in guests}
        self.host_samples = []
        self.tick_s = tick_s
        self.ticks = 0
        self.actions = 0
        self.policy_runs = 0

    def _avg(self, seq):
        seq = seq[-self.history:]
        return sum(seq) / len(seq)

    def _collect(self, row):
        for g in self.guests:
            q = self.qmps[g.label]
            cur = q.balloon_actual() / 1024
            stats = q.command("qom-get", {"path": "/machine/peripheral/balloon0", "property": "guest-stats"})
            unused = stats.get("stats", {}).get("stat-free-memory", -1)
            unused = unused / 1024 if unused >= 0 else None
            self.samples[g.label].append((cur, unused))
            del self.samples[g.label][:-self.history]
        total_mib = sum(self.samples[g.label][-1][0] / 1024 for g in self.guests)
        self.host_samples.append(self.host.free_mib(total_mib) * 1024)
        del self.host_samples[:-self.history]

    def step(self, row):
        # The harness calls this every tick_s (1 s); MoM's monitors and its policy run at their own
        # intervals.  Between collections the harness still reads the balloon sizes, for the
        # simulated host's bookkeeping only (MoM does not see those reads).
        elapsed = self.ticks * self.tick_s
        self.ticks += 1
        if elapsed % self.monitor_interval == 0:
            self._collect(row)
        for g in self.guests:
            row["guests"][g.label]["actual"] = self.qmps[g.label].balloon_actual()
        if elapsed == 0 or elapsed % self.policy_interval:
            return
        self.policy_runs += 1
        host_free_percent = self._avg(self.host_samples) / (self.host.total * 1024)
        for g in self.guests:
            target = self.decide(host_free_percent, self.samples[g.label], self.balloon_max_mib * 1024)
            if target is not None:
                self.qmps[g.label].set_balloon(int(target) * 1024)
                row["guests"][g.label]["target"] = int(target) * 1024
                self.actions += 1

    @classmethod
    def decide(cls, host_free_percent, hist, balloon_max):
        """One policy run's decision for one guest: the balloon size (kB) MoM's rules set, or None
        when they leave it.  hist: the guest's last samples [(balloon_cur kB, mem_unused kB or
        None)], oldest first; balloon_max: its configured size (kB).  No I/O, so that a sweep over
        host settings, and a check of the arithmetic, can run it on recorded figures."""
        shrink = host_free_percent < cls.pressure_threshold
        if shrink:
            if host_free_percent <= cls.pressure_critical:
                guest_free_percent = -0.05 + host_free_percent
            else:
                guest_free_percent = cls.min_guest_free_percent * (host_free_percent / cls.pressure_threshold)
        else:
            guest_free_percent = cls.min_guest_free_percent
        if not hist:
            return None
        hist = hist[-cls.history:]
        avg = lambda seq: sum(seq) / len(seq)
        cur = hist[-1][0]                       # guest.balloon_cur: the latest sample
        unused = [h[1] for h in hist if h[1] is not None]
        if not unused:
            return None                         # GuestMemory not ready: MoM skips the guest
        used = avg([h[0] for h in hist]) - avg(unused)
        guest_balloon_min = 0
        big_enough = lambda size: abs(size - cur) > cls.min_balloon_change_percent * cur
        if shrink:
            balloon_min = max(guest_balloon_min, used + guest_free_percent * cur)
            size = cur * (1 - cls.max_balloon_change_percent)
            if size < balloon_min:
                size = balloon_min
            if size <= cur and big_enough(size):
                return size
        elif cur < balloon_max:
            balloon_min = max(guest_balloon_min, used + guest_free_percent * cur)
            size = cur * (1 + cls.max_balloon_change_percent)
            if size < balloon_min:
                size = balloon_min
            if size > balloon_max:
                size = balloon_max
            if big_enough(size):
                return size
        return None

    def close(self):
        for q in self.qmps.values():
            q.close()


# ---- reporting helpers --------------------------------------------------------------------

def fmt(v, spec="{:.0f}", none="–"):
    if v is None:
        return none
    return spec.format(v)


def table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for r in rows:
        out.append("| " + " | ".join(str(c) for c in r) + " |")
    return "\n".join(out) + "\n"


def plot(path_svg, title, series, oracle_steps=None, ylabel="MiB", line_styles=None,
         xlabel="seconds since rightsized started"):
    """series: {label: [(t, mib), ...]}; oracle_steps: [(t0, t1, mib), ...]."""
    if not shutil.which("gnuplot"):
        log("gnuplot not found: no plot (apt-get install gnuplot-nox)")
        return False
    datadir = tempfile.mkdtemp(prefix="rs-plot-")
    try:
        cmds = ["set terminal svg size 860,420 dynamic font 'sans,11' background rgb 'white'",
                f"set output '{path_svg}'", f"set title '{title}'", f"set xlabel '{xlabel}'",
                f"set ylabel '{ylabel}'", "set key outside right", "set grid", "set yrange [0:*]"]
        plots = []
        styles = {"target": "lw 2 lc rgb '#1f77b4'", "actual": "lw 2 lc rgb '#2ca02c'",
                  "estimate": "lw 1.5 dt 2 lc rgb '#ff7f0e'", "oracle": "lw 2 dt 3 lc rgb '#d62728'"}
        for i, (label, pts) in enumerate(series.items()):
            pts = [p for p in pts if p[1] is not None]
            if not pts:
                continue
            f = os.path.join(datadir, f"s{i}.dat")
            with open(f, "w") as fh:
                for t, v in pts:
                    fh.write(f"{t:.2f} {v:.1f}\n")
            style = (line_styles or {}).get(label) or styles.get(label.split()[-1], "lw 1.5")
            plots.append(f"'{f}' using 1:2 with lines {style} title '{label}'")
        if oracle_steps:
            f = os.path.join(datadir, "oracle.dat")
            with open(f, "w") as fh:
                for t0, t1, v in oracle_steps:
                    fh.write(f"{t0:.2f} {v}\n{t1:.2f} {v}\n\n")
            plots.append(f"'{f}' using 1:2 with lines {styles['oracle']} title 'oracle (true working set)'")
        cmds.append("plot " + ", ".join(plots))
        subprocess.run(["gnuplot"], input="\n".join(cmds) + "\n", text=True, check=True)
        return True
    finally:
        shutil.rmtree(datadir, ignore_errors=True)


def rel_path(path, start):
    return os.path.relpath(path, start)
