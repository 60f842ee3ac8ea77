#!/usr/bin/busybox sh
# PID 1 of svclab's VM guest. It prepares a node-like root, runs the command the
# host asked for (/etc/svclab/run.sh, added per run), reports to the host over
# the virtio serial port "svclab.ctl" and powers off. The host reads ctl lines:
#   svclab booted UPTIME | svclab start UPTIME | svclab exit STATUS
#   svclab out (a tar of /out follows) | svclab done | svclab fail MESSAGE
# Busybox's shell runs its own applets before searching PATH, so anything that
# must be the real tool (iproute2's ip) is called by full path, and the command
# itself runs under dash.

export PATH=/usr/sbin:/usr/bin
export HOME=/root
bb=/usr/bin/busybox
ctl_open=

fail() {
	echo "svclab-init: $*" >/dev/console
	[ -n "$ctl_open" ] && echo "svclab fail $*" >&9
	$bb poweroff -f
	while :; do $bb sleep 60; done
}

uptime_s() {
	read -r up _ </proc/uptime
	echo "$up"
}

$bb mount -t proc proc /proc || fail "mount /proc"
$bb mount -t sysfs sysfs /sys || fail "mount /sys"
$bb mount -t devtmpfs devtmpfs /dev || fail "mount /dev"
exec </dev/null >/dev/console 2>&1

# The serial ports to the host come first, so failures after this are reported.
$bb modprobe -a $(cat /etc/svclab/modules.early) || fail "modprobe $(cat /etc/svclab/modules.early)"
ctl_dev= out_dev= err_dev=
i=0
while [ $i -lt 500 ]; do
	for p in /sys/class/virtio-ports/*; do
		[ -r "$p/name" ] || continue
		case "$(cat "$p/name")" in
		svclab.ctl) ctl_dev=/dev/${p##*/} ;;
		svclab.stdout) out_dev=/dev/${p##*/} ;;
		svclab.stderr) err_dev=/dev/${p##*/} ;;
		esac
	done
	[ -n "$ctl_dev" ] && [ -n "$out_dev" ] && [ -n "$err_dev" ] && [ -c "$ctl_dev" ] && [ -c "$out_dev" ] && [ -c "$err_dev" ] && break
	$bb usleep 10000
	i=$((i + 1))
done
[ -c "$ctl_dev" ] || fail "no virtio port svclab.ctl"
[ -c "$out_dev" ] && [ -c "$err_dev" ] || fail "no virtio ports svclab.stdout/svclab.stderr"
exec 9>"$ctl_dev" 7>"$out_dev" 8>"$err_dev"
ctl_open=1
echo "svclab booted $(uptime_s)" >&9

$bb mkdir -p /dev/pts /dev/shm
$bb mount -t devpts devpts /dev/pts
$bb mount -t tmpfs -o mode=1777 tmpfs /dev/shm
$bb mount -t tmpfs -o mode=755 tmpfs /run || fail "mount /run"
$bb mount -t tmpfs -o mode=1777 tmpfs /tmp || fail "mount /tmp"
$bb mkdir -p /run/netns /out

if ! $bb modprobe -a $(cat /etc/svclab/modules.preload) 2>/run/modprobe.err; then
	fail "modprobe: $(cat /run/modprobe.err)"
fi
/usr/bin/ip link set lo up || fail "ip link set lo up"
$bb hostname svclab

echo "svclab start $(uptime_s)" >&9
/usr/bin/dash /etc/svclab/run.sh </dev/null >&7 2>&8 7>&- 8>&- 9>&-
status=$?
echo "svclab exit $status" >&9
if [ -f /etc/svclab/send-out ]; then
	echo "svclab out" >&9
	(cd /out && $bb tar -cf - .) >&9 || echo "svclab-init: tar of /out failed" >/dev/console
else
	echo "svclab done" >&9
fi
exec 7>&- 8>&- 9>&-
$bb poweroff -f
while :; do $bb sleep 60; done
