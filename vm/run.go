package vm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Result is what one VM run did and how long its parts took.
type Result struct {
	// ExitCode is the command's exit status in the guest (128+N if a signal N
	// ended it); -1 when the guest never reported one.
	ExitCode int
	Kernel   Kernel
	// Image is the hash naming the cached base image.
	Image string
	// Accel is the accelerator the command ran under: "kvm" or "tcg".
	Accel string
	// Prepare is the time before the accelerator choice and qemu's start:
	// kernel, base image (a build on a cold cache), the per-run archive.
	Prepare time.Duration
	// Booted is from qemu's start to /init talking to the host; Started to the
	// command's first instruction (modules loaded); Total to qemu's end.
	Booted, Started, Total time.Duration
}

// ErrTimeout is wrapped by the error Run returns when Config.Timeout passed.
var ErrTimeout = errors.New("vm: timed out")

// Run boots a VM, runs c.Command in it and returns the command's exit status.
// err is nil exactly when the guest reported a status and /out (if asked for)
// was copied back; a non-zero status alone is not an error. The VM is gone when
// Run returns, whatever happened: qemu reaped, temporary files removed.
func Run(ctx context.Context, c Config) (exitCode int, err error) {
	r, err := Execute(ctx, c)
	return r.ExitCode, err
}

// Probe boots a VM that runs /usr/bin/true and reports the kernel, accelerator
// and boot times, e.g. to check a machine or warm the cache. c.Command is
// ignored.
func Probe(ctx context.Context, c Config) (Result, error) {
	c.Command = []string{"/usr/bin/true"}
	r, err := Execute(ctx, c)
	if err == nil && r.ExitCode != 0 {
		err = fmt.Errorf("vm: probe: /usr/bin/true exited %d", r.ExitCode)
	}
	return r, err
}

// Execute is Run with the details: which kernel and accelerator were used and
// how long boot took.
func Execute(ctx context.Context, c Config) (Result, error) {
	res := Result{ExitCode: -1}
	c, err := c.withDefaults()
	if err != nil {
		return res, err
	}
	lg := logger{c.Log}
	t0 := time.Now()
	qemu, err := exec.LookPath(c.Qemu)
	if err != nil {
		return res, fmt.Errorf("vm: %s not found (Debian package qemu-system-x86; scripts/setup.sh installs it): %w", c.Qemu, err)
	}
	k, err := EnsureKernel(ctx, c.CacheDir, c.Log)
	if err != nil {
		return res, fmt.Errorf("vm: %w", err)
	}
	res.Kernel = k
	img, err := ensureBaseImage(ctx, k, c.CacheDir, c.Tools, lg)
	if err != nil {
		return res, fmt.Errorf("vm: %w", err)
	}
	res.Image = img.Hash
	sweepDeadRunDirs()
	tmp, err := os.MkdirTemp("", runDirPrefix+strconv.Itoa(os.Getpid())+"-")
	if err != nil {
		return res, fmt.Errorf("vm: %w", err)
	}
	defer os.RemoveAll(tmp)
	initrd := filepath.Join(tmp, "initrd")
	if err := writeInitrd(initrd, img.Path, c); err != nil {
		return res, err
	}
	res.Prepare = time.Since(t0)
	return newBooter(c, qemu, k.BootImage(), initrd, tmp).run(ctx, res)
}

// runDirPrefix names a run's temporary directory, followed by the runner's pid.
const runDirPrefix = "svclab-vm-"

// sweepDeadRunDirs removes the temporary directories of runners that died
// without cleaning up (SIGKILL gives no chance to): each holds a 27 MB initrd.
func sweepDeadRunDirs() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), runDirPrefix+"*-*"))
	for _, d := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), runDirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid <= 0 {
			continue
		}
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); errors.Is(err, os.ErrNotExist) {
			os.RemoveAll(d)
		}
	}
}

// writeInitrd concatenates the cached base image and this run's archive. The
// kernel unpacks concatenated cpio archives in order, later entries replacing
// earlier ones.
func writeInitrd(dst, base string, c Config) error {
	rt, err := runTree(c)
	if err != nil {
		return err
	}
	out, err := os.Create(dst)
	if err != nil {
		return fmt.Errorf("vm: %w", err)
	}
	defer out.Close()
	in, err := os.Open(base)
	if err != nil {
		return fmt.Errorf("vm: guest image: %w", err)
	}
	defer in.Close()
	if _, err := io.Copy(out, in); err != nil {
		return fmt.Errorf("vm: copy guest image: %w", err)
	}
	if err := rt.writeTo(out); err != nil {
		return fmt.Errorf("vm: per-run archive: %w", err)
	}
	return out.Close()
}

