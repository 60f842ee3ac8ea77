package iptables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// backend names the programs of one iptables backend.
type backend struct {
	name                    string
	iptables, restore, save string
}

var backends = map[string]backend{
	"nft":    {name: "nft", iptables: "iptables-nft", restore: "iptables-nft-restore", save: "iptables-nft-save"},
	"legacy": {name: "legacy", iptables: "iptables-legacy", restore: "iptables-legacy-restore", save: "iptables-legacy-save"},
}

func backendFor(name string) (backend, error) {
	if name == "" {
		name = "nft"
	}
	b, ok := backends[name]
	if !ok {
		return backend{}, fmt.Errorf("iptables backend %q: want nft or legacy", name)
	}
	return b, nil
}

// check tells whether every program of the backend is installed.
func (b backend) check() error {
	var missing []string
	for _, p := range []string{b.iptables, b.restore, b.save} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("iptables %s backend: %s not found: install iptables (scripts/setup.sh)", b.name, strings.Join(missing, ", "))
	}
	return nil
}

// waitSeconds is kube-proxy's -w: how long an iptables program waits for the
// xtables lock before it gives up.
const waitSeconds = "5"

// runner runs the backend's programs. Its methods must be called on a thread that
// is in the node's network namespace (inside ns.Do): a child process starts in
// the namespace of the thread that forks it.
type runner struct {
	be backend
	// env is the environment of every program: the process's own plus
	// XTABLES_LOCKFILE.
	//
	// iptables-legacy serialises every change through a lock file,
	// /run/xtables.lock by default, shared by all network namespaces although each
	// has its own tables, so two labs (or two nodes of one lab) wait for each
	// other. iptables 1.8.9 takes the path from XTABLES_LOCKFILE (checked here:
	// a held lock there makes iptables-legacy -w 1 give up after a second, and one
	// held on /run/xtables.lock no longer matters); pointing it into the lab's run
	// directory keeps the lock per lab while every program touching the lab's
	// tables still agrees on it. iptables-nft takes no lock at all (nf_tables
	// changes are transactions), so the variable changes nothing there.
	env []string
	// commands counts the programs run, for SyncStats.
	commands int
	// ctx is the context of the Sync under way; cancelling it kills the program
	// running.
	ctx context.Context
}

func newRunner(be backend, runDir string) *runner {
	env := os.Environ()
	if runDir != "" {
		env = append(env, "XTABLES_LOCKFILE="+filepath.Join(runDir, "xtables.lock"))
	}
	return &runner{be: be, env: env, ctx: context.Background()}
}

// run runs program with args, feeding it stdin, and returns its standard output.
func (r *runner) run(stdin []byte, program string, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(r.ctx, program, args...)
	cmd.Env = r.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r.commands++
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		var exit *exec.ExitError
		if errors.As(err, &exit) && msg != "" {
			return nil, fmt.Errorf("%s %s: %w: %s", program, strings.Join(args, " "), err, msg)
		}
		return nil, fmt.Errorf("%s %s: %w", program, strings.Join(args, " "), err)
	}
	return stdout.Bytes(), nil
}

// restore runs iptables-restore as kube-proxy does: waiting for the lock, leaving
// chains it does not name alone (--noflush), taking counters from the input.
func (r *runner) restore(input []byte) error {
	_, err := r.run(input, r.be.restore, "-w", waitSeconds, "--noflush", "--counters")
	if err != nil {
		return fmt.Errorf("%w\n%s", err, excerpt(input, err))
	}
	return nil
}

// save returns iptables-save of one table.
func (r *runner) save(table string) ([]byte, error) {
	return r.run(nil, r.be.save, "-t", table)
}

// test runs an iptables command whose exit status 1 means "no" rather than failure:
// -C (the rule is missing) and -N (the chain exists already).
func (r *runner) test(args ...string) (bool, error) {
	_, err := r.run(nil, r.be.iptables, append([]string{"-w", waitSeconds}, args...)...)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

// do runs one iptables command that must succeed.
func (r *runner) do(args ...string) error {
	_, err := r.run(nil, r.be.iptables, append([]string{"-w", waitSeconds}, args...)...)
	return err
}

// excerpt points at the input line iptables-restore complains about ("line N
// failed"), so an error says which rule was refused.
func excerpt(input []byte, err error) string {
	var line int
	msg := err.Error()
	i := strings.Index(msg, "line ")
	if i < 0 {
		return ""
	}
	if _, serr := fmt.Sscanf(msg[i:], "line %d", &line); serr != nil || line < 1 {
		return ""
	}
	lines := strings.Split(string(input), "\n")
	if line > len(lines) {
		return ""
	}
	return fmt.Sprintf("input line %d: %s", line, lines[line-1])
}

// chainsIn lists the chains an iptables-save of one table declares.
func chainsIn(save []byte) []string {
	var chains []string
	for _, l := range strings.Split(string(save), "\n") {
		if strings.HasPrefix(l, ":") {
			if f := strings.Fields(l[1:]); len(f) > 0 {
				chains = append(chains, f[0])
			}
		}
	}
	return chains
}
