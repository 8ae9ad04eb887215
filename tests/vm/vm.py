#!/usr/bin/python3
"""The test VM: Debian 12 under qemu on a pure cgroup v2 hierarchy (tests/vm/build-image.sh).

A small API for tests that need a real systemd on a real cgroup v2 kernel (this host is v1):

    from vm import Vm
    with Vm(shares={"src": "/path/on/host"}) as vm:   # restores the saved booted state
        vm.mount_shares()                              # each share at its host path
        port = vm.forward(8000)                        # 127.0.0.1:port on the host -> guest 8000
        print(vm.ssh("systemctl is-system-running").stdout)
        vm.ssh("id", user="tester")

Booting: the cached disk (build-image.sh) is never written; every VM runs on a throw-away qcow2
overlay. The first boot with a given image and qemu setup is cold (~1 min under emulation); it
then saves the booted machine (qemu migration to a file, with the overlay frozen as of that
moment) next to the image, and every later Vm restores that state in seconds instead. The shares
(virtio-9p) are mounted only after a restore, since qemu cannot save a machine with a mounted 9p
share: so the saved state does not depend on what a test shares in. A Recipe derives a second
saved state from the booted one (what a test needs that does not depend on the build, done once),
restored the same way. Networking is qemu's user mode, reachable only through host ports
forwarded on 127.0.0.1.

CLI: vm.py build | vm.py prepare (the image, then the saved state) | vm.py shell [--cold] |
vm.py run CMD...
"""

import argparse
import fcntl
import hashlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BUILD_SCRIPT = os.path.join(HERE, "build-image.sh")
CACHE_DIR = os.environ.get("VM_CACHE_DIR", "/var/cache/code-interpreter/vm")
TEST_USER = "tester"
# Fixed share tags: the set of devices must be the same when the state is saved and restored.
SHARE_TAGS = ("share0", "share1")
STATE_RECIPE = "state-v2"
# The version of how a derived state (Recipe) is made and saved: a change makes every one anew.
DERIVED_RECIPE = "derived-v1"
# Where a Recipe's files are copied in the VM.
RECIPE_DIR = "/var/tmp/ci-recipe"


class VmError(Exception):
    pass


