#!/usr/bin/env bash
# Builds the Debian 12 Vagrant box (libvirt) that the Vagrantfile uses when no BOX
# is given, from Debian's packages alone, and adds it to Vagrant as svclab/debian12.
#
#   scripts/vagrant-box.sh           build it, or reuse the cached build, and add it
#   scripts/vagrant-box.sh --path    print the .box file's path (building it if it is
#                                    not cached) without adding it to Vagrant
#
# The box: a debootstrap of bookworm (with bookworm-updates and bookworm-security)
# holding Debian's kernel (linux-image-amd64: ip_vs, ip_set and dummy are modules
# there), systemd, openssh-server, sudo, rsync (Vagrant's synced folder), and
# qemu-guest-agent (vagrant-libvirt asks it for the box's address when the box is on
# qemu's user-mode network, see the Vagrantfile). Every NIC takes DHCP. The vagrant
# user has Vagrant's well-known insecure public key (Vagrant swaps it for a fresh
# one at the first `vagrant up`) and passwordless sudo. GRUB boots it from the MBR,
# so it is an ordinary box for any vagrant-libvirt host, and an upgraded kernel
# boots through the /vmlinuz and /initrd.img links Debian keeps.
#
# No loop or nbd device is used (containers and CI hosts may have neither):
# mke2fs -d writes the tree straight into the partition of a sparse raw image, GRUB's
# boot.img and core.img go into its first MiB, and qemu-img makes the qcow2.
#
# The build is cached in /var/cache/svclab/vagrant/KEY (SVCLAB_VAGRANT_CACHE), KEY
# hashing what the box is made from: this script, the kernel version Debian offers
# today, the mirrors and Vagrant's public key. A run that finds KEY built only adds
# the box to Vagrant, if Vagrant does not have that version yet. Needs root.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
self="$repo/scripts/vagrant-box.sh"
box_name=svclab/debian12   # the Vagrantfile's default; keep the two in step
suite=bookworm
mirror=${SVCLAB_DEBIAN_MIRROR:-http://deb.debian.org/debian}
security_mirror=${SVCLAB_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
cache_root=${SVCLAB_VAGRANT_CACHE:-/var/cache/svclab/vagrant}
disk_gib=20
# What the box holds beyond debootstrap's minbase (the kernel comes after the
# upgrade, so that it is the newest one and is built into an initramfs only once).
packages=(systemd-sysv udev dbus systemd-resolved openssh-server sudo rsync
  qemu-guest-agent iproute2 kmod procps ca-certificates)

print_path=false
case "${1:-}" in
  "") ;;
  --path) print_path=true ;;
  -h|--help) sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "scripts/vagrant-box.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
esac

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/vagrant-box.sh: debootstrap and chroot need root: run it with sudo" >&2
  exit 2
fi

log() { printf 'vagrant-box: %s\n' "$*" >&2; }
# elapsed START: seconds since START (from $SECONDS), for the phase lines.
elapsed() { echo "$((SECONDS - $1)) s"; }

# Host tools, and the Debian package that brings each.
declare -A pkg_of=(
  [debootstrap]=debootstrap
  [qemu-img]=qemu-utils
  [sfdisk]=fdisk
  [mke2fs]=e2fsprogs
  [grub-mkimage]=grub-pc-bin     # core.img and the modules /boot/grub loads
  [vagrant]=vagrant
  [bsdtar]=libarchive-tools      # packs the .box (vagrant unpacks with it too)
)
missing=()
for bin in "${!pkg_of[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${pkg_of[$bin]}")
done
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# Vagrant's well-known insecure key pair ships with Vagrant itself.
pubkey=$(ls /usr/share/rubygems-integration/all/gems/vagrant-*/keys/vagrant.pub \
  /opt/vagrant/embedded/gems/gems/vagrant-*/keys/vagrant.pub 2>/dev/null | head -n1 || true)
