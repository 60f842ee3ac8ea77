package specs

import (
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gbytes"
	"github.com/onsi/gomega/gexec"

	"github.com/svclab/svclab/lab/namespaces"
)

// A lab taken down under a command that works on it (svclab down, svclab clean
// --all, a namespace deleted by hand) made the command fail with whatever step it
// cut short: "iptables-nft: context canceled", "signal: killed". The command
// says instead that its lab went away, and who took it.
var _ = Describe("A lab taken down under a command", Label("records"), func() {
	// The race does not depend on the mode: the first of svclab's own.
	own := ownModes()
	if len(own) == 0 {
		return
	}
	m := own[0]
	// --trace keeps web.yaml's lab under verify some 15 s after its checks
	// (see the supervision specs), time enough for the lab to go under it.
	verifyArgs := append([]string{"verify", "--trace", "-f", "web"}, modeArgs(m)...)
	const labUpWait = 2 * time.Minute

	It("says `svclab verify`'s lab was taken down by `svclab down`, naming its pid, "+m.label, Label(m.label), func() {
		session := startSvclab(verifyArgs...)
		Eventually(session.Err).WithTimeout(labUpWait).Should(gbytes.Say(`checking \d+ flows`))
		rec := ownedBy(session.Command.Process.Pid)
		out, err := runSvclab("down", rec.ID)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(session).WithTimeout(2 * time.Minute).Should(gexec.Exit())
		stderr := string(session.Err.Contents())
		Expect(session.ExitCode()).To(Equal(1), stderr)
		Expect(stderr).To(MatchRegexp(regexp.QuoteMeta("svclab: "+m.label+": lab "+rec.ID+" was taken down during verify (by `svclab down "+rec.ID+"`, pid ")+`\d+: svclab verify, its owner, got SIGTERM\)`),
			"verify's error names the lab, the command that took it and its pid")
		Expect(stderr).NotTo(ContainSubstring("context canceled"))
	})

	It("says a namespace of `svclab verify`'s lab was deleted under it, "+m.label, Label(m.label), func() {
		session := startSvclab(verifyArgs...)
		Eventually(session.Err).WithTimeout(labUpWait).Should(gbytes.Say(`checking \d+ flows`))
		rec := ownedBy(session.Command.Process.Pid)
		client, ok := rec.Member("client")
		Expect(ok).To(BeTrue())
		Expect(namespaces.Delete(client.NetNS)).To(Succeed())
		Eventually(session).WithTimeout(2 * time.Minute).Should(gexec.Exit())
		stderr := string(session.Err.Contents())
		Expect(session.ExitCode()).To(Equal(1), stderr)
		Expect(stderr).To(ContainSubstring("lab " + rec.ID + " was taken down during verify (its namespace " + client.NetNS + " (member client) was deleted)"))
	})

	It("says `svclab exec`'s lab was taken down by `svclab down`, and ends the command, "+m.label, Label(m.label), func() {
		id := upWeb(m)
		session := startSvclab("exec", id, "node-1", "--", "sleep", "600")
		// The command runs: exec has a sleep as its child. Read from /proc,
		// not pgrep, which the VM's guest has not; the bound only ends a
		// wait that would never end (under TCG a start takes seconds).
		Eventually(func() bool { return hasChild(session.Command.Process.Pid, "sleep") }).
			WithTimeout(time.Minute).Should(BeTrue())
		out, err := runSvclab("down", id)
		Expect(err).NotTo(HaveOccurred(), out)
		Eventually(session).WithTimeout(time.Minute).Should(gexec.Exit())
		stderr := string(session.Err.Contents())
		Expect(session.ExitCode()).To(Equal(1), stderr)
		Expect(stderr).To(MatchRegexp(regexp.QuoteMeta("lab "+id+" was taken down during exec (by `svclab down "+id+"`, pid ") + `\d+: `))
		Expect(stderr).To(ContainSubstring(`the command "sleep" was ended`))
	})

	It("negative control: passes svclab verify, and exec gives its command's exit status, on a lab left up, "+m.label, Label(m.label), func() {
		session := startSvclab(verifyArgs...)
		Eventually(session).WithTimeout(labUpWait + 2*time.Minute).Should(gexec.Exit())
		stderr := string(session.Err.Contents())
		Expect(session.ExitCode()).To(Equal(0), stderr)
		Expect(stderr).NotTo(ContainSubstring("was taken down"))

		id := upWeb(m)
		err := exec.Command(svclabBin, "exec", id, "node-1", "--", "sh", "-c", "exit 3").Run()
		var ee *exec.ExitError
		Expect(err).To(BeAssignableToTypeOf(ee))
		Expect(err.(*exec.ExitError).ExitCode()).To(Equal(3))
		out, err := runSvclab("exec", id, "client", "--", "true")
		Expect(err).NotTo(HaveOccurred(), out)
	})
})

// upWeb brings web.yaml up in mode m with `svclab up`, to be taken down when the
// spec ends, and returns its ID.
func upWeb(m modeCase) string {
	out, err := runSvclab(append([]string{"up", "-f", "web"}, modeArgs(m)...)...)
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), out)
	id := strings.Fields(strings.SplitN(out, "Lab ", 2)[1])[0]
	DeferCleanup(func() { runSvclab("down", id) })
	return id
}

// hasChild tells whether process pid has a child whose command is comm, as
// /proc/PID/stat says (its second field, in parentheses; the fourth, the
// parent's PID).
func hasChild(pid int, comm string) bool {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		open, end := strings.IndexByte(string(b), '('), strings.LastIndexByte(string(b), ')')
		if open < 0 || end < open {
			continue
		}
		rest := strings.Fields(string(b)[end+1:])
		if string(b)[open+1:end] == comm && len(rest) > 1 && rest[1] == strconv.Itoa(pid) {
			return true
		}
	}
	return false
}
