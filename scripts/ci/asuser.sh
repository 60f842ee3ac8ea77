#!/usr/bin/env bash
# The Ginkgo suite as an ordinary user, no sudo (issue 36): CI's run of what
# README's "Without root" promises. As root, it makes (once) a user of its own,
# svclab-ci, with a subordinate ID range, copies the repository's tracked files
# and the suite's binaries into that user's home, and runs
#
#   svclab unshare -- scripts/specs.sh --prebuilt BIN OUT MODES
#
# as that user: the suite runs in a user namespace where the user is root, the
# specs acting as nobody use the subordinate range, and every lab namespace is
# made inside. Then it checks root's view: no svclab namespace in
# `ip netns list`, no lab record in /run/svclab, no process of the user left.
#
#   scripts/ci/asuser.sh BINDIR OUTDIR MODES
#
# BINDIR holds what `scripts/specs.sh --build-only` built; the reports land in
# OUTDIR; $SVCLAB_KUBE_BINARY, when set, is the component binary (readable by
# every user, as /var/cache/svclab/kube's are).
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
bin=${1:?usage: scripts/ci/asuser.sh BINDIR OUTDIR MODES}
out=${2:?usage: scripts/ci/asuser.sh BINDIR OUTDIR MODES}
modes=${3:?usage: scripts/ci/asuser.sh BINDIR OUTDIR MODES}
user=svclab-ci

if [ "$(id -u)" -ne 0 ]; then
  echo "scripts/ci/asuser.sh: it makes a user and runs the suite as that user: run it as root" >&2
  exit 2
fi
if ! id "$user" >/dev/null 2>&1; then
  # Debian's useradd gives a new user a subordinate range (SUB_UID_COUNT in
  # /etc/login.defs); the check below adds one where it did not.
  useradd --create-home --shell /bin/bash "$user"
  echo "scripts/ci/asuser.sh: made the user $user" >&2
fi
if ! grep -q "^$user:" /etc/subuid || ! grep -q "^$user:" /etc/subgid; then
  # A range above every range already given.
  start=$(awk -F: '{ end = $2 + $3; if (end > max) max = end } END { print (max > 100000 ? max : 100000) }' /etc/subuid /etc/subgid)
  usermod --add-subuids "$start-$((start + 65535))" --add-subgids "$start-$((start + 65535))" "$user"
fi
home=$(getent passwd "$user" | cut -d: -f6)
uid=$(id -u "$user")

# The user's own copy: the repository may be in a directory only root reads
# (CI's clone under /root). Tracked files as they are in the work tree.
# Only a copy this script made is replaced (its mark): never a directory of
# the user's own that happens to have the name.
work="$home/svclab"
mark="$work/.made-by-scripts-ci-asuser"
if [ -e "$work" ] && [ ! -f "$mark" ]; then
  echo "scripts/ci/asuser.sh: $work exists and is not a copy this script made; move it away" >&2
  exit 2
fi
rm -rf "$work"
mkdir -p "$work/bin" "$work/out"
touch "$mark"
git -C "$repo" ls-files -z | (cd "$repo" && tar --null -T - -cf -) | tar -C "$work" -xf -
for f in svclab specs.test checkreport ginkgo; do
  cp "$bin/$f" "$work/bin/$f"
done
chown -R "$user:" "$work"

# The state directory without XDG_RUNTIME_DIR (a user without a login
# session): what rootless.StateDir picks. Runs before this one may have left
# labs there, which the check below must not blame on this run.
state=/tmp/svclab-$uid
before=$(ls "$state" 2>/dev/null | grep -c '\.json$' || true)

# iptables-nft raises its socket's send buffer for a big restore with
# SO_SNDBUFFORCE, which a user namespace may not: the host's default must fit
# kube-proxy's restore of the differential corpora (README: Without root). A
# host setting, as a module loaded: raised for this step, restored after.
wmem=$(cat /proc/sys/net/core/wmem_default)
if [ "$wmem" -lt 4194304 ]; then
  echo "scripts/ci/asuser.sh: net.core.wmem_default $wmem -> 4194304 for this step (iptables-nft without root)" >&2
  sysctl -qw net.core.wmem_default=4194304
  trap 'sysctl -qw net.core.wmem_default='"$wmem"'' EXIT
fi

status=0
runuser -u "$user" -- env -i HOME="$home" USER="$user" PATH="/usr/local/go/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
  ${SVCLAB_PROCS:+SVCLAB_PROCS="$SVCLAB_PROCS"} ${SVCLAB_KUBE_BINARY:+SVCLAB_KUBE_BINARY="$SVCLAB_KUBE_BINARY"} \
  "$work/bin/svclab" unshare -- "$work/scripts/specs.sh" --prebuilt "$work/bin" "$work/out" "$modes" || status=$?
mkdir -p "$out"
cp -r "$work/out/." "$out/"

# Root's view: the run made nothing it can see, and left nothing running.
if ip netns list | grep -q '^svclab-'; then
  ip netns list | grep '^svclab-' >&2
  echo "scripts/ci/asuser.sh: the suite as $user left namespaces in root's view" >&2
  status=1
fi
if ls /run/svclab/*.json >/dev/null 2>&1 && [ -n "$(find /run/svclab -maxdepth 1 -name '*.json' -user "$user")" ]; then
  echo "scripts/ci/asuser.sh: the suite as $user wrote lab records into root's /run/svclab" >&2
  status=1
fi
after=$(ls "$state" 2>/dev/null | grep -c '\.json$' || true)
if [ "$after" -gt "$before" ]; then
  ls -l "$state" >&2
  echo "scripts/ci/asuser.sh: the suite as $user left $((after - before)) lab record(s) in its state directory $state" >&2
  status=1
fi
# A process may still be exiting as its namespace goes: a few seconds' grace.
for _ in $(seq 20); do
  pgrep -u "$user" >/dev/null || break
  sleep 0.5
done
if pgrep -u "$user" >/dev/null; then
  ps -o pid,args -u "$user" >&2
  echo "scripts/ci/asuser.sh: processes of $user outlived the suite" >&2
  status=1
fi
exit "$status"
