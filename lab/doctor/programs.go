package doctor

import (
	"context"
	"os/exec"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/proxy/xtables"
)

// Program is one program svclab or its users run, found or not.
type Program struct {
	Name    string `json:"name"`
	Package string `json:"package"` // the Debian package that has it
	Path    string `json:"path,omitempty"`
	Version string `json:"version,omitempty"`
}

// Found tells whether the program is installed.
func (p Program) Found() bool { return p.Path != "" }

// programDef is a program doctor reports. Programs whose --version asks the
// kernel (ipvsadm loads ip_vs for it, ipset asks for its protocol) are named
// by their package's version instead: doctor changes nothing on the host.
type programDef struct {
	name, pkg   string
	versionFlag string // "" means: the package's version
}

func programDefs(qemu string) []programDef {
	return []programDef{
		{name: xtables.Backends["nft"].IPTables, pkg: "iptables", versionFlag: "--version"},
		{name: xtables.Backends["legacy"].IPTables, pkg: "iptables", versionFlag: "--version"},
		{name: "ipset", pkg: "ipset"},
		{name: "ipvsadm", pkg: "ipvsadm"},
		{name: "conntrack", pkg: "conntrack", versionFlag: "--version"},
		{name: "nft", pkg: "nftables", versionFlag: "--version"},
		{name: qemu, pkg: "qemu-system-x86", versionFlag: "--version"},
	}
}

func findPrograms(ctx context.Context, qemu string) []Program {
	var out []Program
	for _, d := range programDefs(qemu) {
		p := Program{Name: d.name, Package: d.pkg}
		path, err := exec.LookPath(d.name)
		if err != nil {
			out = append(out, p)
			continue
		}
		p.Path = path
		if d.versionFlag != "" {
			p.Version = firstLine(run(ctx, path, d.versionFlag))
		} else if v := run(ctx, "dpkg-query", "-W", "-f", "${Version}", d.pkg); v != "" {
			p.Version = "package " + d.pkg + " " + v
		}
		if p.Version == "" {
			p.Version = "version unknown"
		}
		out = append(out, p)
	}
	return out
}

// run returns a program's standard output, or "" when it fails.
func run(ctx context.Context, name string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	b, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}