def log(msg):
    print(f"[vm {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def build_image():
    """The directory of the cached image, building it first if needed (minutes, once)."""
    out = subprocess.run([BUILD_SCRIPT], stdout=subprocess.PIPE, text=True, check=True)
    return out.stdout.strip().splitlines()[-1]


def kvm_usable(image_dir):
    """Whether qemu can run this kernel with KVM. /dev/kvm may open, and even run the BIOS, yet
    hang the kernel (as on this project's machines), so the probe boots the image's kernel with
    KVM and waits for its first line on the serial console. The answer is kept per host kernel.
    VM_ACCEL=tcg|kvm skips the probe."""
    if os.environ.get("VM_ACCEL") in ("tcg", "kvm"):
        return os.environ["VM_ACCEL"] == "kvm"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False
    cached = os.path.join(CACHE_DIR, f"kvm-probe-{os.uname().release}")
    if os.path.exists(cached):
        with open(cached) as f:
            return f.read().strip() == "kvm"
    with tempfile.TemporaryDirectory() as tmp:
        console = os.path.join(tmp, "console")
        proc = subprocess.Popen(
            ["qemu-system-x86_64", "-machine", "q35", "-accel", "kvm", "-cpu", "host", "-m", "256",
             "-nographic", "-no-reboot", "-monitor", "none", "-serial", f"file:{console}",
             "-kernel", os.path.join(image_dir, "vmlinuz"), "-append",
             "console=ttyS0 earlyprintk=serial panic=-1"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        works = False
        deadline = time.monotonic() + 15  # a working KVM prints it within a second or two
        while time.monotonic() < deadline and proc.poll() is None and not works:
            time.sleep(0.5)
            with open(console, "rb") if os.path.exists(console) else open(os.devnull, "rb") as f:
                works = b"Linux version" in f.read()
        proc.kill()
        proc.wait()
    with open(cached, "w") as f:
        f.write("kvm\n" if works else "tcg\n")
    log(f"KVM {'works' if works else 'does not boot a kernel here: software emulation (TCG)'}")
    return works


def die_with_parent():
    """In qemu's child before exec: a test that is killed takes its VM with it."""
    import ctypes
    import signal
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Qmp:
    """qemu's machine protocol over its unix socket: one JSON command, one JSON answer."""

    def __init__(self, path, timeout=60):
        deadline = time.monotonic() + timeout
        while True:
            try:
                self.sock = socket.socket(socket.AF_UNIX)
                self.sock.connect(path)
                break
            except OSError:
                self.sock.close()
                if time.monotonic() > deadline:
                    raise VmError(f"qemu's QMP socket {path} did not open")
                time.sleep(0.1)
        self.file = self.sock.makefile("rw")
        self._read()  # the greeting
        self.execute("qmp_capabilities")

    def _read(self):
        while True:
            line = self.file.readline()
            if not line:
                raise VmError("qemu closed its QMP socket")
            msg = json.loads(line)
            if "event" not in msg:
                return msg

    def execute(self, command, **arguments):
        req = {"execute": command}
        if arguments:
            req["arguments"] = arguments
        self.file.write(json.dumps(req) + "\n")
        self.file.flush()
        reply = self._read()
        if "error" in reply:
            raise VmError(f"QMP {command}: {reply['error'].get('desc')}")
        return reply.get("return")

    def hmp(self, command_line, quiet=True):
        """A human-monitor command (hostfwd_add has no QMP form). `quiet`: it prints nothing
        when it works, so any output is its error."""
        out = self.execute("human-monitor-command", **{"command-line": command_line}) or ""
        out = out.strip()
        if quiet and out:
            raise VmError(f"monitor: {command_line}: {out}")
        return out

    def close(self):
        self.sock.close()


class Recipe:
    """What makes a derived saved state from the booted one: `files` (host paths) copied into
    RECIPE_DIR, then `steps`, each (what, user, shell command), run in order over ssh, with no
    share mounted. The state is saved when the last step returns and is keyed by the base
    state's key, DERIVED_RECIPE, `name`, the steps' text and the files' names and contents: a
    change to any of them makes it anew, from the base state, with the steps run again."""

    def __init__(self, name, steps, files=()):
        self.name = name
        self.steps = list(steps)
        self.files = list(files)

    def key(self, base_state_dir):
        h = hashlib.sha256()
        for part in [DERIVED_RECIPE, os.path.basename(base_state_dir), self.name]:
            h.update(part.encode() + b"\0")
        for what, user, command in self.steps:
            h.update(f"{what}\0{user}\0{command}\0".encode())
        for path in self.files:
            with open(path, "rb") as f:
                h.update(os.path.basename(path).encode() + b"\0" + f.read() + b"\0")
        return h.hexdigest()[:16]

    def text(self):
        """The steps as a human reads them (saved beside the state)."""
        return "".join(f"# {what} (as {user})\n{command}\n" for what, user, command in self.steps)


class Vm:
    def __init__(self, shares=None, memory_mb=3072, cpus=2, image_dir=None, cold=False,
                 recipe=None):
        """`shares`: {name: host_path}, at most two, each mounted at its host path in the guest
        by mount_shares(). `cold`: boot from scratch, ignoring (and not saving) a saved state.
        `recipe` (a Recipe): boot from the state it derives from the booted one (made and saved
        first if there is none), not from the booted one."""
        if shares and len(shares) > len(SHARE_TAGS):
            raise VmError(f"at most {len(SHARE_TAGS)} shares")
        self.shares = dict(shares or {})
        self.memory_mb = memory_mb
        self.cpus = cpus
        self.cold = cold
        self.recipe = recipe
        self.image_dir = image_dir or build_image()
        self.workdir = tempfile.mkdtemp(prefix="ci-vm-")
        self.key = os.path.join(self.image_dir, "id_ed25519")
        self.proc = None
        self.qmp = None
        self.ssh_port = None
        self.boot_seconds = None
        self.restored = False

    # -- qemu ----------------------------------------------------------------------------------

    def _qemu_args(self, disk, incoming, share_paths=None):
        accel = "kvm" if kvm_usable(self.image_dir) else "tcg"
        args = [
            "qemu-system-x86_64", "-machine", "q35",
            "-accel", "kvm" if accel == "kvm" else "tcg,thread=multi",
            "-cpu", "host" if accel == "kvm" else "max",
            "-smp", str(self.cpus), "-m", str(self.memory_mb),
            "-nographic", "-no-reboot",
            "-kernel", os.path.join(self.image_dir, "vmlinuz"),
            "-initrd", os.path.join(self.image_dir, "initrd.img"),
            "-append", "root=/dev/vda rw console=ttyS0 cgroup_no_v1=all "
                       "systemd.unified_cgroup_hierarchy=1 panic=-1 net.ifnames=0",
            "-drive", f"file={disk},if=virtio,format=qcow2,cache=unsafe",
            "-netdev", "user,id=net0,net=10.0.2.0/24", "-device", "virtio-net-pci,netdev=net0",
            "-qmp", f"unix:{self.workdir}/qmp.sock,server=on,wait=off",
            "-serial", f"file:{self.workdir}/console.log", "-monitor", "none",
        ]
        for i, tag in enumerate(SHARE_TAGS):
            # An empty directory stands in for an unused share: the devices must not change.
            path = list(self.shares.values())[i] if i < len(self.shares) else self.workdir
            if share_paths is not None:
                path = share_paths
            args += ["-virtfs", f"local,path={path},mount_tag={tag},security_model=none,"
                                f"id={tag}"]
        if incoming:
            args += ["-incoming", "defer"]
        return args, accel

    def _state_dir(self):
        """Where the saved booted state lives: keyed by qemu's version and its machine setup."""
        version = subprocess.run(["qemu-system-x86_64", "--version"], stdout=subprocess.PIPE,
                                 text=True, check=True).stdout.splitlines()[0]
        args, _ = self._qemu_args("DISK", incoming=False, share_paths="SHARE")
        args = [a for a in args if self.workdir not in a]  # per-run paths
        key = hashlib.sha256("\n".join([STATE_RECIPE, version] + args).encode()).hexdigest()
        return os.path.join(self.image_dir, f"state-{key[:16]}")

    def _start(self, disk, incoming):
        args, accel = self._qemu_args(disk, incoming)
        log(f"qemu ({accel}): {'restoring' if incoming else 'cold boot'}")
        with open(os.path.join(self.workdir, "qemu.log"), "w") as qemu_log:
            self.proc = subprocess.Popen(args, stdin=subprocess.DEVNULL,
                                         stdout=subprocess.DEVNULL, stderr=qemu_log,
                                         preexec_fn=die_with_parent)
        self.qmp = Qmp(os.path.join(self.workdir, "qmp.sock"))
        self.ssh_port = free_port()
        self.qmp.hmp(f"hostfwd_add net0 tcp:127.0.0.1:{self.ssh_port}-:22")

    def _overlay(self, backing, path):
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", "-b", backing, "-F", "qcow2",
                        path], check=True)

    def _cold_boot(self, disk):
        start = time.monotonic()
        self._start(disk, incoming=False)
        self.wait_for_ssh(timeout=600)
        # Everything that starts at boot has started: a saved state carries no half-done job.
        self.ssh("systemctl is-system-running --wait || systemctl --failed --no-legend; true",
                 timeout=300)
        return time.monotonic() - start

    def _freeze(self, tmp):
        """Saves the running machine's memory to tmp/memory (its disk overlay, in tmp, is then
        never written again) and stops qemu."""
        self.ssh("sync")
        self.qmp.hmp(f"hostfwd_remove net0 tcp:127.0.0.1:{self.ssh_port}", quiet=False)
        self.qmp.execute("stop")
        self.qmp.execute("migrate", uri=f"exec:cat > {tmp}/memory")
        while True:
            status = self.qmp.execute("query-migrate").get("status")
            if status == "completed":
                break
            if status in ("failed", "cancelled"):
                raise VmError(f"saving the VM state: migration {status}")
            time.sleep(0.2)
        self._kill()

    def _save_state(self, state_dir):
        """Cold-boots on a frozen overlay and saves the running machine next to it."""
        for stale in os.listdir(self.image_dir):  # what an interrupted save left
            if stale.startswith("state."):
                shutil.rmtree(os.path.join(self.image_dir, stale), ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix="state.", dir=self.image_dir)
        disk = os.path.join(tmp, "booted.qcow2")
        self._overlay(os.path.join(self.image_dir, "disk.qcow2"), disk)
        seconds = self._cold_boot(disk)
        log(f"cold boot took {seconds:.1f} s; saving the booted state")
        self._freeze(tmp)
        with open(os.path.join(tmp, "cold-boot-seconds"), "w") as f:
            f.write(f"{seconds:.1f}\n")
        os.rename(tmp, state_dir)

    def _save_derived(self, base_dir, state_dir):
        """Restores the booted state on a new overlay, runs the recipe and saves the machine."""
        recipe = self.recipe
        prefix = f"derived.{recipe.name}."
        for stale in os.listdir(self.image_dir):  # what an interrupted save left
            if stale.startswith(prefix):
                shutil.rmtree(os.path.join(self.image_dir, stale), ignore_errors=True)
        tmp = tempfile.mkdtemp(prefix=prefix, dir=self.image_dir)
        try:
            start = time.monotonic()
            disk = os.path.join(tmp, "booted.qcow2")
            self._overlay(os.path.join(base_dir, "booted.qcow2"), disk)
            self._restore(base_dir, disk)
            log(f"making the derived state {os.path.basename(state_dir)}")
            if recipe.files:
                self.ssh(f"rm -rf {RECIPE_DIR} && mkdir -m 755 {RECIPE_DIR}")
                for path in recipe.files:
                    self.copy_in(path, f"{RECIPE_DIR}/")
                self.ssh(f"chmod -R a+rX {RECIPE_DIR}")
            for what, user, command in recipe.steps:
                step = time.monotonic()
                self.ssh(command, user=user, timeout=900)
                log(f"{what}: {time.monotonic() - step:.1f} s")
            # What the steps read stays out of the saved memory: a smaller file, a faster restore.
            self.ssh("sync && echo 3 >/proc/sys/vm/drop_caches")
            seconds = time.monotonic() - start
            self._freeze(tmp)
            with open(os.path.join(tmp, "recipe.txt"), "w") as f:
                f.write(recipe.text())
            with open(os.path.join(tmp, "made-seconds"), "w") as f:
                f.write(f"{seconds:.1f}\n")
            os.rename(tmp, state_dir)
            log(f"derived state made in {seconds:.1f} s")
        except BaseException:
            self._kill()
            shutil.rmtree(tmp, ignore_errors=True)
            raise

    def ensure_state(self):
        """The saved booted state's directory, cold-booting to save it first if there is none;
        with a recipe, the derived state's, made first from the booted one if there is none."""
        if self.recipe:
            # Its own lock, taken before the booted state's: making it (minutes) does not hold
            # up those who restore the booted state, and two makers of the same one never race.
            lock_path = os.path.join(self.image_dir, f".derived-{self.recipe.name}.lock")
            with open(lock_path, "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                base_dir = self._ensure_base_state()
                state_dir = os.path.join(
                    self.image_dir, f"derived-{self.recipe.name}-{self.recipe.key(base_dir)}")
                if not os.path.isdir(state_dir):
                    self._save_derived(base_dir, state_dir)
            return state_dir
        return self._ensure_base_state()

    def _ensure_base_state(self):
        state_dir = self._state_dir()
        with open(os.path.join(self.image_dir, ".state.lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # one saves, the others wait and restore
            if not os.path.isdir(state_dir):
                self._save_state(state_dir)
        return state_dir

    def boot(self):
        """Starts the VM and returns once ssh answers: restored from the saved state, or cold."""
        try:
            return self._boot()
        except BaseException:
            self.shutdown()
            raise

    def _boot(self):
        start = time.monotonic()
        disk = os.path.join(self.workdir, "disk.qcow2")
        if self.cold:
            self._overlay(os.path.join(self.image_dir, "disk.qcow2"), disk)
            self._cold_boot(disk)
        else:
            state_dir = self.ensure_state()
            self._overlay(os.path.join(state_dir, "booted.qcow2"), disk)
            self._restore(state_dir, disk)
            self.restored = True
        self.boot_seconds = time.monotonic() - start
        log(f"VM up in {self.boot_seconds:.1f} s ({'restored' if self.restored else 'cold'})")
        return self

    def _restore(self, state_dir, disk):
        """Starts qemu on `disk` (an overlay of the state's) with the state's memory."""
        self._start(disk, incoming=True)
        self.qmp.execute("migrate-incoming", uri=f"exec:cat {state_dir}/memory")
        # The machine was saved stopped, so it arrives paused ("inmigrate" until then).
        while (status := self.qmp.execute("query-status").get("status")) == "inmigrate":
            if self.proc.poll() is not None:
                raise VmError(f"qemu exited restoring the state: {self._qemu_log()}")
            time.sleep(0.1)
        if status != "running":
            self.qmp.execute("cont")
        self.wait_for_ssh(timeout=120)
        # The guest's clock stood still while the state was on disk.
        self.ssh(f"date -s @{int(time.time())} >/dev/null")

    def _qemu_log(self):
        with open(os.path.join(self.workdir, "qemu.log")) as f:
            return f.read()[-2000:]

    def console_log(self):
        with open(os.path.join(self.workdir, "console.log"), errors="replace") as f:
            return f.read()

    def _kill(self):
        if self.qmp:
            try:
                self.qmp.execute("quit")
            except (VmError, OSError):
                pass
            self.qmp.close()
            self.qmp = None
        if self.proc:
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None

    def shutdown(self):
        self._kill()
        shutil.rmtree(self.workdir, ignore_errors=True)

    def __enter__(self):
        return self.boot()

    def __exit__(self, *exc):
        self.shutdown()

    # -- inside --------------------------------------------------------------------------------

    def _ssh_base(self, user):
        return ["ssh", "-i", self.key, "-p", str(self.ssh_port), "-o", "BatchMode=yes",
                "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null",
                "-o", "LogLevel=ERROR", "-o", "ConnectTimeout=10", f"{user}@127.0.0.1"]

    def ssh(self, command, user="root", check=True, timeout=600, input=None):
        """Runs `command` through the guest's shell; returns the CompletedProcess (text)."""
        r = subprocess.run(self._ssh_base(user) + ["--", command], input=input,
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           timeout=timeout)
        if check and r.returncode != 0:
            raise VmError(f"in the VM as {user}: {command!r} exited {r.returncode}:\n"
                          f"{r.stdout[-3000:]}{r.stderr[-3000:]}")
        return r

    def wait_for_ssh(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                raise VmError(f"qemu exited: {self._qemu_log()}")
            try:
                if self.ssh("true", check=False, timeout=30).returncode == 0:
                    return
            except subprocess.TimeoutExpired:
                pass
            if time.monotonic() > deadline:
                raise VmError(f"no ssh after {timeout} s; console:\n{self.console_log()[-3000:]}")
            time.sleep(1)

    def copy_in(self, src, dst, user="root"):
        subprocess.run(["scp", "-q", "-i", self.key, "-P", str(self.ssh_port), "-o",
                        "BatchMode=yes", "-o", "StrictHostKeyChecking=no", "-o",
                        "UserKnownHostsFile=/dev/null", "-o", "LogLevel=ERROR", "-r", src,
                        f"{user}@127.0.0.1:{dst}"], check=True)

    def mount_shares(self):
        """Mounts each share at its host path (so a build directory's absolute paths hold)."""
        for (name, path), tag in zip(self.shares.items(), SHARE_TAGS):
            self.ssh(f"modprobe 9pnet_virtio && mkdir -p {path} && "
                     f"mount -t 9p -o trans=virtio,version=9p2000.L,msize=262144 {tag} {path}")

    def forward(self, guest_port, host_port=None):
        """Forwards 127.0.0.1:host_port (a free one by default) to the guest's port."""
        host_port = host_port or free_port()
        self.qmp.hmp(f"hostfwd_add net0 tcp:127.0.0.1:{host_port}-:{guest_port}")
        return host_port



def run_tests(missing, patterns):
    """The VM tests' runner: fails (CI=true) or skips (77, meson's code) when `missing` names
    what the machine lacks, else runs this module's unittest cases (only those matching
    `patterns`) and prints "N passed, N failed, N skipped"."""
    import unittest
    if missing:
        print(f"missing {', '.join(missing)}", file=sys.stderr)
        # Under CI a test that lacks its environment fails; elsewhere it is skipped (77).
        return 1 if os.environ.get("CI") == "true" else 77
    start = time.monotonic()
    prog = unittest.main(module="__main__",
                         argv=[sys.argv[0], "-v"] + [a for k in patterns for a in ("-k", k)],
                         exit=False)
    r = prog.result
    failed = len(r.failures) + len(r.errors)
    print(f"# VM tests took {time.monotonic() - start:.0f} s", file=sys.stderr)
    print(f"{r.testsRun - failed - len(r.skipped)} passed, {failed} failed, "
          f"{len(r.skipped)} skipped")
    return 1 if failed or r.testsRun == 0 else 0

def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["build", "prepare", "shell", "run"])
    ap.add_argument("args", nargs="*")
    ap.add_argument("--cold", action="store_true", help="boot cold, not from the saved state")
    ap.add_argument("--share", action="append", default=[], help="a host directory to mount")
    opts = ap.parse_args()
    if opts.command == "build":
        print(build_image())
        return 0
    if opts.command == "prepare":  # the image and the saved state (CI, beside the compiler)
        vm = Vm()
        try:
            print(vm.ensure_state())
        finally:
            vm.shutdown()
        return 0
    with Vm(shares={p: p for p in opts.share}, cold=opts.cold) as vm:
        vm.mount_shares()
        if opts.command == "run":
            r = vm.ssh(" ".join(opts.args), check=False)
            sys.stdout.write(r.stdout)
            sys.stderr.write(r.stderr)
            return r.returncode
        return subprocess.call(vm._ssh_base("root"))


if __name__ == "__main__":
    sys.exit(main())
