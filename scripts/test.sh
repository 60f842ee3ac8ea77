#!/usr/bin/env bash
# svclab's whole test run, as CI runs it (README: "Run it"). As root on a
# fresh Debian 12 machine it installs what it needs, then runs:
#   0. scripts/ci/checksources: the repository holds sources only (no tracked
#      binary, nothing over 1 MB outside docs/bench/);
#   1. go vet and the Go tests of every package (parsing, rules, the VM runner, ...);
#   2. the Ginkgo suite on this kernel, in both iptables modes (nft, legacy) and
#      with the real kube-proxy (nftables, iptables-nft, iptables-legacy), with the
#      differential check of svclab's iptables proxier against kube-proxy, both
#      backends, in parallel processes (scripts/specs.sh: SVCLAB_PROCS);
#   3. the same suite as an ordinary user it makes (svclab-ci), without sudo, in
#      svclab's user namespace (svclab unshare; scripts/ci/asuser.sh);
#   4. the Ginkgo suite in svclab's VM on Debian's kernel, one process: every
#      spec of IPVS, and of the real kube-proxy's IPVS mode (kube-proxy-ipvs)
#      those the label filter below keeps; checkreport names how many it left
#      out. The iptables modes in the VM would add some 25 minutes under TCG;
#      they run by hand. The VM suite runs after the host's, not beside it:
#      beside the Go tests' builds and the host suite, an API server in the
#      emulated guest missed its own post-start hook's bound
#      (start-service-ip-repair-controllers) and exited;
#   5. svclab verify on the shipped topologies in every mode, and with the real
#      kube-proxy in nftables mode;
#   6. svclab bench --quick, a smoke test of the benchmark's output;
#   7. vagrant validate and scripts/provision.sh --check. The Vagrant box that boots
#      (scripts/ci/vagrant.sh) is a job of its own: on a fresh machine it costs more
#      than this run's budget leaves (docs/vagrant.md).
# Every spec of every mode must run and pass: a skipped or pending spec fails the run.
# Reports land in $SVCLAB_TEST_OUT (default: a new directory under /tmp).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/test.sh: the specs build network namespaces and need root: run it with sudo" >&2
  exit 2
fi
scripts/setup.sh

out=${SVCLAB_TEST_OUT:-$(mktemp -d /tmp/svclab-test.XXXXXX)}
mkdir -p "$out"
# Each step's duration is printed when the next one starts, and all of them in a
# table at the end, whether the run passed or failed part-way: where CI's time
# goes, per step (issue 20).
step_names=() step_secs=() step_name="" step_start=0
step_done() {
  [ -n "$step_name" ] || return 0
  local took=$((SECONDS - step_start))
  step_names+=("$step_name") step_secs+=("$took")
  printf -- '--- %s: %d min %02d s\n' "$step_name" $((took / 60)) $((took % 60))
  step_name=""
}
step() {
  step_done
  step_name="$*" step_start=$SECONDS
  printf '\n=== %s (%s)\n' "$*" "$(date +%T)"
}
summary() {
  local rc=$? failed="" i
  # The step still open when the run exits non-zero is the one that failed.
  [ "$rc" -ne 0 ] && failed=$step_name
  step_done
  printf '\n=== step durations (%s)\n' "$([ "$rc" -eq 0 ] && echo passed || echo "failed, exit $rc")"
  for i in "${!step_names[@]}"; do
    printf '%4d:%02d  %s%s\n' $((step_secs[i] / 60)) $((step_secs[i] % 60)) "${step_names[i]}" \
      "$([ "${step_names[i]}" = "$failed" ] && echo '  <- failed')"
  done
  printf '%4d:%02d  total\n' $((SECONDS / 60)) $((SECONDS % 60))
  # Whatever a failed step left behind goes before the next run.
  go run ./cmd/svclab clean >/dev/null 2>&1 || true
}
trap summary EXIT

step "sources only: no tracked binary, nothing over 1 MB outside docs/bench/"
go run ./scripts/ci/checksources

step "the Kubernetes components (svclab-kube: built once from components/, cached in /var/cache/svclab/kube)"
t0=$SECONDS
kube_binary=$(go run ./cmd/svclab kube-binary)
echo "components ready in $((SECONDS - t0)) s: $kube_binary"

step "go vet and Go tests"
go vet ./...
go test -count=1 -timeout 20m ./lab/... ./vm/... ./cmd/... ./internal/... ./scripts/...

