package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"time"

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

// options are svclab-kube's own options, which `version` lists.
var options = []string{"--wait-for"}

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
	waitFor, args, err := waitForOption(args)
	if err != nil {
		fmt.Fprintf(os.Stderr, "svclab-kube: %v\n\n", err)
		usage(os.Stderr)
		os.Exit(2)
	}
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
	if waitFor != "" {
		if err := waitForFile(waitFor); err != nil {
			fmt.Fprintf(os.Stderr, "svclab-kube: %v\n", err)
			os.Exit(1)
		}
	}
	// Upstream mains read os.Args (cobra's Execute, kubectl's plugin lookup,
	// CoreDNS's flag.Parse): each sees the command line it would see as its own
	// program.
	os.Args = append([]string{name}, args...)
	os.Exit(cmd.run(args))
}

// waitForOption takes `--wait-for FILE` (or `--wait-for=FILE`) from the front
// of args, before the command word: an option of svclab-kube's own, so it never
// reaches an upstream command's flags.
func waitForOption(args []string) (string, []string, error) {
	if len(args) == 0 {
		return "", args, nil
	}
	if v, ok := strings.CutPrefix(args[0], "--wait-for="); ok {
		if v == "" {
			return "", nil, errors.New("--wait-for: want a file")
		}
		return v, args[1:], nil
	}
	if args[0] != "--wait-for" {
		return "", args, nil
	}
	if len(args) < 2 || args[1] == "" {
		return "", nil, errors.New("--wait-for: want a file")
	}
	return args[1], args[2:], nil
}

// waitPoll is how often --wait-for looks for its file: a stat every 10 ms is
// nothing beside a component's start, and the component runs within 10 ms of
// the file's appearance.
const waitPoll = 10 * time.Millisecond

// waitForFile returns once path exists. This is what --wait-for is for: the
// process has already run every package's init (over a thousand, seconds of
// CPU on a loaded machine), so a lab forks its components while the API server
// starts and they take up their work the moment the lab writes the file (its
// kubeconfig, once the API server is ready). It never gives up: the process
// that forked it ends it (svclab's components die with it).
func waitForFile(path string) error {
	for {
		_, err := os.Stat(path)
		if err == nil {
			return nil
		}
		if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("--wait-for %s: %w", path, err)
		}
		time.Sleep(waitPoll)
	}
}

func usage(w *os.File) {
	fmt.Fprintf(w, "Usage: svclab-kube [--wait-for FILE] COMMAND [ARGS...]\n   or: COMMAND [ARGS...] through a link named COMMAND\n\nCommands:\n")
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-24s %s\n", n, commands[n].summary)
	}
	fmt.Fprintf(w, "\nEvery command but version takes its upstream program's flags; --help shows them.\n")
	fmt.Fprintf(w, "--wait-for FILE runs the command once FILE exists (its package initialisation done before).\n")
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
	// What svclab-kube itself understands beyond the upstream commands: a
	// lab given this binary (--kube-binary) reads it before using them.
	fmt.Printf("svclab-kube %s\n", strings.Join(options, " "))
	return 0
}
