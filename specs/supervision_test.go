package specs

import (
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
	"github.com/svclab/svclab/lab/topology"
)

// The owner of a lab watches every component process it started, as a kubelet
// watches its containers: one killed from outside, by its pid, shows in `svclab
// ls` and in the owner's log with its exit status, and `svclab verify` fails
// naming it when it died during the checks. Without that, a kube-proxy keeps
// its last rules when the API server is gone, and every flow passes.
var _ = Describe("Supervision of a lab's components", Label("supervision"), func() {
	// labUpWait bounds a lab with a control plane coming up on a loaded machine.
	const labUpWait = 5 * time.Minute
	apiServer := "kube-apiserver on " + topology.ControlPlaneMember
	negativeControlDone := false
	for _, m := range modes {
		args := append(modeArgs(m), "-f", "web")
		if m.own() {
			args = append(args, "--control-plane")
		}

		It("fails svclab verify, naming the API server killed during its run, and svclab ls shows the lab degraded, "+m.label, Label(m.label), func() {
			// --trace: svclab's modes check web.yaml in under a second, too
			// short to be sure a kill lands in it; tracing every check after
			// them keeps the lab under verify for some 15 s more, and a death
			// at any time in the lab's life fails verify.
			session := startSvclab(append([]string{"verify", "--json", "--trace"}, args...)...)
			Eventually(session.Err).WithTimeout(labUpWait).Should(gbytes.Say(`checking \d+ flows`))
			rec := ownedBy(session.Command.Process.Pid)
			killComponent(rec, "kube-apiserver")

			degraded := "degraded: " + apiServer + " exited 137 (killed)"
			Eventually(func() string { out, _ := runSvclab("ls"); return out }).WithTimeout(time.Minute).Should(ContainSubstring(degraded),
				"svclab ls while verify still runs its checks")
			Eventually(session).WithTimeout(10 * time.Minute).Should(gexec.Exit())
			Expect(session.Err).To(gbytes.Say(apiServer+` \(pid \d+\) exited 137 \(killed\)`), "the owner's (verify's) log")
			Expect(session.ExitCode()).To(Equal(1), "%s", session.Err.Contents())
			var rep verifyReport
			Expect(json.Unmarshal(session.Out.Contents(), &rep)).To(Succeed())
			Expect(rep.Passed).To(BeFalse())
			var failed []string
			for _, c := range rep.Checks {
				if !c.Passed {
					failed = append(failed, c.Name+": "+c.Observed)
				}
			}
			// Every flow passed: kube-proxy kept the rules it had. The one
			// failure is the death.
			Expect(failed).To(HaveLen(1), "only the death fails")
			Expect(failed[0]).To(HavePrefix("component " + apiServer + ": exited 137 (killed) at "))
		})

		if !negativeControlDone {
			negativeControlDone = true
			It("negative control: passes svclab verify when nothing is killed, and svclab ls says running, "+m.label, Label(m.label), func() {
				session := startSvclab(append([]string{"verify", "--json"}, args...)...)
				Eventually(session.Err).WithTimeout(labUpWait).Should(gbytes.Say(`checking \d+ flows`))
				rec := ownedBy(session.Command.Process.Pid)
				out, err := runSvclab("ls")
				Expect(err).NotTo(HaveOccurred(), out)
				Expect(out).To(MatchRegexp(rec.ID + `.*\d+ running`))
				Eventually(session).WithTimeout(10 * time.Minute).Should(gexec.Exit())
				Expect(session.ExitCode()).To(Equal(0), "%s", session.Err.Contents())
				Expect(string(session.Err.Contents())).NotTo(MatchRegexp(`\(pid \d+\) exited`))
			})
		}

		if !m.kubeProxy {
			continue
		}
		It("shows a killed kube-proxy and a killed CoreDNS in svclab ls and the owner's log, restarts them after the back-off and counts the restarts, "+m.label, Label(m.label), func() {
			session := startSvclab(append([]string{"up", "--foreground"}, args...)...)
			Eventually(session.Out).WithTimeout(labUpWait).Should(gbytes.Say("Ctrl-C tears it down"))
			rec := ownedBy(session.Command.Process.Pid)
			proxy := killComponent(rec, "kube-proxy node-1")
			dns := killComponent(rec, "coredns ")
			pod := strings.TrimPrefix(dns, "coredns ")

			Eventually(session.Err).WithTimeout(time.Minute).Should(gbytes.Say(`kube-proxy on node-1 \(pid \d+\) exited 137 \(killed\)`))
			Eventually(func() string { out, _ := runSvclab("ls"); return out }).WithTimeout(time.Minute).Should(And(
				ContainSubstring("degraded: "), ContainSubstring("kube-proxy on node-1 exited 137 (killed)"),
				ContainSubstring("CoreDNS in pod "+pod+" exited 137 (killed)")), "killed %s and %s", proxy, dns)
			Expect(string(session.Err.Contents())).To(ContainSubstring("CoreDNS in pod " + pod))

			By("restarting both after the back-off, as their kubelet would, with the restarts counted")
			Eventually(func() string { out, _ := runSvclab("ls"); return out }).WithTimeout(supervise.InitialBackOff + 2*time.Minute).Should(And(
				ContainSubstring("running (restarts: "), ContainSubstring("kube-proxy on node-1 1"), ContainSubstring("CoreDNS in pod "+pod+" 1")))
			// The owner logs the restart before it records it, but the line
			// reaches this buffer through a pipe and gexec's copying
			// goroutine: on a busy machine (parallel specs) ls showed the
			// record before the line had arrived.
			Eventually(session.Err).WithTimeout(time.Minute).Should(gbytes.Say(`restarted \(pid \d+, restart 1\)`))
			ns, name, _ := strings.Cut(pod, "/")
			Eventually(func() string {
				out, _ := runSvclab("kubectl", rec.ID, "--", "get", "pod", "-n", ns, name, "-o", "jsonpath={.status.containerStatuses[0].restartCount}")
				return strings.TrimSpace(out)
			}).WithTimeout(time.Minute).Should(Equal("1"), "kubectl get pod %s: restartCount", pod)
			for _, c := range labRecord(rec.ID).Components {
				if c.Name == proxy || c.Name == dns {
					Expect(c.Process.Alive()).To(BeTrue(), "the record names %s's new process, pid %d", c.Name, c.Process.PID)
				}
			}
		})
	}
})

