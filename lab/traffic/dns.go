package traffic

import (
	"context"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// DNSTimeout bounds one question of Exchange: a lab's DNS answers within
// milliseconds.
const DNSTimeout = time.Second

// Exchange asks server one question for name (a full name, with its final dot)
// from inside the network namespace netns, over protocol (UDP or TCP) in
// server's family, on a socket of its own, and returns the response. A question unanswered within
// DNSTimeout is a timeout error (Classify says Timeout), as is a refused
// one a refusal.
func Exchange(ctx context.Context, netns, protocol string, server netip.AddrPort, name string, qtype uint16) (*dns.Msg, error) {
	proto := "udp"
	if strings.EqualFold(protocol, "TCP") {
		proto = "tcp"
	}
	ctx, cancel := context.WithTimeout(ctx, DNSTimeout)
	defer cancel()
	conn, err := Dialer(netns)(ctx, proto+family(server.Addr()), hostPort(server))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	m := new(dns.Msg)
	m.SetQuestion(name, qtype)
	client := &dns.Client{Net: proto, Timeout: DNSTimeout}
	resp, _, err := client.ExchangeWithConnContext(ctx, m, &dns.Conn{Conn: conn})
	return resp, err
}
