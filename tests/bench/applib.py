# SPDX-License-Identifier: LGPL-2.1-or-later
"""Application parts judged by the application: a load in the Debian 12 distro guest that prints
its own throughput every second, the oracle that finds the smallest size at which that
throughput holds, and rightsized's run judged against it.

The oracle (throughput_oracle) answers "how much memory does this load need?" with the load's own
numbers and nothing of rightsize's: the smallest balloon size at which the load's throughput is at
least OK_THROUGHPUT of the same guest's at full size, and its p99 latency (where the load reports
one) at most OK_P99 of it.  It bisects from the full size down, never from a size rightsized
chose; each size is held for a settle long enough to measure its steady state rather than the
transition into it, then measured in windows until the verdict is stable.  An unmanaged twin beside
the guest runs the same load at full size throughout: each window's figure is the guest's over the
twin's in the same wall-clock window, divided by the pair's ratio at full size (the calibration),
so the machine's own drift cancels.  Its answer depends on the workload and the guest, not on
rightsize, so it is cached by the workload's definition (oracle_cache_key) and `make bench` does
not bisect again.  Beside it, the size the older refault rule gives on the same windows (file
refaults plus swap-ins under REFAULT_LIMIT pages/s over twice the rate at full size), labelled as
such: the throughput size is the headline.

A workload (the Workload classes) boots its guest, prepares its data, starts its load as a
transient unit whose lines go to the serial console (the harness timestamps them there, so the
load never needs the guest agent, which rightsized holds), and parses those lines into
(work, ms, p99) samples."""

import hashlib
import json
import math
import os
import re
import statistics
import time

import benchlib as bl
import distrolib as dl

OK_THROUGHPUT = 0.99        # the oracle's bar: throughput at least this share of full size's
OK_P99 = 1.05               # and p99 latency at most this multiple of it
ORACLE_METHOD = 1           # bumped when the oracle's method changes, so cached answers are measured again
GUEST_SCRIPTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "guest")

LOAD_RE = re.compile(r"rs-load ops=(\d+) ms=(\d+)(?: p99=([\d.]+))?")


class AppGuest(dl.DistroGuest):
    """A distro guest whose load prints `rs-load ops=N ms=M [p99=P]` lines (the workload turns its
    load's own output into them in the guest, or parses its own lines in parse_sample)."""

    LOAD, LOAD_LINES = "the load", "samples"
    VMSTAT_KEYS = dl.vmstat_keys("file")
    ALIVE_IN_WINDOW = False
    LOAD_STALLED_S = 120

    def __init__(self, rundir, mem_mib, workload, label=None):
        super().__init__(rundir, mem_mib, label or workload.name)
        self.workload = workload
        self.samples = []       # (host time, work units, ms, p99 ms or None)
        self.BOOT_ARGS = workload.boot_args()

    def parse_load(self, now, line):
        s = self.workload.parse_sample(line)
        if s is None:
            return False
        self.samples.append((now, *s))
        return True

    def load_figures(self, t0, t1):
        return self.workload.figures(self.samples, t0, t1)

    def describe(self, w):
        return (f"{bl.fmt(w.get('rate'), '{:.1f}')} {self.workload.unit}, p99 {bl.fmt(w.get('p99_ms'), '{:.2f}')} ms, "
                + super().describe(w))


def throughput(samples, t0, t1, by_wall=False):
    """The load's rate over the samples that arrived in [t0, t1]: work units per second of the
    load's own clock (by_wall: of the window's wall time, for a load whose samples are its jobs'
    durations, which overlap), the median of its per-second p99s, and how many samples."""
    s = [x for x in samples if t0 <= x[0] <= t1 and x[1] is not None]
    ms = (t1 - t0) * 1000 if by_wall else sum(x[2] for x in s)
    p99 = [x[3] for x in s if x[3] is not None]
    return {"rate": sum(x[1] for x in s) * 1000 / ms if ms > 0 and s else None,
            "p99_ms": statistics.median(p99) if p99 else None, "samples": len(s)}


# ---- the workloads ----------------------------------------------------------------------------

