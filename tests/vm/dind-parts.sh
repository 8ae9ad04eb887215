#!/usr/bin/env bash
# Inside the test VM (tests/vm/test_dind.py): the cheap stand-ins for the default image
# (packaging/image/build.sh default, too big to load under emulation), made from the VM's own
# files in seconds.
#
#   dind-parts.sh DIR IMAGE
#
# DIR/share/executor-image.tar (+ .changes): the executor image's root for the nested dockerd,
#   small_executor_root.py's shell part (bash, dash, coreutils, tar, setsid: what the docker
#   backend runs in a sandbox). No python3, so the daemon serves bash only; the nested import
#   takes seconds.
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

python3 "$(dirname "$0")/small_executor_root.py" --no-python "$dir/share/executor-image.tar"

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
