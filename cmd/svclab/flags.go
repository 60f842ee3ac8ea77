package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/proxies"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/version"
	"github.com/svclab/svclab/topologies"
)

// labFlags are the flags of every command that builds or renders a lab.
type labFlags struct {
	file          string
	mode          string
	backend       string
	apply         string
	scheduler     string
	version       string
	masqueradeAll bool
	noCleanup     bool
	// The control plane and the real kube-proxy.
	controlPlane    bool
	proxyImpl       string
	kubeBinary      string
	kubeProxyBinary string
	kubeProxyConfig string
}

// schedulers are IPVS's schedulers kube-proxy takes as ipvs.scheduler.
var schedulers = []string{"rr", "wrr", "lc", "wlc", "sh", "dh", "sed", "nq", "mh"}

// Proxies that can program a lab's nodes (--proxy).
const (
	proxySvclab    = "svclab"
	proxyKubeProxy = "kube-proxy"
)

func (f *labFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.file, "file", "f", "", fileHelp())
	fs.StringVar(&f.mode, "mode", proxy.DefaultMode(), "proxy mode: "+strings.Join(proxy.Modes(), ", "))
	fs.StringVar(&f.backend, "backend", "", "xtables backend the rules are written with: nft (default) or legacy")
	fs.StringVar(&f.apply, "apply", "", "how svclab's proxier writes a change: "+methodHelp())
	fs.StringVar(&f.scheduler, "scheduler", "", "kube-proxy's ipvs.scheduler: "+strings.Join(schedulers, ", ")+" (default rr)")
	fs.StringVar(&f.version, "kube-proxy-version", "", "kube-proxy release whose rules to reproduce, e.g. 1.18 (default: the topology's, else "+version.Default.String()+")")
	fs.BoolVar(&f.masqueradeAll, "masquerade-all", false, "kube-proxy's --masquerade-all: SNAT all traffic to ClusterIPs")
	fs.BoolVar(&f.noCleanup, "no-conntrack-cleanup", false, "do not delete stale UDP conntrack entries after endpoint changes")
	fs.BoolVar(&f.controlPlane, "control-plane", false, "run a control plane (kube-apiserver, the EndpointSlice controllers) and apply the lab through it, as controlPlane: true in the topology")
	fs.StringVar(&f.proxyImpl, "proxy", proxySvclab, "what programs the nodes: svclab (svclab's own proxiers) or kube-proxy (the real one, in every node; implies --control-plane)")
	fs.StringVar(&f.kubeBinary, "kube-binary", "", "the svclab-kube binary of the Kubernetes components (default: built from components/ on first use and cached)")
	fs.StringVar(&f.kubeProxyBinary, "kube-proxy-binary", "", "run this kube-proxy (one you built) instead of the component binary's, with --proxy kube-proxy")
	fs.StringVar(&f.kubeProxyConfig, "kube-proxy-config", "", "a KubeProxyConfiguration fragment (YAML) merged over the lab's; svclab's proxiers read the fields they reproduce and refuse the others")
}

// methodHelp lists each mode's ways of writing, its default first.
func methodHelp() string {
	var parts []string
	for _, name := range proxy.Modes() {
		m, _ := proxy.Lookup(name)
		if len(m.Methods) > 0 {
			parts = append(parts, name+": "+strings.Join(m.Methods, ", "))
		}
	}
	return strings.Join(parts, "; ")
}

