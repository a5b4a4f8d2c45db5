# SPDX-License-Identifier: LGPL-2.1-or-later
"""What the parts on the Debian 12 distro guest (contrib/build-distro-image) share: bench-pgbench,
bench-redis and bench-distro-idle.  DistroGuest boots the guest, reaches its QMP and agent through
contrib/guest-ctl and timestamps its console lines (a /proc/vmstat printer's, and a part's
subclass adds its load's); then the windows measured on those lines, the oracle's balloon descent
judged by the guest's refault and swap-in counters, rightsized managing the guest, and the plots.
Where the parts differ, DistroGuest's class attributes and methods, or a parameter, say how."""

import base64
import importlib.machinery
import importlib.util
import os
import re
import statistics
import subprocess
import threading
import time

import benchlib as bl

BOOT = os.path.join(bl.TOP_SRCDIR, "contrib", "boot-distro-guest")
BUILD_IMAGE = os.path.join(bl.TOP_SRCDIR, "contrib", "build-distro-image")
IMAGE_DIR = os.environ.get("RIGHTSIZE_DISTRO_GUEST_DIR") or os.path.join(bl.TOP_BUILDDIR, "distro-guest")

_loader = importlib.machinery.SourceFileLoader("guest_ctl", os.path.join(bl.TOP_SRCDIR, "contrib", "guest-ctl"))
_spec = importlib.util.spec_from_loader("guest_ctl", _loader)
guest_ctl = importlib.util.module_from_spec(_spec)
_loader.exec_module(guest_ctl)

MAX_ERROR_SMOKE = 0.15      # a --smoke run fails when its last hold's estimate is further off the oracle
REFAULT_LIMIT = 30          # pages/s of file refaults + swap-ins that end the oracle's descent
BASELINE_S = 60             # how long the guest's own refault rate is measured at full size (cfg["baseline_s"])

VMSTAT_RE = re.compile(r"rs-vmstat (.*)")


def vmstat_keys(activate):
    """The /proc/vmstat counters the printer prints; activate ("file" or "anon") picks the
    workingset_activate_ counter of the kind of set the part loads."""
    return ("workingset_refault_file", "workingset_refault_anon", f"workingset_activate_{activate}",
            "pswpin", "pswpout", "pgmajfault", "oom_kill", "pgscan_kswapd", "pgscan_direct",
            "pgsteal_kswapd", "pgsteal_direct", "nr_free_pages")


def exec_result(status):
    """(exit code, stdout, stderr) of the agent's guest-exec-status reply for a finished command
    (128 + the signal when one ended it)."""
    dec = lambda k: base64.b64decode(status.get(k, "")).decode(errors="replace")
    return status.get("exitcode", 128 + status.get("signal", 0)), dec("out-data"), dec("err-data")


def build_image():
    """Builds the distro guest image in IMAGE_DIR (a no-op when it is up to date)."""
    out = subprocess.run([BUILD_IMAGE, IMAGE_DIR], capture_output=True, text=True)
    if out.returncode != 0:
        raise bl.HarnessError(f"build-distro-image failed:\n{out.stderr[-3000:]}")


