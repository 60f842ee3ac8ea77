#!/usr/bin/env bash
# Installs what svclab needs on a Debian 12 machine, as root. Safe to run again: it
# installs only what is missing. Go itself is expected on PATH (/usr/local/go/bin);
# --no-go skips that check (scripts/provision.sh looks for Go itself). --no-vm
# leaves out what only svclab's own VM needs (qemu, cpio, xz): a machine
# whose kernel loads IPVS never starts that VM.
set -euo pipefail
need_go=true
need_vm=true
for arg in "$@"; do
  case "$arg" in
    --no-go) need_go=false ;;
    --no-vm) need_vm=false ;;
    *) echo "scripts/setup.sh: unknown argument $arg (--no-go, --no-vm)" >&2; exit 2 ;;
  esac
done

need_root() {
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/setup.sh: installing packages needs root; run it with sudo" >&2
    exit 2
  fi
}

# Binaries that the project runs, and the Debian package that brings each.
declare -A pkg_of=(
  [iptables]=iptables            # iptables-nft and iptables-legacy, both backends
  [ipvsadm]=ipvsadm
  [ipset]=ipset
  [ip]=iproute2                 # ip, ss and tc, in the VM's guest and in failure dumps
  [conntrack]=conntrack
  [nft]=nftables                 # kube-proxy's nftables mode runs it; svclab reads its table with it
  [tcpdump]=tcpdump
  [curl]=curl
  [update-ca-certificates]=ca-certificates   # https for curl and Go's module downloads
  [depmod]=kmod                  # modprobe, and depmod for the VM's modules
  [busybox]=busybox-static       # the guest's tools, and the DNS specs' wget in a pod (seed 002)
  [newuidmap]=uidmap             # without root: a subordinate ID range in svclab's user namespace
  [nsenter]=util-linux           # without root: later commands join a lab's user namespace
)
if $need_vm; then
  pkg_of+=(
    [qemu-system-x86_64]=qemu-system-x86
    [cpio]=cpio
    [xz]=xz-utils                # unpacks the VM kernel once, so it boots ~4 s faster
  )
fi

missing=()
for bin in "${!pkg_of[@]}"; do
  if ! command -v "$bin" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$bin" ] && [ ! -x "/sbin/$bin" ]; then
    missing+=("${pkg_of[$bin]}")
  fi
done

if [ "${#missing[@]}" -gt 0 ]; then
  need_root
  echo "scripts/setup.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if $need_go && ! command -v go >/dev/null 2>&1; then
  if [ -x /usr/local/go/bin/go ]; then
    echo "scripts/setup.sh: Go is at /usr/local/go/bin; add it to PATH" >&2
  else
    echo "scripts/setup.sh: Go 1.26 or newer is needed (https://go.dev/doc/install)" >&2
    exit 2
  fi
fi

# Without root, svclab runs each command in a user namespace of its own (README:
# Without root), and the specs labelled rootless do that as nobody: say now,
# not in a failed spec, when this host refuses an ordinary user one.
if ! setpriv --reuid=65534 --regid=65534 --clear-groups unshare -Ur true 2>/dev/null; then
  echo "scripts/setup.sh: warning: this host refuses an ordinary user a user namespace, so svclab without root" \
    "and the specs labelled rootless cannot run; \`svclab doctor\` says which setting refuses it and how to allow it" >&2
fi
