package specs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/xtables"
	"github.com/svclab/svclab/lab/topology"
	"github.com/svclab/svclab/lab/traffic"
	"github.com/svclab/svclab/lab/verify"
	"github.com/svclab/svclab/topologies"
)

// `svclab verify`'s expectations are derived from the topology alone; these specs
// hold them against the kernel on the shipped labs and on labs written for the
// specs, every check of every flow, and hold `svclab verify --plan`, run as nobody,
// to list exactly the checks the run made.
var _ = Describe("svclab verify", Label("verify"), func() {
	// Each lab by the text of its file, which the run and the plan both read.
	labs := map[string]func() []byte{
		"web.yaml":            func() []byte { return shippedText("web.yaml") },
		"httpd.yaml":          func() []byte { return shippedText("httpd.yaml") },
		"lb.yaml":             func() []byte { return shippedText("lb.yaml") },
		"services lab":        func() []byte { return []byte(strings.TrimSpace(servicesLab)) },
		"policies.yaml":       func() []byte { return readFile("testdata/policies.yaml") },
		"policies-local.yaml": func() []byte { return readFile("testdata/policies-local.yaml") },
		"loadbalancers.yaml":  func() []byte { return readFile("testdata/loadbalancers.yaml") },
		"firewall.yaml":       func() []byte { return readFile("testdata/firewall.yaml") },
	}
	// ranOnlyIn holds labs to the modes they have been run in so far: the
	// firewall lab has not yet run with kube-proxy's iptables-legacy mode.
	ranOnlyIn := map[string][]string{
		"firewall.yaml": {"iptables-nft", "iptables-legacy", "ipvs", "kube-proxy-iptables-nft", "kube-proxy-nftables", "kube-proxy-ipvs"},
	}
	// The seeds' topologies (web.yaml from seed 000, httpd.yaml from seed 002),
	// labelled "seeds": of kube-proxy-ipvs's verify specs CI's VM suite runs
	// these only (scripts/test.sh).
	seedLabs := []string{"web.yaml", "httpd.yaml"}
	for _, m := range modes {
		for name, text := range labs {
			if only, ok := ranOnlyIn[name]; ok && !slices.Contains(only, m.label) {
				continue
			}
			labels := Label(m.label)
			if slices.Contains(seedLabs, name) {
				labels = Label(m.label, "seeds")
			}
			It("passes every check on "+name+", "+m.label, labels, func() {
				l := upLab(parse(name, string(text())), m.options())
				checks, err := verify.Run(context.Background(), l, m.label)
				Expect(err).NotTo(HaveOccurred())
				Expect(checks).NotTo(BeEmpty())
				var failed []string
				for _, c := range checks {
					if !c.Passed {
						failed = append(failed, c.Name+": expected "+c.Expected+", observed "+c.Observed+" ("+c.Why+")")
					}
				}
				Expect(failed).To(BeEmpty(), "%d of %d checks failed:\n%s", len(failed), len(checks), strings.Join(failed, "\n"))

				By("svclab verify --plan, as nobody, lists exactly these checks")
				dir := nobodyDir()
				file := writeFile(dir, "lab.yaml", text())
				plan := planAsNobody(dir, append(modeArgs(m), "-f", file)...)
				Expect(plan.Checks).To(Equal(asPlanned(checks)))
			})
		}

		if !m.own() {
			// The raw-table DROP silences whatever programmed the rules below
			// it; the control runs in svclab's modes.
			continue
		}
		It("negative control: fails exactly the refusals a DROP swallows, "+m.label, Label(m.label), func() {
			l := upLab(parse("services.yaml", servicesLab), m.options())
			// Service empty has no endpoints, so every connection to its ClusterIP
			// must be refused. A DROP in raw, ahead of the proxy's REJECT (or of
			// IPVS), on every node turns each of those refusals into silence.
			const emptyVIP = "10.96.123.49"
			be, err := xtables.BackendFor(m.backend) // IPVS mode's own rules use the default
			Expect(err).NotTo(HaveOccurred())
			for _, node := range []string{"node-1", "node-2", "node-3"} {
				for _, hook := range []string{"PREROUTING", "OUTPUT"} {
					_, err := namespaces.Output(netnsOf(l, node), be.IPTables, "-t", "raw", "-I", hook, "-d", emptyVIP, "-j", "DROP")
					Expect(err).NotTo(HaveOccurred())
				}
			}
			checks, err := verify.Run(context.Background(), l, m.label)
			Expect(err).NotTo(HaveOccurred())
			var wrong []string
			swallowed := 0
			for _, c := range checks {
				dropped := c.Expected == "refused" && strings.Contains(c.To, emptyVIP+":")
				if dropped {
					swallowed++
				}
				if c.Passed == dropped {
					wrong = append(wrong, fmt.Sprintf("%s: passed=%t, observed %s", c.Name, c.Passed, c.Observed))
				}
			}
			Expect(swallowed).To(BeNumerically(">", 0))
			Expect(wrong).To(BeEmpty(), "every refusal of %s must fail and every other check pass:\n%s", emptyVIP, strings.Join(wrong, "\n"))
		})
	}
})

