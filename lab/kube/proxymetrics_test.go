package kube

import (
	"os"
	"strings"
	"testing"
	"time"
)

// testdata/proxy-metrics-nftables.txt is the metrics page of a real
// kube-proxy 1.37.2 in nftables mode, read from its node in a lab: its first
// (full) sync, a sync after an EndpointSlice change by the controller, then a
// Service and a selectorless EndpointSlice carrying the trigger-time
// annotation, written together (two syncs, one network programming latency).
func TestParseProxyMetricsOfARealKubeProxy(t *testing.T) {
	f, err := os.Open("testdata/proxy-metrics-nftables.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := ParseProxyMetrics(f)
	if err != nil {
		t.Fatal(err)
	}
	want := ProxyMetrics{
		Syncs: 4, SyncSeconds: 1.121162012, FullSyncs: 1,
		Programmed: 1, ProgrammedSeconds: 4.539273899,
		LastSync:   unixSeconds(1.7961485096133811e+09),
		LastQueued: unixSeconds(1.7961485084333456e+09),
	}
	if m != want {
		t.Errorf("parsed\n%+v\nwant\n%+v", m, want)
	}
	if got := m.LastSync.Sub(m.LastQueued).Round(time.Millisecond); got != 1180*time.Millisecond {
		t.Errorf("last sync %s after the last queued, want 1.18s (the page's gauges)", got)
	}
}

func TestParseProxyMetricsSeries(t *testing.T) {
	for _, tc := range []struct {
		name, page string
		want       ProxyMetrics
	}{
		{"nothing observed yet", "# HELP go_goroutines x\n# TYPE go_goroutines gauge\ngo_goroutines 12\n", ProxyMetrics{}},
		{"unlabelled, before 1.28", `# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{le="+Inf"} 3
kubeproxy_sync_proxy_rules_duration_seconds_sum 0.5
kubeproxy_sync_proxy_rules_duration_seconds_count 3
`, ProxyMetrics{Syncs: 3, SyncSeconds: 0.5}},
		{"IPv6 beside IPv4", `# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv6",le="+Inf"} 7
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv6"} 9
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv6"} 7
kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family="IPv4",le="+Inf"} 2
kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family="IPv4"} 0.25
kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family="IPv4"} 2
# TYPE kubeproxy_sync_proxy_rules_last_timestamp_seconds gauge
kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv6"} 2e+09
`, ProxyMetrics{Syncs: 2, SyncSeconds: 0.25}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := ParseProxyMetrics(strings.NewReader(tc.page))
			if err != nil {
				t.Fatal(err)
			}
			if m != tc.want {
				t.Errorf("parsed %+v, want %+v", m, tc.want)
			}
		})
	}
	if _, err := ParseProxyMetrics(strings.NewReader("kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family=IPv4} 1\n")); err == nil {
		t.Error("a malformed page parsed")
	}
}

func TestProxyMetricsSince(t *testing.T) {
	before := ProxyMetrics{Syncs: 4, SyncSeconds: 1.0, FullSyncs: 1, Programmed: 1, ProgrammedSeconds: 4}
	after := ProxyMetrics{Syncs: 6, SyncSeconds: 1.5, FullSyncs: 1, Programmed: 2, ProgrammedSeconds: 4.3}
	want := ProxyDelta{Syncs: 2, MeanSync: 250 * time.Millisecond, Programmed: 1, MeanProgrammed: 300 * time.Millisecond}
	if got := after.Since(before); got != want {
		t.Errorf("Since = %+v, want %+v", got, want)
	}
	if got := before.Since(before); got != (ProxyDelta{}) {
		t.Errorf("Since itself = %+v, want nothing", got)
	}
}
