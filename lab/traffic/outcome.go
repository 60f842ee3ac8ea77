package traffic

import (
	"errors"
	"io"
	"net"
	"os"
	"syscall"
)

// Outcome is how an attempt ended, in the terms a Service check speaks.
type Outcome string

const (
	// Answered: a backend replied.
	Answered Outcome = "answered"
	// Refused: the connection was refused at once (TCP RST to the SYN, or ICMP port
	// unreachable), as kube-proxy's REJECT for a Service without endpoints does.
	Refused Outcome = "refused"
	// Timeout: nothing came back before the deadline, as when a rule drops packets.
	Timeout Outcome = "timeout"
	// Reset: an established connection was reset.
	Reset Outcome = "reset"
	// Unreachable: no route, or ICMP host/network unreachable.
	Unreachable Outcome = "unreachable"
	// Failed: anything else.
	Failed Outcome = "failed"
)

// Classify maps a dial, read or write error to an Outcome; nil is Answered.
func Classify(err error) Outcome {
	var errno syscall.Errno
	var netErr net.Error
	switch {
	case err == nil:
		return Answered
	case errors.Is(err, os.ErrDeadlineExceeded), errors.As(err, &netErr) && netErr.Timeout():
		// Reads past their deadline, and dials whose timeout expired.
		return Timeout
	case errors.As(err, &errno):
		switch errno {
		case syscall.ECONNREFUSED:
			return Refused
		case syscall.ECONNRESET, syscall.EPIPE, syscall.ECONNABORTED:
			return Reset
		case syscall.EHOSTUNREACH, syscall.ENETUNREACH:
			return Unreachable
		case syscall.ETIMEDOUT:
			return Timeout
		}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// The peer closed without answering: the connection was cut.
		return Reset
	}
	return Failed
}