// `svclab verify --flows` runs the flows a user wrote instead: a file that says
// what happens passes, and of a file that says some of it wrongly exactly those
// flows fail, in every mode. The files hold in every mode, and --plan lists their
// checks as nobody.
var _ = Describe("svclab verify --flows", Label("verify"), func() {
	const (
		rightFlows = "testdata/services.flows.yaml"
		wrongFlows = "testdata/services-wrong.flows.yaml"
	)

	It("holds flows files to both models: they agree but for the flows named wrong", func() {
		for _, file := range []struct {
			lab   *topology.Topology
			flows string
			text  []byte
		}{
			{shipped("web.yaml"), "<embedded>/flows/web.yaml", shippedFlows("web.yaml")},
			{parse("services.yaml", servicesLab), rightFlows, readFile(rightFlows)},
			{parse("services.yaml", servicesLab), wrongFlows, readFile(wrongFlows)},
		} {
			c, err := lab.ConfigOf(file.lab, lab.Options{})
			Expect(err).NotTo(HaveOccurred())
			for _, m := range []proxy.Model{proxy.ModelIPTables, proxy.ModelIPVS} {
				derived := map[string]verify.Flow{}
				for _, f := range verify.Derive(file.lab, m, c).Flows {
					derived[f.Source.Name+" "+f.To+" "+f.Protocol] = f
				}
				plan, err := verify.ParseFlows(file.flows, file.text, file.lab, m)
				Expect(err).NotTo(HaveOccurred())
				for _, f := range plan.Flows {
					d, ok := derived[f.Source.Name+" "+f.To+" "+f.Protocol]
					if f.Service == "" {
						// Not a Service address: the web flows' UDP to a TCP
						// NodePort, which the node itself refuses.
						Expect(ok).To(BeFalse())
						Expect(f.Expected.Outcome).To(Equal(traffic.Refused))
						continue
					}
					Expect(ok).To(BeTrue(), "%s: %v plans no flow from %s to %s", file.flows, m, f.Source.Name, f.To)
					wrong := strings.HasPrefix(f.Name, "wrong:")
					Expect(f.Expected.String() == d.Expected.String()).To(Equal(!wrong),
						"%s: %s under the %v: expects %s, the model %s", file.flows, f.Name, m, f.Expected, d.Expected)
				}
			}
		}
	})

	It("plans without root, and runs without root in a user namespace of its own", func() {
		dir := nobodyDir()
		planAsNobody(dir, "-f", "web")
		out, err := newOrdinaryUser().run("verify", "-f", "web")
		Expect(err).NotTo(HaveOccurred(), "a run as nobody: %s", out)
		Expect(out).To(ContainSubstring("18 of 18 checks passed"))
	})

	for _, m := range modes {
		It("passes the shipped flows of web.yaml, exactly the checks --plan lists, "+m.label, Label(m.label), func() {
			rep, code := verifyAsRoot(append(modeArgs(m), "-f", "web", "--flows", "web")...)
			Expect(code).To(Equal(0), "%+v", rep.Checks)
			Expect(rep.Passed).To(BeTrue())
			Expect(rep.Checks).To(HaveLen(6))
			plan := planAsNobody(nobodyDir(), append(modeArgs(m), "-f", "web", "--flows", "web")...)
			Expect(plan.Checks).To(Equal(asPlanned(rep.Checks)))
		})

		if !m.own() {
			// Which flows fail is verify's comparison, whoever programmed the
			// rules; the shipped flows above take the real kube-proxy through
			// the command line.
			continue
		}
		It("passes right flows and fails exactly the wrong ones, "+m.label, Label(m.label), func() {
			topo := writeFile(GinkgoT().TempDir(), "services.yaml", []byte(servicesLab))
			rep, code := verifyAsRoot(append(modeArgs(m), "-f", topo, "--flows", rightFlows)...)
			Expect(code).To(Equal(0), "%+v", rep.Checks)
			Expect(rep.Checks).To(HaveLen(7))

			rep, code = verifyAsRoot(append(modeArgs(m), "-f", topo, "--flows", wrongFlows)...)
			Expect(code).To(Equal(1))
			var wrong []string
			for _, c := range rep.Checks {
				if c.Passed == strings.HasPrefix(c.Name, "wrong:") {
					wrong = append(wrong, fmt.Sprintf("%s: passed=%t, expected %s, observed %s", c.Name, c.Passed, c.Expected, c.Observed))
				}
			}
			Expect(rep.Checks).To(HaveLen(11))
			Expect(wrong).To(BeEmpty(), "exactly the flows named wrong must fail:\n%s", strings.Join(wrong, "\n"))
			// Each failure is explained by the trace of an attempt, made
			// from the flow's source to its target; passing checks carry none
			// without --trace.
			for _, c := range rep.Checks {
				if c.Passed {
					Expect(c.Trace).To(BeNil(), c.Name)
					continue
				}
				Expect(c.Trace).NotTo(BeNil(), c.Name)
				Expect(c.Trace.From).To(Equal(c.From), c.Name)
				Expect(c.Trace.End.Outcome).NotTo(BeEmpty(), c.Name)
				Expect(c.Trace.Hops).NotTo(BeEmpty(), c.Name)
			}
		})
	}
})

