package bench

import (
	"slices"
	"testing"

	"github.com/svclab/svclab/lab/proxy"
	"github.com/svclab/svclab/lab/proxy/iptables"
	"github.com/svclab/svclab/lab/proxy/ipvs"
)

// The parts the summary's "Where a sync's time goes" shows come from each
// proxier's LastSync by reflection: a renamed method or field would make them
// vanish without an error, so both modes are held to their parts here.
func TestSyncParts(t *testing.T) {
	for _, c := range []struct {
		p    proxy.Proxier
		want []string
	}{
		{&iptables.Proxier{}, []string{"conntrack", "generate", "save", "setup", "write"}},
		{&ipvs.Proxier{}, []string{"conntrack", "ipsets", "iptables", "ipvs"}},
	} {
		var got []string
		for _, pt := range syncParts(c.p) {
			got = append(got, pt.name)
		}
		slices.Sort(got)
		if !slices.Equal(got, c.want) {
			t.Errorf("%T: parts %v, want %v", c.p, got, c.want)
		}
	}
}
