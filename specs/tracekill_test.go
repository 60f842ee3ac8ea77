package specs

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// A `svclab trace` killed with SIGKILL runs none of its deferred removals: its
// nf_tables table stays in every namespace of the lab, and its monitors
// (xtables-monitor --trace, nft monitor trace) would read on and hold the
// namespaces after `down`. These specs kill traces at random points and check
// that the next trace, `clean` and `down` remove what they left, and say so.
var _ = Describe("A trace killed with SIGKILL", Label("lifecycle"), func() {
	for _, m := range ownModes() {
		// Serial: `svclab clean` removes every killed trace's leftovers on the
		// machine, and the specs check that it names exactly the ones their own
		// kill left; another spec's clean beside them would take those first.
		Context(m.label, Label(m.label), Ordered, Serial, func() {
			var (
				id   string
				nss  []string
				took time.Duration
				// inodes are the lab's network namespaces, by inode: a
				// monitor holds its namespace after `down` deleted its name.
				inodes = map[uint64]bool{}
			)
			BeforeAll(func() {
				args := []string{"up", "-f", "web", "--mode", m.mode.Name}
				if m.backend != "" {
					args = append(args, "--backend", m.backend)
				}
				out, err := runSvclab(args...)
				Expect(err).NotTo(HaveOccurred(), out)
				id = strings.Fields(strings.SplitN(out, "Lab ", 2)[1])[0]
				DeferCleanup(func() { runSvclab("down", id) })
				r, err := record.Find(record.DefaultDir, id)
				Expect(err).NotTo(HaveOccurred())
				// One whole trace, to spread the random kill points over.
				start := time.Now()
				out, err = runSvclab("trace", id, "client", "10.96.123.45:80")
				Expect(err).NotTo(HaveOccurred(), out)
				took = time.Since(start)
				for _, mem := range r.Members {
					nss = append(nss, mem.NetNS)
					var st syscall.Stat_t
					Expect(syscall.Stat(namespaces.Path(mem.NetNS), &st)).To(Succeed())
					inodes[st.Ino] = true
				}
			})

			// killTrace starts a trace and kills it at a random point: after a
			// random part of a whole trace's time, or (atTables) once its record names a random
			// number of started monitors, when all its tables are in place.
			// It returns the number of trace tables left in the lab.
			killTrace := func(atTables bool) int {
				for attempt := 1; ; attempt++ {
					cmd := exec.Command(svclabBin, "trace", id, "client", "10.96.123.45:80")
					cmd.Stdout, cmd.Stderr = GinkgoWriter, GinkgoWriter
					Expect(cmd.Start()).To(Succeed())
					exited := make(chan struct{})
					go func() { cmd.Wait(); close(exited) }()
					var point string
					if atTables {
						n := 1 + rand.IntN(len(nss))
						point = fmt.Sprintf("once %d monitors run", n)
						if !waitForMonitors(id, cmd.Process.Pid, n, exited) {
							// It ended first: nothing to kill.
							Expect(attempt).To(BeNumerically("<", 3), "the trace ended each time before %d monitors ran", n)
							continue
						}
					} else {
						d := time.Duration(rand.Int64N(int64(took)))
						point = fmt.Sprintf("after %s", d)
						time.Sleep(d)
					}
					cmd.Process.Kill()
					<-exited
					left := traceTables(nss)
					fmt.Fprintf(GinkgoWriter, "killed the trace %s: %d trace tables left\n", point, left)
					if atTables {
						Expect(left).To(Equal(len(nss)), "a trace killed with its tables in place")
					}
					return left
				}
			}
			// saidRemoved checks what a command said it removed against the
			// tables the killed trace left.
			saidRemoved := func(out string, tables int) {
				fmt.Fprintf(GinkgoWriter, "the command said:\n%s\n", out)
				said := regexp.MustCompile(`lab ` + id + `: removed a killed trace's leftovers: (\d+) trace tables?, (\d+) monitor`).FindStringSubmatch(out)
				if tables == 0 {
					if said != nil {
						Expect(said[1]).To(Equal("0"), out)
					}
					return
				}
				Expect(said).NotTo(BeNil(), "the command did not say it removed the killed trace's leftovers:\n%s", out)
				Expect(said[1]).To(Equal(strconv.Itoa(tables)), out)
			}
			noMonitor := func() {
				Eventually(func() []string { return monitorsIn(inodes) }).WithTimeout(10*time.Second).
					Should(BeEmpty(), "monitor processes in the lab's namespaces")
			}

			It("are removed by the next trace, which says so", func() {
				for _, atTables := range []bool{true, false} {
					left := killTrace(atTables)
					out, err := runSvclab("trace", id, "client", "10.96.123.45:80")
					Expect(err).NotTo(HaveOccurred(), out)
					Expect(traceTables(nss)).To(BeZero(), "trace tables left in the lab")
					saidRemoved(out, left)
					noMonitor()
				}
			})

			It("are removed by `svclab clean`, which leaves the running lab and says so", func() {
				for _, atTables := range []bool{true, false} {
					left := killTrace(atTables)
					out, err := runSvclab("clean")
					Expect(err).NotTo(HaveOccurred(), out)
					Expect(out).To(ContainSubstring("left lab " + id + " running"))
					Expect(traceTables(nss)).To(BeZero(), "trace tables left in the lab")
					saidRemoved(out, left)
					noMonitor()
				}
			})

			It("are removed by `svclab down`, which says so", func() {
				left := killTrace(true)
				out, err := runSvclab("down", id)
				Expect(err).NotTo(HaveOccurred(), out)
				saidRemoved(out, left)
				Expect(labNamespaces("web", strings.TrimPrefix(id, "web-"))).To(BeEmpty())
				noMonitor()
				Expect(filepath.Join(record.DefaultDir, id)).NotTo(BeAnExistingFile())
			})
		})
	}
})

