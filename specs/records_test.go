package specs

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab"
	"github.com/svclab/svclab/lab/member"
	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// deadLab records a lab whose owner is gone, with namespaces for `svclab
// clean` to remove: what a killed `svclab up` leaves. It returns the first
// namespace clean removes.
func deadLab(i int) (first string) {
	r := &record.Lab{ID: fmt.Sprintf("racedead-%d", i), Name: "racedead", RunID: fmt.Sprint(i), Created: time.Now(),
		Owner: record.Process{PID: 0}}
	for _, m := range []string{"fabric", "node-1", "node-2", "pod-a", "pod-b"} {
		ns := fmt.Sprintf("%sracedead-%s-%d", record.NamespacePrefix, m, i)
		Expect(namespaces.Create(ns)).To(Succeed())
		r.Members = append(r.Members, record.Member{Name: m, Kind: member.KindPod, NetNS: ns})
	}
	Expect(record.Write(record.DefaultDir, r)).To(Succeed())
	return r.Members[0].NetNS
}

var _ = Describe("Lab records", Label("records"), func() {
	// `clean` removing dead labs while `up` builds a new one: clean must never
	// touch the lab being built, and up must never report a lab that is not
	// whole. 50 races, up started 0 to 10 ms after clean, or as clean starts
	// removing the dead lab.
	//
	// Serial: its dead labs are another spec's clean's to remove as well, which
	// would change the window it races in.
	It("never lets `svclab clean` break a lab `up` is building", Serial, func() {
		small := parse("race", `
name: race
clusterCIDR: 10.244.0.0/16
serviceCIDR: 10.96.0.0/12
nodes:
  - {name: node-1, ip: 192.168.1.10, podCIDR: 10.244.1.0/24}
pods:
  - {name: p, node: node-1, ip: 10.244.1.10}
`)
		const races = 50
		broken, cleanFailed := 0, 0
		for i := range races {
			first := deadLab(i)
			var out bytes.Buffer
			clean := exec.Command(svclabBin, "clean")
			clean.Stdout, clean.Stderr = &out, &out
			Expect(clean.Start()).To(Succeed())
			if i%2 == 0 {
				time.Sleep(time.Duration(i%11) * time.Millisecond)
			} else {
				// Right inside the window: clean has read the records and
				// is removing the dead lab's namespaces.
				Eventually(func() bool { return namespaces.Exists(first) }).WithTimeout(10 * time.Second).WithPolling(100 * time.Microsecond).Should(BeFalse())
			}
			l, upErr := lab.Up(context.Background(), small, lab.Options{})
			if err := clean.Wait(); err != nil {
				cleanFailed++
				GinkgoWriter.Printf("race %d: clean failed: %v\n%s\n", i, err, out.String())
			}
			switch {
			case upErr != nil:
				broken++
				GinkgoWriter.Printf("race %d: up failed: %v\n", i, upErr)
			default:
				var gone []string
				for _, m := range l.Members() {
					if !namespaces.Exists(m.NetNS) {
						gone = append(gone, m.NetNS)
					}
				}
				if len(gone) > 0 {
					broken++
					GinkgoWriter.Printf("race %d: up succeeded, namespaces gone: %v\n%s\n", i, gone, out.String())
				}
				Expect(l.Down()).To(Succeed())
			}
		}
		Expect(broken).To(BeZero(), "%d of %d races left a broken lab", broken, races)
		Expect(cleanFailed).To(BeZero(), "clean failed in %d of %d races", cleanFailed, races)
		out, err := runSvclab("clean")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(namespaces.List(record.NamespacePrefix + "racedead-")).To(BeEmpty())
		Expect(namespaces.List(record.NamespacePrefix + "race-")).To(BeEmpty())
	})

	// One unparsable record must not block the others: ls warns naming it and
	// lists the rest, down works on another lab, clean removes it.
	//
	// Serial: another spec's `svclab clean` beside it would remove the corrupt
	// record first, and this one's clean would not name it.
	It("goes on past a corrupt record, and `svclab clean` removes it", Serial, func() {
		bad := filepath.Join(record.DefaultDir, "broken-zzzz.json")
		Expect(os.MkdirAll(record.DefaultDir, 0o755)).To(Succeed())
		Expect(os.WriteFile(bad, []byte(`{"id": "broken-zz`), 0o644)).To(Succeed())
		DeferCleanup(func() { os.Remove(bad) })
		out, err := runSvclab("up", "-f", "web")
		Expect(err).NotTo(HaveOccurred(), out)
		id := strings.Fields(strings.SplitN(out, "Lab ", 2)[1])[0]
		DeferCleanup(func() { runSvclab("down", id) })

		cmd := exec.Command(svclabBin, "ls")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		stdout, err := cmd.Output()
		Expect(err).NotTo(HaveOccurred(), stderr.String())
		Expect(string(stdout)).To(ContainSubstring(id))
		Expect(stderr.String()).To(ContainSubstring("warning: lab record " + bad + " is corrupt"))

		out, err = runSvclab("down", id)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(labNamespaces("web", strings.TrimPrefix(id, "web-"))).To(BeEmpty())

		out, err = runSvclab("clean")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("removed corrupt record " + bad))
		Expect(bad).NotTo(BeAnExistingFile())
	})

	// The owner's teardown removes its log with the lab; `up` still shows
	// why the lab failed, and leaves nothing.
	It("shows why a lab did not come up, and leaves nothing", func() {
		logs := func() []string {
			l, err := filepath.Glob(filepath.Join(record.DefaultDir, "*.log"))
			Expect(err).NotTo(HaveOccurred())
			return l
		}
		before := logs()
		out, err := runSvclab("up", "--control-plane", "--kube-binary", "/bin/false")
		Expect(err).To(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("the lab did not come up"))
		Expect(out).To(ContainSubstring("kube binary /bin/false: /bin/false version: exit status 1"))
		Expect(out).NotTo(ContainSubstring("no such file or directory"))
		Expect(logs()).To(Equal(before), "the failed lab's log is left")
	})

	// A control plane's etcd preallocates its write-ahead log under the run
	// directory: a lab that does not fit is refused before anything is built,
	// with the figures. The run directory here is a 16 MiB tmpfs mounted in a
	// mount namespace of the command's own.
	It("refuses a control plane when the run directory lacks the room, saying how much", func() {
		// The mount point: nothing may have made it yet when this spec runs
		// first on a fresh machine.
		Expect(os.MkdirAll(record.DefaultDir, 0o755)).To(Succeed())
		cmd := exec.Command("unshare", "-m", "--propagation", "private", "sh", "-c",
			`mount -t tmpfs -o size=16m none "$1" && exec "$2" up --control-plane --kube-binary /bin/false`,
			"sh", record.DefaultDir, svclabBin)
		out, err := cmd.CombinedOutput()
		Expect(err).To(HaveOccurred(), string(out))
		Expect(string(out)).To(MatchRegexp(`/run/svclab has 1[0-6] MiB free, and a lab with a control plane needs about 128 MiB there \(etcd preallocates a 64 MiB write-ahead log\)`))
		Expect(string(out)).NotTo(ContainSubstring("up in"), "nothing is built")
	})

	// `logs` and `exec` take names: a path-like argument is refused (exit 2)
	// and never reads a file beside the lab's logs.
	It("takes member and component names, never paths", func() {
		r := &record.Lab{ID: "names-abcd", Name: "names", Created: time.Now(), Kubeconfig: "kubeconfig",
			Members: []record.Member{{Name: "node-1", Kind: member.KindNode, NetNS: "svclab-names-node-1-abcd"}}}
		Expect(record.Write(record.DefaultDir, r)).To(Succeed())
		DeferCleanup(func() { record.Remove(record.DefaultDir, r.ID) })
		Expect(os.MkdirAll(record.RunDir(record.DefaultDir, r.ID), 0o755)).To(Succeed())
		Expect(os.WriteFile(filepath.Join(record.RunDir(record.DefaultDir, r.ID), "kube-apiserver.log"), []byte("api log\n"), 0o644)).To(Succeed())
		secret := filepath.Join(record.DefaultDir, "secret-names.log")
		Expect(os.WriteFile(secret, []byte("not the lab's\n"), 0o600)).To(Succeed())
		DeferCleanup(func() { os.Remove(secret) })

		out, err := runSvclab("logs", r.ID, "kube-apiserver")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(Equal("api log\n"))
		for _, args := range [][]string{
			{"logs", r.ID, "../secret-names"}, {"logs", r.ID, "/"}, {"logs", r.ID, ".."},
			{"exec", r.ID, "../../x", "--", "true"}, {"exec", r.ID, "/", "--", "true"},
		} {
			out, err := runSvclab(args...)
			Expect(err).To(HaveOccurred(), "svclab %v: %s", args, out)
			Expect(err.(*exec.ExitError).ExitCode()).To(Equal(2), "svclab %v: %s", args, out)
			Expect(out).To(ContainSubstring("a name, never a path"), "svclab %v", args)
			Expect(out).NotTo(ContainSubstring("not the lab's"))
		}
	})
})
