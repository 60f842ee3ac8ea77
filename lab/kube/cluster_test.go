package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/svclab/svclab/lab/internal/nstest"
	"github.com/svclab/svclab/lab/namespaces"
)

// The test cluster's addresses: the API server and one node on a link of their
// own, the service range routed onto it in the node, pods in 10.244.1.0/24.
var (
	apiAddr     = netip.MustParseAddr("192.168.1.2")
	nodeAddr    = netip.MustParseAddr("192.168.1.10")
	linkBits    = 24
	serviceCIDR = netip.MustParsePrefix("10.96.0.0/12")
	clusterCIDR = netip.MustParsePrefix("10.244.0.0/16")
	podCIDR     = "10.244.1.0/24"
	podIP       = "10.244.1.10"
)

var (
	binaryOnce sync.Once
	binaryPath string
	binaryErr  error
)

// testBinary returns the component binary, built once per test process through
// Binary (from the cache when this source tree was built before; a cold build
// takes minutes, so run these tests with -timeout 30m the first time).
func testBinary(tb testing.TB) string {
	tb.Helper()
	binaryOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
		defer cancel()
		binaryPath, binaryErr = Binary(ctx, Options{Log: os.Stderr})
	})
	if binaryErr != nil {
		tb.Fatal(binaryErr)
	}
	return binaryPath
}

// cluster is an API server and a controller manager in one throwaway namespace
// (api) and a node namespace (node) joined to it by a veth.
type cluster struct {
	tb         testing.TB
	bin        string
	dir        string
	api, node  string
	pki        *PKI
	apiCfg     APIServerConfig
	kubeconfig string
	client     *http.Client
	apiH       *netlink.Handle
	procs      []*Process
	apiServer  *Process
}

func newCluster(tb testing.TB) *cluster {
	tb.Helper()
	c := &cluster{tb: tb, dir: tb.TempDir()}
	// Registered first, so it runs last: after every process was stopped and
	// every namespace deleted, nothing of them is left.
	tb.Cleanup(func() {
		for _, p := range c.procs {
			select {
			case <-p.Done():
			default:
				tb.Errorf("%s (pid %d) still runs after the test", p.Name, p.Pid())
			}
		}
		for _, ns := range []string{c.api, c.node} {
			if ns != "" && namespaces.Exists(ns) {
				tb.Errorf("namespace %s is left after the test", ns)
			}
		}
	})
	apiNS, nodeNS := nstest.New(tb, "runs the API server"), nstest.New(tb, "runs kube-proxy")
	c.api, c.apiH = apiNS.Name, apiNS.Netlink
	c.node = nodeNS.Name
	nodeH := nodeNS.Netlink
	bin := testBinary(tb)
	c.bin = bin
	veth(tb, c.apiH, "eth0", netip.PrefixFrom(apiAddr, linkBits), nodeH, c.node, "eth0", netip.PrefixFrom(nodeAddr, linkBits))
	eth, err := nodeH.LinkByName("eth0")
	if err != nil {
		tb.Fatal(err)
	}
	// As a lab node: the service range goes onto the node network, or locally
	// generated traffic to a ClusterIP never reaches the DNAT.
	if err := nodeH.RouteAdd(&netlink.Route{LinkIndex: eth.Attrs().Index, Dst: ipNet(serviceCIDR), Scope: netlink.SCOPE_LINK}); err != nil {
		tb.Fatal(err)
	}

	c.pki, err = NewPKI(PKIConfig{Dir: filepath.Join(c.dir, "pki"), APIServer: apiAddr, ServiceCIDR: serviceCIDR})
	if err != nil {
		tb.Fatal(err)
	}
	c.apiCfg = APIServerConfig{
		Netns: c.api, Address: apiAddr, ServiceCIDR: serviceCIDR, PKI: c.pki,
		Dir: filepath.Join(c.dir, "apiserver"), LogFile: filepath.Join(c.dir, "kube-apiserver.log"),
	}
	c.kubeconfig = filepath.Join(c.dir, "kubeconfig")
	if err := WriteKubeconfig(c.kubeconfig, "svclab-test", c.apiCfg.URL(), c.pki); err != nil {
		tb.Fatal(err)
	}
	c.apiServer = c.start(StartAPIServer(bin, c.apiCfg))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ready, err := WaitAPIServer(ctx, c.apiServer, c.apiCfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Logf("kube-apiserver: /readyz 200 %s after exec", ready.Round(time.Millisecond))
	c.client, err = HTTPSClient(c.api, c.pki, 10*time.Second)
	if err != nil {
		tb.Fatal(err)
	}
	c.start(StartControllerManager(bin, ControllerManagerConfig{
		Netns: c.api, Kubeconfig: c.kubeconfig, LogFile: filepath.Join(c.dir, "kube-controller-manager.log"),
	}))
	return c
}

// start registers a started process to be stopped when the test ends and, if
// the test failed, to have its log's end printed.
func (c *cluster) start(p *Process, err error) *Process {
	c.tb.Helper()
	if err != nil {
		c.tb.Fatal(err)
	}
	c.procs = append(c.procs, p)
	stopAtEnd(c.tb, p)
	return p
}

// stopAtEnd stops p when the test ends, saying how long that took, and prints
// the end of its log if the test failed.
func stopAtEnd(tb testing.TB, p *Process) {
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		start := time.Now()
		if err := p.Stop(ctx); err != nil {
			tb.Error(err)
		}
		tb.Logf("%s: stopped in %s (%v)", p.Name, time.Since(start).Round(time.Millisecond), p.Err())
		if tb.Failed() {
			tb.Logf("%s's log ends:\n%s", p.Name, tail(p.LogFile, 30))
		}
	})
}

