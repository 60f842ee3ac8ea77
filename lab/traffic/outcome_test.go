package traffic

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	// A dial whose own timeout expires: nothing listens on a blackholed
	// address-less socket, so use a context that is already past its deadline.
	ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel()
	_, dialErr := (&net.Dialer{}).DialContext(ctx, "tcp4", "127.0.0.1:9")
	for _, tc := range []struct {
		err  error
		want Outcome
	}{
		{nil, Answered},
		{dialErr, Timeout},
		{fmt.Errorf("read: %w", os.ErrDeadlineExceeded), Timeout},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, Refused},
		{&net.OpError{Op: "read", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, Reset},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ENETUNREACH)}, Unreachable},
		{&net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.EHOSTUNREACH)}, Unreachable},
		// A local OUTPUT rule's EPERM is resolved by the client (see Conn.ask).
		{&net.OpError{Op: "write", Err: os.NewSyscallError("write", syscall.EPERM)}, Failed},
		{fmt.Errorf("read: %w", io.EOF), Reset},
		{errors.New("something else"), Failed},
	} {
		if got := Classify(tc.err); got != tc.want {
			t.Errorf("Classify(%v) = %s, want %s", tc.err, got, tc.want)
		}
	}
}