if [ -z "$pubkey" ]; then
  echo "scripts/vagrant-box.sh: Vagrant's insecure public key (keys/vagrant.pub in Vagrant's gem) not found; is vagrant installed from Debian or HashiCorp's package?" >&2
  exit 1
fi

# The kernel the box gets is the one this host's apt would install today: the
# same version svclab's own VM boots.
kernel_version() {
  apt-cache policy linux-image-amd64 2>/dev/null | sed -n 's/^ *Candidate: //p'
}
kernel=$(kernel_version)
if [ -z "$kernel" ] || [ "$kernel" = "(none)" ]; then
  apt-get update -qq
  kernel=$(kernel_version)
fi
if [ -z "$kernel" ] || [ "$kernel" = "(none)" ]; then
  echo "scripts/vagrant-box.sh: apt knows no linux-image-amd64; is $mirror in /etc/apt/sources.list?" >&2
  exit 1
fi

key=$( { sha256sum < "$self"; echo "$kernel $mirror $security_mirror"; sha256sum < "$pubkey"; } \
  | sha256sum | cut -c1-16)
dir="$cache_root/$key"
box_file="$dir/debian12.box"

mkdir -p "$cache_root"
# One build at a time: a second run waits, then finds the box built.
exec 9>"$cache_root/.lock"
flock 9