// accelChoice is the accelerator a run starts with.
type accelChoice struct {
	accel string
	why   string
	// fallback: a KVM boot that does not reach /init is retried with TCG (auto).
	fallback bool
	// probing: no verdict is cached yet; the first KVM boot makes one.
	probing bool
}

func chooseAccel(c Config, kvmUsable func() error) (accelChoice, error) {
	switch c.Accel {
	case AccelTCG:
		return accelChoice{accel: AccelTCG, why: "asked for"}, nil
	case AccelKVM:
		if err := kvmUsable(); err != nil {
			return accelChoice{}, fmt.Errorf("vm: accel kvm: %w", err)
		}
		return accelChoice{accel: AccelKVM, why: "asked for"}, nil
	}
	if err := kvmUsable(); err != nil {
		return accelChoice{accel: AccelTCG, why: err.Error()}, nil
	}
	if v, ok := LoadVerdict(c.CacheDir); ok {
		return accelChoice{accel: v.Accel, why: fmt.Sprintf("verdict in %s: %s", VerdictPath(c.CacheDir), v.Reason), fallback: true}, nil
	}
	return accelChoice{accel: AccelKVM, why: "first try of /dev/kvm on this host kernel", fallback: true, probing: true}, nil
}

// booter runs qemu for one Config; boot may be called twice when KVM falls back.
// It knows nothing of where the kernel and initrd came from, so the accelerator
// logic can be driven with any qemu, kernel and initrd.
type booter struct {
	c      Config
	qemu   string
	kernel string
	initrd string
	dir    string
	lg     logger
	// kvmUsable tells whether /dev/kvm can be opened; KVMUsable outside tests.
	kvmUsable func() error
	// watch bounds every KVM boot's progress.
	watch    kvmWatch
	deadline time.Time // set at the first qemu start
}

func newBooter(c Config, qemu, kernel, initrd, dir string) *booter {
	return &booter{c: c, qemu: qemu, kernel: kernel, initrd: initrd, dir: dir, lg: logger{c.Log},
		kvmUsable: KVMUsable, watch: defaultKVMWatch}
}

// run boots the VM under the accelerator chooseAccel picks. In auto mode a KVM
// boot that does not reach /init, whatever the way (silence, a stall, qemu
// aborting, crashing or exiting, an error on its stderr), means KVM does not run
// guests on this host: the run boots again under TCG, says why in one line and
// remembers it for this host kernel. What happens after /init is the command's
// business, not the accelerator's, and is reported as such.
func (b *booter) run(ctx context.Context, res Result) (Result, error) {
	choice, err := chooseAccel(b.c, b.kvmUsable)
	if err != nil {
		return res, err
	}
	accel := choice.accel
	b.lg.printf("qemu: %s (%s), %d CPUs, %d MiB", accel, choice.why, b.c.CPUs, b.c.MemoryMiB)
	out, err := b.boot(ctx, accel)
	if out.kvmFailure != "" {
		if !choice.fallback {
			return res, fmt.Errorf("vm: accel kvm: %s\n%s", out.kvmFailure, out.qemuOutput)
		}
		v := Verdict{Accel: AccelTCG, Reason: "kvm: " + out.kvmFailure}
		if serr := saveVerdict(b.c.CacheDir, v); serr != nil {
			b.lg.printf("%s; using tcg (not remembered: %v)", v.Reason, serr)
		} else {
			b.lg.printf("%s; using tcg, remembered in %s", v.Reason, VerdictPath(b.c.CacheDir))
		}
		accel = AccelTCG
		out, err = b.boot(ctx, accel)
	} else if choice.probing && out.booted > 0 {
		v := Verdict{Accel: AccelKVM, Reason: fmt.Sprintf("a guest reached /init %.1fs after qemu started", out.booted.Seconds())}
		if serr := saveVerdict(b.c.CacheDir, v); serr != nil {
			b.lg.printf("cannot remember the accelerator verdict: %v", serr)
		}
	}
	res.Accel = accel
	res.Booted, res.Started, res.Total = out.booted, out.started, out.total
	if out.reported {
		res.ExitCode = out.exitCode
	}
	if err != nil {
		return res, err
	}
	b.lg.printf("command exited %d; VM ran %.1fs", res.ExitCode, out.total.Seconds())
	return res, nil
}

type bootOutcome struct {
	exitCode int
	reported bool
	booted   time.Duration
	started  time.Duration
	total    time.Duration
	// kvmFailure is set when a KVM boot ended before /init: why, in one line.
	// qemuOutput then holds the last lines of qemu's stderr and of the console.
	kvmFailure string
	qemuOutput string
}