class Workload:
    """What a part needs of its load.  name: the part; unit: what its throughput counts."""

    name = unit = None
    mem_mib, smp, swap = 1024, 1, "1G"
    rate_by_wall = False
    CONFIG = {}                 # the workload's own oracle and run settings over CONFIGS'

    def definition(self):
        """Everything that decides the load's behaviour: the oracle cache's key."""
        return {"name": self.name, "mem_mib": self.mem_mib, "smp": self.smp, "swap": self.swap}

    def data_definition(self):
        """Everything that decides what prepare_data makes: the data disk cache's key."""
        return {}

    def boot_args(self):
        return ["--smp", str(self.smp), "--swap", self.swap]

    # prepare_data's result lives on the data disk: made once per definition and image, kept in
    # DATA_CACHE, and each boot runs on a copy-on-write overlay of it (data_disk()).
    DATA_ON_DISK = False

    def prepare_data(self, g):
        """Creates the load's data on g's data disk (once: data_disk() keeps it); a dict of what
        it made (for the report)."""
        return {}

    def prepare(self, g):
        """What each boot needs before the load starts (services stopped, data in memory); a dict
        of what it made (for the report)."""
        return {}

    def start(self, g):
        """Starts the load in g as a transient unit writing to the serial console."""
        raise NotImplementedError

    def rewarm(self, g):
        """Brings back what a smaller size evicted, before a larger size is judged (none: the load
        reads it back itself during the settle)."""

    def parse_sample(self, line):
        m = LOAD_RE.search(line)
        if not m:
            return None
        return int(m[1]), int(m[2]), float(m[3]) if m[3] else None

    def figures(self, samples, t0, t1):
        return throughput(samples, t0, t1, by_wall=self.rate_by_wall)

    def warm_up(self, g, twin, window_s=30, tolerance=0.05, timeout_s=900):
        """Waits until the load's rate stops climbing in both guests (a window no more than
        tolerance above the one before it): a page cache fills at the load's own miss rate,
        minutes at full size under TCG, and a calibration taken before that measures the filling.
        Only a climb counts: under TCG a window's rate swings by ±10 % either way."""
        deadline = time.monotonic() + timeout_s
        prev = {}
        while time.monotonic() < deadline:
            t0 = time.monotonic()
            time.sleep(window_s)
            now = {x.label: dl.window(x, t0, time.monotonic())["rate"] for x in (g, twin) if x}
            if prev and all(now[k] and prev[k] and now[k] / prev[k] - 1 <= tolerance for k in now):
                bl.log(f"{self.name}: warm: {', '.join(f'{k} {v:.1f} {self.unit}' for k, v in now.items())}")
                return
            prev = now
        bl.log(f"{self.name}: the rate did not settle within {timeout_s} s: calibrating anyway")

    def describe(self):
        raise NotImplementedError


def start_unit(g, unit, command):
    g.must(["systemd-run", "--unit", unit, "-p", "StandardOutput=file:/dev/ttyS0",
            "-p", "StandardError=file:/dev/ttyS0", "sh", "-c", command])


def install_script(g, name):
    """Copies tests/bench/guest/NAME into the guest's /usr/local/bin (through the agent)."""
    with open(os.path.join(GUEST_SCRIPTS, name), "rb") as f:
        data = f.read()
    import base64
    g.must(["sh", "-c", f"echo {base64.b64encode(data).decode()} | base64 -d > /usr/local/bin/{name} && "
            f"chmod 755 /usr/local/bin/{name}"])


class FioZipf(Workload):
    """fio's buffered random reads, Zipf-distributed over a file larger than the guest's RAM: the
    set is a skewed slice of the page cache with no knee, and what does not fit is read again
    from the disk."""

    unit = "reads/s"

    def __init__(self, theta, mem_mib=1024, smp=1, file_share=1.5):
        self.theta, self.mem_mib, self.smp, self.file_share = theta, mem_mib, smp, file_share
        self.name = f"fio-zipf{str(theta).replace('.', '')}" + ("" if mem_mib == 1024 and smp == 1 else
                                                                 f"-{mem_mib // 1024}g{smp}c")
        self.file_mib = int(mem_mib * file_share)

    def definition(self):
        return dict(super().definition(), theta=self.theta, file_mib=self.file_mib, bs="4k", engine="psync")

    def data_definition(self):
        return {"fio-file-mib": self.file_mib}

    DATA_ON_DISK = True

    def prepare_data(self, g):
        # Real blocks (a sparse file's holes are read from no disk at all).
        g.must(["dd", "if=/dev/zero", "of=/srv/rs-fio.dat", "bs=1M", f"count={self.file_mib}", "conv=fsync"],
               timeout=1800)
        return {"file_mib": self.file_mib}

    def prepare(self, g):
        g.must(["systemctl", "stop", "postgresql", "redis-server"])
        return {}

    def start(self, g):
        # fio's terse status line every second carries the cumulative read KiB (field 6) and the
        # job's runtime in ms (field 9): the load line is their difference.  --invalidate=0 keeps
        # the page cache fio finds (by default it drops the file's pages when the job starts).
        fio = (f"fio --name=zipf --filename=/srv/rs-fio.dat --size={self.file_mib}m --rw=randread "
               f"--random_distribution=zipf:{self.theta} --bs=4k --ioengine=psync --invalidate=0 --norandommap "
               "--time_based --runtime=86400 --status-interval=1 --output-format=terse")
        awk = ("awk -F';' '$1 == 3 { if (seen) printf \"rs-load ops=%d ms=%d\\n\", ($6 - kb) / 4, $9 - ms; "
               "kb = $6; ms = $9; seen = 1; fflush() }'")
        start_unit(g, "rs-load", f"{fio} | {awk}")

    def describe(self):
        return (f"`fio --rw=randread --random_distribution=zipf:{self.theta} --bs=4k --ioengine=psync` (buffered, "
                f"one job) over a {self.file_mib} MiB file ({self.file_share:.1f}x the guest's RAM)")


