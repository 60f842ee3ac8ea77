package liblog

import (
	"bytes"
	"log"
	"testing"
)

// netlink's notes about ipset attributes it does not decode are dropped; every
// other line of the standard logger still reaches stderr.
func TestDropLibraryNotes(t *testing.T) {
	var stderr bytes.Buffer
	l := log.New(dropNotes{w: &stderr}, "", log.LstdFlags)
	// As vishvananda/netlink v1.3.1 prints them (ipset_linux.go), for the
	// attribute Debian 12's kernel sends in a hash set's header.
	l.Printf("unknown ipset data attribute from kernel: %+v %v", struct{ Type uint16 }{16401}, 17)
	l.Printf("unknown nested ADT attribute from kernel: %+v", struct{ Type uint16 }{3})
	l.Printf("something else went wrong")
	if got := stderr.String(); !bytes.HasSuffix([]byte(got), []byte("something else went wrong\n")) || bytes.Count([]byte(got), []byte("\n")) != 1 {
		t.Errorf("stderr = %q, want only the last line", got)
	}
}
