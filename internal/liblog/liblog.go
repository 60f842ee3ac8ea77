// Package liblog keeps what libraries write through the standard logger for
// their own authors out of svclab's output: the CLI and the specs' binary
// route the standard logger through it.
package liblog

import (
	"bytes"
	"io"
	"log"
)

// libraryNotes are the messages libraries write through the standard logger that
// are not for svclab's user. vishvananda/netlink (v1.3.1) logs one line for each
// ipset attribute it does not decode while listing a set ("unknown ipset data
// attribute from kernel: {Type:17 ...}"): newer kernels send more of a set's header
// (its initval, bucket size) than the library knows. svclab reads only what the
// library decodes (the entries, and the header fields it names), so those lines
// say nothing about a lab; they appeared on verify's stderr in IPVS mode, and
// 5,928 of them in one run of the specs in svclab's VM.
var libraryNotes = [][]byte{
	[]byte("unknown ipset attribute from kernel:"),
	[]byte("unknown ipset data attribute from kernel:"),
	[]byte("unknown nested ipset data attribute from kernel:"),
	[]byte("unknown ADT attribute from kernel:"),
	[]byte("unknown nested ADT attribute from kernel:"),
}

// dropNotes passes the standard logger's lines to w but for
// libraryNotes. The standard logger writes each message with one Write.
type dropNotes struct{ w io.Writer }

func (d dropNotes) Write(p []byte) (int, error) {
	for _, note := range libraryNotes {
		if bytes.Contains(p, note) {
			return len(p), nil
		}
	}
	return d.w.Write(p)
}

// Quiet sends the standard logger to stderr, but for libraryNotes.
func Quiet(stderr io.Writer) {
	log.SetOutput(dropNotes{w: stderr})
}
