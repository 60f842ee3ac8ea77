package main

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
// say nothing about a lab; they appeared on verify's stderr in IPVS mode.
var libraryNotes = [][]byte{
	[]byte("unknown ipset attribute from kernel:"),
	[]byte("unknown ipset data attribute from kernel:"),
	[]byte("unknown nested ipset data attribute from kernel:"),
	[]byte("unknown ADT attribute from kernel:"),
	[]byte("unknown nested ADT attribute from kernel:"),
}

// dropLibraryNotes passes the standard logger's lines to w but for
// libraryNotes. The standard logger writes each message with one Write.
type dropLibraryNotes struct{ w io.Writer }

func (d dropLibraryNotes) Write(p []byte) (int, error) {
	for _, note := range libraryNotes {
		if bytes.Contains(p, note) {
			return len(p), nil
		}
	}
	return d.w.Write(p)
}

// quietLibraries sends the standard logger through dropLibraryNotes.
func quietLibraries(stderr io.Writer) {
	log.SetOutput(dropLibraryNotes{w: stderr})
}
