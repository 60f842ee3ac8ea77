package kube

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/svclab/svclab/internal/cachedir"
	"github.com/svclab/svclab/lab/internal/progress"
)

// heartbeat is how often a build says it is still going.
const heartbeat = 20 * time.Second

// Ldflags are the linker flags of a component build: no symbol tables (the binary
// shrinks by a third) and the Kubernetes version strings, which otherwise read
// v0.0.0-master.
func Ldflags() string {
	major, minor := "", ""
	if parts := strings.SplitN(strings.TrimPrefix(Version, "v"), ".", 3); len(parts) == 3 {
		major, minor = parts[0], parts[1]
	}
	const pkg = "k8s.io/component-base/version."
	return strings.Join([]string{
		"-s", "-w",
		"-X", pkg + "gitVersion=" + Version,
		"-X", pkg + "gitMajor=" + major,
		"-X", pkg + "gitMinor=" + minor,
	}, " ")
}

// build compiles the components module in src into bin: statically (CGO off, so
// it runs in the VM guest, which has no C library), with -trimpath, through a
// temporary file renamed into place. Progress goes to lg: a first line saying it
// takes minutes, then a heartbeat with the packages compiled so far.
func build(ctx context.Context, src, bin string, lg logger) error {
	goBin, err := findGo()
	if err != nil {
		return err
	}
	lg.printf("building the Kubernetes components (%s), first use: takes several minutes...", Version)
	tmp, err := os.CreateTemp(filepath.Dir(bin), ".build-")
	if err != nil {
		return fmt.Errorf("build the Kubernetes components: %w", err)
	}
	tmp.Close()
	defer os.Remove(tmp.Name())

	cmd := exec.CommandContext(ctx, goBin, "build", "-v", "-trimpath", "-ldflags", Ldflags(), "-o", tmp.Name(), "./cmd/svclab-kube")
	cmd.Dir = src
	cmd.Env = append(append(os.Environ(), "CGO_ENABLED=0"), goEnv(filepath.Dir(bin), os.Getenv)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("build the Kubernetes components: %s: %w", goBin, err)
	}
	var packages atomic.Int64
	var msgs []string
	progress.While(heartbeat, func(elapsed time.Duration) {
		lg.printf("still building: %d packages compiled, %s", packages.Load(), elapsed.Round(time.Second))
	}, func() { msgs = readBuildOutput(stderr, &packages) })
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("build the Kubernetes components in %s (%s build ./cmd/svclab-kube): %w\n%s", src, goBin, err, strings.Join(msgs, "\n"))
	}
	if err := os.Chmod(tmp.Name(), 0o755); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return fmt.Errorf("build the Kubernetes components: %w", err)
	}
	lg.printf("built the Kubernetes components in %s: %s", time.Since(start).Round(time.Second), bin)
	return nil
}

// readBuildOutput counts the package paths `go build -v` prints as it compiles
// them and returns the last lines of anything else (errors, downloads).
func readBuildOutput(r io.Reader, packages *atomic.Int64) []string {
	const keep = 40
	var other []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line != "" && !strings.ContainsAny(line, " \t#:") {
			packages.Add(1)
			continue
		}
		other = append(other, line)
		if len(other) > keep {
			other = other[1:]
		}
	}
	return other
}

// findGo finds the go command: on PATH, else where scripts/setup.sh installs it
// (sudo's PATH often lacks /usr/local/go/bin).
func findGo() (string, error) {
	if p, err := exec.LookPath("go"); err == nil {
		return p, nil
	}
	const installed = "/usr/local/go/bin/go"
	if isFile(installed) {
		return installed, nil
	}
	return "", fmt.Errorf("building the Kubernetes components (%s) needs Go, and no go command is on PATH or at %s: install Go (scripts/setup.sh), or give a built svclab-kube with --kube-binary PATH or $%s", Version, installed, BinaryEnv)
}

// lockDir takes the cache's lock, so that two runs do not build the same binary
// at once; a run that has to wait says so.
func lockDir(ctx context.Context, dir string, lg logger) (unlock func(), err error) {
	return cachedir.Lock(ctx, dir, func() {
		lg.printf("another svclab is building the Kubernetes components into %s; waiting for it", dir)
	})
}