work= rootfs=
build() {
  local start uuid disk resolv_link
  work=$(mktemp -d "$cache_root/.build.XXXXXX")
  rootfs="$work/rootfs"
  # Whatever the build mounted or wrote goes, whichever way it ends.
  trap 'umount "$rootfs/proc" 2>/dev/null || true; rm -rf --one-file-system "$work"' EXIT

  start=$SECONDS
  log "debootstrap $suite from $mirror (kernel $kernel; this takes minutes)"
  debootstrap --variant=minbase --include="$(IFS=,; echo "${packages[*]}")" \
    "$suite" "$rootfs" "$mirror" > "$work/debootstrap.log" 2>&1 || {
      tail -n 30 "$work/debootstrap.log" >&2
      echo "scripts/vagrant-box.sh: debootstrap failed (log above)" >&2
      exit 1
    }
  log "debootstrap: $(elapsed "$start")"

  start=$SECONDS
  cat > "$rootfs/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
  # Maintainer scripts (the kernel's initramfs, systemd's) read /proc; no service
  # they would start may run on this host (it would run in the root namespace).
  # The box's resolv.conf points at systemd-resolved, which does not run here:
  # apt in the chroot resolves through the host's until the link is put back.
  mount -t proc proc "$rootfs/proc"
  printf '#!/bin/sh\nexit 101\n' > "$rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$rootfs/usr/sbin/policy-rc.d"
  resolv_link=$(readlink "$rootfs/etc/resolv.conf")
  rm "$rootfs/etc/resolv.conf"
  cp -L /etc/resolv.conf "$rootfs/etc/resolv.conf"
  # in_root CMD...: CMD in the tree, its output in apt.log (shown if it fails).
  # unsafe-io: a build that fails is thrown away whole, so dpkg need not fsync.
  in_root() {
    chroot "$rootfs" env DEBIAN_FRONTEND=noninteractive LC_ALL=C "$@" \
      -o Dpkg::Options::=--force-unsafe-io >> "$work/apt.log" 2>&1 || {
      tail -n 30 "$work/apt.log" >&2
      echo "scripts/vagrant-box.sh: '$*' failed in the box's tree (log above)" >&2
      exit 1
    }
  }
  in_root apt-get update --error-on=any
  in_root apt-get full-upgrade -y
  in_root apt-get install -y --no-install-recommends linux-image-amd64
  in_root apt-get clean
  ln -sf "$resolv_link" "$rootfs/etc/resolv.conf"
  rm "$rootfs/usr/sbin/policy-rc.d"
  umount "$rootfs/proc"
  log "updates and kernel $(ls "$rootfs/lib/modules"): $(elapsed "$start")"

  start=$SECONDS
  configure "$rootfs"
  uuid=$(cat /proc/sys/kernel/random/uuid)
  echo "UUID=$uuid / ext4 errors=remount-ro 0 1" > "$rootfs/etc/fstab"
  install_grub_config "$rootfs" "$uuid"

  disk="$work/disk.raw"
  truncate -s "${disk_gib}G" "$disk"
  echo 'start=2048, type=83, bootable' | sfdisk -q --label dos "$disk"
  # What grub-bios-setup would do, without its probing of the host's devices:
  # boot.img in the MBR's code area (the partition table stays), core.img right
  # after it. boot.img's defaults already point at sector 1 and the BIOS drive;
  # grub-mkimage has written core.img's own sector count into it.
  grub-mkimage -O i386-pc -o "$work/core.img" -p '(hd0,msdos1)/boot/grub' biosdisk part_msdos ext2
  dd if=/usr/lib/grub/i386-pc/boot.img of="$disk" bs=440 count=1 conv=notrunc status=none
  dd if="$work/core.img" of="$disk" bs=512 seek=1 conv=notrunc status=none
  mke2fs -q -t ext4 -L svclab-root -U "$uuid" -d "$rootfs" -E offset=$((2048 * 512)) \
    "$disk" "$(( (disk_gib * 1024 * 1024) - 1024 ))k"
  qemu-img convert -c -O qcow2 "$disk" "$work/box.img"
  rm -f "$disk"
  cat > "$work/metadata.json" <<EOF
{"provider": "libvirt", "format": "qcow2", "virtual_size": $disk_gib}
EOF
  # A box's own Vagrantfile; the project's Vagrantfile says how it is run.
  echo '# svclab/debian12, built by svclab scripts/vagrant-box.sh' > "$work/Vagrantfile"
  bsdtar -cf "$work/debian12.box" -C "$work" metadata.json Vagrantfile box.img
  log "image: $(elapsed "$start")"

  # Box versions only grow, so Vagrant (and vagrant-libvirt's copy of the image in
  # its storage pool, named after the version) never mistakes an old build for this.
  mkdir -p "$dir"
  date -u +0.%Y%m%d%H%M%S > "$dir/version"
  mv "$work/debian12.box" "$box_file"
  {
    echo "kernel: $(ls "$rootfs/lib/modules")"
    echo "built: $(date -u +%FT%TZ)"
    chroot "$rootfs" dpkg-query -W -f '${Package} ${Version}\n'
  } > "$dir/contents.txt"
  rm -rf --one-file-system "$work"
  trap - EXIT
}

