#!/usr/bin/env bash
# Builds the test VM's disk: Debian 12 with systemd on a pure cgroup v2 hierarchy (the kernel is
# booted with cgroup_no_v1=all), for the systemd tests (tests/vm/) and the rootless Docker work.
# No registry and no loop device: mmdebstrap into a directory, `mke2fs -d` turns it into an ext4
# image, `qemu-img convert` into qcow2. The kernel and initrd are copied out of the root, so qemu
# boots them directly (-kernel/-initrd/-append) and the kernel command line stays ours.
#
#   tests/vm/build-image.sh            prints the directory holding the image when done
#
# The result is cached under $VM_CACHE_DIR/<key>/ keyed by the package list and RECIPE, so a
# rerun does nothing. Env: VM_CACHE_DIR (/var/cache/code-interpreter/vm), DEBIAN_MIRROR,
# FORCE=1 rebuilds.
set -euo pipefail

# Bump when the recipe below changes in a way the package list does not show.
RECIPE=vm-recipe-5
SUITE=bookworm
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
CACHE_DIR="${VM_CACHE_DIR:-/var/cache/code-interpreter/vm}"
TEST_USER=tester
DISK_SIZE=8G
PACKAGES=(
  # boot and the init system on cgroup v2; logind gives the test user a user manager
  linux-image-amd64 initramfs-tools e2fsprogs kmod systemd systemd-sysv dbus libpam-systemd
  udev openssh-server procps iproute2 curl
  # rootless sandboxes (newuidmap/newgidmap) and rootless Docker (test_rootless_dood.py); runc's
  # systemd cgroup driver, the only one a rootless Engine has on cgroup v2, needs the user's bus
  uidmap iptables apparmor docker.io rootlesskit slirp4netns fuse-overlayfs dbus-user-session
  # `meson install --no-rebuild` of the shared build directory, as docs/deployment.md says
  meson
  # the sandbox's language stack on SANDBOX_ROOTFS=host (what scripts/install-deps.sh installs)
  python3 python3-numpy python3-pandas python3-matplotlib python3-openpyxl python3-dill
  # the daemon's runtime libraries: `ldd code-interpreter` mapped to packages with `dpkg -S`
  # (tests/vm/test_systemd.py checks inside the VM that ldd finds every one)
  libseccomp2 libcap2 libnl-3-200 libnl-route-3-200 libssl3 libyaml-0-2
  libspdlog1.10 libfmt9 libstdc++6 libgcc-s1 libc6
  # the fork server loads it at run time (dlopen: src/runtime/init/embedded_python.cc), so ldd does not
  # list it
  libpython3.11
)

key="$(printf '%s\n' "$SUITE" "${PACKAGES[@]}" "$RECIPE" | sha256sum | cut -c1-16)"
out="$CACHE_DIR/$key"
mkdir -p "$CACHE_DIR"
# One build at a time (scripts/test.sh starts one in the background; a test may start another).
exec 9>"$CACHE_DIR/.build.lock"
flock 9
if [ -s "$out/disk.qcow2" ] && [ "${FORCE:-0}" != 1 ]; then
  echo "$out"
  exit 0
fi
for tool in mmdebstrap mke2fs qemu-img ssh-keygen; do
  command -v "$tool" >/dev/null ||
    { echo "$tool is not installed (scripts/install-deps.sh)" >&2; exit 1; }
done

start=$(date +%s)
work="$(mktemp -d "$CACHE_DIR/build.XXXXXX")"
trap 'rm -rf "$work"' EXIT
root="$work/root"
echo "bootstrapping $SUITE for the VM ($key)" >&2
# The initramfs settings go in before the kernel's package makes it (mmdebstrap's essential
# hook): only the modules that mount the root (virtio disk, ext4), not Debian's default of every
# driver (750 modules, 37 MB, about 130 s of CPU).
mkdir -p "$work/initramfs-tools/conf.d" "$work/initramfs-tools/hooks"
echo MODULES=list >"$work/initramfs-tools/conf.d/vm.conf"
cat >"$work/initramfs-tools/hooks/vm-root" <<'HOOK'
#!/bin/sh
[ "$1" = prereqs ] && exit 0
. /usr/share/initramfs-tools/hook-functions
for module in virtio_pci virtio_blk ext4; do force_load "$module"; done
HOOK
chmod 755 "$work/initramfs-tools/hooks/vm-root"
"$(dirname "$(readlink -f "$0")")/../../scripts/debian-root.sh" "$SUITE" "$MIRROR" "$root" \
  "$(IFS=,; echo "${PACKAGES[*]}")" \
  --essential-hook="cp -a '$work/initramfs-tools' \"\$1/etc/\"" >&2
