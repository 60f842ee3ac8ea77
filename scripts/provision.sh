#!/usr/bin/env bash
# Provisions a Debian 12 machine whose kernel loads modules (a Vagrant box, a
# cloud VM, a laptop) to run every svclab mode natively: the packages, Go, and the
# kernel modules kube-proxy's iptables, nftables and IPVS modes need, loaded now and at boot.
#
#   scripts/provision.sh            provision this machine (root)
#   scripts/provision.sh --check    do what this kernel allows without changing
#                                   boot configuration: CI runs this on a kernel
#                                   that loads no modules
#
# Go is not downloaded: the machines svclab runs on reach Debian's mirrors and the Go
# module proxy, not go.dev. The Vagrantfile copies the host's toolchain to
# /usr/local/go; elsewhere, install Go 1.26 there first.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
check=false
[ "${1:-}" = "--check" ] && check=true

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/provision.sh: needs root" >&2
  exit 2
fi

# 1. Packages (the test run's list, less svclab's own VM: this kernel loads IPVS),
# then Go.
"$repo/scripts/setup.sh" --no-go --no-vm
go_bin=$(command -v go || true)
if [ -z "$go_bin" ] && [ -x /usr/local/go/bin/go ]; then
  go_bin=/usr/local/go/bin/go
  # sudo's PATH and login shells find it there.
  $check || ln -sf "$go_bin" /usr/local/bin/go
fi
if [ -z "$go_bin" ]; then
  echo "provision: no Go on PATH or at /usr/local/go. The Vagrantfile copies the host's" \
    "Go there (SVCLAB_GOROOT, else \`go env GOROOT\` on the host): install Go 1.26 on" \
    "the host and run \`vagrant reload --provision\`; elsewhere put Go 1.26 at /usr/local/go." >&2
  exit 1
fi
echo "provision: $("$go_bin" version)"

# 2. Kernel modules: kube-proxy's IPVS mode and its schedulers, ipset, conntrack,
# br_netfilter for bridged pod traffic, dummy for kube-ipvs0, xt_physdev for the
# IPVS mode's rules of external IPs, and the nf_tables expressions of its nftables
# mode (numgen, fib, nat, masquerade, reject).
modules=(
  br_netfilter dummy veth
  nf_conntrack nf_conntrack_netlink nf_nat
  ip_vs ip_vs_rr ip_vs_wrr ip_vs_lc ip_vs_wlc ip_vs_sh ip_vs_dh ip_vs_sed ip_vs_nq
  ip_set ip_set_hash_ip ip_set_hash_ipport ip_set_hash_ipportip ip_set_hash_ipportnet ip_set_hash_net ip_set_bitmap_port
  xt_set xt_ipvs xt_physdev xt_statistic xt_recent xt_comment xt_mark xt_addrtype xt_conntrack xt_MASQUERADE xt_nfacct
  nf_tables nft_chain_nat nft_ct nft_nat nft_masq nft_numgen nft_fib_ipv4 nft_reject_ipv4
)
conf=/etc/modules-load.d/svclab.conf
if $check; then
  conf=$(mktemp /tmp/svclab-modules.XXXXXX.conf)
  trap 'rm -f "$conf"' EXIT
fi
printf '%s\n' "# Loaded at boot for svclab (scripts/provision.sh)" "${modules[@]}" > "$conf"
echo "provision: module list written to $conf"

if [ ! -e /proc/modules ]; then
  echo "provision: this kernel ($(uname -r)) loads no modules; checking what it has built in instead"
  missing=()
  [ -e /proc/net/ip_vs ] || missing+=("IPVS (CONFIG_IP_VS)")
  [ -d /proc/sys/net/bridge ] || missing+=("br_netfilter")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "provision: not built in: ${missing[*]}; svclab runs those modes in its VM (svclab vm)"
  fi
else
  # --check runs on CI hosts: a dry run (modprobe -n) finds the modules without
  # loading any (br_netfilter would change how the host's own bridges filter).
  dry=()
  $check && dry=(-n)
  failed=()
  for m in "${modules[@]}"; do
    modprobe "${dry[@]}" -q "$m" 2>/dev/null || failed+=("$m")
  done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "provision: could not load: ${failed[*]}" >&2
    $check || exit 1
  elif $check; then
    echo "provision: all ${#modules[@]} modules can be loaded (dry run)"
  else
    echo "provision: all ${#modules[@]} modules loaded"
  fi
fi
echo "provision: done"
