package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/svclab/svclab/lab/bench"
)

func TestCSVRoundTrip(t *testing.T) {
	rows := []bench.Row{
		{Mode: "iptables", Method: "partial", Backend: "nft", Services: 1000, Endpoints: 2, Metric: "add_sync", Rep: 3, Value: 0.123456789, Unit: bench.UnitSeconds},
		{Mode: "ipvs", Method: "netlink", Services: 10000, Endpoints: 10, Metric: "real_servers", Value: 100000, Unit: bench.UnitCount},
		{Mode: "iptables", Method: "full", Backend: "legacy", Services: 100, Endpoints: 2, Metric: "kernel_memory", Value: -4096, Unit: bench.UnitBytes},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rows); err != nil {
		t.Fatal(err)
	}
	if first, _, _ := strings.Cut(b.String(), "\n"); first != "mode,method,backend,services,endpoints,metric,rep,value,unit" {
		t.Errorf("header %q", first)
	}
	got, err := ReadCSV(&b)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("read back\n%+v\nwant\n%+v", got, rows)
	}
}

func TestReadCSVRejects(t *testing.T) {
	for name, text := range map[string]string{
		"wrong header":   "mode,method,backend,n,e,metric,rep,value,unit\n",
		"short row":      strings.Join(CSVHeader, ",") + "\niptables,full,nft,100,2,cold_sync,0,1.5\n",
		"not a number":   strings.Join(CSVHeader, ",") + "\niptables,full,nft,many,2,cold_sync,0,1.5,s\n",
		"NaN value":      strings.Join(CSVHeader, ",") + "\niptables,full,nft,100,2,cold_sync,0,NaN,s\n",
		"infinite value": strings.Join(CSVHeader, ",") + "\niptables,full,nft,100,2,cold_sync,0,+Inf,s\n",
	} {
		if _, err := ReadCSV(strings.NewReader(text)); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
