package proxy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Proxier programs one node's kernel from the Service state, as kube-proxy does, and
// re-programs it on every change.
type Proxier interface {
	// Sync makes the node's dataplane match ports. It is called with the whole state
	// every time; a proxier decides how much of it to rewrite.
	Sync(ctx context.Context, ports []ServicePort) error
	// Close releases what the proxier holds (sockets, handles). Rules stay: they go
	// with the node's namespace.
	Close() error
}

// Target is the node a proxier programs.
type Target struct {
	Node    Node
	Cluster Cluster
	// NetNS is the path of the node's network namespace (/run/netns/...); empty
	// means the calling process's own namespace, which svclab never programs.
	NetNS string
	// RunDir is a directory private to this lab for lock and state files.
	RunDir string
}

// Options are the knobs of the modes. A mode reads the ones it knows and rejects
// values it does not support.
type Options struct {
	// Backend is the iptables backend: "nft" (default) or "legacy".
	Backend string
	// Apply is how iptables rules reach the kernel, each an iptables-restore
	// --noflush except per-rule: "partial" (the default from 1.27: kube-proxy's
	// partial sync, rewriting the top-level chains and only the per-Service chains
	// of Services that changed), "full" (every chain, as kube-proxy did before),
	// "changed" (only chains whose rules differ) or "per-rule" (the naive way: one
	// iptables call per rule).
	Apply string
	// Scheduler is the IPVS scheduler: rr (default), wrr, lc, wlc, sh, dh, sed, nq,
	// mh.
	Scheduler string
	// NoConntrackCleanup turns off deleting stale UDP conntrack entries after a sync,
	// to show what happens without it.
	NoConntrackCleanup bool
}

// Mode is one way of programming Services, registered by name.
type Mode struct {
	Name string
	// Summary is one line for help texts.
	Summary string
	// New makes a proxier for one node.
	New func(t Target, o Options) (Proxier, error)
	// Render prints what New's proxier would install for ports, in the mode's
	// native text (iptables-restore input, ipvsadm -Ln, ...), without root.
	Render func(t Target, o Options, ports []ServicePort) (string, error)
	// Available returns nil when the running kernel and userland can run the mode,
	// or an error saying what is missing and what to do.
	Available func() error
	// Kernel lists the kernel features the mode programs, beyond what every lab
	// builds on (network namespaces, veth, bridges, br_netfilter), by the names
	// `svclab doctor` probes them under (lab/doctor): its answer for a mode comes
	// from this list, so a new mode declares what it needs here.
	Kernel []string
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Mode{}
)

// Register adds a mode; modes register themselves from their package's init.
func Register(m Mode) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[m.Name]; dup {
		panic("proxy: mode " + m.Name + " registered twice")
	}
	registry[m.Name] = m
}

// Lookup returns the mode called name.
func Lookup(name string) (Mode, error) {
	registryMu.RLock()
	defer registryMu.RUnlock()
	m, ok := registry[name]
	if !ok {
		return Mode{}, fmt.Errorf("unknown proxy mode %q (known: %s)", name, strings.Join(modeNames(), ", "))
	}
	return m, nil
}

// Modes lists the registered mode names, sorted.
func Modes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	return modeNames()
}

func modeNames() []string {
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Constructor adapts a mode's New, which returns its own proxier type, to
// Mode.New, so that a failure gives a nil Proxier rather than an interface
// holding a nil pointer.
func Constructor[P Proxier](newP func(Target, Options) (P, error)) func(Target, Options) (Proxier, error) {
	return func(t Target, o Options) (Proxier, error) {
		p, err := newP(t, o)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