// waitForMonitors waits until the trace process pid of lab id has recorded n
// started monitors, or has exited (false).
func waitForMonitors(id string, pid, n int, exited <-chan struct{}) bool {
	deadline := time.Now().Add(time.Minute)
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return false
		default:
		}
		files, _ := filepath.Glob(filepath.Join(record.RunDir(record.DefaultDir, id), fmt.Sprintf("trace-%d-*.json", pid)))
		for _, f := range files {
			var t record.Trace
			if b, err := os.ReadFile(f); err == nil && json.Unmarshal(b, &t) == nil && len(t.Monitors) >= n {
				return true
			}
		}
		time.Sleep(time.Millisecond)
	}
	Fail(fmt.Sprintf("trace %d recorded no %d monitors in a minute", pid, n))
	return false
}

// traceTables counts the trace tables in the namespaces nss.
func traceTables(nss []string) int {
	n := 0
	for _, ns := range nss {
		if !namespaces.Exists(ns) {
			continue
		}
		out, err := namespaces.Output(ns, "nft", "list", "tables")
		Expect(err).NotTo(HaveOccurred(), "nft list tables in %s: %s", ns, out)
		n += strings.Count(string(out), " "+record.TraceTablePrefix)
	}
	return n
}

// monitorsIn lists the trace monitors (xtables-monitor, nft) that run, not
// ended, in one of the network namespaces inodes.
func monitorsIn(inodes map[uint64]bool) []string {
	var found []string
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		comm, err := os.ReadFile(p + "/comm")
		name := strings.TrimSpace(string(comm))
		if err != nil || (name != "xtables-monitor" && name != "nft") {
			continue
		}
		var st syscall.Stat_t
		if syscall.Stat(p+"/ns/net", &st) != nil || !inodes[st.Ino] {
			continue
		}
		// nftables mode's proxier runs nft too, briefly: not a monitor.
		b, _ := os.ReadFile(p + "/cmdline")
		cmdline := strings.ReplaceAll(string(b), "\x00", " ")
		pid, _ := strconv.Atoi(filepath.Base(p))
		if (name == "xtables-monitor" || strings.Contains(cmdline, " monitor ")) && record.ProcessOf(pid).Alive() {
			found = append(found, fmt.Sprintf("%d %s", pid, cmdline))
		}
	}
	return found
}
