// Package xtables runs the iptables programs of one backend (nft or legacy) inside a
// node's network namespace, the way kube-proxy's iptables wrapper does: -w for the
// lock, iptables-restore --noflush --counters, EnsureChain and EnsureRule. Both the
// iptables and the IPVS modes use it.
package xtables

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/svclab/svclab/lab/proxy"
)

// MasqueradeMark is the mark KUBE-MARK-MASQ sets in both modes: kube-proxy's
// default --iptables-masquerade-bit 14, printed as kube-proxy prints it, with
// fmt's "%#08x", which pads the digits to eight (iptables-save shows 0x4000).
const MasqueradeMark = "0x00004000"

// Backend names the programs of one iptables backend.
type Backend struct {
	Name                    string
	IPTables, Restore, Save string
}

// Backends are the two backends of iptables 1.8.
var Backends = map[string]Backend{
	"nft":    {Name: "nft", IPTables: "iptables-nft", Restore: "iptables-nft-restore", Save: "iptables-nft-save"},
	"legacy": {Name: "legacy", IPTables: "iptables-legacy", Restore: "iptables-legacy-restore", Save: "iptables-legacy-save"},
}

// BackendFor returns the backend called name; "" is nft.
func BackendFor(name string) (Backend, error) {
	if name == "" {
		name = "nft"
	}
	b, ok := Backends[name]
	if !ok {
		return Backend{}, fmt.Errorf("iptables backend %q: want nft or legacy", name)
	}
	return b, nil
}

// Backends6 are the IPv6 programs of the same backends: kube-proxy's IPv6
// proxier runs ip6tables, ip6tables-restore and ip6tables-save
// (k8s.io/kubernetes pkg/util/iptables: cmdIP6Tables, cmdIP6TablesRestore,
// cmdIP6TablesSave; iptables 1.8 installs each with -nft and -legacy names).
var Backends6 = map[string]Backend{
	"nft":    {Name: "nft", IPTables: "ip6tables-nft", Restore: "ip6tables-nft-restore", Save: "ip6tables-nft-save"},
	"legacy": {Name: "legacy", IPTables: "ip6tables-legacy", Restore: "ip6tables-legacy-restore", Save: "ip6tables-legacy-save"},
}

// BackendForFamily is BackendFor with the programs of family f: ip6tables'
// for IPv6, iptables' otherwise (IPv4, or "").
func BackendForFamily(name string, f corev1.IPFamily) (Backend, error) {
	b, err := BackendFor(name)
	if err != nil || f != corev1.IPv6Protocol {
		return b, err
	}
	return Backends6[b.Name], nil
}

// SaveProgramFor is SaveProgram for family f: ip6tables-save's for IPv6.
func SaveProgramFor(name string, f corev1.IPFamily) string {
	b, err := BackendForFamily(name, f)
	if err != nil {
		b, _ = BackendForFamily(backendOrder[0], f)
	}
	return b.Save
}

// backendOrder lists the backends, the default first.
var backendOrder = []string{"nft", "legacy"}

// Variants are the backends as variants of a mode that writes with them, the
// default first.
func Variants() []proxy.Variant {
	vs := make([]proxy.Variant, len(backendOrder))
	for i, name := range backendOrder {
		vs[i] = proxy.Variant{Name: name, Backend: name}
	}
	return vs
}

// CheckAll tells whether the programs of every backend are installed.
func CheckAll() error {
	for _, name := range backendOrder {
		if err := Backends[name].Check(); err != nil {
			return err
		}
	}
	return nil
}

// SaveProgram is the iptables-save of the backend called name ("" is nft), so
// that a dump shows the rules a lab installed and not the other backend's empty
// tables.
func SaveProgram(name string) string {
	b, err := BackendFor(name)
	if err != nil {
		return Backends[backendOrder[0]].Save
	}
	return b.Save
}