class RedisZipf(Workload):
    """Redis GETs with Zipf-distributed keys (tests/bench/guest/rs-zipf-get): an anonymous set with
    no knee, whose cold keys go to swap."""

    unit = "GET/s"
    VALUE_BYTES = 1000

    def __init__(self, theta=0.99, dataset_share=0.5, mem_mib=1024, smp=1):
        self.theta, self.dataset_share, self.mem_mib, self.smp = theta, dataset_share, mem_mib, smp
        self.name = "redis-zipf" + ("" if mem_mib == 1024 and smp == 1 else f"-{mem_mib // 1024}g{smp}c")

    def definition(self):
        return dict(super().definition(), theta=self.theta, dataset_share=self.dataset_share,
                    value_bytes=self.VALUE_BYTES, client=_file_hash(os.path.join(GUEST_SCRIPTS, "rs-zipf-get")))

    def prepare(self, g):
        import importlib.machinery
        import importlib.util
        loader = importlib.machinery.SourceFileLoader("bench_redis", os.path.join(os.path.dirname(__file__),
                                                                                   "bench-redis"))
        spec = importlib.util.spec_from_loader("bench_redis", loader)
        br = importlib.util.module_from_spec(spec)
        loader.exec_module(br)
        g.must(["systemctl", "stop", "postgresql"])
        g.must(["redis-cli", "config", "set", "save", ""])
        g.must(["redis-cli", "flushall"])
        target = self.dataset_share * g.mem_mib * bl.MIB
        keys = 0
        while int(br.redis_info(g, "memory")["used_memory"]) < target:
            g.must(["redis-cli", "eval", br.FILL_LUA, "0", str(keys), str(keys + br.FILL_BATCH - 1),
                    str(self.VALUE_BYTES)])
            keys += br.FILL_BATCH
        self.keys = keys
        install_script(g, "rs-zipf-get")
        used = int(br.redis_info(g, "memory")["used_memory"]) / bl.MIB
        return {"keys": keys, "used_mib": round(used)}

    def start(self, g):
        start_unit(g, "rs-load", f"exec rs-zipf-get {self.keys} {self.theta}")

    def describe(self):
        return (f"Redis filled to {self.dataset_share:.0%} of the guest's RAM with {self.VALUE_BYTES}-byte values, "
                f"then GETs one at a time with Zipf-distributed keys (θ {self.theta}, `tests/bench/guest/rs-zipf-get`)")