# configure ROOTFS: what makes the tree a Vagrant box.
configure() {
  local root=${1:?configure: no root directory}
  echo svclab > "$root/etc/hostname"
  printf '127.0.0.1\tlocalhost\n127.0.1.1\tsvclab\n' > "$root/etc/hosts"

  # DHCP on every NIC, names and DNS from systemd-networkd and -resolved.
  cat > "$root/etc/systemd/network/80-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
EOF
  systemctl --root="$root" enable systemd-networkd.service systemd-resolved.service >/dev/null 2>&1
  # apt's daily timers would hold the dpkg lock while Vagrant provisions; e2scrub's
  # boot-time check costs most of a minute under TCG and finds nothing on a new box.
  systemctl --root="$root" disable apt-daily.timer apt-daily-upgrade.timer \
    e2scrub_all.timer e2scrub_reap.service >/dev/null 2>&1
  systemctl --root="$root" mask apt-daily.service apt-daily-upgrade.service >/dev/null 2>&1

  # Every box instance gets its own host keys and machine id at its first boot.
  # No RSA key: making one takes most of a minute under TCG.
  rm -f "$root"/etc/ssh/ssh_host_*
  printf 'HostKey /etc/ssh/ssh_host_ed25519_key\nHostKey /etc/ssh/ssh_host_ecdsa_key\n' \
    > "$root/etc/ssh/sshd_config.d/host-keys.conf"
  cat > "$root/etc/systemd/system/ssh-host-keys.service" <<'EOF'
[Unit]
Description=Generate SSH host keys on first boot
Before=ssh.service
ConditionPathExists=!/etc/ssh/ssh_host_ed25519_key

[Service]
Type=oneshot
ExecStart=/usr/bin/ssh-keygen -q -t ed25519 -N "" -f /etc/ssh/ssh_host_ed25519_key
ExecStart=/usr/bin/ssh-keygen -q -t ecdsa -N "" -f /etc/ssh/ssh_host_ecdsa_key

[Install]
WantedBy=multi-user.target
EOF
  systemctl --root="$root" enable ssh-host-keys.service >/dev/null 2>&1
  : > "$root/etc/machine-id"
  rm -f "$root/var/lib/dbus/machine-id"

  chroot "$root" useradd --create-home --shell /bin/bash vagrant
  install -d -m 700 "$root/home/vagrant/.ssh"
  install -m 600 "$pubkey" "$root/home/vagrant/.ssh/authorized_keys"
  chroot "$root" chown -R vagrant:vagrant /home/vagrant/.ssh
  echo 'vagrant ALL=(ALL) NOPASSWD: ALL' > "$root/etc/sudoers.d/vagrant"
  chmod 440 "$root/etc/sudoers.d/vagrant"
}

# install_grub_config ROOTFS UUID: GRUB's modules and a menu booting Debian's
# current kernel, serial console first so libvirt's console log shows the boot.
install_grub_config() {
  local root=${1:?install_grub_config: no root directory} uuid=$2
  mkdir -p "$root/boot/grub/i386-pc"
  cp /usr/lib/grub/i386-pc/*.mod /usr/lib/grub/i386-pc/*.lst "$root/boot/grub/i386-pc/"
  cat > "$root/boot/grub/grub.cfg" <<EOF
serial --unit=0 --speed=115200
terminal_input serial console
terminal_output serial console
set timeout=0
menuentry 'Debian 12 (svclab box)' {
  linux /vmlinuz root=UUID=$uuid ro console=tty0 console=ttyS0,115200n8
  initrd /initrd.img
}
EOF
}

if [ ! -f "$box_file" ]; then
  total=$SECONDS
  build
  log "built $box_file ($(du -h "$box_file" | cut -f1)) in $(elapsed "$total")"
else
  log "cached: $box_file"
fi
if $print_path; then
  echo "$box_file"
  exit 0
fi

# box_versions: the versions of $box_name that Vagrant has.
box_versions() {
  vagrant box list --machine-readable 2>/dev/null \
    | awk -F, -v name="$box_name" '$3=="box-name"{n=$4} $3=="box-version" && n==name{print $4}'
}

version=$(cat "$dir/version")
if box_versions | grep -qxF "$version"; then
  log "Vagrant has $box_name $version"
else
  start=$SECONDS
  # A catalog entry (rather than the bare .box) gives the box its version.
  cat > "$dir/catalog.json" <<EOF
{"name": "$box_name", "versions": [{"version": "$version", "providers": [
  {"name": "libvirt", "url": "file://$box_file", "checksum_type": "sha256",
   "checksum": "$(sha256sum "$box_file" | cut -d' ' -f1)"}]}]}
EOF
  vagrant box add --provider libvirt "$dir/catalog.json"
  log "vagrant box add: $(elapsed "$start")"
fi
# Older builds of the box only take room; one still used by a machine stays.
box_versions | while read -r old; do
  [ "$old" = "$version" ] && continue
  if vagrant box remove "$box_name" --provider libvirt --box-version "$old" >/dev/null 2>&1; then
    log "removed the older build $old"
  else
    log "kept the older build $old (a machine still uses it)"
  fi
done