// startSvclab starts the svclab binary with args, its output in gbytes
// buffers; a spec that ends before it does interrupts it, which tears its lab
// down.
func startSvclab(args ...string) *gexec.Session {
	session, err := gexec.Start(exec.Command(svclabBin, args...), GinkgoWriter, GinkgoWriter)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		session.Interrupt()
		Eventually(session).WithTimeout(time.Minute).Should(gexec.Exit())
	})
	return session
}

// killComponent sends SIGKILL to the first component of the lab recorded by
// rec whose name starts with prefix, by its recorded pid and start time (so
// only the process the lab started), and returns its name.
func killComponent(rec *record.Lab, prefix string) string {
	var names []string
	for _, c := range labRecord(rec.ID).Components {
		names = append(names, c.Name)
		if strings.HasPrefix(c.Name, prefix) {
			ExpectWithOffset(1, c.Process.Alive()).To(BeTrue(), "%s (pid %d) runs before it is killed", c.Name, c.Process.PID)
			ExpectWithOffset(1, c.Process.Signal(syscall.SIGKILL)).To(Succeed())
			return c.Name
		}
	}
	Fail("lab " + rec.ID + " has no component " + prefix + " (it has " + strings.Join(names, ", ") + ")")
	return ""
}

// labRecord reads the lab's record as it is now.
func labRecord(id string) *record.Lab {
	r, err := record.Find(record.DefaultDir, id)
	ExpectWithOffset(2, err).NotTo(HaveOccurred())
	return r
}
