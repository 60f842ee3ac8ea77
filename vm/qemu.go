package vm

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// guestPorts are the virtio serial ports between /init and the host, by name.
var guestPorts = []string{"svclab.ctl", "svclab.stdout", "svclab.stderr"}

// qemuArgs is the command line of one boot. The guest has no disk, network card,
// display or firmware-provided devices: the kernel and an initramfs, the first
// serial port as its console, and a virtio serial device whose ports carry
// control messages, the command's stdout and its stderr. Each port's host end is
// a Unix socket the runner listens on.
func qemuArgs(accel string, cpus, memMiB int, kernel, initrd, cmdline string, sockets map[string]string) []string {
	args := []string{
		"-nodefaults", "-no-user-config", "-display", "none", "-no-reboot",
		"-smp", strconv.Itoa(cpus), "-m", strconv.Itoa(memMiB),
	}
	switch accel {
	case AccelKVM:
		args = append(args, "-accel", "kvm", "-cpu", "host")
	default:
		// Multi-threaded TCG runs each vCPU on its own host thread.
		args = append(args, "-accel", "tcg,thread=multi")
	}
	args = append(args,
		"-kernel", kernel, "-initrd", initrd, "-append", cmdline,
		"-serial", "stdio",
		"-device", "virtio-serial-pci,id=vser0",
	)
	for i, name := range guestPorts {
		id := fmt.Sprintf("port%d", i)
		args = append(args,
			"-chardev", fmt.Sprintf("socket,id=%s,path=%s", id, sockets[name]),
			"-device", fmt.Sprintf("virtserialport,bus=vser0.0,chardev=%s,name=%s", id, name),
		)
	}
	return args
}

// kernelCmdline: "quiet" because every console byte is a trapped I/O write under
// TCG; mitigations=off because the guest is a throwaway lab and the mitigations
// cost emulated time; panic=-1 with -no-reboot turns a guest panic into qemu's
// exit. A run that watches KVM's progress wants the kernel's first line as
// early as possible, so it asks for the early console and full verbosity.
func kernelCmdline(watchProgress bool) string {
	base := "console=ttyS0 panic=-1 mitigations=off"
	if watchProgress {
		return base + " earlyprintk=serial,ttyS0"
	}
	return base + " quiet"
}

// qemuProcess is a started qemu with its console being read.
type qemuProcess struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when qemu has been waited for
	// consoleDone is closed when the console has been read to its end, which
	// follows qemu's exit: nothing writes to Config.Console after that.
	consoleDone chan struct{}
	waitErr     error
	stderr      *tailBuffer
	// stderrHead keeps qemu's first words: when KVM fails, the first error
	// names the cause and what follows (an assertion, a backtrace) does not.
	stderrHead *headBuffer
	console    *tailBuffer
}

// startQemu starts qemu with its stdout (the guest console) copied to console
// and to a tail buffer; firstLine is closed when the kernel's first line
// ("Linux version ...") appears.
func startQemu(qemu string, args []string, console io.Writer, firstLine chan<- struct{}) (*qemuProcess, error) {
	p := &qemuProcess{exited: make(chan struct{}), consoleDone: make(chan struct{}),
		stderr: newTailBuffer(8 << 10), stderrHead: &headBuffer{max: 4 << 10}, console: newTailBuffer(16 << 10)}
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	p.cmd = exec.Command(qemu, args...)
	p.cmd.Stdout = pw
	p.cmd.Stderr = io.MultiWriter(p.stderr, p.stderrHead)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{
		// Own process group: a terminal's Ctrl-C reaches the runner, which then
		// ends qemu itself and says why. Pdeathsig ends qemu if the runner dies.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	started := make(chan error, 1)
	// Pdeathsig fires when the thread that forked qemu exits, and Go ends
	// threads that a goroutine locked and did not unlock (network-namespace code
	// does that). Forking and waiting from one locked thread keeps that thread
	// alive exactly as long as qemu.
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		err := p.cmd.Start()
		started <- err
		if err != nil {
			close(p.exited)
			return
		}
		p.waitErr = p.cmd.Wait()
		close(p.exited)
	}()
	if err := <-started; err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", qemu, err)
	}
	pw.Close()
	go func() {
		defer close(p.consoleDone)
		defer pr.Close()
		var w io.Writer = p.console
		if console != nil {
			w = io.MultiWriter(p.console, console)
		}
		watch := &lineWatch{marker: []byte("Linux version"), found: firstLine}
		io.Copy(io.MultiWriter(w, watch), pr)
	}()
	return p, nil
}

