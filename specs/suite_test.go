// Package specs is svclab's Ginkgo suite: real labs, real rules, real packets. It
// needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN). Every spec runs for every mode
// listed in SVCLAB_MODES (default: every mode of svclab's own proxiers this kernel
// supports); a listed mode the kernel cannot run fails the suite instead of being
// skipped. Modes labelled kube-proxy-MODE ("kube-proxy-nftables",
// "kube-proxy-iptables-nft") run the real kube-proxy behind a real API server
// (the component binary: $SVCLAB_KUBE_BINARY, or built and cached on first use),
// in the specs about what packets do; the specs about svclab's own proxiers
// (apply methods, conntrack-cleanup switches, rendered rules) run only in svclab's
// modes.
package specs

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/svclab/svclab/internal/liblog"
	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/kube"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxies"
	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	_ "github.com/svclab/svclab/lab/proxy/nftables"
)

func TestSpecs(t *testing.T) {
	// The ginkgo CLI starts a compiled suite in the binary's directory; the specs
	// read testdata/ and ../topologies from the package's (scripts/specs.sh).
	if dir := os.Getenv("SVCLAB_SPECS_DIR"); dir != "" {
		if err := os.Chdir(dir); err != nil {
			t.Fatalf("SVCLAB_SPECS_DIR: %v", err)
		}
	}
	// The lab's libraries log through the standard logger; netlink's notes
	// on ipset attributes it does not decode are no finding (as in the CLI).
	liblog.Quiet(os.Stderr)
	RegisterFailHandler(Fail)
	RunSpecs(t, "svclab")
}

// svclabBin is the svclab binary the CLI specs run: $SVCLAB_BIN, or one built for
// the suite.
var svclabBin string

// kubeBinary is the component binary the kube-proxy modes' labs run; empty when
// SVCLAB_MODES lists none.
var kubeBinary string

var _ = SynchronizedBeforeSuite(func() []byte {
	Expect(namespaces.CheckPrivileges()).To(Succeed(), "the specs build real labs")
	kubeBin := ""
	for _, m := range modes {
		if m.kubeProxy {
			// Built here (minutes, the first time) rather than by the first lab,
			// whose spec would time out; a failure fails the suite.
			var err error
			kubeBin, err = kube.Binary(context.Background(), kube.Options{Log: GinkgoWriter})
			Expect(err).NotTo(HaveOccurred(), "SVCLAB_MODES lists %s, which runs the Kubernetes components", m.label)
			break
		}
	}
	bin := os.Getenv("SVCLAB_BIN")
	if bin == "" {
		var err error
		bin, err = gexec.Build("github.com/svclab/svclab/cmd/svclab")
		Expect(err).NotTo(HaveOccurred())
	}
	return []byte(bin + "\n" + kubeBin)
}, func(paths []byte) {
	svclabBin, kubeBinary, _ = strings.Cut(string(paths), "\n")
	if kubeBinary != "" {
		// The svclab commands the CLI specs run take it from here.
		Expect(os.Setenv(kube.BinaryEnv, kubeBinary)).To(Succeed())
	}
	_, err := os.Stat(svclabBin)
	Expect(err).NotTo(HaveOccurred(), "svclab binary %s", svclabBin)
	for _, m := range modes {
		Expect(m.mode.Available()).To(Succeed(), "SVCLAB_MODES lists %s, which this kernel cannot run", m.label)
	}
})

var _ = SynchronizedAfterSuite(func() {}, func() {
	if os.Getenv("SVCLAB_BIN") == "" {
		gexec.CleanupBuildArtifacts()
	}
})

// modeCase is one mode (and variant) every Service spec runs in, programmed by
// svclab's proxier or by the real kube-proxy.
type modeCase struct {
	label     string
	mode      proxy.Mode
	backend   string
	kubeProxy bool
}

// own tells whether svclab's own proxier programs the mode: specs about its
// apply methods, switches and rendered rules run only then.
func (m modeCase) own() bool { return !m.kubeProxy }

// model is the dataplane model of the mode, which the specs that reach into a
// node's rules switch on.
func (m modeCase) model() proxy.Model { return m.mode.Dataplane.Model }

func (m modeCase) options() lab.Options {
	o := lab.Options{Mode: m.mode.Name, Proxy: proxy.Config{Backend: m.backend}}
	if m.kubeProxy {
		// kube-proxy's own defaults (minSyncPeriod 1 s included): the specs check
		// the kube-proxy users run.
		o.KubeProxy, o.KubeBinary = &proxies.KubeProxyOptions{}, kubeBinary
	}
	return o
}

// ownModes are the modes in SVCLAB_MODES that svclab's own proxiers program.
func ownModes() []modeCase {
	var out []modeCase
	for _, m := range modes {
		if m.own() {
			out = append(out, m)
		}
	}
	return out
}

// modes is read while the spec tree is built, so every spec of every mode is in the
// tree: nothing is filtered out or skipped later.
var modes = modesFromEnv()

// modesFromEnv reads SVCLAB_MODES, labels of runs (proxy.ParseRun):
// "iptables-nft", "ipvs" for svclab's proxiers, "kube-proxy-nftables",
// "kube-proxy-iptables-legacy" for the real kube-proxy. By default every run of
// svclab's proxiers this kernel can make: the kube-proxy modes need the
// component binary, minutes to build the first time, so they run when asked for.
func modesFromEnv() []modeCase {
	var labels []string
	if env := os.Getenv("SVCLAB_MODES"); env != "" {
		labels = strings.Split(env, ",")
	} else {
		for _, r := range proxy.Runs(false) {
			if r.Mode.Available() == nil {
				labels = append(labels, r.Label())
			}
		}
	}
	var out []modeCase
	for _, l := range labels {
		r, err := proxy.ParseRun(l)
		if err != nil {
			panic(fmt.Sprintf("SVCLAB_MODES: %v", err))
		}
		out = append(out, modeCase{label: r.Label(), mode: r.Mode, backend: r.Variant.Backend, kubeProxy: r.KubeProxy})
	}
	return out
}

// runSvclab runs the svclab binary and returns its combined output.
func runSvclab(args ...string) (string, error) {
	out, err := exec.Command(svclabBin, args...).CombinedOutput()
	return string(out), err
}