// boot runs qemu once with accel: it starts qemu with the guest's ports
// listening, follows the guest until qemu exits, reads what the ports still
// hold, and judges the run.
func (b *booter) boot(ctx context.Context, accel string) (bootOutcome, error) {
	// Every KVM boot is watched: KVM that worked yesterday can fail today (a
	// nested-virtualisation setting changed), and watching costs a working KVM
	// nothing.
	watch := accel == AccelKVM
	st := &bootState{out: bootOutcome{exitCode: -1}, lg: b.lg}
	sockets, listeners, err := listenPorts(b.dir)
	if err != nil {
		return st.out, fmt.Errorf("vm: guest port sockets: %w", err)
	}
	defer func() {
		for _, l := range listeners {
			l.Close()
		}
	}()
	args := qemuArgs(accel, b.c.CPUs, b.c.MemoryMiB, b.kernel, b.initrd, kernelCmdline(watch), sockets)
	firstLine := make(chan struct{})
	if !watch {
		firstLine = nil
	}
	st.start = time.Now()
	if b.deadline.IsZero() {
		b.deadline = st.start.Add(b.c.Timeout)
	}
	p, err := startQemu(b.qemu, args, b.c.Console, firstLine)
	if err != nil {
		return st.out, fmt.Errorf("vm: %w", err)
	}

	st.events = make(chan ctlEvent, 64)
	streams := b.acceptStreams(listeners, st.events)
	b.watchQemu(ctx, p, st, firstLine, watch)
	st.out.total = time.Since(st.start)
	p.kill() // no-op once exited; makes sure on every other path
	<-p.exited
	<-p.consoleDone
	closeIdle(listeners)
	streams.wait(listeners)
	// Late ctl events (the exit line read after qemu ended) still count.
	st.handlePending()
	return b.verdict(st, p, watch)
}

// bootState is what boot learns of one qemu run as it goes.
type bootState struct {
	out    bootOutcome
	start  time.Time
	lg     logger
	events chan ctlEvent // the guest's ctl port's

	stopErr  error  // why the runner ended qemu, if it did
	stalled  string // which watch limit a KVM boot missed
	failMsg  string // what the guest's /init said when it failed
	outErr   error  // why /out could not be copied
	finished bool   // the guest reported its status and sent what it had to
}

// handle takes in one event of the guest's ctl port.
func (st *bootState) handle(ev ctlEvent) {
	switch ev.kind {
	case "booted":
		st.out.booted = time.Since(st.start)
	case "start":
		st.out.started = time.Since(st.start)
		st.lg.printf("booted in %.1fs, command started at %.1fs", st.out.booted.Seconds(), st.out.started.Seconds())
	case "exit":
		if code, err := strconv.Atoi(ev.arg); err == nil {
			st.out.exitCode, st.out.reported = code, true
		}
	case "done":
		st.finished = true
	case "outdone":
		st.outErr, st.finished = ev.err, true
	case "fail":
		st.failMsg = ev.arg
	}
}

// handlePending takes in the events waiting in the channel. A limit that passes
// while /init's "booted" waits there must not count: the events are read first.
func (st *bootState) handlePending() {
	for len(st.events) > 0 {
		st.handle(<-st.events)
	}
}

// portStreams are the guest's port streams (ctl, stdout, stderr), each accepted
// and read by a goroutine of its own.
type portStreams struct {
	wg    sync.WaitGroup
	conns chan net.Conn
}

// acceptStreams starts the goroutines that accept the guest's ports and read
// them: ctl into events (an "eof" event when it is never connected), stdout and
// stderr to the run's writers.
func (b *booter) acceptStreams(listeners map[string]*net.UnixListener, events chan<- ctlEvent) *portStreams {
	s := &portStreams{conns: make(chan net.Conn, len(guestPorts))}
	acceptPort := func(name string, handle func(net.Conn)) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			conn, err := listeners[name].Accept()
			if err != nil {
				if name == "svclab.ctl" {
					events <- ctlEvent{kind: "eof"}
				}
				return
			}
			s.conns <- conn
			handle(conn)
		}()
	}
	acceptPort("svclab.ctl", func(conn net.Conn) { readCtl(conn, b.c.OutDir, events) })
	acceptPort("svclab.stdout", func(conn net.Conn) { copyTo(b.c.Stdout, conn) })
	acceptPort("svclab.stderr", func(conn net.Conn) { copyTo(b.c.Stderr, conn) })
	return s
}