func (p *qemuProcess) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Kill()
	}
}

// lineWatch closes found the first time marker passes through it.
type lineWatch struct {
	marker []byte
	found  chan<- struct{}
	tail   []byte
	done   bool
}

func (l *lineWatch) Write(b []byte) (int, error) {
	if l.done || l.found == nil {
		return len(b), nil
	}
	buf := append(l.tail, b...)
	if bytes.Contains(buf, l.marker) {
		l.done = true
		close(l.found)
		return len(b), nil
	}
	keep := len(l.marker) - 1
	if len(buf) > keep {
		buf = buf[len(buf)-keep:]
	}
	l.tail = append(l.tail[:0], buf...)
	return len(b), nil
}

// tailBuffer keeps the last max bytes written to it, for error messages.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func newTailBuffer(max int) *tailBuffer { return &tailBuffer{max: max} }

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-t.max:]...)
	}
	return len(b), nil
}

// lastLines returns up to n final lines, without terminal control sequences
// noise beyond what the guest printed.
func (t *tailBuffer) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	text := strings.ReplaceAll(string(t.buf), "\r", "")
	lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// headBuffer keeps the first max bytes written to it.
type headBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (h *headBuffer) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if room := h.max - len(h.buf); room > 0 {
		h.buf = append(h.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

func (h *headBuffer) String() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return string(h.buf)
}

// listenPorts creates the Unix sockets qemu connects the guest ports to.
func listenPorts(dir string) (map[string]string, map[string]*net.UnixListener, error) {
	paths := map[string]string{}
	ls := map[string]*net.UnixListener{}
	for _, name := range guestPorts {
		p := filepath.Join(dir, name+".sock")
		os.Remove(p)
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: p, Net: "unix"})
		if err != nil {
			for _, l := range ls {
				l.Close()
			}
			return nil, nil, err
		}
		paths[name] = p
		ls[name] = l
	}
	return paths, ls, nil
}

// closeIdle closes the listeners that have no connection waiting to be
// accepted. It is called once qemu has exited, so no connection can arrive any
// more; but one qemu made may still wait in the backlog for its port's accepting
// goroutine, which a loaded machine can schedule after qemu ended (a short
// guest connects, writes and exits within milliseconds). Closing that listener
// would drop what the guest wrote, unread, so it stays open for the goroutine.
func closeIdle(ls map[string]*net.UnixListener) {
	for _, l := range ls {
		if !connWaiting(l) {
			l.Close()
		}
	}
}

// connWaiting reports whether a connection waits in l's backlog: a listening
// socket polls readable exactly then.
func connWaiting(l *net.UnixListener) bool {
	rc, err := l.SyscallConn()
	if err != nil {
		return false
	}
	waiting := false
	rc.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, 0)
		waiting = err == nil && n > 0 && fds[0].Revents&unix.POLLIN != 0
	})
	return waiting
}

// ctlEvent is one line /init sent on svclab.ctl.
type ctlEvent struct {
	kind string // booted, start, exit, out, done, fail, outdone, eof
	arg  string
	err  error // for outdone: the result of unpacking /out
}

// readCtl parses the control port. After "out" the stream is a tar archive of
// the guest's /out, unpacked into outDir before the "outdone" event.
func readCtl(conn io.Reader, outDir string, events chan<- ctlEvent) {
	br := bufio.NewReader(conn)
	for {
		line, err := br.ReadString('\n')
		if line = strings.TrimSpace(line); line != "" {
			kind, arg, _ := strings.Cut(strings.TrimPrefix(line, "svclab "), " ")
			events <- ctlEvent{kind: kind, arg: arg}
			if kind == "out" {
				err := extractOut(br, outDir)
				events <- ctlEvent{kind: "outdone", err: err}
				io.Copy(io.Discard, br)
				break
			}
		}
		if err != nil {
			break
		}
	}
	events <- ctlEvent{kind: "eof"}
}
