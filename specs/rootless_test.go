package specs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/svclab/svclab/lab/namespaces"
	"github.com/svclab/svclab/lab/record"
)

// An ordinary user (nobody, no capabilities) runs svclab: each run makes a
// user namespace of its own, where the user is root, and every lab namespace
// inside it (internal/rootless). Root's view of the machine, its namespaces
// and its records, never holds the run.
var _ = Describe("A run without root", Label("rootless"), func() {
	for _, m := range modes {
		It("verifies web as an ordinary user, or says why the mode cannot be, "+m.label, Label(m.label), func() {
			u := newOrdinaryUser()
			args := []string{"verify", "-f", "web", "--mode", m.mode.Name, "--no-vm"}
			if m.backend != "" {
				args = append(args, "--backend", m.backend)
			}
			if m.kubeProxy {
				args = append(args, "--proxy", "kube-proxy", "--kube-binary", kubeBinary)
			}
			out, err := u.run(args...)
			if why := m.mode.NoUserNamespace; why != nil {
				// IPVS: the kernel keeps its sysctls from a user namespace's
				// network namespaces; svclab says so, and what to do, and
				// builds nothing (without --no-vm it runs in svclab's VM).
				Expect(err).To(HaveOccurred(), "svclab %s as nobody:\n%s", strings.Join(args, " "), out)
				Expect(out).To(ContainSubstring(why.Error()))
				return
			}
			Expect(err).NotTo(HaveOccurred(), "svclab %s as nobody:\n%s", strings.Join(args, " "), out)
			passed := regexp.MustCompile(`(\d+) of (\d+) checks passed`).FindStringSubmatch(out)
			Expect(passed).NotTo(BeNil(), out)
			Expect(passed[1]).To(Equal(passed[2]), out)
		})
	}

	It("keeps an ordinary user's lab out of root's sight: up, exec, trace, ls and down", func() {
		u := newOrdinaryUser()
		out, err := u.run("up", "-f", "web")
		Expect(err).NotTo(HaveOccurred(), "svclab up as nobody:\n%s", out)
		m := regexp.MustCompile(`svclab down (web-(\S+))`).FindStringSubmatch(out)
		Expect(m).NotTo(BeNil(), out)
		id, run := m[1], m[2]
		DeferCleanup(func() { u.run("down", id) })

		By("root sees neither its namespaces nor its record; the user's state directory has it")
		Expect(namespaces.List(record.NamespacePrefix)).NotTo(ContainElement(HaveSuffix("-" + run)))
		Expect(filepath.Join(record.DefaultDir, id+".json")).NotTo(BeAnExistingFile())
		Expect(filepath.Join(u.runtimeDir, "svclab", id+".json")).To(BeAnExistingFile())

		By("exec, trace and ls join the lab")
		out, err = u.run("exec", id, "client", "--", "curl", "-s", "--max-time", "10", "10.96.123.45")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`"pod":"web-[ab]"`))
		out, err = u.run("trace", id, "client", "10.96.123.45:80")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(MatchRegexp(`answered by web-[ab]`))
		out, err = u.run("ls")
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring(id))

		By("down removes it, record and all")
		out, err = u.run("down", id)
		Expect(err).NotTo(HaveOccurred(), out)
		Expect(out).To(ContainSubstring("Lab " + id + " is down."))
		Expect(filepath.Join(u.runtimeDir, "svclab", id+".json")).NotTo(BeAnExistingFile())
	})
})

// ordinaryUser runs a copy of svclab as nobody, with a runtime directory of
// its own, so that specs running beside each other see only their own labs.
type ordinaryUser struct {
	bin, runtimeDir string
}

func newOrdinaryUser() ordinaryUser {
	dir, err := os.MkdirTemp("", "svclab-xdg-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, dir)
	Expect(os.Chown(dir, 65534, 65534)).To(Succeed())
	Expect(os.Chmod(dir, 0o700)).To(Succeed())
	return ordinaryUser{bin: worldExecutable(svclabBin), runtimeDir: dir}
}

// command is svclab with args, to run as nobody, with no capabilities and no
// groups but its own.
func (u ordinaryUser) command(args ...string) *exec.Cmd {
	cmd := exec.Command(u.bin, args...)
	cmd.Dir = filepath.Dir(u.bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "XDG_RUNTIME_DIR=" + u.runtimeDir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534, Groups: []uint32{}}}
	return cmd
}

// run runs svclab with args as nobody and returns what it printed.
func (u ordinaryUser) run(args ...string) (string, error) {
	out, err := u.command(args...).CombinedOutput()
	return string(out), err
}
