package bench

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/svclab/svclab/lab/namespaces"
)

// connect opens one TCP connection to to and times the handshake alone: socket
// creation is outside the clock, and the socket is reset at close (SO_LINGER 0)
// so neither end keeps TIME_WAIT and the conntrack entry goes at once. The
// calling thread must be in the client's network namespace. Go's net package is
// not used here on purpose: its dialer hands the wait to the runtime's poller,
// which adds scheduling noise of the order being measured on the data path.
func connect(to netip.AddrPort, timeout time.Duration) (time.Duration, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("socket: %w", err)
	}
	defer unix.Close(fd)
	if err := unix.SetsockoptLinger(fd, unix.SOL_SOCKET, unix.SO_LINGER, &unix.Linger{Onoff: 1, Linger: 0}); err != nil {
		return 0, fmt.Errorf("SO_LINGER: %w", err)
	}
	sa := &unix.SockaddrInet4{Port: int(to.Port()), Addr: to.Addr().As4()}
	start := time.Now()
	deadline := start.Add(timeout)
	err = unix.Connect(fd, sa)
	if err != nil && !errors.Is(err, unix.EINPROGRESS) {
		return time.Since(start), err
	}
	for err != nil {
		left := time.Until(deadline)
		if left <= 0 {
			return time.Since(start), fmt.Errorf("connect %s: %w", to, unix.ETIMEDOUT)
		}
		ms := int(left / time.Millisecond)
		if ms == 0 {
			ms = 1
		}
		pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
		n, perr := unix.Poll(pfd, ms)
		if errors.Is(perr, unix.EINTR) || (perr == nil && n == 0) {
			continue
		}
		if perr != nil {
			return time.Since(start), fmt.Errorf("poll: %w", perr)
		}
		soerr, gerr := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
		if gerr != nil {
			return time.Since(start), fmt.Errorf("SO_ERROR: %w", gerr)
		}
		if soerr != 0 {
			return time.Since(start), fmt.Errorf("connect %s: %w", to, unix.Errno(soerr))
		}
		err = nil
	}
	return time.Since(start), nil
}

// connectFailures counts the failed connections to one target and keeps the
// first error, to say what went wrong.
type connectFailures struct {
	n     int
	first error
}

// connectSamples connects k times to each target, round robin so that every
// target sees the same background, from one thread in the client's namespace.
// samples[i] holds target i's handshake times; failures are counted apart.
func connectSamples(ctx context.Context, client string, targets []netip.AddrPort, k int, timeout time.Duration) (samples [][]time.Duration, failures []connectFailures, err error) {
	samples = make([][]time.Duration, len(targets))
	failures = make([]connectFailures, len(targets))
	err = namespaces.Do(client, func() error {
		for r := 0; r < k; r++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			for i, to := range targets {
				d, err := connect(to, timeout)
				if err != nil {
					if failures[i].n == 0 {
						failures[i].first = err
					}
					failures[i].n++
					continue
				}
				samples[i] = append(samples[i], d)
			}
		}
		return nil
	})
	return samples, failures, err
}

// proberConfig sizes the prober.
type proberConfig struct {
	// Interval is the time between attempts (1 ms).
	Interval time.Duration
	// AttemptTimeout bounds one attempt: a SYN sent before the rules exist is
	// never answered, and the attempt gives up after this long.
	AttemptTimeout time.Duration
	// Workers is how many attempts may be under way at once; each holds a thread
	// in the client's namespace. It must cover AttemptTimeout/Interval for the
	// interval to hold while attempts hang.
	Workers int
}

// prober measures network-programming latency: from the start of an update to
// the first TCP connection through the changed Service that succeeds. A new
// connection attempt, on a fresh socket and source port, starts every Interval
// from threads that stay in the client's namespace for the prober's life.
type prober struct {
	cfg  proberConfig
	jobs chan job
	wg   sync.WaitGroup
	// inflight counts attempts under way, of any round.
	inflight atomic.Int64
	round    atomic.Int64
	errc     chan error
}

type job struct {
	to    netip.AddrPort
	round int64
	won   chan<- time.Time
}

func newProber(client string, c proberConfig) (*prober, error) {
	p := &prober{cfg: c, jobs: make(chan job), errc: make(chan error, c.Workers)}
	started := make(chan error, c.Workers)
	for i := 0; i < c.Workers; i++ {
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			entered := false
			err := namespaces.Do(client, func() error {
				entered = true
				started <- nil
				for j := range p.jobs {
					_, err := connect(j.to, c.AttemptTimeout)
					if err == nil && p.round.Load() == j.round {
						select {
						case j.won <- time.Now():
						default:
						}
					}
					p.inflight.Add(-1)
				}
				return nil
			})
			// An error after the worker entered the namespace (switching back
			// failed) leaves a thread the runtime discards; nothing waits for it.
			if err != nil && !entered {
				started <- err
			}
		}()
	}
	for i := 0; i < c.Workers; i++ {
		if err := <-started; err != nil {
			p.close()
			return nil, fmt.Errorf("prober in %s: %w", client, err)
		}
	}
	return p, nil
}

func (p *prober) close() {
	close(p.jobs)
	p.wg.Wait()
}

// probeResult is one round: how long after start the first connection
// succeeded, and how the polling went.
type probeResult struct {
	Latency  time.Duration
	Attempts int
	// Interval is the mean time between attempts, up to the last one started.
	Interval time.Duration
}

// errNeverAnswered is returned when no attempt succeeded.
var errNeverAnswered = errors.New("no connection succeeded")

// firstSuccess polls to until a connection succeeds or ctx ends, timing from
// start (taken by the caller just before it began the update). Attempts still
// under way when it returns belong to this round and are ignored by later ones.
func (p *prober) firstSuccess(ctx context.Context, to netip.AddrPort, start time.Time) (probeResult, error) {
	round := p.round.Add(1)
	defer p.round.Add(1)
	won := make(chan time.Time, 1)
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	var r probeResult
	first := time.Now()
	last := first
	send := func() {
		p.inflight.Add(1)
		select {
		case p.jobs <- job{to: to, round: round, won: won}:
			r.Attempts++
			last = time.Now()
		default:
			// Every worker is busy: this tick sends nothing.
			p.inflight.Add(-1)
		}
	}
	send()
	for {
		select {
		case t := <-won:
			r.Latency = t.Sub(start)
			if r.Attempts > 1 {
				r.Interval = last.Sub(first) / time.Duration(r.Attempts-1)
			}
			return r, nil
		case <-tick.C:
			send()
		case <-ctx.Done():
			return r, ctx.Err()
		}
	}
}

// drain waits until no attempt is under way, so the next round starts with every
// worker free.
func (p *prober) drain(ctx context.Context) error {
	for p.inflight.Load() > 0 {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
	return nil
}
