#!/usr/bin/python3
"""A small executor root, made in the test VM from the VM's own Debian 12 files (run as root
there): what the docker backend runs in an executor container (bash, sh, coreutils, tar, setsid:
src/container/sandbox_shell.cc, staging.cc, workspace_collect.cc, cgroup_probe.cc) and Python with
its standard library, 75 MB instead of the full executor image's 1.26 GB, whose import alone
takes ~10 minutes under emulation. The VM tests that need an executor image in an Engine of the
VM's use it; the full image's contents are tested on the host's dockerd.

  small_executor_root.py [--no-python] OUT.tar   # OUT.tar and OUT.tar.changes (docker import)

--no-python: the shell's part only (32 MB; the daemon then serves bash alone), for a nested
dockerd whose import should take seconds.

The files are the packages' own and their library packages' (dpkg -L, without documentation),
owned by root; merged-/usr paths are stored once, under /usr, with /bin, /sbin,
/lib and /lib64 as the symlinks Debian has.
"""

import importlib.util
import os
import subprocess
import sys
import tempfile

SHELL_PACKAGES = ["bash", "dash", "coreutils", "tar", "grep", "sed", "findutils", "util-linux"]
PYTHON_PACKAGES = ["python3-minimal", "python3.11-minimal", "libpython3.11-minimal",
                   "libpython3.11-stdlib"]
# The sandbox user, for what looks its name up (the full image has it too).
ETC = {"passwd": "root:x:0:0:root:/root:/bin/bash\n"
                 "user:x:65532:65532:user:/home/user:/bin/bash\n",
       "group": "root:x:0:\nuser:x:65532:\n"}
SKIP = ("/usr/share/doc/", "/usr/share/man/", "/usr/share/info/", "/usr/share/locale/",
        "/usr/share/lintian/", "/usr/share/bash-completion/")
TOP_LINKS = ("bin", "sbin", "lib", "lib64")  # symlinks into /usr on a merged-/usr system
# As packaging/executor-image/build.sh configures the full image.
CHANGES = ["WORKDIR /workspace", "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8",
           'CMD ["/bin/bash"]']


def canonical(path):
    """The path with its directories' symlinks resolved (/bin/bash -> /usr/bin/bash), the last
    component kept as it is (a symlink stays one)."""
    return os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))


def installed_packages():
    """{package: [dependency alternatives, ...]} of the installed packages (one dpkg-query)."""
    out = subprocess.run(["dpkg-query", "-W", "-f",
                          "${Package}\t${db:Status-Abbrev}\t${Pre-Depends}, ${Depends}\n"],
                         stdout=subprocess.PIPE, text=True, check=True).stdout
    packages = {}
    for line in out.splitlines():
        name, status, depends = line.split("\t")
        if status.startswith("ii"):
            packages[name.split(":")[0]] = [
                [alt.split()[0].split(":")[0] for alt in dep.split("|")]
                for dep in depends.split(",") if dep.strip()]
    return packages


def with_libraries(wanted, packages):
    """`wanted` and, recursively, the library packages they depend on: what their programs
    load (a process per file, as ldd, costs minutes under emulation; one query does not)."""
    todo, seen = list(wanted), set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for alternatives in packages[name]:
            dep = next((a for a in alternatives if a in packages), None)
            if dep and (dep.startswith(("lib", "zlib")) or dep in wanted) and dep not in seen:
                todo.append(dep)
    return sorted(seen)


def closure(packages):
    listed = subprocess.run(["dpkg", "-L"] + with_libraries(packages, installed_packages()),
                            stdout=subprocess.PIPE, text=True, check=True).stdout.splitlines()
    todo = [p for p in listed if p.startswith("/") and not p.startswith(SKIP)]
    files = set()
    while todo:
        path = canonical(todo.pop())
        if path in files or not os.path.lexists(path) or os.path.isdir(path) and \
                not os.path.islink(path):
            continue
        files.add(path)
        if os.path.islink(path):
            todo.append(os.path.realpath(path))
        elif path.endswith(".py"):
            # The compiled module, made at install and not listed: without it every run would
            # compile the standard library again (seconds under emulation; /usr is not writable).
            pyc = importlib.util.cache_from_source(path)  # this python3 is the root's
            if os.path.exists(pyc):
                files.add(pyc)
    return files


def parents(files):
    dirs = set()
    for f in files:
        d = os.path.dirname(f)
        while d != "/" and d not in dirs:
            dirs.add(d)
            d = os.path.dirname(d)
    return dirs


def main():
    python = sys.argv[1] != "--no-python"
    out = sys.argv[-1]
    files = closure(SHELL_PACKAGES + (PYTHON_PACKAGES if python else []))
    # /bin, /lib, ... as the symlinks they are on a merged-/usr system; /tmp as it is (1777).
    top = [name for name in TOP_LINKS if os.path.islink("/" + name)] + ["tmp"]
    names = sorted(parents(files)) + sorted(files - {"/" + t for t in top})
    with tempfile.TemporaryDirectory() as stage:
        os.mkdir(os.path.join(stage, "workspace"))
        os.mkdir(os.path.join(stage, "etc"))
        for name, content in ETC.items():
            with open(os.path.join(stage, "etc", name), "w") as f:
                f.write(content)
        with open(os.path.join(stage, "list"), "w") as f:
            f.write("\n".join(top + [n.lstrip("/") for n in names]) + "\n")
        # GNU tar, not Python's tarfile: the VM is emulated and this is 75 MB.
        subprocess.run(["tar", "-cf", out, "--no-recursion", "--owner=0", "--group=0",
                        "--numeric-owner", "-C", "/", "-T", os.path.join(stage, "list"),
                        "-C", stage, "workspace", "etc/passwd", "etc/group"], check=True)
    key = subprocess.run(["sha256sum", out], stdout=subprocess.PIPE, text=True,
                         check=True).stdout[:16]
    with open(out + ".changes", "w") as f:
        f.write("\n".join([f"LABEL code-interpreter.root-key=vm-small-{key}"] + CHANGES) + "\n")
    print(f"{out}: {len(names)} files, {os.path.getsize(out) >> 20} MiB, root key {key}")


if __name__ == "__main__":
    main()
