package nftables

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
)

// Table is kube-proxy's table, in family ip (svclab's labs are IPv4 only).
const Table = "kube-proxy"

// mode is the nftables mode as registered. svclab has no proxier for it (New
// and Render are nil), no variants and no methods: the real kube-proxy runs it.
var mode = proxy.Mode{
	Name:      "nftables",
	Summary:   "kube-proxy's nftables mode: one nftables table, verdict maps per ClusterIP and NodePort (run by the real kube-proxy)",
	Dataplane: proxy.Dataplane{Model: proxy.ModelNFTables, Selection: proxy.RandomPerConnection},
	Section:   proxy.SectionNFTables,
	Available: Available,
	// What `svclab doctor` can probe of it; nft's expressions (numgen, fib,
	// nat, reject) come with nf_tables on every kernel of 5.13 or later that
	// Available lets through.
	Kernel: []string{"nf_tables"},
	Rules: func(proxy.Config) [][]string {
		return [][]string{{"nft", "list", "table", "ip", Table}}
	},
	Read:    Read,
	Cleanup: Cleanup,
}

func init() { proxy.Register(mode) }

// minKernel is the oldest kernel kube-proxy's nftables mode runs on
// (utilkernel.NFTablesKubeProxyKernelVersion): older kernels come with nft
// programs that newer rules can break.
var minKernel = [2]int{5, 13}

// Available tells whether this machine can run the nftables mode: the nft
// program (1.0.1 or later, as kube-proxy's knftables demands), a kernel of 5.13
// or later, and nf_tables taking kube-proxy's table, which `nft --check` tries
// (a dry run that changes nothing) in a network namespace of its own, so that
// not even the check touches the machine's.
func Available() error {
	path, err := exec.LookPath("nft")
	if err != nil {
		return errors.New("nftables mode: the nft program is missing: install Debian's nftables package (apt-get install nftables; scripts/setup.sh does)")
	}
	out, err := exec.Command(path, "--version").Output()
	if err != nil {
		return fmt.Errorf("nftables mode: %s --version: %w", path, err)
	}
	if v := strings.TrimSpace(string(out)); strings.HasPrefix(v, "nftables v0.") || strings.HasPrefix(v, "nftables v1.0.0 ") {
		return fmt.Errorf("nftables mode: kube-proxy needs nft 1.0.1 or later (%s is %s): install a newer nftables package", path, v)
	}
	if major, minor, ok := proxy.KernelRelease(); ok && (major < minKernel[0] || (major == minKernel[0] && minor < minKernel[1])) {
		return fmt.Errorf("nftables mode: kube-proxy's nftables mode needs kernel %d.%d or later (this one is %d.%d); run it in svclab's VM (svclab vm)",
			minKernel[0], minKernel[1], major, minor)
	}
	check := exec.Command(path, "--check", "-f", "-")
	check.Stdin = strings.NewReader(fmt.Sprintf("add table ip %s { comment \"svclab check\" ; }\n", Table))
	check.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET}
	var stderr bytes.Buffer
	check.Stderr = &stderr
	if err := check.Run(); err != nil {
		msg := strings.TrimSpace(stderr.String())
		if errors.Is(err, syscall.EPERM) || strings.Contains(msg, "Operation not permitted") {
			return fmt.Errorf("nftables mode: checking nf_tables %w", proxy.ErrNeedsRoot)
		}
		return fmt.Errorf("nftables mode: this kernel's nf_tables does not take kube-proxy's table (nft --check: %v: %s): it needs CONFIG_NF_TABLES with nat, numgen, fib and reject", err, msg)
	}
	return nil
}

// Cleanup deletes kube-proxy's tables (ip and ip6 kube-proxy) from t's node,
// as `kube-proxy --cleanup` does for this mode; a node without them is clean
// already.
func Cleanup(t proxy.Target) error {
	ns, err := namespaces.OpenPath(t.NetNS)
	if err != nil {
		return fmt.Errorf("nftables cleanup: %w", err)
	}
	defer ns.Close()
	for _, family := range []string{"ip", "ip6"} {
		if _, err := ns.Output("nft", "delete", "table", family, Table); err != nil && !strings.Contains(err.Error(), "No such file or directory") {
			return fmt.Errorf("nftables cleanup of %s: %w", ns, err)
		}
	}
	return nil
}
