package main

import (
	"strings"
	"testing"
	"time"
)

func TestSpecMode(t *testing.T) {
	for labels, want := range map[string]string{
		"verify,kube-proxy-iptables-legacy": "kube-proxy-iptables-legacy",
		"ipvs,churn":                        "ipvs",
		"records":                           noMode,
		// The differential check's specs carry both sides' labels: the
		// first names the mode the spec ran in.
		"iptables-nft,kube-proxy-iptables-nft,differential": "iptables-nft",
	} {
		if got := specMode(strings.Split(labels, ",")); got != want {
			t.Errorf("specMode(%s) = %s, want %s", labels, got, want)
		}
	}
}

func TestPrintTiming(t *testing.T) {
	var specs []timed
	for i := range 25 {
		specs = append(specs, timed{text: "spec " + string(rune('A'+i)), mode: "iptables-nft", labels: []string{"iptables-nft", "verify"}, took: time.Duration(i+1) * time.Second})
	}
	specs = append(specs, timed{text: "alone", mode: noMode, labels: []string{"records"}, took: 100 * time.Second})
	var b strings.Builder
	printTiming(&b, "r.json", specs)
	out := b.String()
	for _, want := range []string{
		"r.json: the 20 slowest of 26 specs (425.0 s of spec time in all):\n  100.0 s  (no mode)                   alone\n   25.0 s  iptables-nft                spec Y\n",
		"  325.0 s    25 specs  iptables-nft\n  100.0 s     1 specs  (no mode)\n",
		"  325.0 s    25 specs  verify\n  100.0 s     1 specs  records\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	// With "alone" first, the 20th slowest is spec G (7 s); spec F (6 s) is the 21st.
	if !strings.Contains(out, "spec G\n") || strings.Contains(out, "spec F\n") {
		t.Errorf("the table is not the 20 slowest:\n%s", out)
	}
}
