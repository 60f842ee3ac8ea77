package doctor

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// WriteText prints the report for people: one line per feature, program and
// mode, and a last line saying whether every mode can run.
func WriteText(w io.Writer, rep Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "host kernel %s\n", rep.HostKernel)
	fmt.Fprintf(tw, "\nkernel features, %s\n", rep.Probe)
	for _, f := range rep.Features {
		line := f.State
		switch f.State {
		case Missing:
			line += ": " + f.Detail + " (" + f.Fix + ")"
		case Unknown:
			line = f.Detail
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", f.Name, f.What, line)
	}
	fmt.Fprintf(tw, "\nprograms\n")
	for _, p := range rep.Programs {
		if p.Found() {
			fmt.Fprintf(tw, "  %s\t%s\n", p.Name, p.Version)
		} else {
			fmt.Fprintf(tw, "  %s\tmissing (apt-get install %s)\n", p.Name, p.Package)
		}
	}
	fmt.Fprintf(tw, "\nsvclab's VM\n")
	if len(rep.VMMissing) == 0 {
		fmt.Fprintf(tw, "  host\tready\n")
	} else {
		var m []string
		for _, miss := range rep.VMMissing {
			m = append(m, miss.String())
		}
		fmt.Fprintf(tw, "  host\tcannot run it: missing %s\n", strings.Join(m, ", "))
	}
	fmt.Fprintf(tw, "  accelerator\t%s\n", rep.KVM.describe())
	if rep.VMKernel.Cached {
		fmt.Fprintf(tw, "  kernel\tcached: %s (%s %s) in %s\n", rep.VMKernel.Release, rep.VMKernel.Package, rep.VMKernel.Version, rep.VMKernel.Dir)
	} else {
		fmt.Fprintf(tw, "  kernel\tnot cached: the first VM run fetches Debian's with apt-get download (needs Debian's package mirrors)\n")
	}
	rep.WithoutRoot.write(tw)
	fmt.Fprintf(tw, "\nmodes\n")
	for _, v := range rep.Modes {
		fmt.Fprintf(tw, "  %s\t%s\n", v.Mode, v)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	var err error
	if rep.UserNamespace {
		if _, err := fmt.Fprintln(w, "\nprobed as an ordinary user, in a user namespace of svclab's own: these are what svclab runs without root"); err != nil {
			return err
		}
	}
	switch {
	case !rep.Probed:
		_, err = fmt.Fprintln(w, "\ncannot tell which modes can run natively without probing the kernel: run `sudo svclab doctor`")
	case rep.OK:
		_, err = fmt.Fprintln(w, "\nevery mode can run on this host")
	default:
		_, err = fmt.Fprintln(w, "\nsome modes cannot run on this host: install or load what is named above")
	}
	return err
}
