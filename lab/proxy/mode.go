package proxy

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/svclab/svclab/lab/namespaces"
)

// Proxier programs one node's kernel from the Service state, as kube-proxy does, and
// re-programs it on every change.
type Proxier interface {
	// Sync makes the node's dataplane match s. It is called with the whole state
	// every time; a proxier decides how much of it to rewrite.
	Sync(ctx context.Context, s *State) error
	// Close releases what the proxier holds (sockets, handles). Rules stay: they go
	// with the node's namespace.
	Close() error
}

// StatsReporter is a proxier that accounts for its last sync, for benchmarks.
type StatsReporter interface {
	Stats() SyncStats
}

// ErrNeedsRoot is a mode's Available answer when it could not find out without
// root: no verdict on the mode.
var ErrNeedsRoot = errors.New("needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN)")

// Target is the node a proxier programs.
type Target struct {
	Node   Node
	Config Config
	// NetNS is the path of the node's network namespace (/run/netns/...); empty
	// means the calling process's own namespace, which svclab never programs.
	NetNS string
	// RunDir is a directory private to this lab for lock and state files.
	RunDir string
}

// Mode is one way of programming Services, registered by name. It carries what
// the rest of svclab asks of a mode, so that no other package names one.
type Mode struct {
	Name string
	// Summary is one line for help texts.
	Summary string
	// Dataplane says how the mode's rules behave, for verify's model.
	Dataplane Dataplane
	// Section is the section of kube-proxy's configuration the mode reads
	// besides the common fields ("iptables", "ipvs", "nftables"): a setting of
	// another section is a mistake for this mode.
	Section string
	// Variants are the ways of running the mode that `--mode all` runs one after
	// another and the bench compares (iptables: its two xtables backends); none
	// means the mode runs one way.
	Variants []Variant
	// Methods are the ways svclab's proxier writes a change (Config.Method), its
	// default first.
	Methods []string
	// PerRule are the Methods that write one rule per program run rather than
	// a whole sync in one: such a sync costs a run, whose cost grows with the
	// table, for every chain and rule, and it cannot be stopped part-way.
	// Benchmarks measure them from an empty node of their own and estimate
	// their syncs beforehand (SyncEstimator) rather than stop one.
	PerRule []string
	// New makes svclab's proxier for one node; nil when svclab has no proxier
	// of its own for the mode.
	New func(t Target) (Proxier, error)
	// Render prints what New's proxier would install for s, in the mode's
	// native text (iptables-restore input, ipvsadm -Ln, ...), without root.
	Render func(t Target, s *State) (string, error)
	// Available returns nil when the running kernel and userland can run the mode,
	// or an error saying what is missing and what to do.
	Available func() error
	// NoUserNamespace says why the mode cannot run in the network namespaces
	// of a user namespace (svclab without root), and what to do; nil: it can.
	// Available refuses it there.
	NoUserNamespace error
	// Rules are the commands that print what a node programmed in this mode
	// with c holds (iptables-save, nft list, ipvsadm -Ln): what `svclab rules`
	// shows of a running lab and what a failure dump shows.
	Rules func(c Config) [][]string
	// Kernel lists the kernel features the mode programs, beyond what every lab
	// builds on (network namespaces, veth, bridges, br_netfilter), by the names
	// `svclab doctor` probes them under (lab/doctor): its answer for a mode comes
	// from this list, so a new mode declares what it needs here.
	Kernel []string
	// Cleanup takes what the mode installs off t's node, leaving it as a fresh
	// one, as kube-proxy's --cleanup does; nil when the mode's rules go only
	// with the node's namespace.
	Cleanup func(t Target) error
	// Read reads the Services a node's kernel holds in this mode's layout, as
	// whoever programmed them (svclab's proxier or kube-proxy itself) left them,
	// into a ServiceMap to compare with ExpectedServiceMap. ns is the node's
	// namespace, c its configuration (the xtables backend, for iptables).
	Read func(ns *namespaces.NS, c Config) (ServiceMap, error)
}

// Dataplane is how a mode's rules behave, as far as verify must know.
type Dataplane struct {
	Model     Model
	Selection Selection
}

