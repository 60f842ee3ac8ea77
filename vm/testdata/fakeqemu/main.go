// Command fakeqemu stands in for qemu-system-x86_64 in vm's accelerator
// tests, so that every way a KVM boot can fail is tried on any host, root or
// not, with or without /dev/kvm. It takes qemu's command line as the runner
// builds it and reads what to do from the environment:
//
//	FAKEQEMU_KVM     what a boot with -accel kvm does: abort (qemu's MSR error,
//	                 then SIGABRT), segv (SIGSEGV), silent (hangs printing
//	                 nothing), stall (prints the kernel's first line, hangs),
//	                 exit1 (an error on stderr, exit status 1), boot (boots),
//	                 die-after-init (reaches /init, starts the command, aborts)
//	FAKEQEMU_STATUS  the command's exit status a boot reports (default 0)
//	FAKEQEMU_LOG     a file each start appends its accelerator to
//
// A boot with any other accelerator boots. Booting means speaking the guest's
// side of the runner's protocol as vm/guest/init.sh does: the kernel's first
// line on the console (stdout), then on the virtio serial ports, which qemu
// connects to the runner's Unix sockets, "svclab booted", "svclab start", the
// command's output on svclab.stdout, "svclab exit STATUS" and "svclab done".
package main

import (
	"fmt"
	"net"
	"os"
	"strings"
	"syscall"
	"time"
)

func main() {
	accel, ports, err := parseArgs(os.Args[1:])
	if err != nil {
		fmt.Fprintf(os.Stderr, "qemu-system-x86_64: %v\n", err)
		os.Exit(1)
	}
	if log := os.Getenv("FAKEQEMU_LOG"); log != "" {
		f, err := os.OpenFile(log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			fmt.Fprintln(f, accel)
			f.Close()
		}
	}
	behaviour := "boot"
	if accel == "kvm" {
		behaviour = os.Getenv("FAKEQEMU_KVM")
	}
	status := os.Getenv("FAKEQEMU_STATUS")
	if status == "" {
		status = "0"
	}
	switch behaviour {
	case "abort":
		// What qemu 7.2 printed on a host whose KVM refuses an MSR.
		fmt.Fprintln(os.Stderr, "qemu-system-x86_64: error: failed to set MSR 0x10a to 0x69")
		fmt.Fprintln(os.Stderr, "qemu-system-x86_64: ../../target/i386/kvm/kvm.c:3183: kvm_buf_set_msrs: Assertion `ret == cpu->kvm_msr_buf->nmsrs' failed.")
		die("ABRT")
	case "segv":
		die("SEGV")
	case "silent":
		hang()
	case "stall":
		fmt.Println("Linux version 6.1.0-fake (svclab's stand-in qemu)")
		hang()
	case "exit1":
		fmt.Fprintln(os.Stderr, "qemu-system-x86_64: -accel kvm: failed to initialize kvm: Permission denied")
		os.Exit(1)
	case "boot", "die-after-init":
		if err := boot(accel, ports, status, behaviour == "die-after-init"); err != nil {
			fmt.Fprintf(os.Stderr, "qemu-system-x86_64: stand-in guest: %v\n", err)
			os.Exit(1)
		}
	default:
		fmt.Fprintf(os.Stderr, "qemu-system-x86_64: stand-in: FAKEQEMU_KVM=%q is none of abort, segv, silent, stall, exit1, boot, die-after-init\n", behaviour)
		os.Exit(1)
	}
}

// parseArgs returns the accelerator and the socket path of each virtio serial
// port by name, from -chardev socket,id=ID,path=P and -device
// virtserialport,...,chardev=ID,name=NAME.
func parseArgs(args []string) (accel string, ports map[string]string, err error) {
	paths := map[string]string{}
	names := map[string]string{}
	for i := 0; i+1 < len(args); i++ {
		opts := options(args[i+1])
		switch args[i] {
		case "-accel":
			accel, _, _ = strings.Cut(args[i+1], ",")
		case "-chardev":
			paths[opts["id"]] = opts["path"]
		case "-device":
			if strings.HasPrefix(args[i+1], "virtserialport,") {
				names[opts["name"]] = opts["chardev"]
			}
		}
	}
	ports = map[string]string{}
	for _, name := range []string{"svclab.ctl", "svclab.stdout", "svclab.stderr"} {
		p := paths[names[name]]
		if p == "" {
			return "", nil, fmt.Errorf("no -chardev socket for virtio port %s", name)
		}
		ports[name] = p
	}
	return accel, ports, nil
}

func options(s string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

func boot(accel string, ports map[string]string, status string, dieAfterInit bool) error {
	fmt.Println("Linux version 6.1.0-fake (svclab's stand-in qemu)")
	conns := map[string]net.Conn{}
	for name, path := range ports {
		c, err := net.Dial("unix", path)
		if err != nil {
			return err
		}
		defer c.Close()
		conns[name] = c
	}
	ctl := conns["svclab.ctl"]
	for _, line := range []string{"svclab booted 0.42\n", "svclab start 0.50\n"} {
		if _, err := ctl.Write([]byte(line)); err != nil {
			return err
		}
	}
	if dieAfterInit {
		die("ABRT")
	}
	if _, err := fmt.Fprintf(conns["svclab.stdout"], "the stand-in guest ran the command under %s\n", accel); err != nil {
		return err
	}
	_, err := fmt.Fprintf(ctl, "svclab exit %s\nsvclab done\n", status)
	return err
}

// die ends the process by SIG<signal> with the default action, as a crashing qemu
// ends, without a core file. Go's runtime handles these signals itself, so a
// shell that signals itself does it.
func die(signal string) {
	syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
	err := syscall.Exec("/bin/sh", []string{"sh", "-c", "kill -" + signal + " $$"}, os.Environ())
	fmt.Fprintf(os.Stderr, "qemu-system-x86_64: stand-in: exec /bin/sh: %v\n", err)
	os.Exit(1)
}

func hang() {
	for {
		time.Sleep(time.Hour)
	}
}
