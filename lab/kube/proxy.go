package kube

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/traffic"
)

// ProxyProcessConfig is one node's kube-proxy process.
type ProxyProcessConfig struct {
	// Name names it in messages ("kube-proxy node-1").
	Name string
	// Netns is the node's namespace.
	Netns string
	// ConfigFile is its KubeProxyConfiguration (WriteProxyConfig), which also names
	// the kubeconfig.
	ConfigFile string
	// Binary is a kube-proxy of the user's (--kube-proxy-binary), run as
	// `Binary --config ConfigFile`; empty: the component binary's kube-proxy.
	Binary string
	// IPTablesBackend is the iptables backend (nft or legacy) its iptables mode
	// runs: kube-proxy runs whatever `iptables` its PATH finds, so the programs of
	// the backend are linked under that name into RunDir, first on its PATH (what
	// the kube-proxy image's iptables wrapper does by detection). Empty leaves
	// PATH alone.
	IPTablesBackend string
	// RunDir holds the backend's links and the xtables lock file; the lab's run
	// directory, so two labs never wait for each other's lock.
	RunDir string
	// LogFile receives its output.
	LogFile string
	// ExtraArgs are appended to --config (a flag kube-proxy honours beside its
	// configuration file).
	ExtraArgs []string
	// WaitFor, when set, makes it wait for this file (the kubeconfig) before
	// it runs (WaitForArgs); the component binary's kube-proxy only.
	WaitFor string
}

// StartProxy starts kube-proxy in the node's namespace.
func StartProxy(binary string, c ProxyProcessConfig) (*Process, error) {
	name := c.Name
	if name == "" {
		name = "kube-proxy"
	}
	args := []string{"kube-proxy", "--config=" + c.ConfigFile}
	path := binary
	if c.Binary != "" {
		if c.WaitFor != "" {
			return nil, fmt.Errorf("%s: %s is no component binary: it cannot wait for %s", name, c.Binary, c.WaitFor)
		}
		path, args = c.Binary, args[1:]
	}
	args = WaitForArgs(c.WaitFor, append(args, c.ExtraArgs...))
	var env []string
	if c.RunDir != "" {
		env = append(env, "XTABLES_LOCKFILE="+filepath.Join(c.RunDir, "xtables.lock"))
	}
	if c.IPTablesBackend != "" {
		dir, err := iptablesLinks(c.RunDir, c.IPTablesBackend)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		env = append(env, "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	return Start(Command{Name: name, Netns: c.Netns, Path: path, Args: args, Env: env, LogFile: c.LogFile})
}

// iptablesLinks makes runDir/iptables-<backend>/ holding iptables, iptables-save,
// iptables-restore and their ip6tables twins, each a link to the backend's
// multi-call program (xtables-nft-multi, xtables-legacy-multi), which picks
// the tool by the name it is run as.
func iptablesLinks(runDir, backend string) (string, error) {
	b, err := xtables.BackendFor(backend)
	if err != nil {
		return "", err
	}
	if err := b.Check(); err != nil {
		return "", err
	}
	prog, err := exec.LookPath(b.IPTables)
	if err == nil {
		prog, err = filepath.EvalSymlinks(prog)
	}
	if err != nil {
		return "", fmt.Errorf("iptables %s backend: %w", backend, err)
	}
	dir := filepath.Join(runDir, "iptables-"+b.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	for _, tool := range []string{"iptables", "iptables-save", "iptables-restore", "ip6tables", "ip6tables-save", "ip6tables-restore"} {
		// By rename, so that the kube-proxies of a lab's nodes, started side by
		// side, can each make the links without tripping over the others'.
		link := filepath.Join(dir, tool)
		tmp := fmt.Sprintf("%s.%d", link, rand.Int64())
		if err := os.Symlink(prog, tmp); err != nil {
			return "", fmt.Errorf("iptables %s backend: %w", backend, err)
		}
		if err := os.Rename(tmp, link); err != nil {
			os.Remove(tmp)
			return "", fmt.Errorf("iptables %s backend: %w", backend, err)
		}
	}
	return dir, nil
}

// WaitProxy waits until kube-proxy in p, serving metrics on nodeIP, has finished
// its first IPv4 sync (its healthz answers 200 from the start, so the sync
// counter is what tells), and returns how long after its start that was.
func WaitProxy(ctx context.Context, p *Process, nodeIP netip.Addr) (time.Duration, error) {
	client := traffic.HTTPClient(p.Netns, time.Second)
	url := ProxyMetricsURL(nodeIP)
	for {
		m, err := ReadProxyMetrics(ctx, client, url)
		if err == nil && m.Syncs > 0 {
			return time.Since(p.Started), nil
		}
		if exited := p.Exited(); exited != nil {
			return 0, exited
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s: no sync yet (%s: %v): %w", p.Name, url, err, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}

// ProxyMetricsURL is where kube-proxy serves its metrics inside the node.
func ProxyMetricsURL(nodeIP netip.Addr) string {
	return "http://" + netip.AddrPortFrom(nodeIP, ProxyMetricsPort).String() + "/metrics"
}
