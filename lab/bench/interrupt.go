package bench

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// cellName names one lab of the run (a mode's variant, or one kube-proxy
// subject, at one size) as the progress and the notes do.
func cellName(label string, n, e int) string { return fmt.Sprintf("%s N=%d E=%d", label, n, e) }

// interrupted records, when ctx was cancelled (Ctrl-C, SIGTERM), that the run
// stopped early and every lab that did not run whole: the one it was in (part
// of which may be measured) and those after it, but for what the run had cut
// already (the notes say why).
func (r *runner) interrupted(ctx context.Context) {
	if ctx.Err() == nil {
		return
	}
	r.rep.Interrupted = fmt.Sprintf("stopped from outside (%v) after %s", context.Cause(ctx), time.Since(r.rep.Started).Round(time.Second))
	for _, g := range r.groups() {
		name := cellName(g.label(), g.n, g.e)
		if r.done[name] || r.allCut(g) {
			continue
		}
		r.rep.NotRun = append(r.rep.NotRun, name)
	}
	subjects, _ := r.c.KubeProxySubjects()
	for _, e := range r.c.Endpoints {
		for _, n := range r.c.Services {
			for _, s := range subjects {
				if name := cellName(s.String(), n, e); !r.done[name] && !r.cut[kubeProxyCurve(s, e)] {
					r.rep.NotRun = append(r.rep.NotRun, name)
				}
			}
		}
	}
	r.logf("interrupted: %s; did not run whole: %s", r.rep.Interrupted, strings.Join(r.rep.NotRun, ", "))
}
