#!/usr/bin/env bash
# Inside the test VM (tests/vm/test_dind.py): the cheap stand-ins for the default image
# (packaging/image/build.sh default, too big to load under emulation), made from the VM's own
# files in seconds.
#
#   dind-parts.sh DIR IMAGE
#
# DIR/share/executor-image.tar (+ .changes): the executor image's root for the nested dockerd,
#   as packaging/executor-image/build.sh makes it but with only what the docker backend runs in a
#   sandbox (src/docker/sandbox_shell.cc, staging.cc, workspace_collect.cc, cgroup_probe.cc):
#   bash (PID 1, the run wrappers), dash as /bin/sh (the kill and probe execs), coreutils (sleep,
#   cat, ...), tar (files in and out), setsid (background programs), and their libraries by ldd.
#   A few MB: the nested import takes seconds. No python3, so the daemon serves bash only.
# IMAGE in the VM's dockerd: the default image's layout and configuration with nothing in it
#   but /etc's user database: the test bind-mounts the VM's /usr pieces (dockerd, containerd,
#   runc, the daemon's libraries), the binary and DIR/share over it.
set -euo pipefail
dir="$1"
image="$2"
rm -rf "$dir"
mkdir -p "$dir/share"

# The merged-/usr symlinks Debian 12 roots have.
usr_links() {
  mkdir -p "$1/usr/bin" "$1/usr/sbin" "$1/usr/lib" "$1/usr/lib64"
  for d in bin sbin lib lib64; do ln -s "usr/$d" "$1/$d"; done
}

root="$dir/executor"
usr_links "$root"
programs=(/usr/bin/bash /usr/bin/dash /usr/bin/tar /usr/bin/setsid)
mapfile -t -O ${#programs[@]} programs < <(dpkg -L coreutils | grep -E '^(/usr)?/s?bin/.')
# Every file by its /usr name, symlinks (libtinfo.so.6 -> libtinfo.so.6.4) stored as the file
# they name, in one tar. The libraries from the loader itself, not ldd: ldd forks a few times per
# program, and each fork is slow under emulation (80 s against 20 s for coreutils).
for p in "${programs[@]}"; do /lib64/ld-linux-x86-64.so.2 --list "$p"; done |
  grep -o '/[^ ]*\.so[^ ]*' | cat - <(printf '%s\n' "${programs[@]}") |
  sed -E 's#^/(bin|sbin|lib|lib64)/#/usr/\1/#; s#^/##' | sort -u |
  tar -C / -chf - -T - | tar -C "$root" -xf -
ln -s dash "$root/usr/bin/sh"
mkdir -p "$root/workspace" "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"
printf 'root:x:0:0:root:/root:/bin/bash\nsandbox:x:65532:65532:sandbox:/tmp:/usr/sbin/nologin\n' \
  >"$root/etc/passwd"
printf 'root:x:0:\nsandbox:x:65532:\n' >"$root/etc/group"
tar --numeric-owner -C "$root" -cf "$dir/share/executor-image.tar" .
key="$(sha256sum "$dir/share/executor-image.tar" | cut -c1-16)"
# The executor image's configuration (packaging/executor-image/build.sh's CHANGES).
printf '%s\n' "LABEL code-interpreter.root-key=$key" "WORKDIR /workspace" \
  "ENV PATH=/usr/local/bin:/usr/bin:/bin LANG=C.UTF-8" 'CMD ["/bin/bash"]' \
  >"$dir/share/executor-image.tar.changes"

base="$dir/base"
usr_links "$base"
mkdir -p "$base"/{etc,proc,sys,dev,run,tmp,root,usr/local/bin,usr/share/code-interpreter} \
  "$base/var/lib/code-interpreter/files" "$base/var/lib/code-interpreter/docker"
chmod 1777 "$base/tmp"
chmod 0710 "$base/var/lib/code-interpreter/docker"
cp /etc/passwd /etc/group /etc/nsswitch.conf "$base/etc/"
touch "$base/usr/local/bin/code-interpreter"  # the binary's mount point
# The default image's configuration (packaging/image/build.sh: COMMON and the default's own),
# once the VM's dockerd answers (the test starts it alongside).
for _ in $(seq 300); do docker version >/dev/null 2>&1 && break; sleep 1; done
tar --numeric-owner -C "$base" -cf - . | docker import \
  --change 'ENTRYPOINT ["/usr/local/bin/code-interpreter"]' \
  --change 'CMD ["serve"]' \
  --change "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8" \
  --change "ENV EXECUTOR_BACKEND=auto HOST=0.0.0.0 PORT=8000" \
  --change "ENV FILE_STORAGE_DIR=/var/lib/code-interpreter/files" \
  --change "WORKDIR /var/lib/code-interpreter" \
  --change "USER 0:0" \
  --change "VOLUME /var/lib/code-interpreter/docker" \
  - "$image" >/dev/null
echo "executor root $(du -h "$dir/share/executor-image.tar" | cut -f1); $image imported"