// Check tells whether every program of the backend is installed.
func (b Backend) Check() error {
	var missing []string
	for _, p := range []string{b.IPTables, b.Restore, b.Save} {
		if _, err := exec.LookPath(p); err != nil {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("iptables %s backend: %s not found: install iptables (scripts/setup.sh)", b.Name, strings.Join(missing, ", "))
	}
	return nil
}

// WaitSeconds is kube-proxy's -w: how long an iptables program waits for the
// xtables lock before it gives up.
const WaitSeconds = "5"

// Runner runs the backend's programs. Its methods must be called on a thread that
// is in the node's network namespace (inside ns.Do): a child process starts in the
// namespace of the thread that forks it.
type Runner struct {
	Backend Backend
	// Commands counts the programs run, for sync statistics.
	Commands int
	// Ctx is the context of the sync under way; cancelling it kills the program
	// running. Nil means context.Background.
	Ctx context.Context
	// env is the environment of every program: the process's own plus
	// XTABLES_LOCKFILE.
	//
	// iptables-legacy serialises every change through a lock file,
	// /run/xtables.lock by default, shared by all network namespaces although each
	// has its own tables, so two labs (or two nodes of one lab) wait for each
	// other. iptables 1.8.9 takes the path from XTABLES_LOCKFILE (checked: a held
	// lock there makes iptables-legacy -w 1 give up after a second, and one held on
	// /run/xtables.lock no longer matters); pointing it into the lab's run directory
	// keeps the lock per lab while every program touching the lab's tables still
	// agrees on it. iptables-nft takes no lock at all (nf_tables changes are
	// transactions), so the variable changes nothing there.
	env []string
}

// NewRunner makes a runner whose lock file lives in runDir ("" keeps the default).
func NewRunner(b Backend, runDir string) *Runner {
	env := os.Environ()
	if runDir != "" {
		env = append(env, "XTABLES_LOCKFILE="+filepath.Join(runDir, "xtables.lock"))
	}
	return &Runner{Backend: b, env: env}
}

// Run runs program with args, feeding it stdin, and returns its standard output.
func (r *Runner) Run(stdin []byte, program string, args ...string) ([]byte, error) {
	ctx := r.Ctx
	if ctx == nil {
		ctx = context.Background()
	}
	cmd := exec.CommandContext(ctx, program, args...)
	cmd.Env = r.env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	r.Commands++
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

// Restore runs iptables-restore as kube-proxy does: waiting for the lock, leaving
// chains it does not name alone (--noflush), taking counters from the input.
func (r *Runner) Restore(input []byte) error {
	_, err := r.Run(input, r.Backend.Restore, "-w", WaitSeconds, "--noflush", "--counters")
	if err != nil {
		if hint := SendBufferHint(err.Error()); hint != "" {
			err = fmt.Errorf("%w (%s)", err, hint)
		}
		return fmt.Errorf("%w\n%s", err, excerpt(input, err))
	}
	return nil
}

// Save returns iptables-save of one table.
func (r *Runner) Save(table string) ([]byte, error) {
	return r.Run(nil, r.Backend.Save, "-t", table)
}

// Test runs an iptables command whose exit status 1 means "no" rather than
// failure: -C (the rule is missing) and -N (the chain exists already).
func (r *Runner) Test(args ...string) (bool, error) {
	_, err := r.Run(nil, r.Backend.IPTables, append([]string{"-w", WaitSeconds}, args...)...)
	var exit *exec.ExitError
	if errors.As(err, &exit) && exit.ExitCode() == 1 {
		return false, nil
	}
	return err == nil, err
}

// Do runs one iptables command that must succeed.
func (r *Runner) Do(args ...string) error {
	_, err := r.Run(nil, r.Backend.IPTables, append([]string{"-w", WaitSeconds}, args...)...)
	return err
}

// EnsureChain is kube-proxy's EnsureChain: iptables -N, where the chain being
// there already is no error.
func (r *Runner) EnsureChain(table, chain string) error {
	_, err := r.Test("-N", chain, "-t", table)
	return err
}

// EnsureRule is kube-proxy's EnsureRule(Prepend): insert the rule first in chain
// unless iptables -C finds it.
func (r *Runner) EnsureRule(table, chain string, rule []string) error {
	there, err := r.Test(append([]string{"-C", chain, "-t", table}, rule...)...)
	if err != nil || there {
		return err
	}
	return r.Do(append([]string{"-I", chain, "-t", table}, rule...)...)
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

// ChainsIn lists the chains an iptables-save of one table declares.
func ChainsIn(save []byte) []string {
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

// The chains both modes write, by kube-proxy's names. Per-Service chains are
// named by the iptables mode (KUBE-SVC-..., see its names.go); the IPVS mode's
// own chains and sets by the IPVS mode.
const (
	ChainServices         = "KUBE-SERVICES"
	ChainNodePorts        = "KUBE-NODEPORTS"
	ChainExternalServices = "KUBE-EXTERNAL-SERVICES"
	ChainForward          = "KUBE-FORWARD"
	ChainPostrouting      = "KUBE-POSTROUTING"
	ChainMarkMasq         = "KUBE-MARK-MASQ"
	ChainMarkDrop         = "KUBE-MARK-DROP"
	ChainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	ChainFirewall         = "KUBE-FIREWALL"
	ChainProxyCanary      = "KUBE-PROXY-CANARY"
)

// SendBufferHint says what to do about an iptables-nft restore that failed
// with "Message too long" (msg holds its output), "" for any other failure.
// iptables-nft sends a restore as one netlink batch and first raises its
// socket's send buffer to fit with SO_SNDBUFFORCE, which needs CAP_NET_ADMIN
// in the initial user namespace: in svclab's user namespace (without root)
// the batch must fit the default buffer, net.core.wmem_default (212992 bytes
// on Debian: some 400 rules; found with kube-proxy on a corpus of 30
// Services). That setting is the host's, not a namespace's.
func SendBufferHint(msg string) string {
	if !strings.Contains(msg, "Message too long") {
		return ""
	}
	return "iptables-nft sends a restore as one netlink batch and raises its socket's send buffer to fit with SO_SNDBUFFORCE, " +
		"which a user namespace may not do (svclab without root): the batch must fit net.core.wmem_default; " +
		"raise it on the host once, as root: sysctl -w net.core.wmem_default=4194304"
}