class SysbenchOltp(Workload):
    """sysbench OLTP on PostgreSQL 15, tables about twice the guest's RAM, sysbench's default
    skewed row choice (`special`): a database whose hot rows are a fraction of its pages."""

    unit = "transactions/s"
    ROW_BYTES = 240             # a sysbench row with its share of the primary key and k index, in PostgreSQL
    TABLES = 4
    SAMPLE_RE = re.compile(r"\[ *\d+s \] thds: \d+ tps: ([\d.]+) .*lat \(ms,99%\): ([\d.]+)")

    def __init__(self, mode, mem_mib=1024, smp=1, table_share=2.0):
        self.mode, self.mem_mib, self.smp, self.table_share = mode, mem_mib, smp, table_share
        self.name = f"sysbench-{mode}" + ("" if mem_mib == 1024 and smp == 1 else f"-{mem_mib // 1024}g{smp}c")
        self.table_size = int(mem_mib * bl.MIB * table_share / self.ROW_BYTES / self.TABLES)

    def definition(self):
        return dict(super().definition(), mode=self.mode, tables=self.TABLES, table_size=self.table_size)

    def _args(self):
        return (f"--db-driver=pgsql --pgsql-host=/var/run/postgresql --pgsql-user=postgres --pgsql-db=postgres "
                f"--tables={self.TABLES} --table-size={self.table_size}")

    DATA_ON_DISK = True

    def data_definition(self):
        return {"sysbench-tables": self.TABLES, "table_size": self.table_size}

    def prepare_data(self, g):
        # sysbench's own prepare sends every row from the client: hours under TCG for tables twice
        # the guest's RAM.  The same tables (oltp_common.lua's schema: id, k, c CHAR(120), pad
        # CHAR(60); k random in [1, table_size]; the secondary index on k) generated in the server.
        for t in range(1, self.TABLES + 1):
            sql = (f"CREATE TABLE sbtest{t} (id SERIAL PRIMARY KEY, k INTEGER DEFAULT 0 NOT NULL, "
                   "c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL); "
                   f"INSERT INTO sbtest{t} (k, c, pad) SELECT 1 + (random() * {self.table_size - 1})::int, "
                   "substr(repeat(md5(i::text), 4), 1, 119), substr(repeat(md5((i + 1)::text), 2), 1, 59) "
                   f"FROM generate_series(1, {self.table_size}) AS i; CREATE INDEX k_{t} ON sbtest{t}(k);")
            # One -c is one transaction, and VACUUM cannot run inside one: its own -c.
            g.must(["runuser", "-u", "postgres", "--", "psql", "-q", "-v", "ON_ERROR_STOP=1", "-c", sql,
                    "-c", f"VACUUM ANALYZE sbtest{t}"], timeout=7200)
        db_mib = int(g.must(["du", "-sm", "/var/lib/postgresql/15/main/base"]).split()[0])
        return {"db_mib": db_mib, "rows": self.table_size * self.TABLES}

    def prepare(self, g):
        g.must(["systemctl", "stop", "redis-server"])
        return {}

    def start(self, g):
        script = "oltp_read_only" if self.mode == "ro" else "oltp_read_write"
        g.must(["systemd-run", "--unit", "rs-load", "--uid", "postgres", "-p", "StandardOutput=file:/dev/ttyS0",
                "-p", "StandardError=file:/dev/ttyS0", "-p", "WorkingDirectory=/var/tmp", "sh", "-c",
                f"exec sysbench {script} {self._args()} --threads=1 --time=0 --report-interval=1 "
                "--percentile=99 --rand-type=special run"])

    def parse_sample(self, line):
        m = self.SAMPLE_RE.search(line)
        if not m:
            return None
        # tps over one second: the transactions of that second, to the hundredth.
        return float(m[1]), 1000, float(m[2])

    def describe(self):
        script = "oltp_read_only" if self.mode == "ro" else "oltp_read_write"
        return (f"`sysbench {script}` on PostgreSQL 15, {self.TABLES} tables of {self.table_size} rows "
                f"(about {self.table_share:.0f}x the guest's RAM), one thread, sysbench's skewed `special` row choice")


