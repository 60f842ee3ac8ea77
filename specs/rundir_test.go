package specs

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
	"github.com/svclab/svclab/lab/supervise"
)

// A full /run/svclab (a tmpfs, which etcd's log may fill) must not hide what
// matters: why `up` failed, and how a running lab is. Each spec mounts a small
// tmpfs of its own on the run directory (and one on /run/netns, so that what a
// lab creates stays there too), in a mount namespace of its own, and fills it.
var _ = Describe("A full run directory", func() {
	// The owner's output goes to a log under the run directory, which cannot be
	// written: the cause comes over the ready pipe, which needs no disk.
	It("shows why `svclab up` failed when the run directory is full, though the lab's log cannot be written", Label("records"), func() {
		// Mount points: on a fresh machine (svclab's VM) nothing made them
		// before this spec when it runs first ("mounting none on
		// /run/svclab failed: No such file or directory" in CI's VM).
		Expect(os.MkdirAll(record.DefaultDir, 0o755)).To(Succeed())
		Expect(os.MkdirAll(namespaces.Dir, 0o755)).To(Succeed())
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount -t tmpfs none "$3" && mount -t tmpfs -o size=1m none "$1" || exit 99
			dd if=/dev/zero of="$1/fill" bs=64k 2>/dev/null
			exec "$2" up -f web`,
			"sh", record.DefaultDir, svclabBin, namespaces.Dir)
		out, err := cmd.CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		Expect(err.(*exec.ExitError).ExitCode()).To(Equal(1), string(out))
		Expect(string(out)).To(MatchRegexp(`svclab: the lab did not come up: record lab web-[a-z0-9]+: write /run/svclab/web-[a-z0-9]+\.json\.\d+\.tmp: no space left on device`))
	})

	// The record is written anew, through a new file, on every change: with
	// the run directory full it cannot be, and said "running" after a
	// component died. The owner answers `ls` and `inspect` for the lab on a
	// socket bound when the lab started; once there is room again, the
	// record catches up.
	It("shows a component killed while the run directory is full in svclab ls and inspect, says the record is stale and why, and writes it once there is room", Label("supervision"), func() {
		// 128 MiB are asked for a control plane (etcd's preallocated log);
		// the rest is filled once it runs.
		ns := privateRunDir("200m")
		out, err := ns.svclab("up", "--control-plane", "-f", "web")
		Expect(err).NotTo(HaveOccurred(), out)
		id := strings.Fields(strings.SplitN(out, "Lab ", 2)[1])[0]
		DeferCleanup(func() {
			ns.run("rm", "-f", filepath.Join(record.DefaultDir, "fill"))
			if CurrentSpecReport().Failed() {
				// The owner's log, which goes with the run directory: its
				// restarts, failed restarts and reports.
				log, _ := ns.run("cat", filepath.Join(record.DefaultDir, id+".log"))
				AddReportEntry("owner's log", log)
			}
			out, err := ns.svclab("down", id)
			Expect(err).NotTo(HaveOccurred(), out)
		})
		out, err = ns.svclab("ls")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(id + `.* \d+ running  `))

		By("filling the run directory")
		out, _ = ns.run("dd", "if=/dev/zero", "of="+filepath.Join(record.DefaultDir, "fill"), "bs=1M")
		Expect(out).To(ContainSubstring("No space left on device"), "dd fills the run directory")

		By("killing a CoreDNS replica, whose death the record cannot take")
		var dns record.Component
		for _, c := range ns.record(id).Components {
			if strings.HasPrefix(c.Name, "coredns ") {
				dns = c
				break
			}
		}
		Expect(dns.Name).NotTo(BeEmpty(), "the lab runs CoreDNS")
		Expect(dns.Process.Signal(syscall.SIGKILL)).To(Succeed())
		pod := strings.TrimPrefix(dns.Name, "coredns ")
		// Down until its restart 10 s later, then restarted: either is the
		// truth, and a plain "running" is not.
		death := `(degraded: .*CoreDNS in pod ` + pod + ` exited 137 \(killed\)|running \(restarts: .*CoreDNS in pod ` + pod + ` \d+)`
		stale := `\(record stale since \d\d:\d\d:\d\d: no space left on device\)`
		Eventually(func() string { out, _ := ns.svclab("ls"); return out }).WithTimeout(time.Minute).Should(
			MatchRegexp(id+`.* \d+ `+death+`.*`+stale), "svclab ls")
		out, err = ns.svclab("inspect", id)
		Expect(err).NotTo(HaveOccurred(), out)
		// The component may have restarted since, and the API server died
		// (etcd cannot write either): degraded or restarted, never plain.
		Expect(out).To(MatchRegexp(`held by process \d+, (degraded: |running \(restarts: ).*` + stale))
		live := ns.live()
		Expect(live.Stale).NotTo(BeNil(), "ls --json: recordStale")
		Expect(live.Stale.Err).To(Equal("no space left on device"))
		Expect(deathsOf(ns.record(id), "CoreDNS in pod "+pod)).To(BeZero(), "the record on disk is behind: it could not be written")

		By("restarting it after the back-off, which the record cannot take either")
		// Said by the deaths in `ls --json`: the health line leaves the
		// restarts out while another component (the API server) is down.
		Eventually(func(g Gomega) {
			live := ns.live()
			g.Expect(live.Stale).NotTo(BeNil())
			g.Expect(restartsOf(live, "CoreDNS in pod "+pod)).To(Equal(1))
		}).WithTimeout(supervise.InitialBackOff+time.Minute).Should(Succeed(), "svclab ls --json")
		Expect(deathsOf(ns.record(id), "CoreDNS in pod "+pod)).To(BeZero(), "the record on disk is behind: it could not be written")

		By("making room: the owner writes the record again, unasked")
		out, err = ns.run("rm", filepath.Join(record.DefaultDir, "fill"))
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(func() int { return restartsOf(ns.record(id), "CoreDNS in pod "+pod) }).WithTimeout(time.Minute).Should(Equal(1),
			"the death and the restart reach the record on disk")
		Eventually(func() string { out, _ := ns.svclab("ls"); return out }).WithTimeout(time.Minute).ShouldNot(ContainSubstring("record stale"))
	})
})

// deathsOf counts the deaths of component in r.
func deathsOf(r *record.Lab, component string) int {
	n := 0
	for _, d := range r.Deaths {
		if d.Component == component {
			n++
		}
	}
	return n
}

// restartsOf counts the deaths of component in r that were restarted.
func restartsOf(r *record.Lab, component string) int {
	n := 0
	for _, d := range r.Deaths {
		if d.Component == component && d.Restarted != nil {
			n++
		}
	}
	return n
}

// mountNS is a mount namespace of a spec's own, held by a process that sleeps
// in it; the commands run in it through nsenter.
type mountNS struct{ pid int }

// privateRunDir makes a mount namespace with a tmpfs of size on the run
// directory and one on /run/netns, gone when the spec ends.
func privateRunDir(size string) mountNS {
	Expect(os.MkdirAll(record.DefaultDir, 0o755)).To(Succeed())
	Expect(os.MkdirAll(namespaces.Dir, 0o755)).To(Succeed())
	holder := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
		`mount -t tmpfs none "$3" && mount -t tmpfs -o size="$2" none "$1" && echo mounted && exec sleep infinity`,
		"sh", record.DefaultDir, size, namespaces.Dir)
	stdout, err := holder.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	holder.Stderr = GinkgoWriter
	Expect(holder.Start()).To(Succeed())
	DeferCleanup(func() {
		holder.Process.Kill()
		holder.Wait()
	})
	line, _ := bufio.NewReader(stdout).ReadString('\n')
	Expect(line).To(Equal("mounted\n"), "the holder's mounts")
	return mountNS{pid: holder.Process.Pid}
}

// run runs argv in the namespace and returns its combined output.
func (m mountNS) run(argv ...string) (string, error) {
	args := append([]string{"-t", strconv.Itoa(m.pid), "-m", "--"}, argv...)
	out, err := exec.Command("nsenter", args...).CombinedOutput()
	return string(out), err
}

// svclab runs the svclab binary in the namespace.
func (m mountNS) svclab(args ...string) (string, error) {
	return m.run(append([]string{svclabBin}, args...)...)
}

// live is the one lab `svclab ls --json` lists in the namespace, as its owner
// answers for it.
func (m mountNS) live() *record.Lab {
	out, err := m.svclab("ls", "--json")
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	var labs []record.Lab
	ExpectWithOffset(1, json.Unmarshal([]byte(out), &labs)).To(Succeed(), out)
	ExpectWithOffset(1, labs).To(HaveLen(1), out)
	return &labs[0]
}

// record reads the record of lab id on the namespace's disk.
func (m mountNS) record(id string) *record.Lab {
	out, err := m.run("cat", filepath.Join(record.DefaultDir, id+".json"))
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	var r record.Lab
	ExpectWithOffset(1, json.Unmarshal([]byte(out), &r)).To(Succeed(), out)
	return &r
}