class DistroGuest:
    """One distro guest: its QMP and agent through contrib/guest-ctl's clients, and a thread that
    timestamps the vmstat printer's lines from the console log.  As it is, a guest with no load
    (bench-distro-idle's); a part's subclass names its load, parses its lines (parse_load), gives
    a window's figures of them (load_figures) and may judge a window otherwise (bad)."""

    LABEL = "distro"            # the label when none is given
    BOOT_ARGS = ()              # more options for boot-distro-guest
    VMSTAT_KEYS = vmstat_keys("file")   # a page-cache set's (pgbench's database, the idle guest)
    LOAD = None                 # the load's name in check_alive's message; None: no load to check
    LOAD_LINES = None           # the attribute holding the load's timestamped lines
    LOAD_STALLED_S = 30         # how long check_alive lets the load be silent by default
    # measure(): both the load and the printer must have printed within the window itself (a load
    # that prints every second); False: check_alive's default allowances apply.
    ALIVE_IN_WINDOW = True
    # What check_alive shows when a stream fell silent: a shell command run in the guest, its caption.
    STALL_REPORT = ("dmesg | tail -n 25; cat /proc/pressure/io", "the guest's kernel log")
    # window()'s rates: name -> the vmstat counters whose sum it is, per second.
    RATES = {"refaults_per_s": ("workingset_refault_file",), "swapins_per_s": ("pswpin",)}

    def __init__(self, rundir, mem_mib, label=None):
        self.rundir, self.mem_mib = rundir, mem_mib
        self.name = self.label = label or self.LABEL
        self.vmstat = []     # (host time, {counter: value})
        # The guest's own rate at full size, warm (set by measure_baseline()): what it shows with
        # nothing taken from it is no sign of a size too small.
        self.refault_floor = 0.0
        self.pid = None
        self._stop = threading.Event()
        self._thread = None

    def boot(self):
        os.makedirs(self.rundir, exist_ok=True)
        bl._guests.append(self)
        out = subprocess.run([BOOT, "--dir", self.rundir, "--image-dir", IMAGE_DIR, "--mem", f"{self.mem_mib}M",
                              *self.BOOT_ARGS], capture_output=True, text=True)
        if out.returncode != 0:
            raise bl.HarnessError(f"boot-distro-guest failed:\n{out.stderr[-3000:]}")
        with open(os.path.join(self.rundir, "qemu.pid")) as f:
            self.pid = int(f.read())
        self.boot_s = float(open(os.path.join(self.rundir, "boot-seconds")).read())
        self.accel = open(os.path.join(self.rundir, "accel")).read().strip()
        self.start_console_tail()

    def start_console_tail(self):
        """Timestamps RUNDIR/console.log's lines from now on, in a thread (parse_load, vmstat)."""
        self._thread = threading.Thread(target=self._tail, daemon=True)
        self._thread.start()

    def _tail(self):
        bl.tail_lines(os.path.join(self.rundir, "console.log"), self._stop, self._parse)

    def _parse(self, now, line):
        if self.parse_load(now, line):
            return
        m = VMSTAT_RE.search(line)
        if m:
            f = m[1].split()
            try:
                self.vmstat.append((now, {f[i]: int(f[i + 1]) for i in range(0, len(f) - 1, 2)}))
            except ValueError:
                pass

    def parse_load(self, now, line):
        """Keeps line if it is one of the load's (arrived at host time now); whether it was."""
        return False

    def load_figures(self, t0, t1):
        """The load's figures for window(): of its lines that arrived in [t0, t1]."""
        return {}

    def limit(self):
        """Pages/s of file refaults plus swap-ins above which a window is not clean: REFAULT_LIMIT
        over twice the guest's own rate at full size."""
        return REFAULT_LIMIT + 2 * self.refault_floor

    def bad(self, w):
        """Whether window w is not clean: file refaults plus swap-ins above limit()."""
        return (w["refaults_per_s"] or 0) + (w["swapins_per_s"] or 0) > self.limit()

    def describe(self, w):
        """Window w for the oracle's log and errors."""
        floor = f" (limit {self.limit():.0f})" if self.refault_floor else ""
        return f"{w['refaults_per_s'] or 0:.0f} refaults/s, {w['swapins_per_s'] or 0:.0f} swap-ins/s{floor}"

    def start_vmstat(self):
        """Starts the printer of VMSTAT_KEYS (every second) as a transient unit writing to the
        serial console: the harness timestamps its lines, so it needs no agent, which rightsized
        holds later (an agent socket serves one client)."""
        printer = ("while :; do echo \"rs-vmstat $(grep -E '^(" + "|".join(self.VMSTAT_KEYS) +
                   ") ' /proc/vmstat | tr '\\n' ' ')\"; sleep 1; done")
        self.must(["systemd-run", "--unit", "rs-vmstat", "-p", "StandardOutput=file:/dev/ttyS0", "sh", "-c", printer])

    def qmp(self, name, arguments=None):
        q = guest_ctl.Qmp(self.rundir)
        try:
            return q.command(name, arguments)
        finally:
            q.s.close()

    def run(self, argv, timeout=600):
        """Runs argv in the guest through the agent; (exit code, stdout, stderr)."""
        a = guest_ctl.Agent(self.rundir, timeout=30)
        try:
            st = a.exec(argv, timeout)
        finally:
            a.s.close()
        return exec_result(st)

    def must(self, argv, timeout=600):
        rc, out, err = self.run(argv, timeout)
        if rc != 0:
            raise bl.HarnessError(f"guest: {' '.join(argv)}: exit {rc}: {err[-1000:]}")
        return out

    def balloon_actual_mib(self):
        return self.qmp("query-balloon")["actual"] / bl.MIB

    def set_balloon(self, mib, timeout=90):
        """Sets the balloon and waits until it is within 2 MiB (s taken, or None when it stuck)."""
        t0 = time.monotonic()
        self.qmp("balloon", {"value": int(mib * bl.MIB)})
        while time.monotonic() < t0 + timeout:
            if abs(self.balloon_actual_mib() - mib) <= 2:
                return time.monotonic() - t0
            time.sleep(0.3)
        return None

    def rss(self):
        return bl.process_rss(self.pid)

    def rightsized(self, workdir):
        """rightsized set up (not started) to manage this guest, and the name its API lists the
        guest by (None: the only guest it has)."""
        d = bl.Daemon(os.path.join(workdir, "daemon"), [os.path.join(self.rundir, "qmp.sock")])
        # The distro guest's sockets are qmp.sock and qga.sock in its run directory.
        with open(d.config) as f:
            conf = f.read().replace("agent-socket-pattern = %d/%n.qga", "agent-socket-pattern = %d/qga.sock")
        with open(d.config, "w") as f:
            f.write(conf)
        return d, None

    def counter(self, key):
        return self.vmstat[-1][1].get(key, 0) if self.vmstat else 0

    def stop(self):
        self._stop.set()
        subprocess.run([BOOT, "--stop", self.rundir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        if self in bl._guests:
            bl._guests.remove(self)


def window(g, t0, t1):
    """The load's figures and g.RATES of the lines that arrived in [t0, t1]."""
    vm = [v for v in g.vmstat if t0 <= v[0] <= t1]
    w = {"seconds": round(t1 - t0, 1), **g.load_figures(t0, t1), **dict.fromkeys(g.RATES)}
    if len(vm) >= 2:
        dt = vm[-1][0] - vm[0][0]
        if dt > 0:
            d = lambda k: vm[-1][1].get(k, 0) - vm[0][1].get(k, 0)
            for rate, keys in g.RATES.items():
                w[rate] = sum(d(k) for k in keys) / dt
    return w


def wait_lines(g, what, n, timeout):
    deadline = time.monotonic() + timeout
    while len(getattr(g, what)) < n:
        if time.monotonic() > deadline:
            raise bl.HarnessError(f"{g.label}: only {len(getattr(g, what))} {what} lines after {timeout} s")
        time.sleep(0.3)


def start_guests(guests, part, start, load_lines, parallel_boot=False):
    """Boots the guests (None: absent) one after the other (parallel_boot: side by side, a minute
    less for a pair), runs start(g) in all of them side by side (under TCG a database's
    initialisation or a fill takes minutes; start logs its own exceptions), then waits for
    load_lines of each one's load and 5 of its vmstat printer.  Returns {label: what start
    returned}."""
    guests = [x for x in guests if x]
    if parallel_boot:
        errors = []

        def boot(x):
            try:
                x.boot()
            except bl.HarnessError as e:
                errors.append(e)
        booting = [threading.Thread(target=boot, args=(x,)) for x in guests]
        for t in booting:
            t.start()
        for t in booting:
            t.join()
        if errors:
            raise errors[0]
    for x in guests:
        if not parallel_boot:
            x.boot()
        bl.log(f"{part}: {x.label} booted in {x.boot_s:.0f} s ({x.accel})")
    results = {}
    threads = [threading.Thread(target=lambda x=x: results.__setitem__(x.label, start(x))) for x in guests]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for x in guests:
        if x.label not in results:
            raise bl.HarnessError(f"{part} did not start in the {x.label} guest (see above)")
    for x in guests:
        wait_lines(x, x.LOAD_LINES, load_lines, 120)
        wait_lines(x, "vmstat", 5, 60)
    return results


class GuestStalled(bl.HarnessError):
    """The guest stopped answering: its load or vmstat printer fell silent (check_alive)."""


# What a guest that stopped answering raises: check_alive's GuestStalled, guest-ctl's and virsh's
# GuestError (an agent or QMP command failed), or a socket timeout.
STALLS = (GuestStalled, guest_ctl.GuestError, OSError)


def check_alive(g, stalled_s=None):
    """A guest whose load or vmstat printer fell silent measures nothing: no lines is not clean.
    Each may be silent for stalled_s; by default the load for g.LOAD_STALLED_S, the printer 30 s.
    Raises GuestStalled, with what the guest's kernel says when its agent still answers."""
    now = time.monotonic()
    streams = [("the vmstat printer", g.vmstat, 30 if stalled_s is None else stalled_s)]
    if g.LOAD:
        streams.insert(0, (g.LOAD, getattr(g, g.LOAD_LINES), g.LOAD_STALLED_S if stalled_s is None else stalled_s))
    for what, lines, allow in streams:
        if not lines or now - lines[-1][0] > allow:
            cmd, caption = g.STALL_REPORT
            tail = ""
            try:
                tail = g.must(["sh", "-c", cmd], timeout=30)
            except bl.HarnessError as e:
                tail = str(e)
            except STALLS as e:
                tail = f"(no answer: the agent is unresponsive too: {e})"
            raise GuestStalled(f"{g.label}: {what} printed nothing for {allow} s; {caption}:\n{tail}")


def measure(g, cfg):
    t = time.monotonic() + cfg["settle_s"]
    time.sleep(cfg["settle_s"] + cfg["window_s"])
    check_alive(g, cfg["settle_s"] + cfg["window_s"] if g.ALIVE_IN_WINDOW else None)
    return window(g, t, time.monotonic())


def wait_quiet(g, cfg, timeout=300):
    """Waits until a window at the current size is clean (after a squeeze, what it took comes
    back: the page cache refilled, or the set swapped back in)."""
    deadline = time.monotonic() + timeout
    while True:
        w = measure(g, cfg)
        if not g.bad(w):
            return w
        if time.monotonic() > deadline:
            raise bl.HarnessError(f"still not clean at {g.balloon_actual_mib():.0f} MiB after {timeout} s: "
                                  f"{g.describe(w)}")


def measure_baseline(g, cfg):
    """Sets g.refault_floor to the guest's rate over cfg["baseline_s"] (default BASELINE_S) s at
    full size, and returns that window: a guest that refaults or swaps in steadily with nothing
    taken from it is judged against that, not against nil.  Call it with the set warm (a database
    read back): what an earlier squeeze evicted otherwise comes back one random read at a time
    for many minutes at every size (the first TPC-B run refaulted 53-88 pages/s at every size up
    to full; read back first, 0 pages/s at full size)."""
    g.set_balloon(g.mem_mib)
    w = measure(g, dict(cfg, window_s=cfg.get("baseline_s", BASELINE_S)))
    g.refault_floor = (w["refaults_per_s"] or 0) + (w["swapins_per_s"] or 0)
    bl.log(f"oracle: baseline at full size {g.mem_mib} MiB: {g.describe(w)}")
    return w


def _log_step(g, size, w, again=False, note=""):
    bl.log(f"oracle: {size} MiB{' again' if again else ''}{note}: {g.describe(w)}")


def oracle(g, cfg, start_hint=0, hint_quiet_s=180, from_footprint=True):
    """The oracle's descent: (working set MiB, steps), judged by g.bad.  It starts at start_hint,
    the size rightsized held the guest at, rounded up to cfg["step_mib"] (a size to check, not a
    result to take: after hint_quiet_s s without a clean window there it climbs 4 steps); with no
    such size, from the guest's footprint (total - free) at full size when from_footprint, else
    from full size; and descends from the first clean size, in cfg["coarse_mib"] steps first when
    cfg has it (rightsized may hold the guest hundreds of MiB above the set), then, from the last
    clean coarse size once a window there is clean again, in step_mib steps to the first bad one.
    Starting where rightsized left it spares a deflation to full size and the minute of refaults
    after it.
    A guest that stalls at a step (STALLS: its load or printer silent, its agent or QMP not
    answering) below a size already judged clean ends the descent there, as a bad size does: the
    last clean size is the answer, and the last step says `stalled` (why).  A stall before any
    clean size is an error."""
    fine = cfg["step_mib"]
    step = cfg.get("coarse_mib", fine)
    steps = []
    clean = None
    size = g.mem_mib
    if start_hint:
        # What rightsized's last probe took (evicted cache, or hot pages pushed to swap) comes
        # back as it is read, for a minute or two, at any size: wait for a clean window there
        # before judging it.
        size = min(g.mem_mib, int(-(-start_hint // fine) * fine))
        try:
            reach = g.set_balloon(size)
            w = wait_quiet(g, cfg, timeout=hint_quiet_s)
            steps.append(dict(size=size, reach_s=reach, again=False, **w))
            _log_step(g, size, w, note=" (where rightsized held it, once quiet)")
            clean = size
            size -= step
        except (bl.HarnessError, *STALLS) as e:
            # Not clean, or stalled: either way a larger size is what to try.
            bl.log(f"oracle: {e}: climbing")
            size = min(g.mem_mib, size + 4 * step)
    elif from_footprint:
        try:
            g.set_balloon(g.mem_mib)
            full = wait_quiet(g, cfg)
            meminfo = g.must(["cat", "/proc/meminfo"])
        except STALLS as e:
            raise bl.HarnessError(f"oracle: {g.label} stalled at full size, {g.mem_mib} MiB: {e}") from e
        free_mib = int(re.search(r"MemFree:\s+(\d+)", meminfo)[1]) / 1024
        size = int((g.mem_mib - free_mib) // step * step)
        steps.append(dict(size=g.mem_mib, **full))
    # The lowest size tried: a guest clean there has a set at or below it (an idle guest's part
    # stops at the policy's floor, where rightsized stops too).
    while size >= cfg.get("oracle_min_mib", 129):
        t_step = time.monotonic()
        try:
            reach = g.set_balloon(size)
            # A step evicts what the LRU held longest, some of it pages the load had not come back
            # to yet: a burst of refaults or swap-ins that passes.  Only a second bad window ends it.
            for again in (False, True):
                w = measure(g, cfg)
                steps.append(dict(size=size, reach_s=reach, again=again, **w))
                _log_step(g, size, w, again)
                if not g.bad(w):
                    break
        except STALLS as e:
            if clean is None:
                raise bl.HarnessError(f"oracle: {g.label} stalled at {size} MiB before any size was judged "
                                      f"clean, so there is no answer: {e}") from e
            # Squeezed this far, the guest hangs on memory (its agent with it): too small, as a bad
            # window would say, only louder.
            why = str(e).splitlines()[0]
            steps.append(dict(size=size, reach_s=None, again=False, stalled=why, **window(g, t_step, time.monotonic())))
            bl.log(f"oracle: {g.label} stalled at {size} MiB ({why}): the descent ends, the last clean size "
                   f"{clean} MiB is the answer")
            break
        if g.bad(w):
            if clean is not None and step > fine:
                # Back to the last clean size (the hot pages this step pushed out come back as
                # they are read), then on in fine steps.
                step = fine
                try:
                    reach = g.set_balloon(clean)
                    w = wait_quiet(g, cfg, timeout=180)
                except (bl.HarnessError, *STALLS) as e:
                    bl.log(f"oracle: {e}: the coarse result stands")
                    break
                steps.append(dict(size=clean, reach_s=reach, again=False, back=True, **w))
                _log_step(g, clean, w, note=" (back, once quiet)")
                size = clean - step
                continue
            if clean is not None:
                break
            if size >= g.mem_mib:
                raise bl.HarnessError(f"not clean at full size ({g.describe(w)}): no clean size")
            size = min(g.mem_mib, size + 4 * step)
            continue
        clean = size
        size -= step
    return clean, steps


def stall_lines(steps, descent="The descent"):
    """The markdown lines saying that the oracle's descent (steps) ended on a stall; [] when not."""
    last = steps[-1] if steps else {}
    if not last.get("stalled"):
        return []
    return [f"{descent} ended on a stall at {last['size']} MiB ({last['stalled']}): the guest stopped answering "
            "there, so the oracle's answer is the last size judged clean above it.", ""]


def managed(g, cfg, workdir, part):
    """rightsized on the guest for cfg["holds"] holds: its first descent and the re-probes after it.
    Returns (samples, view at the end, s to the first hold, the estimate at each hold, the path
    of rightsized's log)."""
    d, name = g.rightsized(workdir)
    with open(d.config) as f:
        # log-level debug: each sample's signals beside the decision made on it
        conf = f.read().replace("log-level = info", "log-level = debug")
    with open(d.config, "w") as f:
        f.write(conf)
    d.start()
    t0 = time.monotonic()
    samples, first_hold, hold_estimates, last_state = [], None, [], None
    deadline = t0 + cfg["managed_max_s"]
    view = {}
    while time.monotonic() < deadline:
        guests = d.guests() or {}
        view = guests.get(name, {}) if name else next(iter(guests.values()), {})
        st = view.get("state")
        samples.append({"t": time.monotonic() - t0, "state": st, "rss": g.rss(),
                        **{k: (view.get(k) / bl.MIB if isinstance(view.get(k), (int, float)) else None)
                           for k in ("estimate", "estimate-lower", "estimate-upper", "target", "actual")}})
        if st == "hold" and last_state != "hold" and view.get("estimate"):
            hold_estimates.append(view["estimate"] / bl.MIB)
            if first_hold is None:
                first_hold = time.monotonic() - t0
            bl.log(f"{part}: hold {len(hold_estimates)} at {samples[-1]['target']:.0f} MiB, "
                   f"estimate {hold_estimates[-1]:.0f} MiB, {samples[-1]['t']:.0f} s in")
            # The cost controller has no probe-and-hold cycle to count (its "hold" is any
            # interval its target stayed): it runs until the deadline, judged at the end.
            if len(hold_estimates) >= cfg["holds"] and bl.bench_controller() != "cost":
                break
        last_state = st
        check_alive(g)
        time.sleep(1)
    if d.daemon.poll() is not None:
        raise bl.HarnessError(f"rightsized exited: {open(d.log_path).read()[-2000:]}")
    d.stop()
    return samples, view, first_hold, hold_estimates, d.log_path


# ---- MoM's rules on the same guest (issue 15: each part against MoM's rules) -----------------

# The host MoM's rules see in an application part stays short: its free memory (MoM's mem_free:
# MemFree + Buffers + Cached) a constant share of its total, whatever this guest gives back (the
# host's other guests take it).  Between MoM's pressure_critical (5 %) and pressure_threshold
# (20 %) every guest is shrunk, at most 5 % of its balloon per 10 s, towards its used memory
# (balloon less the balloon's free-memory stat) plus min_guest_free_percent x share / 20 % = the
# share itself of its balloon.  So a guest is shrunk only while its free memory is above about the
# share, and a guest whose page cache fills it keeps only the kernel's few percent free: a share
# fixed by hand (10 %) left such guests untouched.  mom_host_free_sweep picks the share per
# guest instead: the highest of these candidates at which MoM's rules change its balloon.  Never
# at or below pressure_critical, where MoM shrinks a guest below its used memory (an emergency,
# not its policy), and never above the 10 % at which it could not act on a cache-full guest.
MOM_SHARE_CANDIDATES = (0.10, 0.095, 0.09, 0.085, 0.08, 0.075, 0.07, 0.065, 0.06, 0.055)
# When no candidate lets MoM's rules act (a guest with less free memory than the lowest), the
# lowest is used, and the page says that MoM's rules could not act on this guest short of an
# emergency.
MOM_SHARE_FALLBACK = MOM_SHARE_CANDIDATES[-1]
# The sweep reads the guest the way MoM's collectors do: sample-history-length samples at its
# monitor interval (10 x 5 s), the history its rules average over.
MOM_SWEEP_S = bl.MomBalloonPolicy.history * bl.MomBalloonPolicy.monitor_interval


class MomPressedHost:
    total = 64 * 1024   # MiB: only the share counts

    def __init__(self, share):
        self.share = share

    def free_mib(self, guests_mib):
        return self.share * self.total


def mom_share_from_stats(hist, balloon_max_kb, candidates=MOM_SHARE_CANDIDATES):
    """The host-free share at which MoM's rules act on a guest, from its stats as MoM collects
    them (hist: [(balloon kB, free kB or None)], oldest first): the highest candidate at which
    one policy run changes the balloon.  Returns (share or None when none acts, {share: the size
    in kB MoM's rules set there, or None})."""
    sizes = {c: bl.MomBalloonPolicy.decide(c, hist, balloon_max_kb) for c in candidates}
    acting = [c for c in candidates if sizes[c] is not None]
    return (max(acting) if acting else None), sizes


def mom_host_free_sweep(g, part, candidates=MOM_SHARE_CANDIDATES):
    """A short sweep over host-free shares on guest g at its full size, its load running: reads
    the balloon and its free-memory stat as MoM's collectors do (MOM_SWEEP_S), then judges each
    candidate by MoM's own rule arithmetic (mom_share_from_stats).  Returns {"share": the share
    to run MoM's rules at, "acting": whether any candidate acts, "sizes": {share: MiB or None},
    "free_mib": the guest's mean free memory in the sweep}."""
    q = bl.Qmp(os.path.join(g.rundir, "qmp.sock"))
    hist = []
    try:
        q.command("qom-set", {"path": "/machine/peripheral/balloon0", "property": "guest-stats-polling-interval",
                              "value": bl.MomBalloonPolicy.monitor_interval})
        t_next = time.monotonic()
        for _ in range(bl.MomBalloonPolicy.history):
            stats = q.command("qom-get", {"path": "/machine/peripheral/balloon0", "property": "guest-stats"})
            free = stats.get("stats", {}).get("stat-free-memory", -1)
            hist.append((q.balloon_actual() / 1024, free / 1024 if free >= 0 else None))
            check_alive(g)
            t_next += bl.MomBalloonPolicy.monitor_interval
            time.sleep(max(0.0, t_next - time.monotonic()))
    finally:
        q.close()
    share, sizes = mom_share_from_stats(hist, g.mem_mib * 1024, candidates)
    frees = [f for _, f in hist if f is not None]
    r = {"share": share if share is not None else MOM_SHARE_FALLBACK, "acting": share is not None,
         "sizes": {f"{c:.3f}": (None if v is None else v / 1024) for c, v in sizes.items()},
         "free_mib": statistics.fmean(frees) / 1024 if frees else None, "seconds": MOM_SWEEP_S}
    bl.log(f"{part}: MoM's host-free sweep: {r['free_mib'] or 0:.0f} MiB free in the guest; share "
           f"{r['share']:.1%}" + ("" if share is not None else " (no candidate lets MoM's rules act)"))
    return r


class _MomGuest:
    """What benchlib.MomBalloonPolicy needs of a guest: its label and a QMP connection (held for
    the whole window: nothing else talks to the guest's QMP socket meanwhile)."""

    def __init__(self, g):
        self.label = g.label
        self._path = os.path.join(g.rundir, "qmp.sock")

    def qmp(self):
        return bl.Qmp(self._path)


def mom(g, duration_s, part, sweep=None):
    """oVirt MoM's default balloon policy (benchlib.MomBalloonPolicy, MoM's rules reimplemented)
    on guest g for duration_s, from its full size, on a host that stays short (MomPressedHost) at
    the share mom_host_free_sweep picked (sweep: its result; None: sweep now, MOM_SWEEP_S more).
    Returns its samples ({"t", "target", "actual", "rss"}, MiB and s since MoM started), the
    balloon size it held over the window's last third (median), its lowest, and its actions."""
    if g.set_balloon(g.mem_mib) is None:
        raise bl.HarnessError(f"{part}: the balloon did not return to {g.mem_mib} MiB for MoM's run")
    if sweep is None:
        sweep = mom_host_free_sweep(g, part)
    policy = bl.MomBalloonPolicy([_MomGuest(g)], MomPressedHost(sweep["share"]), balloon_max_mib=g.mem_mib)
    samples, target = [], g.mem_mib
    t0 = time.monotonic()
    t0_epoch = time.time()
    try:
        next_t = t0
        while time.monotonic() < t0 + duration_s:
            row = {"guests": {g.label: {}}}
            policy.step(row)
            s = row["guests"][g.label]
            if s.get("target"):
                target = s["target"] / bl.MIB
            samples.append({"t": round(time.monotonic() - t0, 1), "target": target,
                            "actual": s["actual"] / bl.MIB, "rss": (g.rss() or 0) / bl.MIB})
            check_alive(g)
            next_t += 1
            time.sleep(max(0.0, next_t - time.monotonic()))
    finally:
        policy.close()
    tail = [s["actual"] for s in samples if s["t"] >= duration_s * 2 / 3]
    held = statistics.median(tail) if tail else None
    bl.log(f"{part}: MoM's rules held the guest at {bl.fmt(held)} MiB ({policy.actions} balloon changes "
           f"in {policy.policy_runs} policy runs)")
    return {"samples": samples, "held_mib": held, "lowest_mib": min((s["actual"] for s in samples), default=None),
            "actions": policy.actions, "policy_runs": policy.policy_runs, "duration_s": duration_s,
            "host_free_share": sweep["share"], "share_sweep": sweep, "revision": bl.MOM_REVISION,
            "start_epoch": t0_epoch}


def mom_window(g, duration_s, part, twin=None, versus=None):
    """mom() on guest g, and the figures of its window added to what it returns: `during` (the
    load's window()), QEMU's RSS at the end, the file refaults, swap-ins and OOM kills in it; with
    a twin beside g, `vs_twin` = versus(e0, e1) (the part's comparison of the two over the
    window's host epochs) and the twin's RSS at the end."""
    # The sweep first, at full size: its seconds are not MoM's window.
    if g.set_balloon(g.mem_mib) is None:
        raise bl.HarnessError(f"{part}: the balloon did not return to {g.mem_mib} MiB for MoM's run")
    sweep = mom_host_free_sweep(g, part)
    before = {k: g.counter(k) for k in ("workingset_refault_file", "pswpin", "oom_kill")}
    m0 = time.monotonic()
    m = mom(g, duration_s, part, sweep)
    m.update(during=window(g, m0, time.monotonic()), rss_end_mib=(g.rss() or 0) / bl.MIB,
             refaults=g.counter("workingset_refault_file") - before["workingset_refault_file"],
             swapins=g.counter("pswpin") - before["pswpin"], oom=g.counter("oom_kill") - before["oom_kill"])
    if twin:
        m["vs_twin"] = versus(m["start_epoch"], time.time())
        m["twin_rss_end_mib"] = (twin.rss() or 0) / bl.MIB
    return m


def mom_intro(m, where, load, goal_text):
    """The paragraph that opens a section's table against MoM's rules: m as mom() returned it,
    where: which guest and when, load: what ran throughout."""
    return (f"**Against MoM's rules** (oVirt MoM's default balloon policy, reimplemented from its rules' text: "
            f"{m['revision']}; run {where}, from its full size, for {m['duration_s']:.0f} s, "
            f"{load} running throughout, on a host that stays short: MoM's host free memory a constant "
            f"{m['host_free_share']:.1%} of its total, {mom_share_text(m)}, so every policy run shrinks the guest, "
            f"at most 5 % a step, towards its used memory plus {m['host_free_share']:.1%} of its balloon; "
            f"{m['actions']} balloon changes in {m['policy_runs']} policy runs; {goal_text}):")


def mom_share_text(m):
    """How the host-free share of MoM's run was chosen, for the page."""
    sw = m.get("share_sweep")
    if not sw:
        return ("set by hand, not swept (at that share MoM's rules leave a guest whose page cache fills it "
                "untouched)")
    lo, hi = min(MOM_SHARE_CANDIDATES), max(MOM_SHARE_CANDIDATES)
    if not sw.get("acting"):
        return (f"the lowest of a sweep over {hi:.0%}-{lo:.1%} (the guest had {bl.fmt(sw.get('free_mib'))} MiB free "
                f"over {sw['seconds']} s of MoM's stats at full size, and no share above MoM's critical 5 % let its "
                "rules change the balloon: short of an emergency, MoM's rules leave this guest alone)")
    return (f"the highest share of a sweep over {hi:.0%}-{lo:.1%} at which MoM's rules change this guest's balloon "
            f"(judged by their own arithmetic on {sw['seconds']} s of the guest's stats at full size, "
            f"{bl.fmt(sw.get('free_mib'))} MiB free)")


def mom_markdown(r, load, rows, goal_text):
    """The section's paragraph on MoM's rules: r["mom"] as mom() returned it (with the part's
    figures added), rows: the load's [label, rightsize's, MoM's] rows (the caller's figures)."""
    m = r["mom"]
    mem = r["mem_mib"]
    held = m.get("held_mib")
    target = r.get("target_mib")
    table_rows = [["held at (MiB; MoM: median of its last third)", bl.fmt(target), bl.fmt(held)],
                  ["memory returned: the guest's size less that (MiB)", bl.fmt(mem - target if target else None),
                   bl.fmt(mem - held if held else None)],
                  ["QEMU RSS at the end of the window (MiB)", bl.fmt(r.get("rss_managed_end_mib", r.get("rss_end_mib"))),
                   bl.fmt(m.get("rss_end_mib"))],
                  *rows,
                  ["file refaults / swap-ins in the window", f"{r['refaults_managed']} / {r['swapins_managed']}",
                   f"{m.get('refaults', '–')} / {m.get('swapins', '–')}"],
                  ["OOM kills", str(r["oom_managed"] if "oom_managed" in r else r["oom"]), str(m.get("oom", "–"))]]
    lines = [mom_intro(m, "on the same guest after rightsized", load, goal_text), "",
             bl.table(["", "rightsize", "MoM's rules"], table_rows), ""]
    if (r.get("plots") or {}).get("mom"):
        lines += [f"![{r['part']}: MoM's rules, balloon target and actual](PLOTDIR/{r['plots']['mom']})", ""]
    return lines


def mom_plot(r, outdir, part, oracle_segments=None, guest="the same guest"):
    """PART-mom.svg: MoM's target and the balloon over its window, the oracle dotted (r's
    oracle_mib, or oracle_segments: [(t0, t1, MiB)] on MoM's time axis); its file name or None."""
    m = r.get("mom")
    if not m or not m.get("samples"):
        return None
    series = {"MoM target": [(s["t"], s["target"]) for s in m["samples"]],
              "balloon actual": [(s["t"], s["actual"]) for s in m["samples"]]}
    if oracle_segments is None and r.get("oracle_mib"):
        oracle_segments = [(0, m["samples"][-1]["t"], r["oracle_mib"])]
    name = f"{part}-mom.svg"
    if bl.plot(os.path.join(outdir, name), f"{part}: MoM rules on {guest}", series, oracle_segments or None,
               xlabel="seconds since the MoM rules started"):
        return name
    return None


def convergence_problems(hold_estimates, orc):
    """--smoke's judgement of the estimate rightsized holds at the end (after a re-probe) against
    the oracle measured in the same run: what failed, [] when nothing did."""
    if len(hold_estimates) < 2:
        return [f"only {len(hold_estimates)} holds"]
    if orc is None:
        return ["the oracle found no clean size"]
    if abs(hold_estimates[-1] - orc) / orc > MAX_ERROR_SMOKE:
        return [f"estimate {hold_estimates[-1]:.0f} MiB at the last hold against the oracle's {orc} MiB"]
    return []


def goal_mark(ok):
    return "✅" if ok else "❌"


def smooth(series, width_s=10):
    """Median of each width_s bucket: under TCG a load's throughput swings from second to second
    (pgbench's TPS by ±40 %) and from run to run."""
    buckets = {}
    for t, v in series:
        buckets.setdefault(int(t // width_s), []).append(v)
    return [((k + 0.5) * width_s, statistics.median(v)) for k, v in sorted(buckets.items())]


def plots(r, outdir, part, series, key, what, ylabel, title):
    """Two SVGs on the same time axis (s since rightsized started): PART.svg, the sizes, and
    PART-KEY.svg, the load's throughput `what` of each guest in series ({label: [(t, value)]},
    10 s medians; the managed guest's label is part).  Returns their file names, {"sizes": ...,
    key: ...} (none where gnuplot is missing)."""
    t_end = r["samples"][-1]["t"] if r["samples"] else 0
    sizes = {k: [(x["t"], x[k.split()[-1]]) for x in r["samples"]]
             for k in ("rightsize target", "balloon actual", "rightsize estimate")}
    names = {}
    if bl.plot(os.path.join(outdir, f"{part}.svg"), f"{part}: rightsize on the distro guest", sizes,
               [(0, t_end, r["oracle_mib"])] if r["oracle_mib"] else None):
        names["sizes"] = f"{part}.svg"
    load = {f"{label} {what} (10 s median)": [p for p in smooth(s) if p[0] <= t_end] for label, s in series.items()}
    if bl.plot(os.path.join(outdir, f"{part}-{key}.svg"), title, load, ylabel=ylabel,
               line_styles={f"{part} {what} (10 s median)": "lw 2 lc rgb '#1f77b4'",
                            f"twin {what} (10 s median)": "lw 1.5 lc rgb '#7f7f7f'"}):
        names[key] = f"{part}-{key}.svg"
    return names