class Compile(Workload):
    """`make -j` of a C project in the guest, over and over (Debian's own grep, configured when the
    image was built): a set that rises and falls with each compiler process and the headers it
    reads.  Each compiler run prints its time; the throughput is compile work done per second,
    each file counted at its median time at full size (so a window is judged by what it compiled,
    not by which files fell in it)."""

    unit = "full-size compile-seconds/s"
    rate_by_wall = True
    # A window sees a few files (2-20 s each under TCG): longer windows and settles.
    CONFIG = {"window_s": 60, "settle_s": 60}
    SAMPLE_RE = re.compile(r"rs-cc (\S+) (\d+)")

    def __init__(self, mem_mib=1024, smp=1, jobs=2):
        self.mem_mib, self.smp, self.jobs = mem_mib, smp, jobs
        self.name = "compile" + ("" if mem_mib == 1024 and smp == 1 else f"-{mem_mib // 1024}g{smp}c")
        self.reference = {}     # file -> its median compile ms at full size

    def definition(self):
        return dict(super().definition(), jobs=self.jobs, project="grep (Debian bookworm source)", cflags="-O0")

    def prepare(self, g):
        g.must(["systemctl", "stop", "postgresql", "redis-server"])
        wrapper = ('#!/bin/sh\nt0=$(date +%s%N)\n"$@"\nrc=$?\nt1=$(date +%s%N)\nout=link\n'
                   'while [ $# -gt 0 ]; do [ "$1" = -o ] && out=$2; shift; done\n'
                   'echo "rs-cc $out $(( (t1 - t0) / 1000000 ))"\nexit $rc\n')
        g.must(["sh", "-c", f"printf '%s' '{wrapper}' > /usr/local/bin/rs-timecc && chmod 755 /usr/local/bin/rs-timecc"])
        files = g.must(["sh", "-c", "ls /usr/src/rs-compile/tree/src/*.c /usr/src/rs-compile/tree/lib/*.c | wc -l"])
        return {"c_files": int(files)}

    def start(self, g):
        # rs-timecc's line goes to make's stdout, the console; make's own chatter is silenced (-s).
        # -O0: at configure's -O2 a build of its 171 files takes 14 minutes under TCG, longer than a
        # part can watch; a debug build keeps the compiler's processes and the headers' page cache.
        cc = f"make -s -j{self.jobs} CC='rs-timecc gcc' CFLAGS=-O0"
        start_unit(g, "rs-load", "cd /usr/src/rs-compile/tree && while :; do make -s -C src clean; make -s -C lib clean; "
                   "echo 'rs-cc build-start 0'; "
                   f"{cc} -C lib 2>/dev/null; {cc} -C src 2>/dev/null; done")

    def parse_sample(self, line):
        m = self.SAMPLE_RE.search(line)
        return (m[1], int(m[2]), None) if m else None

    def figures(self, samples, t0, t1):
        as_work = [(t, self.reference[name] / 1000 if name in self.reference else None, ms, p)
                   for t, name, ms, p in samples]
        return throughput(as_work, t0, t1, by_wall=True)

    def warm_up(self, g, twin, window_s=30, tolerance=0.05, timeout_s=3600):
        """Each file's reference time is its median at full size over the first whole build of
        each guest: a weight, so a window is judged by what it compiled; the twin's ratio in the
        same window cancels what the first build's cold cache adds.  A build takes minutes under
        TCG (2-20 s a file)."""
        deadline = time.monotonic() + timeout_s
        guests = [x for x in (g, twin) if x]
        while time.monotonic() < deadline:
            builds = {x.label: self._builds(x) for x in guests}
            # [before the first marker, build 1, build 2 under way]
            if all(len(b) >= 3 for b in builds.values()):
                times = {}
                for b in builds.values():
                    for name, ms in b[1]:
                        times.setdefault(name, []).append(ms)
                self.reference = {k: statistics.median(v) for k, v in times.items()}
                bl.log(f"compile: reference from the first build: {len(self.reference)} files, "
                       f"{sum(self.reference.values()) / 1000:.0f} compile-seconds a build")
                return
            time.sleep(10)
        raise bl.HarnessError(f"compile: no whole build in {timeout_s} s")

    @staticmethod
    def _builds(x):
        """x's samples cut into builds at the marker the load prints before each one; the first
        list is what came before the first marker."""
        builds = [[]]
        for _, name, ms, _ in x.samples:
            if name == "build-start":
                builds.append([])
            else:
                builds[-1].append((name, ms))
        return builds

    def describe(self):
        return (f"`make -s -j{self.jobs} CFLAGS=-O0` of Debian bookworm's grep source, 171 files (configured when "
                "the image was built; `make clean` between builds), each compiler run timed")


class Pgbench(Workload):
    """pgbench on PostgreSQL 15 (the application parts' database, bench-pgbench), judged by its
    TPS: `-S` (read-only, one indexed SELECT a transaction) or the built-in TPC-B-like script
    (read-write, WAL and checkpoints beside the set).  pgbench's progress line has no percentile,
    so this part is judged by throughput alone."""

    unit = "TPS"
    SAMPLE_RE = re.compile(r"progress: [\d.]+ s, ([\d.]+) tps")

    def __init__(self, mode, scale=16, mem_mib=1024, smp=1):
        self.mode, self.scale, self.mem_mib, self.smp = mode, scale, mem_mib, smp
        self.name = ("pgbench-s" if mode == "select" else "tpcb") + (
            "" if mem_mib == 1024 and smp == 1 else f"-{mem_mib // 1024}g{smp}c")

    def definition(self):
        return dict(super().definition(), mode=self.mode, scale=self.scale)

    DATA_ON_DISK = True

    def data_definition(self):
        return {"pgbench-scale": self.scale}

    def prepare_data(self, g):
        g.must(["runuser", "-u", "postgres", "--", "pgbench", "-i", "-q", "-s", str(self.scale)], timeout=3600)
        return {"db_mib": int(g.must(["du", "-sm", "/var/lib/postgresql/15/main/base"]).split()[0])}

    def prepare(self, g):
        g.must(["systemctl", "stop", "redis-server"])
        self.rewarm(g)
        return {}

    def rewarm(self, g):
        # Twice: the database's pages on the active list, as a database long in service has them.
        g.must(["sh", "-c", "for i in 1 2; do cat /var/lib/postgresql/15/main/base/*/* > /dev/null; done"])

    def start(self, g):
        script = ["-S"] if self.mode == "select" else []
        g.must(["systemd-run", "--unit", "rs-load", "--uid", "postgres", "-p", "StandardOutput=file:/dev/ttyS0",
                "-p", "StandardError=file:/dev/ttyS0", "-p", "WorkingDirectory=/var/tmp",
                "pgbench", *script, "-c", "1", "-T", "86400", "-P", "1"])

    def parse_sample(self, line):
        m = self.SAMPLE_RE.search(line)
        return (float(m[1]), 1000, None) if m else None

    def describe(self):
        what = "`-S` (read-only)" if self.mode == "select" else "the TPC-B-like script (read-write)"
        return f"pgbench {what}, scale {self.scale}, one client, on PostgreSQL 15"


class RedisUniform(RedisZipf):
    """bench-redis's load judged by throughput: GETs drawn uniformly from the first quarter of
    the keys (the rest never read again), one at a time through rs-zipf-get with θ 0."""

    def __init__(self, mem_mib=1024, smp=1, dataset_share=0.4, hot_share=0.25):
        super().__init__(theta=0.0, dataset_share=dataset_share, mem_mib=mem_mib, smp=smp)
        self.hot_share = hot_share
        self.name = "redis-uniform" + ("" if mem_mib == 1024 and smp == 1 else f"-{mem_mib // 1024}g{smp}c")

    def definition(self):
        return dict(super().definition(), hot_share=self.hot_share)

    def start(self, g):
        start_unit(g, "rs-load", f"exec rs-zipf-get {self.keys} 0 1 {int(self.keys * self.hot_share)}")

    def describe(self):
        return (f"Redis filled to {self.dataset_share:.0%} of the guest's RAM, GETs one at a time drawn uniformly "
                f"from the first {self.hot_share:.0%} of the keys")


DATA_CACHE = os.path.join(dl.IMAGE_DIR, "data-cache")


def data_disk(wl, workdir):
    """The workload's prepared data disk: made once for its data definition and this image
    (prepare_data in a guest of its own, shut down cleanly) and kept in DATA_CACHE.  Returns
    (path, what prepare_data said), or (None, {}) for a workload with nothing on disk."""
    if not wl.DATA_ON_DISK:
        return None, {}
    key = hashlib.sha256(json.dumps({"data": wl.data_definition(), "image": image_stamp()},
                                    sort_keys=True).encode()).hexdigest()[:16]
    path = os.path.join(DATA_CACHE, f"{key}.qcow2")
    info = path + ".json"
    if os.path.exists(path) and os.path.exists(info):
        with open(info) as f:
            return path, json.load(f)
    os.makedirs(DATA_CACHE, exist_ok=True)
    tmp = os.path.join(DATA_CACHE, f"{key}.tmp.qcow2")
    for f in (tmp, tmp + ".base-stamp"):
        if os.path.exists(f):
            os.unlink(f)
    g = AppGuest(os.path.join(workdir, "prepare"), wl.mem_mib, wl, label="prepare")
    g.BOOT_ARGS = wl.boot_args() + ["--data-image", tmp]
    t0 = time.monotonic()
    g.boot()
    try:
        made = wl.prepare_data(g)
    finally:
        g.stop()
    made["prepared_s"] = round(time.monotonic() - t0)
    bl.log(f"{wl.name}: data disk prepared in {made['prepared_s']} s: {made}")
    os.replace(tmp + ".base-stamp", path + ".base-stamp")
    os.replace(tmp, path)
    with open(info, "w") as f:
        json.dump(made, f)
    return path, made


def data_overlay(path, rundir):
    """A copy-on-write overlay of the cached data disk in rundir, for boot-distro-guest's
    --data-image (which checks the base image's stamp beside it)."""
    import shutil
    import subprocess
    os.makedirs(rundir, exist_ok=True)
    overlay = os.path.join(rundir, "data-run.qcow2")
    for f in (overlay, overlay + ".base-stamp"):
        if os.path.exists(f):
            os.unlink(f)
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-F", "qcow2", "-b", path, overlay], check=True)
    shutil.copy(path + ".base-stamp", overlay + ".base-stamp")
    return overlay


