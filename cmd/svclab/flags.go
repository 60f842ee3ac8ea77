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

func (f *labFlags) register(fs *pflag.FlagSet, defaultMode string) {
	fs.StringVarP(&f.file, "file", "f", "", "topology file, or the name of a shipped one (web, httpd); default: the built-in web.yaml")
	fs.StringVar(&f.mode, "mode", defaultMode, "proxy mode: "+strings.Join(proxy.Modes(), ", "))
	fs.StringVar(&f.backend, "backend", "", "iptables backend: nft (default) or legacy")
	fs.StringVar(&f.apply, "apply", "", "how iptables rules are applied: partial (kube-proxy's partial sync, default from 1.27), full (every chain), changed (only chains that differ), per-rule (one iptables call per rule)")
	fs.StringVar(&f.scheduler, "scheduler", "", "IPVS scheduler: rr (default), wrr, lc, wlc, sh, dh, sed, nq, mh")
	fs.StringVar(&f.version, "kube-proxy-version", "", "kube-proxy release whose rules to reproduce, e.g. 1.18 (default: the topology's, else "+proxy.DefaultVersion.String()+")")
	fs.BoolVar(&f.masqueradeAll, "masquerade-all", false, "kube-proxy's --masquerade-all: SNAT all traffic to ClusterIPs")
	fs.BoolVar(&f.noCleanup, "no-conntrack-cleanup", false, "do not delete stale UDP conntrack entries after endpoint changes")
}

func (f *labFlags) options() lab.Options {
	return lab.Options{
		Mode: f.mode,
		Proxy: proxy.Options{
			Backend: f.backend, Apply: f.apply, Scheduler: f.scheduler,
			NoConntrackCleanup: f.noCleanup,
		},
		KubeProxyVersion: f.version,
		MasqueradeAll:    f.masqueradeAll,
	}
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
