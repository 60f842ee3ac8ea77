package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"

	etcdversion "go.etcd.io/etcd/api/v3/version"
	"k8s.io/component-base/version"

	"github.com/coredns/coredns/coremain"
)

// command is one subcommand: an upstream program's main, taking the arguments after
// the subcommand word.
type command struct {
	run     func(args []string) int
	summary string
}

var commands = map[string]command{
	"kube-apiserver":          {runAPIServer, "the API server, on an embedded etcd with --embedded-etcd-data-dir"},
	"kube-controller-manager": {runControllerManager, "the controller manager (limit it with --controllers)"},
	"kube-proxy":              {runProxy, "the network proxy"},
	"kubectl":                 {runKubectl, "the command-line client"},
	"coredns":                 {runCoreDNS, "the DNS server (plugins: " + pluginList() + ")"},
	"version":                 {runVersion, "prints the versions of the components"},
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if _, ok := commands[name]; !ok {
		if len(args) == 0 {
			usage(os.Stderr)
			os.Exit(2)
		}
		if args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
			usage(os.Stdout)
			os.Exit(0)
		}
		name, args = args[0], args[1:]
	}
	cmd, ok := commands[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "svclab-kube: unknown command %q\n\n", name)
		usage(os.Stderr)
		os.Exit(2)
	}
	// Upstream mains read os.Args (cobra's Execute, kubectl's plugin lookup,
	// CoreDNS's flag.Parse): each sees the command line it would see as its own
	// program.
	os.Args = append([]string{name}, args...)
	os.Exit(cmd.run(args))
}

func usage(w *os.File) {
	fmt.Fprintf(w, "Usage: svclab-kube COMMAND [ARGS...]\n   or: COMMAND [ARGS...] through a link named COMMAND\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-24s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nEvery command but version takes its upstream program's flags; --help shows them.\n")
}

func runVersion(args []string) int {
	if len(args) > 0 {
		fmt.Fprintf(os.Stderr, "version: takes no arguments\n")
		return 2
	}
	fmt.Printf("kubernetes %s\n", version.Get().GitVersion)
	fmt.Printf("etcd %s\n", etcdversion.Version)
	fmt.Printf("coredns %s\n", coremain.CoreVersion)
	fmt.Printf("go %s\n", runtime.Version())
	return 0
}