// wait waits, once qemu is gone, for every stream to end. Each ends at EOF once
// its buffered bytes are read; the bound only guards against a stuck writer,
// whose listeners and connections are then closed.
func (s *portStreams) wait(listeners map[string]*net.UnixListener) {
	streamsDone := make(chan struct{})
	go func() { s.wg.Wait(); close(streamsDone) }()
	drain := time.NewTimer(5 * time.Second)
	defer drain.Stop()
	select {
	case <-streamsDone:
	case <-drain.C:
		for _, l := range listeners {
			l.Close()
		}
	closeAll:
		for {
			select {
			case conn := <-s.conns:
				conn.Close()
			default:
				break closeAll
			}
		}
		<-streamsDone
	}
}

// watchQemu follows qemu until it exits, taking in the guest's ctl events. It
// kills qemu when ctx ends, at the deadline, when a watched (KVM) boot misses a
// limit (the kernel's first console line, /init), and when the guest has sent
// everything but does not power off.
func (b *booter) watchQemu(ctx context.Context, p *qemuProcess, st *bootState, firstLine chan struct{}, watch bool) {
	timeout := time.NewTimer(time.Until(b.deadline))
	defer timeout.Stop()
	var firstLineTimer, initTimer <-chan time.Time
	if watch {
		firstLineTimer = time.After(b.watch.firstLine)
		initTimer = time.After(b.watch.init)
	}
	var grace <-chan time.Time
	sawFirstLine := false
	ctxDone := ctx.Done()
	for {
		select {
		case <-p.exited:
			return
		case <-ctxDone:
			ctxDone = nil
			st.stopErr = fmt.Errorf("vm: stopped: %w", context.Cause(ctx))
			p.kill()
		case <-timeout.C:
			st.stopErr = fmt.Errorf("%w after %s (qemu killed; the guest %s)", ErrTimeout, b.c.Timeout, progress(st.out))
			p.kill()
		case <-firstLine:
			sawFirstLine = true
			firstLine = nil
		case <-firstLineTimer:
			st.handlePending()
			if !sawFirstLine && st.out.booted == 0 {
				st.stalled = fmt.Sprintf("the guest kernel printed nothing within %s", b.watch.firstLine)
				p.kill()
			}
		case <-initTimer:
			st.handlePending()
			if st.out.booted == 0 {
				st.stalled = fmt.Sprintf("the guest did not reach /init within %s", b.watch.init)
				p.kill()
			}
		case <-grace:
			// Everything arrived but the guest did not power off: end it.
			p.kill()
		case ev := <-st.events:
			st.handle(ev)
			if st.finished && grace == nil {
				grace = time.After(10 * time.Second)
			}
		}
	}
}

// verdict is what boot returns once qemu and the streams are done: the
// outcome, and the error of a boot the runner stopped or a guest that failed or
// ended before it reported. A watched boot that did not reach /init is a KVM
// failure, for the caller to fall back on.
func (b *booter) verdict(st *bootState, p *qemuProcess, watch bool) (bootOutcome, error) {
	out := st.out
	switch {
	case st.stopErr != nil:
		return out, st.stopErr
	case watch && out.booted == 0:
		out.kvmFailure = kvmFailure(st.stalled, p, b.qemu)
		out.qemuOutput = fmt.Sprintf("qemu stderr:\n%s\nconsole:\n%s", p.stderr.lastLines(10), p.console.lastLines(30))
		return out, nil
	case st.failMsg != "":
		return out, fmt.Errorf("vm: guest /init failed: %s\nconsole:\n%s", st.failMsg, p.console.lastLines(20))
	case !out.reported:
		return out, fmt.Errorf("vm: the guest ended before reporting the command's exit status (qemu: %v; the guest %s)\nqemu stderr:\n%s\nconsole:\n%s",
			p.waitErr, progress(out), p.stderr.lastLines(10), p.console.lastLines(30))
	case st.outErr != nil:
		return out, fmt.Errorf("vm: copy guest /out to %s: %w", b.c.OutDir, st.outErr)
	case b.c.OutDir != "" && !st.finished:
		return out, fmt.Errorf("vm: the guest ended before sending /out to %s", b.c.OutDir)
	}
	return out, nil
}

func progress(o bootOutcome) string {
	switch {
	case o.reported:
		return "had reported the command's exit status"
	case o.started > 0:
		return fmt.Sprintf("had been running the command since %.1fs", o.started.Seconds())
	case o.booted > 0:
		return fmt.Sprintf("had reached /init at %.1fs but not started the command", o.booted.Seconds())
	default:
		return "had not reached /init"
	}
}

func copyTo(w io.Writer, conn net.Conn) {
	if w == nil {
		w = io.Discard
	}
	io.Copy(w, conn)
}