rm -rf "$work/initramfs-tools"

ssh-keygen -q -t ed25519 -N '' -C code-interpreter-vm -f "$work/id_ed25519"

echo vm >"$root/etc/hostname"
printf '127.0.0.1 localhost\n127.0.1.1 vm\n' >"$root/etc/hosts"
printf '/dev/vda / ext4 defaults,errors=remount-ro 0 1\n' >"$root/etc/fstab"
# qemu's user-mode network hands out 10.0.2.15 by DHCP; networkd takes it on any NIC name.
cat >"$root/etc/systemd/network/10-qemu.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
EOF
echo 'nameserver 10.0.2.3' >"$root/etc/resolv.conf"

# ssh: root and the test user log in with the generated key only.
for home in "$root/root" "$root/home/$TEST_USER"; do
  mkdir -p "$home/.ssh"
  cp "$work/id_ed25519.pub" "$home/.ssh/authorized_keys"
  chmod 700 "$home/.ssh"
  chmod 600 "$home/.ssh/authorized_keys"
done
cat >"$root/etc/ssh/sshd_config.d/vm.conf" <<'EOF'
PasswordAuthentication no
PermitRootLogin prohibit-password
UseDNS no
EOF

# The user units' cgroup delegation: without it a user manager gets no memory or pids controller.
mkdir -p "$root/etc/systemd/system/user@.service.d"
cat >"$root/etc/systemd/system/user@.service.d/delegate.conf" <<'EOF'
[Service]
Delegate=cpu cpuset io memory pids
EOF

chroot "$root" /bin/sh -eu <<EOF
useradd -m -s /bin/bash $TEST_USER
chown -R $TEST_USER:$TEST_USER /home/$TEST_USER
# Subordinate ids for rootless sandboxes (and rootless dockerd later).
usermod --add-subuids 100000-165535 --add-subgids 100000-165535 $TEST_USER
passwd -d root >/dev/null
systemctl enable systemd-networkd ssh serial-getty@ttyS0 >/dev/null 2>&1
# What slows a boot under emulation and no test needs: the system dockerd is started by hand
# (the rootless work runs its own), apt and man timers never.
systemctl disable docker.service docker.socket containerd.service >/dev/null 2>&1 || true
systemctl mask systemd-networkd-wait-online.service apt-daily.timer apt-daily-upgrade.timer \
  man-db.timer e2scrub_all.timer fstrim.timer >/dev/null 2>&1
EOF
# A user manager from boot on, so `systemctl --user` works over ssh for the test user.
mkdir -p "$root/var/lib/systemd/linger"
touch "$root/var/lib/systemd/linger/$TEST_USER"

cp "$root"/boot/vmlinuz-* "$work/vmlinuz"
cp "$root"/boot/initrd.img-* "$work/initrd.img"
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/archives/*.deb \
       "$root"/usr/share/doc/* "$root"/usr/share/man/*

echo "making the disk" >&2
mke2fs -q -t ext4 -L root -d "$root" "$work/disk.raw" "$DISK_SIZE"
qemu-img convert -O qcow2 "$work/disk.raw" "$work/disk.qcow2"
rm -f "$work/disk.raw"
rm -rf "$root"
cat >"$work/packages.txt" <<EOF
$RECIPE $SUITE
${PACKAGES[*]}
EOF
rm -rf "$out"
mv "$work" "$out"
trap - EXIT
chmod 755 "$out"
echo "VM image built in $(( $(date +%s) - start )) s: $out ($(du -sh "$out" | cut -f1))" >&2
echo "$out"
