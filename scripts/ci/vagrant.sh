#!/usr/bin/env bash
# The Vagrant box's job (a job of its own: scripts/test.sh runs only `vagrant
# validate` and `scripts/provision.sh --check`): svclab in a Vagrant box that really
# boots. As root on a fresh Debian 12 machine it
#   1. installs vagrant, vagrant-libvirt and libvirt's daemon from Debian's packages;
#   2. starts libvirtd (and virtlogd) itself unless they already run;
#   3. builds the box svclab/debian12 (scripts/vagrant-box.sh; cached after once);
#   4. brings a new VM up from scratch: `vagrant up` (bin/svclab built on this host,
#      the checkout and this host's Go synced in, scripts/provision.sh);
#   5. runs `svclab verify --mode all` in it and checks that every mode ran on the
#      box's own kernel (IPVS native there, no VM of svclab's inside);
#   6. destroys the VM and removes what the run added to libvirt (the box's image
#      in the storage pool, the pool itself if the run made it), stops the daemons
#      it started, and checks that the root network namespace is as it was.
# Step 6 runs however the run ends. The VM is on qemu's user-mode network: while it
# runs, qemu listens on one port of 127.0.0.1 (SSH) and its sockets carry the VM's
# downloads; no link, address, route or firewall rule appears on the host.
#
#   scripts/ci/vagrant.sh [--out DIR] [--full]
#
# --full runs `vagrant up --provision-with=test` (every spec in every mode in the
# box) after verify. Each phase's time is printed, and kept in DIR/times.txt with
# the console and provisioning logs.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$repo"
export PATH="$PATH:/usr/local/go/bin"

out= full=false
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=$2; shift 2 ;;
    --full) full=true; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "scripts/ci/vagrant.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
done
if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/ci/vagrant.sh: libvirt's system daemon and the box build need root: run it with sudo" >&2
  exit 2
fi
out=${out:-$(mktemp -d /tmp/svclab-vagrant.XXXXXX)}
mkdir -p "$out"
out=$(cd "$out" && pwd)

say() { printf 'vagrant-ci: %s\n' "$*" >&2; }
phase_start=0
phase() { phase_name=$1; phase_start=$SECONDS; printf '\n=== vagrant: %s (%s)\n' "$1" "$(date +%T)" >&2; }
phase_done() {
  printf '%-10s %5d s\n' "$phase_name" "$((SECONDS - phase_start))" | tee -a "$out/times.txt" >&2
}

phase install
declare -A pkg_of=(
  [vagrant]=vagrant
  [libvirtd]=libvirt-daemon-system
  [virsh]=libvirt-clients
  [qemu-system-x86_64]=qemu-system-x86
)
missing=()
for bin in "${!pkg_of[@]}"; do
  command -v "$bin" >/dev/null 2>&1 || missing+=("${pkg_of[$bin]}")
