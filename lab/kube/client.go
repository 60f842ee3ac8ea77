package kube

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/svclab/svclab/lab/traffic"
)

// pollInterval is how often a readiness wait asks again.
const pollInterval = 50 * time.Millisecond

// HTTPSClient is an HTTP client whose connections open inside netns (the lab's
// addresses are reachable only there) and trust p's CA.
func HTTPSClient(netns string, p *PKI, timeout time.Duration) (*http.Client, error) {
	ca, err := os.ReadFile(p.CACert)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("%s: no certificate", p.CACert)
	}
	c := traffic.HTTPClient(netns, timeout)
	c.Transport.(*http.Transport).TLSClientConfig = &tls.Config{RootCAs: pool}
	return c, nil
}

// waitOK asks url (with the bearer token, if any) until it answers 200 OK, and
// returns how long after p's start that was. It gives up when ctx ends or p
// exits, saying why (p's log's last lines).
func waitOK(ctx context.Context, p *Process, client *http.Client, url, token string) (time.Duration, error) {
	var last error
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return 0, err
		}
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Since(p.Started), nil
			}
			err = fmt.Errorf("%s: %s: %s", url, resp.Status, body)
		}
		last = err
		if exited := p.Exited(); exited != nil {
			return 0, exited
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("%s not ready (%v): %w", p.Name, last, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}
