package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/pflag"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/topology"
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
}

func (f *labFlags) register(fs *pflag.FlagSet) {
	fs.StringVarP(&f.file, "file", "f", "", "topology file, or the name of a shipped one (web, httpd); default: the built-in web.yaml")
	fs.StringVar(&f.mode, "mode", proxy.DefaultMode(), "proxy mode: "+strings.Join(proxy.Modes(), ", "))
	fs.StringVar(&f.backend, "backend", "", "xtables backend the rules are written with: nft (default) or legacy")
	fs.StringVar(&f.apply, "apply", "", "how svclab's proxier writes a change: "+methodHelp())
	fs.StringVar(&f.scheduler, "scheduler", "", "kube-proxy's ipvs.scheduler: rr (default), wrr, lc, wlc, sh, dh, sed, nq, mh")
	fs.StringVar(&f.version, "kube-proxy-version", "", "kube-proxy release whose rules to reproduce, e.g. 1.18 (default: the topology's, else "+proxy.DefaultVersion.String()+")")
	fs.BoolVar(&f.masqueradeAll, "masquerade-all", false, "kube-proxy's --masquerade-all: SNAT all traffic to ClusterIPs")
	fs.BoolVar(&f.noCleanup, "no-conntrack-cleanup", false, "do not delete stale UDP conntrack entries after endpoint changes")
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
	if err := m.CheckMethod(f.apply); err != nil {
		return o, fmt.Errorf("--apply: %w", err)
	}
	return o, nil
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
	return a
}

// loadTopology reads -f: a file on disk, else a shipped topology by name, else the
// default.
func loadTopology(file string) (*topology.Topology, error) {
	if file == "" {
		return topology.Default()
	}
	if _, err := os.Stat(file); err == nil {
		return topology.Load(file)
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

func shippedNames() string {
	entries, _ := fs.ReadDir(topologies.Files, ".")
	var names []string
	for _, e := range entries {
		names = append(names, strings.TrimSuffix(e.Name(), ".yaml"))
	}
	return strings.Join(names, ", ")
}
