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
// nft), the xtables extensions, ipset, ipvsadm, conntrack, iproute2's ip, ss and
// tc, every shared library they need (ldd), a few /etc files, /init, and the
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
// "auto" uses KVM when /dev/kvm answers and a KVM guest prints its first kernel
// line within a few seconds and reaches /init soon after; otherwise (on the
// machines svclab is built on, KVM opens but the guest hangs before the kernel
// prints) qemu is killed and the run starts again under TCG with -smp CPUs
// (multi-threaded TCG). The verdict is kept in CacheDir/accel/HOSTKERNEL.json so
// later runs do not pay the probe; delete the file to probe again.
//
// # Cleanup
//
// qemu runs in its own process group with a parent-death signal; it is killed
// and reaped on every path out of Run (success, guest failure, Config.Timeout,
// context cancellation), and the run's temporary directory (initrd copy,
// sockets) is removed. Cached kernels and images unused for a week are removed
// when a new one is made.
package vm
