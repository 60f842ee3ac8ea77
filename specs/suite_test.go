// Package specs is svclab's Ginkgo suite: real labs, real rules, real packets. It
// needs root (or CAP_NET_ADMIN and CAP_SYS_ADMIN). Every spec runs for every mode
// listed in SVCLAB_MODES (default: every mode this kernel supports); a listed mode the
// kernel cannot run fails the suite instead of being skipped.
package specs

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/proxy"
	_ "github.com/svclab/svclab/lab/proxy/iptables"
	_ "github.com/svclab/svclab/lab/proxy/ipvs"
	_ "github.com/svclab/svclab/lab/proxy/nftables"
)

func TestSpecs(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "svclab")
}

// svclabBin is the svclab binary the CLI specs run: $SVCLAB_BIN, or one built for
// the suite.
var svclabBin string

var _ = SynchronizedBeforeSuite(func() []byte {
	Expect(lab.CheckPrivileges()).To(Succeed(), "the specs build real labs")
	if bin := os.Getenv("SVCLAB_BIN"); bin != "" {
		return []byte(bin)
	}
	bin, err := gexec.Build("github.com/svclab/svclab/cmd/svclab")
	Expect(err).NotTo(HaveOccurred())
	return []byte(bin)
}, func(bin []byte) {
	svclabBin = string(bin)
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

// modeCase is one mode (and variant) every Service spec runs in.
type modeCase struct {
	label   string
	mode    proxy.Mode
	backend string
}

// model is the dataplane model of the mode, which the specs that reach into a
// node's rules switch on.
func (m modeCase) model() proxy.Model { return m.mode.Dataplane.Model }

func (m modeCase) options() lab.Options {
	return lab.Options{Mode: m.mode.Name, Proxy: proxy.Config{Backend: m.backend}}
}

// modes is read while the spec tree is built, so every spec of every mode is in the
// tree: nothing is filtered out or skipped later.
var modes = modesFromEnv()

// modesFromEnv reads SVCLAB_MODES, labels of the registered modes that svclab
// has a proxier for, in each variant ("iptables-nft", "ipvs"); by default every
// one this kernel can run.
func modesFromEnv() []modeCase {
	all := map[string]modeCase{}
	// notOwn are the modes the real kube-proxy runs, which these specs cannot.
	notOwn := map[string]error{}
	var known, runnable []string
	for _, name := range proxy.Modes() {
		m, _ := proxy.Lookup(name)
		if err := m.HasProxier(); err != nil {
			notOwn[name] = err
			continue
		}
		variants := m.Variants
		if len(variants) == 0 {
			variants = []proxy.Variant{{}}
		}
		for _, v := range variants {
			label := m.Label(v)
			all[label] = modeCase{label: label, mode: m, backend: v.Backend}
			known = append(known, label)
			if m.Available() == nil {
				runnable = append(runnable, label)
			}
		}
	}
	labels := runnable
	if env := os.Getenv("SVCLAB_MODES"); env != "" {
		labels = strings.Split(env, ",")
	}
	var out []modeCase
	for _, l := range labels {
		m, ok := all[strings.TrimSpace(l)]
		if err := notOwn[strings.TrimSpace(l)]; err != nil {
			panic("SVCLAB_MODES: " + err.Error())
		}
		if !ok {
			panic(fmt.Sprintf("SVCLAB_MODES: unknown mode %q (known: %s)", l, strings.Join(known, ", ")))
		}
		out = append(out, m)
	}
	return out
}

// runSvclab runs the svclab binary and returns its combined output.
func runSvclab(args ...string) (string, error) {
	out, err := exec.Command(svclabBin, args...).CombinedOutput()
	return string(out), err
}