// Model names the flow model verify applies to a mode.
type Model int

// Models verify knows.
const (
	// ModelIPTables is kube-proxy's iptables layout: DNAT in nat PREROUTING and
	// OUTPUT, REJECT for Services without endpoints, DROP for Local policy
	// without local endpoints.
	ModelIPTables Model = iota + 1
	// ModelIPVS is kube-proxy's IPVS layout: every ClusterIP a local address of
	// every node, virtual servers with masquerading real servers.
	ModelIPVS
	// ModelNFTables is kube-proxy's nftables layout, iptables' behaviour in one
	// nftables table.
	ModelNFTables
)

func (m Model) String() string {
	switch m {
	case ModelIPTables:
		return "iptables model"
	case ModelIPVS:
		return "IPVS model"
	case ModelNFTables:
		return "nftables model"
	}
	return fmt.Sprintf("model %d", int(m))
}

// Selection is how a mode picks the backend of a new connection.
type Selection int

// Selections.
const (
	// RandomPerConnection: each new connection draws its backend independently.
	RandomPerConnection Selection = iota + 1
	// SharedPerVirtualServer: one scheduler per virtual server, shared by every
	// client (IPVS's rr rotation), so flows through it are not independent.
	SharedPerVirtualServer
)

// Variant is one way of running a mode.
type Variant struct {
	// Name labels the variant after the mode's name ("nft" gives "iptables-nft").
	Name string
	// Backend is the xtables backend it sets (Config.Backend).
	Backend string
}

// Label is how a run of mode m in variant v is named: "iptables-nft", or the
// mode's name alone for a mode without variants.
func (m Mode) Label(v Variant) string {
	if v.Name == "" {
		return m.Name
	}
	return m.Name + "-" + v.Name
}

// VariantOf is the variant of m a configuration selects: the one whose backend
// c names (the first when c names none), or none for a mode without variants.
func (m Mode) VariantOf(c Config) Variant {
	for _, v := range m.Variants {
		if v.Backend == c.Backend || (c.Backend == "" && v.Backend == m.Variants[0].Backend) {
			return v
		}
	}
	return Variant{}
}

// WritesPerRule tells whether method is one of m's PerRule methods.
func (m Mode) WritesPerRule(method string) bool { return slices.Contains(m.PerRule, method) }

// HasProxier tells whether svclab has a proxier of its own for m, and if not,
// says so and who runs the mode instead.
func (m Mode) HasProxier() error {
	if m.New != nil {
		return nil
	}
	return fmt.Errorf("mode %s: svclab has no proxier of its own for it; the real kube-proxy runs it (--proxy kube-proxy)", m.Name)
}

// CheckMethod tells whether svclab's proxier for m writes with method (empty is
// the default).
func (m Mode) CheckMethod(method string) error {
	if method == "" || slices.Contains(m.Methods, method) {
		return nil
	}
	if err := m.HasProxier(); err != nil {
		return err
	}
	if len(m.Methods) == 0 {
		return fmt.Errorf("mode %s: svclab's proxier has no methods to choose from (got %q)", m.Name, method)
	}
	return fmt.Errorf("mode %s writes with %s (got %q)", m.Name, strings.Join(m.Methods, ", "), method)
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
	if m.Dataplane.Model == 0 || m.Dataplane.Selection == 0 || m.Available == nil || m.Rules == nil || m.Read == nil {
		panic("proxy: mode " + m.Name + " registered without its dataplane, availability, diagnostics or reader")
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

// DefaultMode is the mode svclab uses when none is asked for: kube-proxy's own
// default, the first mode registered for the iptables model.
func DefaultMode() string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	for _, n := range modeNames() {
		if registry[n].Dataplane.Model == ModelIPTables && registry[n].New != nil {
			return n
		}
	}
	return ""
}

// Constructor adapts a mode's New, which returns its own proxier type, to
// Mode.New, so that a failure gives a nil Proxier rather than an interface
// holding a nil pointer.
func Constructor[P Proxier](newP func(Target) (P, error)) func(Target) (Proxier, error) {
	return func(t Target) (Proxier, error) {
		p, err := newP(t)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
