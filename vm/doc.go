// Package vm runs a command inside a throwaway qemu VM that boots Debian's
// distribution kernel, for the parts of svclab the host kernel cannot do: the
// machines svclab is built on (and CI) have no IPVS, no ipset and no dummy
// interface, and can load no modules.
//
// # Using it
//
//	code, err := vm.Run(ctx, vm.Config{
//		Command: []string{"bin/svclab", "verify", "--mode", "ipvs", "--no-vm"},
//		Files:   map[string]string{"bin/svclab": self},
//		Stdout:  os.Stdout, Stderr: os.Stderr, Log: os.Stderr,
//	})
//
// Run returns the command's exit status; err is non-nil only when the VM itself
// failed (qemu missing, timeout, cancelled, guest crashed, /out not copied).
// Execute returns the same plus timings; Probe boots once and reports them;
// EnsureKernel fetches the kernel alone.
//
// # What happens
//
// The kernel is the package linux-image-amd64 depends on (apt-cache depends),
// fetched with apt-get download and kept in CacheDir/kernel/PACKAGE_VERSION. Its
// compressed payload is unpacked once into an ELF vmlinux that qemu starts
// through the PVH entry point: under TCG that saves the ~4 s the bzImage's own
// xz decompressor would take.
//
// The guest's root is an initramfs in two parts. The base image, cached in
// CacheDir/image/HASH.cpio and keyed by everything it is built from, holds
// busybox-static, dash and bash, iptables with both backends (plain names are
// nft), the xtables extensions, nft, ipset, ipvsadm, conntrack, iproute2's ip, ss,
// tc and nstat, tcpdump, every shared library they need (ldd), a few /etc files, /init, and the
// netfilter, IPVS, ipset, bridge, sched, veth/dummy/vxlan and virtio modules with
// their dependencies and depmod output (so the guest kernel can autoload more on
// demand). It is left uncompressed: decompressing it costs the emulated CPU more
// than loading it costs qemu. Each run appends a small second archive with the
// caller's Files and the command script; the kernel unpacks both in order.
//
// /init (guest/init.sh) mounts proc, sysfs, devtmpfs, devpts and tmpfs /run,
// /tmp and /dev/shm, creates /run/netns and /out, loads the modules svclab needs
// (IPVS and all its schedulers, ipset types, xt matches, nf_tables, conntrack
// netlink, br_netfilter, veth, dummy, ...), brings lo up and runs the command
// with dash in /svclab. The guest talks to the host over three virtio serial
// ports, each a Unix socket on the host: svclab.stdout and svclab.stderr carry
// the command's output only, live; svclab.ctl carries /init's reports (booted,
// started, exit status) followed by a tar of /out. The kernel's console is the
// first serial port, kept apart (Config.Console). After the command the guest
// powers off; qemu exits.
//
// # Accelerator
//
// "auto" uses KVM when /dev/kvm answers and a KVM guest reaches /init; any KVM
// boot that does not is taken to mean that KVM does not run guests on this host,
// whatever the way it failed: the kernel printing nothing within 4 s, no /init
// within 15 s (both seen on hosts with nested virtualisation where /dev/kvm
// opens), qemu aborting, crashing on a signal or exiting before the guest
// started (qemu 7.2 aborts with "failed to set MSR 0x10a" on another such host),
// an error on qemu's stderr. qemu is then killed and the run starts again under
// TCG with -smp CPUs (multi-threaded TCG), after one line saying why, e.g.
//
//	vm: kvm: qemu aborted before the guest started: failed to set MSR 0x10a to 0x69; using tcg, remembered in /var/cache/svclab/accel/6.18.44.json
//
// The verdict (kvm or tcg, and why) is kept in CacheDir/accel/HOSTKERNEL.json so
// later runs do not pay the probe; delete the file to probe again. A run started
// under KVM by a verdict is still watched, and falls back the same way. What
// happens after /init (the command failing, qemu dying under it) is the
// command's outcome, reported as such: KVM has proved itself by then. An
// explicit "kvm" never falls back: its failure is the run's error.
//
// # Cleanup
//
// qemu runs in its own process group with a parent-death signal; it is killed
// and reaped on every path out of Run (success, guest failure, Config.Timeout,
// context cancellation), and the run's temporary directory (initrd copy,
// sockets) is removed. Cached kernels and images unused for a week are removed
// when a new one is made.
package vm