# The kube-proxy-* modes run the real kube-proxy behind a real API server (each
# lab waits ~10 s for it; a kube-proxy mode's suite took 10-13 min on a loaded
# 2-core machine, hence the longer timeouts); with iptables-nft and
# kube-proxy-iptables-nft listed (and the two legacy ones) the suite also runs the
# differential check of svclab's proxier against kube-proxy (label differential).
# kube-proxy-ipvs needs IPVS, so it runs in the VM step below (part of it, for
# its time under TCG; docs/specs.md).
step "Ginkgo suite on this kernel ($(uname -r)): iptables-nft, iptables-legacy, and the real kube-proxy (nftables, iptables-nft, iptables-legacy)"
SVCLAB_KUBE_BINARY=$kube_binary scripts/specs.sh "$out/host" \
  iptables-nft,iptables-legacy,kube-proxy-nftables,kube-proxy-iptables-nft,kube-proxy-iptables-legacy

# The same suite as an ordinary user, no sudo (README: Without root): a user
# this script makes, svclab-ci, runs it under `svclab unshare`, in a user
# namespace of its own with its subordinate IDs; root's view must show nothing
# of it afterwards.
step "Ginkgo suite as an ordinary user (svclab unshare, no sudo): the same modes"
SVCLAB_KUBE_BINARY=$kube_binary scripts/ci/asuser.sh "$out/host" "$out/rootless" \
  iptables-nft,iptables-legacy,kube-proxy-nftables,kube-proxy-iptables-nft,kube-proxy-iptables-legacy

# Every spec of ipvs (and of no mode); of kube-proxy-ipvs all but those that
# build a lab each for little (verify on the topologies other than the seeds',
# the IPVS differential check, conntrack's lab per spec, supervision, compare's
# three labs: some 30 more minutes under TCG), and since the suite as an
# ordinary user joined the run, those of load balancers, distribution and
# churn (825 s of the 52 min this step took in a run where TCG was slow, total
# 78 min with the component binary cached); they run by hand (docs/specs.md).
# One process: the guest's two emulated CPUs are the
# bottleneck, and two or three processes there made each kube-proxy-ipvs lab
# 5-10 times slower (an API server exited on its own one-minute post-start bound).
vm_filter='!kube-proxy-ipvs || trace || seeds || services || dns || lifecycle || rootless'
vm_status=0
step "Ginkgo suite in svclab's VM (Debian's kernel): ipvs, and kube-proxy-ipvs but for its costliest labs"
scripts/vm/run.sh --out "$out/vm" --timeout 80m --mem 4096 --kube-binary "$kube_binary" \
  --env SVCLAB_MODES=ipvs,kube-proxy-ipvs --env SVCLAB_BIN=/svclab/bin/svclab \
  --test ./specs -- -ginkgo.label-filter="$vm_filter" -ginkgo.timeout=75m \
  -ginkgo.json-report=/out/specs-vm.json -ginkgo.junit-report=/out/specs-vm.xml -test.timeout=78m || vm_status=$?
# checkreport runs after a failed suite too, for its table of where the time went.
if [ -f "$out/vm/specs-vm.json" ]; then
  go run ./scripts/ci/checkreport -label-filter "$vm_filter" "$out/vm/specs-vm.json" || vm_status=1
fi
[ "$vm_status" -eq 0 ]

step "svclab verify, every mode, on the shipped topologies"
for topo in web httpd; do
  # verify exits non-zero unless it ran checks and every one passed; the report's
  # top-level verdict is its second line.
  "$out/host/svclab" verify --mode all -f "$topo" --json > "$out/verify-$topo.json"
  sed -n 2p "$out/verify-$topo.json" | grep -qx '  "passed": true,'
done
# The README's main job's second half: the real kube-proxy (nftables mode) behind
# a real API server, with the cluster DNS checks of a lab with a control plane.
"$out/host/svclab" verify --proxy kube-proxy --mode nftables --kube-binary "$kube_binary" -f httpd --json > "$out/verify-httpd-kube-proxy.json"
sed -n 2p "$out/verify-httpd-kube-proxy.json" | grep -qx '  "passed": true,'

step "svclab bench --quick (output shape only, never timings)"
"$out/host/svclab" bench --quick --out "$out/bench"

step "Vagrant: the Vagrantfile and provisioning (the box's own job: scripts/ci/vagrant.sh)"
if ! command -v vagrant >/dev/null 2>&1; then
  # Only CI needs vagrant (a Vagrant box does not): installed here, not by setup.sh.
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends vagrant >/dev/null
fi
# The Vagrantfile parses, and provisioning does what this kernel allows.
vagrant validate --ignore-provider
scripts/provision.sh --check

step "nothing left behind"
left=$(ip netns list | grep -c '^svclab-' || true)
if [ "$left" -ne 0 ]; then
  ip netns list | grep '^svclab-' >&2
  echo "scripts/test.sh: $left svclab namespace(s) outlived the run" >&2
  exit 1
fi
echo "All passed. Reports: $out"
