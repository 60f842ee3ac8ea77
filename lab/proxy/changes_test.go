package proxy

import (
	"net/netip"
	"reflect"
	"testing"
)

func TestDiff(t *testing.T) {
	dns := udpPort("dns", "10.96.0.10", 0, serving("10.244.1.2"), serving("10.244.2.2"))
	reordered := dns
	reordered.Endpoints = []Endpoint{serving("10.244.2.2"), serving("10.244.1.2")}
	renumbered := dns
	renumbered.Port = 54
	moved := dns
	moved.Endpoints = []Endpoint{serving("10.244.1.3")}
	other := udpPort("other", "10.96.0.11", 0)
	cases := []struct {
		name      string
		prev, cur []ServicePort
		want      Changes
	}{
		{"nothing changed", []ServicePort{dns}, []ServicePort{dns}, Changes{}},
		{"endpoints in another order", []ServicePort{dns}, []ServicePort{reordered}, Changes{}},
		{"a port renumbered", []ServicePort{dns}, []ServicePort{renumbered}, Changes{"kube-system/dns": {Ports: true, UDP: true}}},
		{"an endpoint moved", []ServicePort{dns}, []ServicePort{moved}, Changes{"kube-system/dns": {Endpoints: true, UDP: true}}},
		{"a Service without endpoints appeared", []ServicePort{dns}, []ServicePort{dns, other},
			Changes{"kube-system/other": {Ports: true, Endpoints: true, UDP: true}}},
		{"a Service went away", []ServicePort{dns, other}, []ServicePort{other},
			Changes{"kube-system/dns": {Ports: true, Endpoints: true, UDP: true}}},
	}
	for _, c := range cases {
		if got := Diff(c.prev, c.cur); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
	}
}

// Every field of ServicePort but Endpoints must make sameFields see a change.
func TestSameFields(t *testing.T) {
	base := udpPort("dns", "10.96.0.10", 0)
	typ := reflect.TypeFor[ServicePort]()
	for i := range typ.NumField() {
		f := typ.Field(i)
		if f.Name == "Endpoints" {
			continue
		}
		changed := base
		v := reflect.ValueOf(&changed).Elem().Field(i)
		switch v.Kind() {
		case reflect.Bool:
			v.SetBool(!v.Bool())
		case reflect.Int:
			v.SetInt(v.Int() + 1)
		case reflect.String:
			v.SetString(v.String() + "x")
		default:
			switch f.Name {
			case "Name":
				changed.Name.Port += "x"
			case "ClusterIP":
				changed.ClusterIP = changed.ClusterIP.Next()
			case "ExternalIPs":
				changed.ExternalIPs = []netip.Addr{netip.MustParseAddr("203.0.113.10")}
			case "LoadBalancerIPs":
				changed.LoadBalancerIPs = []netip.Addr{netip.MustParseAddr("192.168.1.240")}
			case "SourceRanges":
				changed.SourceRanges = []netip.Prefix{netip.MustParsePrefix("192.168.1.0/24")}
			default:
				t.Fatalf("ServicePort.%s (%s): teach this test and sameFields about it", f.Name, f.Type)
			}
		}
		if sameFields(base, changed) {
			t.Errorf("sameFields misses a change of ServicePort.%s", f.Name)
		}
	}
	if !sameFields(base, base) {
		t.Error("sameFields(x, x) = false")
	}
}
