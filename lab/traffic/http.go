package traffic

import (
	"context"
	"net"
	"net/http"
	"time"

	"github.com/svclab/svclab/lab/namespaces"
)

// Dialer opens connections inside the network namespace netns, from any
// goroutine: it enters the namespace for every connection.
func Dialer(netns string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := namespaces.Do(netns, func() error {
			var err error
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}

// HTTPClient is an HTTP client whose connections are opened inside the network
// namespace netns, one new connection per request.
func HTTPClient(netns string, timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{DisableKeepAlives: true, DialContext: Dialer(netns)},
	}
}
