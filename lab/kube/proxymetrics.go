package kube

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// ProxyMetrics is what kube-proxy's metrics page says of its IPv4 syncs: the
// figures it reports of itself, which a benchmark sets beside its own.
// Histograms give a count and a sum: the difference of two readings is how
// many observations came in between and their total, so one reading before and
// one after a change give the mean of the syncs the change caused.
type ProxyMetrics struct {
	// Syncs and SyncSeconds are kubeproxy_sync_proxy_rules_duration_seconds:
	// how many syncs it has made and how long they took in all, each timed
	// by kube-proxy from the start of its sync function to its end.
	Syncs       uint64
	SyncSeconds float64
	// FullSyncs counts kubeproxy_sync_full_proxy_rules_duration_seconds, the
	// syncs that rewrote everything (the iptables and nftables modes tell
	// full and partial syncs apart; 0 in a mode that does not).
	FullSyncs uint64
	// Programmed and ProgrammedSeconds are
	// kubeproxy_network_programming_duration_seconds: per endpoint change, the
	// time from the change's trigger (the EndpointSlice's
	// endpoints.kubernetes.io/last-change-trigger-time annotation) to the end of
	// the sync that programmed it. Changes without the annotation, or older
	// than kube-proxy, are not observed.
	Programmed        uint64
	ProgrammedSeconds float64
	// LastSync is kubeproxy_sync_proxy_rules_last_timestamp_seconds, the end of
	// the last successful sync; LastQueued is
	// kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds, when a sync was
	// last asked for (on every change kube-proxy hears of). Zero when absent.
	LastSync, LastQueued time.Time
}

// Metric names ReadProxyMetrics reads.
const (
	metricSync       = "kubeproxy_sync_proxy_rules_duration_seconds"
	metricFullSync   = "kubeproxy_sync_full_proxy_rules_duration_seconds"
	metricProgrammed = "kubeproxy_network_programming_duration_seconds"
	metricLastSync   = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	metricLastQueued = "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"
)

// ReadProxyMetrics reads kube-proxy's metrics page at url (ProxyMetricsURL)
// with client, whose connections must open in kube-proxy's node
// (traffic.HTTPClient).
func ReadProxyMetrics(ctx context.Context, client *http.Client, url string) (ProxyMetrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return ProxyMetrics{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return ProxyMetrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return ProxyMetrics{}, fmt.Errorf("%s: %s", url, resp.Status)
	}
	m, err := ParseProxyMetrics(resp.Body)
	if err != nil {
		return ProxyMetrics{}, fmt.Errorf("%s: %w", url, err)
	}
	return m, nil
}

// ParseProxyMetrics reads a metrics page in Prometheus' text format, taking
// the IPv4 series (labelled ip_family="IPv4" since kube-proxy 1.28, unlabelled
// before). A metric kube-proxy has observed nothing of yet is absent from the
// page and reads as zero.
func ParseProxyMetrics(r io.Reader) (ProxyMetrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(r)
	if err != nil {
		return ProxyMetrics{}, fmt.Errorf("kube-proxy metrics: %w", err)
	}
	var m ProxyMetrics
	if h := ipv4(families[metricSync]).GetHistogram(); h != nil {
		m.Syncs, m.SyncSeconds = h.GetSampleCount(), h.GetSampleSum()
	}
	if h := ipv4(families[metricFullSync]).GetHistogram(); h != nil {
		m.FullSyncs = h.GetSampleCount()
	}
	if h := ipv4(families[metricProgrammed]).GetHistogram(); h != nil {
		m.Programmed, m.ProgrammedSeconds = h.GetSampleCount(), h.GetSampleSum()
	}
	m.LastSync = unixSeconds(ipv4(families[metricLastSync]).GetGauge().GetValue())
	m.LastQueued = unixSeconds(ipv4(families[metricLastQueued]).GetGauge().GetValue())
	return m, nil
}

// ipv4 is the family's IPv4 series: the one labelled ip_family="IPv4", or one
// without that label; nil if there is none.
func ipv4(f *dto.MetricFamily) *dto.Metric {
	for _, m := range f.GetMetric() {
		family := ""
		for _, l := range m.GetLabel() {
			if l.GetName() == "ip_family" {
				family = l.GetValue()
			}
		}
		if family == "" || family == "IPv4" {
			return m
		}
	}
	return nil
}

// unixSeconds is a gauge of seconds since the epoch as a time; zero for 0.
func unixSeconds(s float64) time.Time {
	if s <= 0 {
		return time.Time{}
	}
	sec, frac := math.Modf(s)
	return time.Unix(int64(sec), int64(math.Round(frac*1e9)))
}

// Since is what kube-proxy observed between an earlier reading and this
// one: the syncs it made and their mean duration, and the network programming
// latencies it recorded and their mean.
func (m ProxyMetrics) Since(before ProxyMetrics) ProxyDelta {
	d := ProxyDelta{Syncs: m.Syncs - before.Syncs, FullSyncs: m.FullSyncs - before.FullSyncs, Programmed: m.Programmed - before.Programmed}
	if d.Syncs > 0 {
		d.MeanSync = seconds((m.SyncSeconds - before.SyncSeconds) / float64(d.Syncs))
	}
	if d.Programmed > 0 {
		d.MeanProgrammed = seconds((m.ProgrammedSeconds - before.ProgrammedSeconds) / float64(d.Programmed))
	}
	return d
}

// ProxyDelta is what kube-proxy observed between two readings of its metrics.
type ProxyDelta struct {
	Syncs, FullSyncs, Programmed uint64
	MeanSync, MeanProgrammed     time.Duration
}

func seconds(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }
