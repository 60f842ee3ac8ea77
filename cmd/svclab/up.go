package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/svclab/svclab/internal/rootless"
	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/topology"
)

// readyLine starts what the process owning a lab sends its parent once the lab
// is up; failedLine, followed by the error, what it sends when the lab did not
// come up. The pipe needs no disk: the owner's log, under /run/svclab, cannot
// be written when that is full, which may be why the lab failed.
const (
	readyLine  = "ready"
	failedLine = "failed"
)

func newUpCommand() *cobra.Command {
	var (
		f          labFlags
		foreground bool
		timings    bool
		readyFD    int
		runID      string
	)
	cmd := &cobra.Command{
		Use:   "up [-f FILE]",
		Short: "Build a lab and leave it running",
		Long: `Build the lab: namespaces, links, routes, the proxy mode's rules on every node, and a
server on every declared pod port. The lab keeps running after up returns: one
background svclab process per lab serves the pods until 'svclab down LAB'.
With --foreground, up stays attached and Ctrl-C tears the lab down.`,
		Example: `  sudo svclab up                      # the built-in web.yaml, iptables-nft
  sudo svclab up -f lb --mode ipvs
  sudo svclab up -f httpd --proxy kube-proxy --mode nftables`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			t, o, err := f.load()
			if err != nil {
				return err
			}
			// Checked here, before a background process is started to hold a
			// lab it could not build.
			if err := lab.Check(t, o); err != nil {
				return usage(err)
			}
			if err := privileged(""); err != nil {
				return err
			}
			if foreground {
				return runLab(t, f, runID, readyFD, timings)
			}
			return startLab(t, f, timings)
		},
	}
	f.register(cmd.Flags())
	cmd.Flags().BoolVar(&foreground, "foreground", false, "stay attached; Ctrl-C tears the lab down")
	cmd.Flags().BoolVar(&timings, "timings", false, "print how long each phase of the start took (the API server's readiness, each kube-proxy's first sync, ...)")
	cmd.Flags().IntVar(&readyFD, "ready-fd", 0, "")
	cmd.Flags().StringVar(&runID, "run-id", "", "")
	cmd.Flags().MarkHidden("ready-fd")
	cmd.Flags().MarkHidden("run-id")
	return cmd
}

// runLab builds the lab in this process and holds it until SIGINT or SIGTERM.
func runLab(t *topology.Topology, f labFlags, runID string, readyFD int, timings bool) (err error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var ready io.WriteCloser = os.Stdout
	if readyFD > 0 {
		// Inherited without close-on-exec: the lab's component processes would
		// hold it open, and `svclab up` would wait for their end instead of
		// this one's word.
		syscall.CloseOnExec(readyFD)
		ready = os.NewFile(uintptr(readyFD), "ready")
		sent := false
		defer func() {
			// `svclab up` prints why the lab did not come up from here,
			// whether or not this process's log could be written.
			if err != nil && !sent {
				fmt.Fprintf(ready, "%s\n%v\n", failedLine, err)
				ready.Close()
			}
		}()
		ready = sentWriter{ready, &sent}
	}
	opts, err := f.options()
	if err != nil {
		return usage(err)
	}
	opts.RunID = runID
	l, err := lab.Up(ctx, t, opts)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("interrupted while building the lab; everything it created is removed")
		}
		return err
	}
	if readyFD > 0 {
		fmt.Fprintln(ready, readyLine)
	}
	printLab(ready, l, readyFD > 0)
	if timings {
		printTimings(ready, l.Record().Timings)
	}
	if readyFD > 0 {
		ready.Close()
	} else {
		fmt.Println("Ctrl-C tears it down.")
	}
	<-ctx.Done()
	return l.Down()
}

// startLab starts a background svclab that owns the lab, waits until the lab is up,
// relays what it printed, and returns. Ctrl-C while waiting stops the builder,
// which removes everything it created.
func startLab(t *topology.Topology, f labFlags, timings bool) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	runID := lab.NewRunID()
	if err := os.MkdirAll(record.DefaultDir, 0o755); err != nil {
		return err
	}
	logPath := filepath.Join(record.DefaultDir, t.Name+"-"+runID+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer logFile.Close()
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	args := append([]string{"up", "--foreground", "--ready-fd", "3", "--run-id", runID}, f.args()...)
	if timings {
		args = append(args, "--timings")
	}
	child := exec.Command(self, args...)
	child.Stdout, child.Stderr = logFile, logFile
	child.ExtraFiles = []*os.File{w}
	// A session of its own: the terminal's Ctrl-C reaches this process only, which
	// then stops the child in order.
	child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := child.Start(); err != nil {
		return err
	}
	w.Close()
	msg := make(chan string, 1)
	go func() {
		b, _ := io.ReadAll(r)
		msg <- string(b)
	}()
	select {
	case out := <-msg:
		if rest, ok := strings.CutPrefix(out, readyLine+"\n"); ok {
			fmt.Print(rest)
			fmt.Printf("Log: %s\n", rootless.HostPath(logPath))
			return child.Process.Release()
		}
		waitErr := child.Wait()
		// Read through the descriptor held open here: the owner's teardown
		// removes the log's name with the lab. What is left of it goes too.
		log := tail(logFile, 20)
		os.Remove(logPath)
		return upFailure(out, waitErr, log)
	case <-sigs:
		child.Process.Signal(syscall.SIGTERM)
		child.Wait()
		os.Remove(logPath)
		return errors.New("interrupted; the lab was torn down and nothing is left behind")
	}
}

// sentWriter notes that the owner wrote to `svclab up` (the lab is up): a
// failure after that is the owner's log's to tell.
type sentWriter struct {
	io.WriteCloser
	sent *bool
}

func (w sentWriter) Write(b []byte) (int, error) {
	*w.sent = true
	return w.WriteCloser.Write(b)
}

// upFailure is why a lab did not come up: the error its owner sent over the
// ready pipe (out) or, when it sent none (it crashed), how it ended; then its
// log's last lines, what led there, when any could be written and read.
func upFailure(out string, waitErr error, log string) error {
	cause, said := strings.CutPrefix(out, failedLine+"\n")
	cause = strings.TrimSpace(cause)
	if !said {
		cause = "its process ended without saying why"
		if waitErr != nil {
			cause = fmt.Sprintf("its process ended (%v) without saying why", waitErr)
		}
	}
	// The log ends with the error the owner printed, said above already.
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if said {
		lines = trimSuffixLines(lines, strings.Split("svclab: "+cause, "\n"))
	}
	if log := strings.TrimSpace(strings.Join(lines, "\n")); log != "" {
		return fmt.Errorf("the lab did not come up: %s\nits log:\n%s", cause, log)
	}
	return fmt.Errorf("the lab did not come up: %s", cause)
}

// trimSuffixLines is lines without suffix at its end, when it ends with it
// (compared without the spaces around each line).
func trimSuffixLines(lines, suffix []string) []string {
	if len(suffix) > len(lines) {
		return lines
	}
	tail := lines[len(lines)-len(suffix):]
	for i := range suffix {
		if strings.TrimSpace(tail[i]) != strings.TrimSpace(suffix[i]) {
			return lines
		}
	}
	return lines[:len(lines)-len(suffix)]
}

// tail is the last n lines of f, read from its start.
func tail(f *os.File, n int) string {
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return fmt.Sprintf("(the log %s cannot be read: %v)", f.Name(), err)
	}
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}
