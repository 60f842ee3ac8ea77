package specs

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/doctor"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/record"
)

// labNamespaces lists the namespaces of one run of a lab.
func labNamespaces(name, runID string) []string {
	all, err := namespaces.List(record.NamespacePrefix + name + "-")
	Expect(err).NotTo(HaveOccurred())
	var mine []string
	for _, n := range all {
		if strings.HasSuffix(n, "-"+runID) {
			mine = append(mine, n)
		}
	}
	return mine
}

// ownedBy waits for the lab record of the process pid and returns it.
func ownedBy(pid int) *record.Lab {
	var rec *record.Lab
	Eventually(func() bool {
		recs, _ := record.List(record.DefaultDir)
		for _, r := range recs {
			if r.Owner.PID == pid {
				rec = r
				return true
			}
		}
		return false
	}).WithTimeout(10 * time.Second).WithPolling(time.Millisecond).Should(BeTrue())
	return rec
}

var _ = Describe("A lab's life", Label("lifecycle"), func() {
	for _, m := range modes {
		It("leaves the root network namespace as it found it, "+m.label, Label(m.label), func() {
			before, err := rootSnapshot()
			Expect(err).NotTo(HaveOccurred())
			l, err := lab.Up(context.Background(), shipped("web.yaml"), m.options())
			Expect(err).NotTo(HaveOccurred())
			_, err = ask(l, "client", "10.96.123.45:80")
			Expect(err).NotTo(HaveOccurred())
			_, err = ask(l, "outside", "192.168.1.10:30080")
			Expect(err).NotTo(HaveOccurred())
			during, err := rootSnapshot()
			Expect(err).NotTo(HaveOccurred())
			Expect(l.Down()).To(Succeed())
			after, err := rootSnapshot()
			Expect(err).NotTo(HaveOccurred())
			Expect(rootChanges(before, during)).To(BeEmpty(), "while the lab runs")
			Expect(rootChanges(before, after)).To(BeEmpty(), "after the lab is gone")
		})
	}

	It("removes every namespace and its record when torn down", func() {
		l, err := lab.Up(context.Background(), shipped("httpd.yaml"), lab.Options{Mode: proxy.DefaultMode()})
		Expect(err).NotTo(HaveOccurred())
		Expect(labNamespaces("httpd", l.RunID)).To(HaveLen(9), "fabric, 3 nodes, 1 client, 4 pods")
		Expect(filepath.Join(record.DefaultDir, l.ID+".json")).To(BeAnExistingFile())
		Expect(l.Down()).To(Succeed())
		Expect(labNamespaces("httpd", l.RunID)).To(BeEmpty())
		Expect(filepath.Join(record.DefaultDir, l.ID+".json")).NotTo(BeAnExistingFile())
		Expect(filepath.Join(record.DefaultDir, l.ID)).NotTo(BeADirectory())
	})

	It("runs two labs from one file side by side", func() {
		a := upLab(shipped("web.yaml"), lab.Options{Mode: proxy.DefaultMode()})
		b := upLab(shipped("web.yaml"), lab.Options{Mode: proxy.DefaultMode()})
		Expect(a.RunID).NotTo(Equal(b.RunID))
		for _, l := range []*lab.Lab{a, b} {
			r, err := ask(l, "outside", "192.168.1.11:30080")
			Expect(err).NotTo(HaveOccurred())
			Expect(r.Pod).To(BeElementOf("web-a", "web-b"))
		}
		Expect(netnsOf(a, "node-1")).NotTo(Equal(netnsOf(b, "node-1")))
	})

	// Serial: another spec's `svclab clean` beside it would remove the killed
	// lab first, and this one's clean would not name it.
	It("leaves nothing after `svclab up` is killed with SIGKILL, once `svclab clean` ran", Serial, func() {
		cmd := exec.Command(svclabBin, "up", "--foreground", "-f", "httpd")
		Expect(cmd.Start()).To(Succeed())
		rec := ownedBy(cmd.Process.Pid)
		Expect(cmd.Process.Kill()).To(Succeed())
		cmd.Wait()
		out, err := runSvclab("clean")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("removed lab " + rec.ID))
		Expect(labNamespaces("httpd", rec.RunID)).To(BeEmpty())
		Expect(filepath.Join(record.DefaultDir, rec.ID+".json")).NotTo(BeAnExistingFile())
	})

	It("leaves nothing when `svclab up` gets Ctrl-C while building", func() {
		cmd := exec.Command(svclabBin, "up", "-f", "httpd")
		session, err := gexec.Start(cmd, GinkgoWriter, GinkgoWriter)
		Expect(err).NotTo(HaveOccurred())
		// The record is written by the background process the command starts.
		var rec *record.Lab
		Eventually(func() bool {
			recs, _ := record.List(record.DefaultDir)
			for _, r := range recs {
				if r.Name == "httpd" && parentOf(r.Owner.PID) == cmd.Process.Pid {
					rec = r
					return true
				}
			}
			return false
		}).WithTimeout(10 * time.Second).WithPolling(time.Millisecond).Should(BeTrue())
		session.Interrupt()
		Eventually(session).WithTimeout(30 * time.Second).Should(gexec.Exit())
		Expect(session.ExitCode()).NotTo(BeZero())
		Expect(session.Err).To(gbytes.Say("interrupted"))
		Eventually(rec.Owner.Alive).WithTimeout(10 * time.Second).Should(BeFalse())
		Expect(labNamespaces("httpd", rec.RunID)).To(BeEmpty())
		Expect(filepath.Join(record.DefaultDir, rec.ID+".json")).NotTo(BeAnExistingFile())
	})

	It("serves a lab in the background after `svclab up` returns, until `svclab down`", func() {
		out, err := runSvclab("up", "-f", "web")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("is up"))
		id := strings.Fields(strings.SplitN(out, "Lab ", 2)[1])[0]
		// Tears the lab down if the spec fails before its own `down`.
		DeferCleanup(func() { runSvclab("down", id) })
		out, err = runSvclab("exec", id, "client", "--", "curl", "-s", "-m", "2", "10.96.123.45")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`"pod":"web-[ab]"`))
		out, err = runSvclab("ls")
		Expect(err).NotTo(HaveOccurred())
		Expect(out).To(ContainSubstring(id))
		By("ls --json and inspect show it again, as up printed it")
		out, err = runSvclab("ls", "--json")
		Expect(err).NotTo(HaveOccurred(), out)
		var labs []struct {
			ID      string `json:"id"`
			Running bool   `json:"running"`
		}
		Expect(json.Unmarshal([]byte(out), &labs)).To(Succeed(), out)
		Expect(labs).To(ContainElement(HaveField("ID", id)))
		for _, l := range labs {
			Expect(l.ID != id || l.Running).To(BeTrue(), "lab %s not running in ls --json", id)
		}
		out, err = runSvclab("inspect", id)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`(?m)^client +pod +10\.244\.1\.5 +node-1 `))
		Expect(out).To(MatchRegexp(`(?m)^default/web:http +10\.96\.123\.45 .* 10\.244\.1\.10:8080`))
		out, err = runSvclab("inspect", id, "--json")
		Expect(err).NotTo(HaveOccurred(), out)
		var inspected record.Lab
		Expect(json.Unmarshal([]byte(out), &inspected)).To(Succeed(), out)
		Expect(inspected.Services).NotTo(BeEmpty())
		Expect(inspected.Members).To(ContainElement(HaveField("Name", "client")))
		out, err = runSvclab("graph", id)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(`"svc default/web:http" -- "web-a" [style=dashed];`))
		out, err = runSvclab("down", id)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(labNamespaces("web", strings.TrimPrefix(id, "web-"))).To(BeEmpty())
	})

	It("rejects a bad topology with the file, line and field, creating nothing", func() {
		bad := filepath.Join(GinkgoT().TempDir(), "bad.yaml")
		Expect(os.WriteFile(bad, []byte(`name: badlab
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
pods:
  - {name: p, node: node-1, ip: 10.244.9.9}
`), 0o644)).To(Succeed())
		out, err := runSvclab("up", "-f", bad)
		Expect(err).To(HaveOccurred())
		Expect(err.(*exec.ExitError).ExitCode()).To(Equal(2))
		Expect(out).To(ContainSubstring(bad + ":7: pods[0].ip"))
		Expect(namespaces.List(record.NamespacePrefix + "badlab-")).To(BeEmpty())
	})

	It("probes, as doctor without root, in a user namespace of its own", func() {
		out, err := newOrdinaryUser().command("doctor", "--json").Output()
		// 0 or 1 (a mode that can run nowhere), never 2: it probed.
		if err != nil {
			Expect(err.(*exec.ExitError).ExitCode()).To(Equal(1), "svclab doctor as nobody:\n%s", out)
		}
		var rep doctor.Report
		Expect(json.Unmarshal(out, &rep)).To(Succeed(), string(out))
		Expect(rep.Probed).To(BeTrue(), string(out))
		Expect(rep.UserNamespace).To(BeTrue(), string(out))
		By("a mode the kernel keeps from user namespaces is never native there")
		for _, v := range rep.Modes {
			m, err := proxy.Lookup(v.Mode)
			Expect(err).NotTo(HaveOccurred())
			if m.NoUserNamespace != nil {
				Expect(v.Where).NotTo(Equal(doctor.Native), "%s as nobody: %+v", v.Mode, v)
			}
		}
	})
})

// parentOf is the parent process of pid, from /proc.
func parentOf(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	ppid, _ := strconv.Atoi(f[1])
	return ppid
}

// worldExecutable copies bin where an unprivileged user may run it.
func worldExecutable(bin string) string {
	dir, err := os.MkdirTemp("", "svclab-nobody-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	Expect(os.Chmod(dir, 0o755)).To(Succeed())
	data, err := os.ReadFile(bin)
	Expect(err).NotTo(HaveOccurred())
	dst := filepath.Join(dir, "svclab")
	Expect(os.WriteFile(dst, data, 0o755)).To(Succeed())
	return dst
}
