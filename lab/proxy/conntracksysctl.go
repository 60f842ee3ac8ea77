package proxy

import (
	"fmt"
	"strconv"
	"time"
)

// Defaults of kube-proxy 1.37's conntrack section (pkg/proxy/apis/config/v1alpha1
// defaults), which a configuration that leaves the fields out gets.
const (
	defaultTCPEstablishedTimeout = 24 * time.Hour
	defaultTCPCloseWaitTimeout   = time.Hour
)

// ConntrackSysctls are the conntrack sysctls kube-proxy configured with c sets
// in its network namespace when it starts (pkg/proxy/conntrack's SetSysctls), in
// that order: the TCP established and CLOSE_WAIT timeouts (a day and an hour
// unless set), liberal TCP window tracking when asked for, and the UDP timeouts
// when set. Each is a per-namespace setting, so a node's do not touch the host's
// or another node's. nf_conntrack_max and the hash size are not among them: svclab
// gives kube-proxy maxPerCore 0, and refuses any other (CheckConntrackMax).
func (c Config) ConntrackSysctls() [][2]string {
	ct := c.KubeProxy.Conntrack
	seconds := func(d time.Duration) string { return strconv.Itoa(int(d / time.Second)) }
	var out [][2]string
	est, wait := defaultTCPEstablishedTimeout, defaultTCPCloseWaitTimeout
	if ct.TCPEstablishedTimeout != nil {
		est = ct.TCPEstablishedTimeout.Duration
	}
	if ct.TCPCloseWaitTimeout != nil {
		wait = ct.TCPCloseWaitTimeout.Duration
	}
	// kube-proxy skips a timeout of 0 (or less): "leave it as it is".
	if est > 0 {
		out = append(out, [2]string{"net.netfilter.nf_conntrack_tcp_timeout_established", seconds(est)})
	}
	if wait > 0 {
		out = append(out, [2]string{"net.netfilter.nf_conntrack_tcp_timeout_close_wait", seconds(wait)})
	}
	if ct.TCPBeLiberal {
		out = append(out, [2]string{"net.netfilter.nf_conntrack_tcp_be_liberal", "1"})
	}
	if d := ct.UDPTimeout.Duration; d > 0 {
		out = append(out, [2]string{"net.netfilter.nf_conntrack_udp_timeout", seconds(d)})
	}
	if d := ct.UDPStreamTimeout.Duration; d > 0 {
		out = append(out, [2]string{"net.netfilter.nf_conntrack_udp_timeout_stream", seconds(d)})
	}
	return out
}

// CheckConntrackMax refuses a conntrack.maxPerCore other than 0, for svclab's
// proxiers and the real kube-proxy alike: with it kube-proxy raises
// nf_conntrack_max, which a node's network namespace cannot write, and the
// conntrack module's hashsize, which is the whole machine's (every lab's and the
// host's own table). A lab's limit is the host's.
func CheckConntrackMax(maxPerCore *int32) error {
	if maxPerCore == nil || *maxPerCore == 0 {
		return nil
	}
	return fmt.Errorf("%d: kube-proxy would raise nf_conntrack_max, read-only in a node's network namespace, "+
		"and the nf_conntrack hashsize, which is the whole machine's; svclab keeps it 0 (leave it as it is): "+
		"raise net.netfilter.nf_conntrack_max on the host instead", *maxPerCore)
}