def _file_hash(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()[:12]


WORKLOADS = {w.name: w for w in (Pgbench("select"), Pgbench("tpcb"), RedisUniform(), FioZipf(0.9), FioZipf(1.2),
                                 RedisZipf(), SysbenchOltp("ro"), SysbenchOltp("rw"), Compile(),
                                 FioZipf(0.9, mem_mib=4096, smp=2))}


# ---- the oracle: the smallest size whose throughput holds -------------------------------------

# name: the oracle's resolution, how long a size is held before it is measured, a window, the
# fewest and most windows at one size, the lowest size tried; the calibration's windows; the
# managed run's length and how many times it runs.
CONFIGS = {
    "smoke": dict(step_mib=32, settle_s=30, window_s=20, min_windows=2, max_windows=4, floor_mib=192,
                  calib_windows=3, managed_s=300, reps=1),
    "full": dict(step_mib=32, settle_s=30, window_s=20, min_windows=2, max_windows=6, floor_mib=192,
                 calib_windows=4, managed_s=360, reps=3),
}
# Student's t at 90 % two-sided for n - 1 degrees of freedom: a verdict is stable when the
# windows' mean ratio lies further from the bar than this many standard errors.
T90 = {1: 6.31, 2: 2.92, 3: 2.35, 4: 2.13, 5: 2.02, 6: 1.94, 7: 1.89, 8: 1.86, 9: 1.83}


def pair_window(g, twin, window_s, reference):
    """One window of g (and its twin, beside it at full size): g's throughput and p99 as ratios to
    the twin's in the same window divided by reference (the pair's at full size), or to reference's
    own figures when there is no twin; the refault and swap-in rates of g in it."""
    t0 = time.monotonic()
    time.sleep(window_s)
    t1 = time.monotonic()
    dl.check_alive(g)
    wg = dl.window(g, t0, t1)
    out = {"rate": wg["rate"], "p99_ms": wg["p99_ms"], "refaults_per_s": wg["refaults_per_s"],
           "swapins_per_s": wg["swapins_per_s"], "samples": wg["samples"]}
    if twin:
        wt = dl.window(twin, t0, t1)
        out["twin_rate"], out["twin_p99_ms"] = wt["rate"], wt["p99_ms"]
        raw = wg["rate"] / wt["rate"] if wg["rate"] and wt["rate"] else None
        raw_p99 = wg["p99_ms"] / wt["p99_ms"] if wg["p99_ms"] and wt["p99_ms"] else None
    else:
        raw, raw_p99 = wg["rate"], wg["p99_ms"]
    out["raw_ratio"], out["raw_p99_ratio"] = raw, raw_p99
    if reference:
        out["ratio"] = raw / reference["raw_ratio"] if raw and reference.get("raw_ratio") else None
        out["p99_ratio"] = (raw_p99 / reference["raw_p99_ratio"]
                            if raw_p99 and reference.get("raw_p99_ratio") else None)
    return out


def calibrate(g, twin, cfg):
    """The pair at full size, neither squeezed: the reference every window is divided by (with a
    twin, the guest's throughput over the twin's; without, the guest's own), and its spread from
    window to window, the noise any verdict has to clear."""
    ws = [pair_window(g, twin, cfg["window_s"], None) for _ in range(cfg["calib_windows"])]
    raws = [w["raw_ratio"] for w in ws if w["raw_ratio"]]
    p99s = [w["raw_p99_ratio"] for w in ws if w["raw_p99_ratio"]]
    if not raws:
        raise bl.HarnessError(f"{g.label}: no throughput at full size in {len(ws)} windows")
    ref = {"raw_ratio": statistics.mean(raws), "raw_p99_ratio": statistics.mean(p99s) if p99s else None,
           "windows": ws}
    ref["spread"] = [min(raws) / ref["raw_ratio"], max(raws) / ref["raw_ratio"]]
    rates = [(w["refaults_per_s"] or 0) + (w["swapins_per_s"] or 0) for w in ws]
    g.refault_floor = statistics.mean(rates)
    bl.log(f"{g.label}: calibration at full size: ratio {ref['raw_ratio']:.3f} "
           f"({ref['spread'][0]:.3f}-{ref['spread'][1]:.3f}), p99 ratio {bl.fmt(ref['raw_p99_ratio'], '{:.3f}')}, "
           f"refaults + swap-ins {g.refault_floor:.0f}/s")
    return ref


def judge(g, twin, size, cfg, reference, going_up):
    """Holds g at size for the settle, then measures windows until the throughput verdict is
    stable (the mean ratio further from OK_THROUGHPUT than T90 standard errors) or max_windows.
    Returns the step: the windows, the means, and whether the size is enough."""
    reach = g.set_balloon(size)
    if going_up:
        g.workload.rewarm(g)
    time.sleep(cfg["settle_s"])
    ws = []
    stable = False
    while len(ws) < cfg["max_windows"]:
        ws.append(pair_window(g, twin, cfg["window_s"], reference))
        r = [w["ratio"] for w in ws if w["ratio"] is not None]
        if len(r) >= cfg["min_windows"]:
            mean = statistics.mean(r)
            se = statistics.stdev(r) / math.sqrt(len(r)) if len(r) > 1 else float("inf")
            if abs(mean - OK_THROUGHPUT) > T90.get(len(r) - 1, 1.8) * se:
                stable = True
                break
    r = [w["ratio"] for w in ws if w["ratio"] is not None]
    p = [w["p99_ratio"] for w in ws if w["p99_ratio"] is not None]
    mean_r = statistics.mean(r) if r else 0.0
    mean_p = statistics.mean(p) if p else None
    rates = [(w["refaults_per_s"] or 0) + (w["swapins_per_s"] or 0) for w in ws]
    step = {"size": size, "reach_s": reach, "windows": ws, "ratio": mean_r, "p99_ratio": mean_p,
            "stable": stable, "refaults_swapins_per_s": statistics.mean(rates),
            "ok": mean_r >= OK_THROUGHPUT and (mean_p is None or mean_p <= OK_P99)}
    step["refault_ok"] = step["refaults_swapins_per_s"] <= g.limit()
    bl.log(f"oracle: {g.label} {size} MiB: throughput {mean_r:.3f}, p99 {bl.fmt(mean_p, '{:.3f}')} of full size "
           f"({len(ws)} windows{'' if stable else ', not stable'}), {step['refaults_swapins_per_s']:.0f} refaults + "
           f"swap-ins/s: {'enough' if step['ok'] else 'too small'}")
    return step


def throughput_oracle(g, twin, cfg, reference):
    """Bisects from the full size down: sizes full - 2 steps, - 4, - 8, ... until one is too small
    (or the floor), then halves the bracket between the last size that was enough and the first
    that was not until it is one step wide.  Returns {"oracle_mib", "steps", "refault_rule_mib"}."""
    step_mib, full = cfg["step_mib"], g.mem_mib
    steps, bracket = [], {"good": full, "bad": None}

    def visit(size):
        """Judges size (going up from the last one visited: the load is warmed again first) and
        narrows the bracket; whether it was enough."""
        st = judge(g, twin, size, cfg, reference, bool(steps) and size > steps[-1]["size"])
        steps.append(st)
        bracket["good" if st["ok"] else "bad"] = size
        return st["ok"]
    d = 2 * step_mib
    while bracket["bad"] is None and full - d >= cfg["floor_mib"]:
        if visit(full - d):
            d *= 2
    while bracket["bad"] is not None and bracket["good"] - bracket["bad"] > step_mib:
        size = int((bracket["good"] + bracket["bad"]) / 2 // step_mib * step_mib)
        if not bracket["bad"] < size < bracket["good"]:
            break
        visit(size)
    good, bad = bracket["good"], bracket["bad"]
    # The refault rule on the same windows: the smallest visited size clean by it with no visited
    # size above it failing.
    visited = sorted(steps, key=lambda s: -s["size"])
    rule = full
    for st in visited:
        if not st["refault_ok"]:
            break
        rule = st["size"]
    # Full size again, after the squeezes: under TCG a balloon squeeze splits the host's huge pages
    # under the guest's RAM and leaves it slower at any size until they are collapsed again
    # (../shared/guest-lab.md, 2026-12-06). A full size that no longer reaches the calibration
    # says how much of every verdict above is the squeeze's lasting cost rather than the size's.
    after = judge(g, twin, full, cfg, reference, True)
    bl.log(f"oracle: {g.label}: full size again, after the bisection: throughput {after['ratio']:.3f} of the "
           "calibration's")
    return {"oracle_mib": good, "floor_reached": bad is None, "steps": steps, "refault_rule_mib": rule,
            "refault_limit": g.limit(), "full_after": after}


def image_stamp():
    try:
        with open(os.path.join(dl.IMAGE_DIR, "stamp")) as f:
            return f.read().strip()
    except OSError:
        return "?"


def oracle_cache_key(workload, cfg):
    what = {"workload": workload.definition(), "image": image_stamp(), "method": ORACLE_METHOD,
            "oracle": {k: cfg[k] for k in ("step_mib", "settle_s", "window_s", "min_windows", "max_windows",
                                            "floor_mib", "calib_windows")}}
    return hashlib.sha256(json.dumps(what, sort_keys=True).encode()).hexdigest()[:16]


def oracle_cache_path(outdir):
    return os.path.join(outdir, "app-oracle-cache.json")


def cached_oracle(outdir, key):
    try:
        with open(oracle_cache_path(outdir)) as f:
            return json.load(f).get(key)
    except (OSError, ValueError):
        return None


def save_oracle(outdir, key, result):
    path = oracle_cache_path(outdir)
    try:
        with open(path) as f:
            cache = json.load(f)
    except (OSError, ValueError):
        cache = {}
    cache[key] = result
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(cache, f, indent=1)
    os.replace(tmp, path)