// options are the lab options the flags ask for; a shorthand for a section of
// kube-proxy's configuration that the mode does not read is a mistake.
func (f *labFlags) options() (lab.Options, error) {
	o := lab.Options{
		Mode: f.mode,
		Proxy: proxy.Config{
			Backend: f.backend, Method: f.apply, NoConntrackCleanup: f.noCleanup,
		},
		KubeProxyVersion: f.version,
		// Every command that builds a lab shows its long steps (a first build of
		// the components takes many minutes) on stderr, as lines.
		Log: os.Stderr,
	}
	k := &o.Proxy.KubeProxy
	k.IPVS.Scheduler = f.scheduler
	k.IPTables.MasqueradeAll = f.masqueradeAll
	k.NFTables.MasqueradeAll = f.masqueradeAll
	m, err := proxy.Lookup(f.mode)
	if err != nil {
		return o, err
	}
	if f.scheduler != "" && m.Section != proxy.SectionIPVS {
		return o, fmt.Errorf("--scheduler sets ipvs.scheduler, which mode %s does not read", m.Name)
	}
	o.ControlPlane, o.KubeBinary = f.controlPlane, f.kubeBinary
	var file *kube.ProxyFragment
	if f.kubeProxyConfig != "" {
		if file, err = kube.ReadProxyFragment(f.kubeProxyConfig); err != nil {
			return o, err
		}
	}
	switch f.proxyImpl {
	case proxyKubeProxy:
		if f.apply != "" || f.noCleanup {
			return o, errors.New("--apply and --no-conntrack-cleanup are svclab's own proxiers' settings; the real kube-proxy (--proxy kube-proxy) has its own ways")
		}
		flags, err := kube.NewProxyFragment("the command line", shorthands(f))
		if err != nil {
			return o, err
		}
		fragment := flags.Over(file)
		o.KubeProxy = &proxies.KubeProxyOptions{Binary: f.kubeProxyBinary, Fragment: fragment}
		// The lab's expectations follow what kube-proxy is told.
		cfg, _, err := fragment.Decode()
		if err != nil {
			return o, err
		}
		o.Proxy.KubeProxy, o.Proxy.ClusterCIDRGiven = cfg, fragment.Sets("clusterCIDR")
		return o, nil
	case proxySvclab:
	default:
		return o, fmt.Errorf("--proxy %q: want %s or %s", f.proxyImpl, proxySvclab, proxyKubeProxy)
	}
	if f.kubeProxyBinary != "" {
		return o, errors.New("--kube-proxy-binary runs the real kube-proxy: add --proxy kube-proxy")
	}
	if err := m.CheckMethod(f.apply); err != nil {
		return o, fmt.Errorf("--apply: %w", err)
	}
	if file != nil {
		cfg, paths, err := file.Decode()
		if err != nil {
			return o, err
		}
		if err := proxy.CheckFields(paths); err != nil {
			return o, fmt.Errorf("%s: %w", file.Source(), err)
		}
		// What svclab's proxiers refuse, a plan refuses too.
		if err := (proxy.Config{KubeProxy: cfg}).Validate(m.Section); err != nil {
			return o, fmt.Errorf("%s: %w", file.Source(), err)
		}
		cfg.IPVS.Scheduler = firstNonEmpty(f.scheduler, cfg.IPVS.Scheduler)
		cfg.IPTables.MasqueradeAll = cfg.IPTables.MasqueradeAll || f.masqueradeAll
		cfg.NFTables.MasqueradeAll = cfg.NFTables.MasqueradeAll || f.masqueradeAll
		o.Proxy.KubeProxy, o.Proxy.ClusterCIDRGiven = cfg, file.Sets("clusterCIDR")
	}
	return o, nil
}

// shorthands are the settings of kube-proxy's configuration that flags give,
// as configuration fields.
func shorthands(f *labFlags) map[string]any {
	m := map[string]any{}
	if f.masqueradeAll {
		m[proxy.SectionIPTables] = map[string]any{"masqueradeAll": true}
		m[proxy.SectionNFTables] = map[string]any{"masqueradeAll": true}
	}
	if f.scheduler != "" {
		m[proxy.SectionIPVS] = map[string]any{"scheduler": f.scheduler}
	}
	return m
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// args are the flags as given, to start the process that owns a lab with the same
// settings.
func (f *labFlags) args() []string {
	a := []string{"--mode", f.mode}
	for _, kv := range [][2]string{{"--file", f.file}, {"--backend", f.backend}, {"--apply", f.apply}, {"--scheduler", f.scheduler}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	if f.version != "" {
		a = append(a, "--kube-proxy-version", f.version)
	}
	if f.masqueradeAll {
		a = append(a, "--masquerade-all")
	}
	if f.noCleanup {
		a = append(a, "--no-conntrack-cleanup")
	}
	if f.controlPlane {
		a = append(a, "--control-plane")
	}
	for _, kv := range [][2]string{{"--proxy", f.proxyImpl}, {"--kube-binary", f.kubeBinary}, {"--kube-proxy-binary", f.kubeProxyBinary}, {"--kube-proxy-config", f.kubeProxyConfig}} {
		if kv[1] != "" {
			a = append(a, kv[0], kv[1])
		}
	}
	return a
}

// load reads -f and the lab flags: what up, trace, rules and compare start from.
// Both errors are the user's input.
func (f *labFlags) load() (*topology.Topology, lab.Options, error) {
	t, err := loadTopology(f.file)
	if err != nil {
		return nil, lab.Options{}, err
	}
	o, err := f.options()
	if err != nil {
		return nil, lab.Options{}, usage(err)
	}
	return t, o, nil
}

// loadTopology reads -f: a file on disk, else a shipped topology by name, else the
// default.
func loadTopology(file string) (*topology.Topology, error) {
	if file == "" {
		return topology.Default()
	}
	if _, err := os.Stat(file); err == nil {
		// Unreadable or wrong, it is the user's input.
		t, err := topology.Load(file)
		return t, usage(err)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, usage(err)
	}
	for _, name := range []string{file, file + ".yaml"} {
		if _, err := fs.Stat(topologies.Files, name); err == nil {
			return topology.Embedded(name)
		}
	}
	return nil, usage(fmt.Errorf("%s: no such file, and no shipped topology has that name (shipped: %s)", file, shippedNames()))
}

// fileHelp is -f's help: what loadTopology reads.
func fileHelp() string {
	return "topology file, or the name of a shipped one (" + shippedNames() + "); default: the built-in web.yaml"
}

func shippedNames() string {
	entries, _ := fs.ReadDir(topologies.Files, ".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return strings.Join(names, ", ")
}