done
dpkg-query -W -f '${Status}' vagrant-libvirt 2>/dev/null | grep -q 'ok installed' || missing+=(vagrant-libvirt)
if [ ${#missing[@]} -gt 0 ]; then
  say "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
phase_done

# What the root network namespace looks like; compared after the run. Listening
# sockets are left out: other programs on the machine open and close theirs.
rootns_state() {
  ip -o link show | sed 's/ state [A-Z]* / /; s/ qlen [0-9]*//'
  ip -o addr show
  ip route show table all
  ip rule show
  local save
  for save in iptables-nft-save iptables-legacy-save ip6tables-nft-save ip6tables-legacy-save nft; do
    command -v "$save" >/dev/null 2>&1 || continue
    if [ "$save" = nft ]; then nft list ruleset; else "$save" | { grep -v '^#' || true; }; fi
  done
  sysctl -n net.ipv4.ip_forward net.ipv4.conf.all.forwarding
}
rootns_state > "$out/rootns-before.txt"

# Everything the run starts or adds is undone here, in reverse, however it ends.
started_pids=()
pool_created=false
vagrant_env=()
console= domain=
cleanup() {
  local status=$? start=$SECONDS
  trap - EXIT INT TERM
  printf '\n=== vagrant: destroy and clean up (%s)\n' "$(date +%T)" >&2
  if [ ${#vagrant_env[@]} -gt 0 ]; then
    if [ -z "$domain" ]; then
      domain=$(virsh -q domname "$(cat "$out/dotvagrant/machines/default/libvirt/id" 2>/dev/null)" 2>/dev/null || true)
    fi
    env "${vagrant_env[@]}" vagrant destroy -f >&2 || status=1
    # qemu outlives libvirtd, so a domain vagrant could not destroy goes here,
    # before the daemons this run started stop.
    if [ -n "$domain" ] && virsh -q dominfo "$domain" >/dev/null 2>&1; then
      say "vagrant destroy left $domain: destroying it with virsh"
      virsh -q destroy "$domain" >/dev/null 2>&1 || true
      virsh -q undefine "$domain" --remove-all-storage >/dev/null || true
      status=1
    fi
    # libvirt keeps a domain's logs after the domain: they go with the results.
    mv "$console" "$out/console.log" 2>/dev/null || true
    if [ -n "$domain" ]; then
      mv "/var/log/libvirt/qemu/$domain.log" "$out/qemu.log" 2>/dev/null || true
    fi
    # vagrant-libvirt uploads the box's image into the storage pool once per box
    # version and leaves it there: an upload of this run's goes with it (one that
    # was there before may back someone's VM).
    for vol in $(pool_volumes); do
      grep -qxF "$vol" "$out/volumes-before.txt" || virsh -q vol-delete --pool default "$vol" >/dev/null || status=1
    done
    if $pool_created && virsh -q pool-info default >/dev/null 2>&1; then
      virsh -q pool-destroy default >/dev/null 2>&1 || true
      virsh -q pool-undefine default >/dev/null || status=1
    fi
  fi
  for ((i = ${#started_pids[@]} - 1; i >= 0; i--)); do
    kill "${started_pids[i]}" 2>/dev/null || true
    wait "${started_pids[i]}" 2>/dev/null || true
  done
  printf '%-10s %5d s\n' destroy "$((SECONDS - start))" | tee -a "$out/times.txt" >&2
  rootns_state > "$out/rootns-after.txt"
  if ! diff -u "$out/rootns-before.txt" "$out/rootns-after.txt" >&2; then
    say "the root network namespace changed during the run (diff above)"
    status=1
  fi
  if [ "$status" -eq 0 ]; then
    say "passed; logs and times in $out"
  else
    say "FAILED; logs in $out"
  fi
  exit "$status"
}
trap cleanup EXIT
trap 'say "failed: line $LINENO: $BASH_COMMAND"' ERR
trap 'exit 130' INT
trap 'exit 143' TERM

phase libvirtd
# A host with systemd has the daemons socket-activated; here (CI, containers) they
# may not run at all. Those started here stop at the end.
if ! virsh -q -c qemu:///system version >/dev/null 2>&1; then
  # Something must listen on virtlogd's socket (systemd, or a virtlogd): the file
  # alone may be left from a virtlogd that was killed.
  if ! ss -Hxl | grep -qF /run/libvirt/virtlogd-sock; then
    virtlogd > "$out/virtlogd.log" 2>&1 &
    started_pids+=($!)
  fi
  libvirtd > "$out/libvirtd.log" 2>&1 &
  started_pids+=($!)
  for _ in $(seq 1 60); do
    virsh -q -c qemu:///system version >/dev/null 2>&1 && break
    sleep 0.5
  done
  if ! virsh -q -c qemu:///system version >/dev/null 2>&1; then
    tail -n 20 "$out/libvirtd.log" >&2
    say "libvirtd did not come up (log above)"
    exit 1
  fi
fi
export LIBVIRT_DEFAULT_URI=qemu:///system
virsh -q pool-info default >/dev/null 2>&1 || pool_created=true
# pool_volumes: the volumes in libvirt's default storage pool, if there is one.
pool_volumes() { virsh -q vol-list default 2>/dev/null | awk '{print $1}' || true; }
pool_volumes > "$out/volumes-before.txt"
phase_done

phase box
scripts/vagrant-box.sh
phase_done

phase accel
# The Vagrantfile gives the VM KVM or TCG by the verdict svclab's own VM keeps for
# this host kernel (vm/accel.go): some hosts have a /dev/kvm whose guests abort or
# hang. Where /dev/kvm opens and no run has judged it yet, one probe boot of
# svclab's VM does, falling back to TCG and remembering it if KVM fails.
doctor=$(go run ./cmd/svclab doctor --json 2>"$out/doctor.err" || true)
if [ -z "$doctor" ]; then
  cat "$out/doctor.err" >&2
  say "svclab doctor failed (above)"
  exit 1
fi
printf '%s\n' "$doctor" > "$out/doctor.json"
if grep -q '"device": "usable"' "$out/doctor.json" && ! grep -q '"verdict":' "$out/doctor.json"; then
  say "/dev/kvm opens and KVM was not tried on this host kernel yet: svclab's VM tries it"
  go run ./vm/cmd/svclab-vm -probe >&2
fi
go run ./cmd/svclab doctor 2>/dev/null | grep -E '^ *accelerator' >&2 || true
phase_done

# A VM of its own: its own Vagrant state (not the checkout's .vagrant), its own SSH
# port, and a console log kept with the results.
ssh_port=
for _ in $(seq 1 50); do
  p=$((20000 + RANDOM % 10000))
  if [ -z "$(ss -Hltn "sport = :$p")" ]; then ssh_port=$p; break; fi
done
if [ -z "$ssh_port" ]; then
  say "no free port for the VM's SSH on 127.0.0.1"
  exit 1
fi
# libvirt writes the console where its own logs are (qemu may not reach $out).
console=/var/log/libvirt/qemu/svclab-vagrant-ci-$$.console.log
vagrant_env=(
  VAGRANT_DOTFILE_PATH="$out/dotvagrant"
  SVCLAB_VAGRANT_SSH_PORT="$ssh_port"
  SVCLAB_VAGRANT_CONSOLE="$console"
)
vagrant() { env "${vagrant_env[@]}" vagrant "$@"; }
# stamp prefixes each line with the seconds since it started reading.
stamp() { local t0=$SECONDS line; while IFS= read -r line; do printf '[%4ds] %s\n' "$((SECONDS - t0))" "$line"; done; }
# progress_off drops the progress meter Vagrant redraws on one line (box upload).
progress_off() { sed -u 's/\x1b\[K\(Progress: [0-9]*%\)\{0,1\}//g'; }

phase up
status=0
vagrant up --provider=libvirt 2>&1 | progress_off | stamp | tee "$out/up.log" || status=$?
domain=$(virsh -q domname "$(cat "$out/dotvagrant/machines/default/libvirt/id" 2>/dev/null)" 2>/dev/null || true)
if [ "$status" -ne 0 ]; then
  tail -n 40 "$console" >&2 2>/dev/null || true
  say "vagrant up failed (the VM's console above; all of it in $out/console.log)"
  exit 1
fi
# The accelerator the VM got, for the record beside the times.
printf '  %-8s %s\n' domain "$(virsh -q dumpxml "$domain" | sed -n "s/^<domain type='\([a-z]*\)'.*/\1/p")" \
  | tee -a "$out/times.txt" >&2
phase_done
# The parts of vagrant up, from the times stamped on its output.
at() { sed -n "s/^\[ *\([0-9]*\)s\] ==> default: $1.*/\1/p" "$out/up.log" | head -n1; }
t_start=$(at 'Starting domain') t_ssh=$(at 'Machine booted and ready')
t_sync=$(at 'Rsyncing folder') t_prov=$(at 'Running provisioner') t_end=$((SECONDS - phase_start))
{
  printf '  %-8s %5d s  (go build on the host, box image into the storage pool, domain defined)\n' define "$t_start"
  printf '  %-8s %5d s  (domain start to SSH)\n' boot "$((t_ssh - t_start))"
  printf '  %-8s %5d s  (rsync of the checkout and Go)\n' sync "$((t_prov - t_sync))"
  printf '  %-8s %5d s  (scripts/provision.sh)\n' provision "$((t_end - t_prov))"
} | tee -a "$out/times.txt" >&2

phase verify
vagrant ssh -c 'uname -r; sudo /vagrant/bin/svclab verify --mode all' 2>&1 | tee "$out/verify.log"
# Every mode ran on the box's kernel: verify names each mode it ran here with its
# count, and says so when it hands a mode to svclab's VM instead.
if grep -q "runs in svclab's VM" "$out/verify.log"; then
  say "verify used svclab's VM inside the box: the box's kernel did not run every mode"
  exit 1
fi
for mode in iptables-nft iptables-legacy ipvs; do
  if ! grep -Eq "^$mode: ([0-9]+) of \\1 checks passed" "$out/verify.log"; then
    say "verify did not report $mode as run and passed in the box"
    exit 1
  fi
done
phase_done

if $full; then
  phase test
  vagrant up --provision-with=test 2>&1 | progress_off | tee "$out/test.log"
  phase_done
fi