// veth joins two namespaces, creating the peer directly in the other one.
func veth(tb testing.TB, h *netlink.Handle, name string, addr netip.Prefix, peerH *netlink.Handle, peerNS, peerName string, peerAddr netip.Prefix) {
	tb.Helper()
	ns, err := netns.GetFromPath(namespaces.Path(peerNS))
	if err != nil {
		tb.Fatal(err)
	}
	defer ns.Close()
	if err := h.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: name}, PeerName: peerName, PeerNamespace: netlink.NsFd(ns)}); err != nil {
		tb.Fatal(err)
	}
	for _, end := range []struct {
		h    *netlink.Handle
		name string
		addr netip.Prefix
	}{{h, name, addr}, {peerH, peerName, peerAddr}} {
		l, err := end.h.LinkByName(end.name)
		if err == nil {
			err = end.h.AddrAdd(l, &netlink.Addr{IPNet: ipNet(end.addr)})
		}
		if err == nil {
			err = end.h.LinkSetUp(l)
		}
		if err != nil {
			tb.Fatalf("%s: %v", end.name, err)
		}
	}
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// kubectl runs the binary's kubectl inside the API server's namespace.
func (c *cluster) kubectl(args ...string) string {
	c.tb.Helper()
	argv := append([]string{c.bin}, KubectlArgs(c.kubeconfig, filepath.Join(c.dir, "kubectl-cache"), args...)...)
	out, err := namespaces.Output(c.api, argv...)
	if err != nil {
		c.tb.Fatal(err)
	}
	return string(out)
}

// apply writes a manifest and applies it with kubectl.
func (c *cluster) apply(name, manifest string) {
	c.tb.Helper()
	f := filepath.Join(c.dir, name+".yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		c.tb.Fatal(err)
	}
	c.kubectl("apply", "-f", f)
}

// request calls the API over HTTPS from inside the API server's namespace and
// decodes the answer into out (if not nil).
func (c *cluster) request(method, path string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, c.apiCfg.URL()+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.pki.AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	if out != nil {
		return json.Unmarshal(b, out)
	}
	return nil
}

// eventually polls check every 20 ms until it returns nil, which it returns with
// the time that took, or until timeout has passed, which returns check's error.
func eventually(timeout time.Duration, check func() error) (time.Duration, error) {
	start := time.Now()
	for {
		err := check()
		if err == nil {
			return time.Since(start), nil
		}
		if time.Since(start) > timeout {
			return 0, fmt.Errorf("not after %s: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// inNamespace checks that p runs in the named network namespace.
func inNamespace(tb testing.TB, p *Process, ns string) {
	tb.Helper()
	var want, got syscall.Stat_t
	if err := syscall.Stat(namespaces.Path(ns), &want); err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Stat(fmt.Sprintf("/proc/%d/ns/net", p.Pid()), &got); err != nil {
		tb.Fatal(err)
	}
	if got.Ino != want.Ino {
		tb.Errorf("%s (pid %d) runs in network namespace %d, not %s (%d)", p.Name, p.Pid(), got.Ino, ns, want.Ino)
	}
}

// listeners returns the listening TCP and UDP sockets of the given processes in
// the named network namespace ("": the root namespace), as ss prints them.
func listeners(tb testing.TB, ns string, procs ...*Process) []string {
	tb.Helper()
	argv := []string{"ss", "-Hltunp"}
	var out []byte
	var err error
	if ns == "" {
		out, err = exec.Command(argv[0], argv[1:]...).Output()
	} else {
		out, err = namespaces.Output(ns, argv...)
	}
	if err != nil {
		tb.Fatalf("ss: %v", err)
	}
	var found []string
	for _, line := range strings.Split(string(out), "\n") {
		for _, p := range procs {
			if strings.Contains(line, fmt.Sprintf("pid=%d,", p.Pid())) {
				found = append(found, line)
			}
		}
	}
	return found
}

// memory describes a process's memory: resident (RSS) and proportional (PSS,
// which splits the pages of the binary the components share among them).
func memory(p *Process) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", p.Pid()))
	if err != nil {
		return err.Error()
	}
	kb := map[string]float64{}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[2] == "kB" {
			var v float64
			fmt.Sscan(f[1], &v)
			kb[strings.TrimSuffix(f[0], ":")] = v
		}
	}
	return fmt.Sprintf("%.0f MiB resident (PSS %.0f MiB)", kb["Rss"]/1024, kb["Pss"]/1024)
}
