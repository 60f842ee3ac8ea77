package bench

import (
	"reflect"
	"strings"
	"time"

	"github.com/svclab/svclab/lab/proxy"
)

// part is one piece of a sync's time as the proxier accounts for it.
type part struct {
	name string
	d    time.Duration
}

var durationType = reflect.TypeFor[time.Duration]()

// syncParts reads how a proxier says its last sync spent its time, when it says:
// a LastSync method returning a struct, whose time.Duration fields (Total
// aside) are the parts, named in lower case. The bench times every sync itself
// and needs none of this; it only explains where the time went (the iptables
// proxier: generate, setup, save, write, conntrack; the IPVS one: iptables,
// ipvs, ipsets, conntrack). Read by reflection so that any mode offering it is
// read alike, without a case per mode; TestSyncParts holds the two modes here
// to it.
func syncParts(p proxy.Proxier) []part {
	m := reflect.ValueOf(p).MethodByName("LastSync")
	if !m.IsValid() || m.Type().NumIn() != 0 || m.Type().NumOut() != 1 || m.Type().Out(0).Kind() != reflect.Struct {
		return nil
	}
	stats := m.Call(nil)[0]
	var parts []part
	for i := 0; i < stats.NumField(); i++ {
		f := stats.Type().Field(i)
		if !f.IsExported() || f.Type != durationType || f.Name == "Total" {
			continue
		}
		parts = append(parts, part{name: strings.ToLower(f.Name), d: time.Duration(stats.Field(i).Int())})
	}
	return parts
}

// addParts records the parts of p's last sync under prefix_part_NAME.
func (r *runner) addParts(s subject, n, e int, prefix string, rep int, p proxy.Proxier) {
	for _, pt := range syncParts(p) {
		r.addDuration(s, n, e, prefix+"_part_"+pt.name, rep, pt.d)
	}
}
