# SPDX-License-Identifier: LGPL-2.1-or-later
"""The distro guest as a libvirt domain (issue 15), for the parts whose managed guest rightsized
reaches through its libvirt backend: Libvirtd, the test libvirtd of contrib/libvirt-setup;
LibvirtDistroGuest, a DistroGuest defined by contrib/guest-domain-xml --distro-image-dir and
reached through virsh (QMP with qemu-monitor-command, the agent with qemu-agent-command: libvirt
serialises agent commands, so the harness and rightsized share the agent), whose rightsized()
gives distrolib.managed a daemon with its libvirt backend on."""

import json
import os
import subprocess
import time

import benchlib as bl
import distrolib as dl

URI = "qemu:///system"      # contrib/libvirt-setup's, as tests/integration use it (LIBVIRT_TEST_URI)
LIBVIRT_SETUP = os.path.join(bl.TOP_SRCDIR, "contrib", "libvirt-setup")
DOMAIN_XML = os.path.join(bl.TOP_SRCDIR, "contrib", "guest-domain-xml")
BOOT_TIMEOUT_S = 300        # boot-distro-guest's default --timeout
AGENT_CALL_S = 30           # one agent command's timeout, as DistroGuest.run's agent socket


def virsh(*args, timeout=120):
    """virsh on URI: its stdout, or GuestError (as guest-ctl's clients raise) with its stderr."""
    try:
        out = subprocess.run(["virsh", "-q", "-c", URI, *args], capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise dl.guest_ctl.GuestError(f"virsh {args[0]}: no answer in {timeout} s") from e
    if out.returncode != 0:
        raise dl.guest_ctl.GuestError(f"virsh {args[0]}: {out.stderr.strip()[-1000:]}")
    return out.stdout


def tail(path, n):
    """The last n lines of a log ("" when there is none)."""
    try:
        with open(path, errors="replace") as f:
            return "\n".join(f.read().replace("\r", "").splitlines()[-n:])
    except OSError:
        return ""


class Libvirtd:
    """The libvirtd that contrib/libvirt-setup starts (it needs RIGHTSIZE_TEST_SYSTEM_CHANGES=1 or
    CI=true, and says so).  It sits in benchlib's list of what to stop at exit or on a signal, and
    its stop() stops its guests' domains before libvirtd, whatever that list's order: a domain left
    behind would keep its QEMU running with no libvirtd to destroy it."""

    def __init__(self):
        self.guests = []

    def start(self):
        bl._guests.append(self)
        out = subprocess.run([LIBVIRT_SETUP], capture_output=True, text=True)
        if out.returncode != 0:
            raise bl.HarnessError(f"contrib/libvirt-setup failed:\n{out.stderr[-3000:]}")

    def stop(self):
        for g in list(self.guests):
            g.stop()
        if self in bl._guests:
            subprocess.run([LIBVIRT_SETUP, "--stop"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            bl._guests.remove(self)


class LibvirtDistroGuest(dl.DistroGuest):
    """A DistroGuest that runs as the libvirt domain `domain` on libvirtd (a started Libvirtd),
    opted in to rightsized's policy file bench.conf (benchlib.Daemon's).  The domain writes its
    console to RUNDIR/console.log, which the inherited thread tails; BOOT_ARGS go to
    guest-domain-xml, which takes boot-distro-guest's --mem, --swap, --append, --smp and
    --vmem-size alike."""

    POLICY = "bench"          # the domain's opt-in: benchlib.Daemon's policies/bench.conf

    def __init__(self, rundir, mem_mib, libvirtd, label=None):
        super().__init__(rundir, mem_mib, label)
        self.libvirtd = libvirtd
        self.domain = f"rightsize-bench-{self.label}-{os.getpid()}"
        self.qemu_log = f"/var/log/libvirt/qemu/{self.domain}.log"     # QEMU's stderr (stdio_handler = "file")
        self.defined = False

    def boot(self):
        os.makedirs(self.rundir, exist_ok=True)
        bl._guests.append(self)
        self.libvirtd.guests.append(self)
        xml = os.path.join(self.rundir, "domain.xml")
        with open(xml, "w") as f:
            out = subprocess.run([DOMAIN_XML, "--name", self.domain, "--distro-image-dir", dl.IMAGE_DIR,
                                  "--run-dir", self.rundir, "--mem", f"{self.mem_mib}M", "--policy", self.POLICY,
                                  *self.BOOT_ARGS], stdout=f, stderr=subprocess.PIPE, text=True)
        if out.returncode != 0:
            raise bl.HarnessError(f"guest-domain-xml failed:\n{out.stderr[-3000:]}")
        try:
            virsh("define", xml)
            self.defined = True
            t0 = time.monotonic()
            virsh("start", self.domain)
            with open(f"/run/libvirt/qemu/{self.domain}.pid") as f:
                self.pid = int(f.read())
            self._wait_ready(t0 + BOOT_TIMEOUT_S)
        except dl.guest_ctl.GuestError as e:
            raise bl.HarnessError(f"{self.domain}: {e}\n--- QEMU's log (tail)\n{tail(self.qemu_log, 20)}\n"
                                  f"--- console.log (tail)\n{tail(os.path.join(self.rundir, 'console.log'), 40)}") from e
        self.boot_s = time.monotonic() - t0
        self.accel = "tcg"      # guest-domain-xml's <domain type='qemu'>
        self.start_console_tail()

    def _wait_ready(self, deadline):
        """boot-distro-guest's two steps: the agent answers, then systemd has finished booting."""
        while True:
            try:
                virsh("qemu-agent-command", self.domain, "--timeout", "2", json.dumps({"execute": "guest-ping"}))
                break
            except dl.guest_ctl.GuestError as e:
                if not os.path.exists(f"/proc/{self.pid}"):
                    raise dl.guest_ctl.GuestError("QEMU exited before the guest agent answered") from e
                if time.monotonic() > deadline:
                    raise dl.guest_ctl.GuestError(f"the guest agent did not answer within {BOOT_TIMEOUT_S} s") from e
            time.sleep(0.5)
        _, out, _ = self.run(["systemctl", "is-system-running", "--wait"], max(1, deadline - time.monotonic()))
        state = (out.strip().splitlines() or [""])[-1]
        if state == "degraded":
            bl.log(f"{self.label}: warning: the guest is degraded; failed units:\n"
                   + self.run(["systemctl", "--failed", "--no-legend", "--plain"])[1])
        elif state != "running":
            raise dl.guest_ctl.GuestError(f"systemctl is-system-running says '{state or 'nothing'}'")

    def qmp(self, name, arguments=None):
        msg = {"execute": name}
        if arguments is not None:
            msg["arguments"] = arguments
        reply = json.loads(virsh("qemu-monitor-command", self.domain, "--pretty", json.dumps(msg)))
        return dl.guest_ctl.result(reply, name)

    def _agent(self, name, arguments):
        reply = virsh("qemu-agent-command", self.domain, "--timeout", str(AGENT_CALL_S),
                      json.dumps({"execute": name, "arguments": arguments}), timeout=AGENT_CALL_S + 30)
        return dl.guest_ctl.result(json.loads(reply), name)

    def run(self, argv, timeout=600):
        """Runs argv in the guest through the agent; (exit code, stdout, stderr)."""
        pid = self._agent("guest-exec", {"path": argv[0], "arg": argv[1:], "capture-output": True})["pid"]
        deadline = time.monotonic() + timeout
        # Each poll is a virsh process and a libvirtd call: back off to 1 s on a long job.
        pause = 0.05
        while True:
            st = self._agent("guest-exec-status", {"pid": pid})
            if st.get("exited"):
                break
            if time.monotonic() > deadline:
                raise dl.guest_ctl.GuestError(f"{argv[0]}: still running after {timeout} s")
            time.sleep(pause)
            pause = min(1.0, pause * 2)
        return dl.exec_result(st)

    def rightsized(self, workdir):
        """rightsized with its libvirt backend on and no QMP sockets, this domain the only one it
        may take (others on that libvirtd may opt in too); distrolib.managed runs it."""
        d = bl.Daemon(os.path.join(workdir, "daemon"), [], libvirt_uri=URI)
        with open(d.config, "a") as f:
            f.write(f"[guests]\nmanage = {self.domain}\n")
        return d, self.domain

    def stop(self):
        self._stop.set()
        if self.defined:
            for command in ("destroy", "undefine"):
                try:
                    virsh(command, self.domain)
                except dl.guest_ctl.GuestError:
                    pass        # not running (destroy), or libvirtd gone
            self.defined = False
        for disk in ("root.qcow2", "data.qcow2", "swap.img"):
            try:
                os.remove(os.path.join(self.rundir, disk))
            except FileNotFoundError:
                pass
        if self in bl._guests:
            bl._guests.remove(self)
        if self in self.libvirtd.guests:
            self.libvirtd.guests.remove(self)