// verifyReport is `svclab verify --json`'s output.
type verifyReport struct {
	Passed  bool           `json:"passed"`
	Planned bool           `json:"planned"`
	Checks  []verify.Check `json:"checks"`
}

// modeArgs are the flags that select mode m.
func modeArgs(m modeCase) []string {
	args := []string{"--mode", m.mode.Name}
	if m.kubeProxy {
		args = append(args, "--proxy", "kube-proxy")
	}
	if m.backend != "" {
		args = append(args, "--backend", m.backend)
	}
	return args
}

// asPlanned is checks as --plan lists them, before any is made.
func asPlanned(checks []verify.Check) []verify.Check {
	out := make([]verify.Check, len(checks))
	for i, c := range checks {
		c.Observed, c.Passed, c.Attempts = "", false, 0
		out[i] = c
	}
	return out
}

// verifyAsRoot runs svclab verify --json with args and returns its report and exit
// status.
func verifyAsRoot(args ...string) (verifyReport, int) {
	cmd := exec.Command(svclabBin, append([]string{"verify", "--json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else {
		ExpectWithOffset(1, err).NotTo(HaveOccurred(), "svclab verify %s: %s", strings.Join(args, " "), stderr.String())
	}
	var rep verifyReport
	ExpectWithOffset(1, json.Unmarshal(out, &rep)).To(Succeed(), "svclab verify %s: %s", strings.Join(args, " "), stderr.String())
	return rep, code
}

// nobodyDir is a directory user nobody may read, holding a copy of the svclab
// binary (the suite's own sits in a directory only root may enter); it is removed
// when the spec ends.
func nobodyDir() string {
	dir, err := os.MkdirTemp("", "svclab-nobody-")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	ExpectWithOffset(1, os.Chmod(dir, 0o755)).To(Succeed())
	bin, err := os.ReadFile(svclabBin)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	ExpectWithOffset(1, os.WriteFile(filepath.Join(dir, "svclab"), bin, 0o755)).To(Succeed())
	return dir
}

// asNobody is dir's svclab with args, to run as user and group nobody (65534)
// with no supplementary groups.
func asNobody(dir string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(dir, "svclab"), args...)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "HOME=" + dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	return cmd
}

// planAsNobody runs svclab verify --plan --json with args as nobody and returns
// its report, which must be a plan.
func planAsNobody(dir string, args ...string) verifyReport {
	cmd := asNobody(dir, append([]string{"verify", "--plan", "--json"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), "svclab verify --plan %s as nobody: %s", strings.Join(args, " "), stderr.String())
	var rep verifyReport
	ExpectWithOffset(1, json.Unmarshal(out, &rep)).To(Succeed())
	ExpectWithOffset(1, rep.Planned).To(BeTrue())
	ExpectWithOffset(1, rep.Checks).NotTo(BeEmpty())
	return rep
}

// writeFile writes data to name in dir, readable by every user, and returns its
// path.
func writeFile(dir, name string, data []byte) string {
	path := filepath.Join(dir, name)
	ExpectWithOffset(1, os.WriteFile(path, data, 0o644)).To(Succeed())
	return path
}

func readFile(path string) []byte {
	data, err := os.ReadFile(path)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return data
}

func shippedFlows(name string) []byte {
	data, err := fs.ReadFile(topologies.Flows, "flows/"+name)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return data
}

func shippedText(name string) []byte {
	data, err := fs.ReadFile(topologies.Files, name)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return data
}
