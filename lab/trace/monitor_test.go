package trace

import "testing"

// /proc/PID/net/netlink of `xtables-monitor --trace` in a new network namespace
// (kernel 6.18): of its two NETLINK_NETFILTER sockets, the second (inode 227864)
// has joined NFNLGRP_NFTRACE (bit 8 of Groups).
const monitorNetlink = `sk               Eth Pid        Groups   Rmem     Wmem     Dump  Locks    Drops    Inode
00000000762d142c 0   0          00000000 0        0        0     2        0        227850  
000000007c4a4315 12  20177      00000000 0        0        0     2        0        227863  
00000000f163d294 12  3588596979 00000100 0        0        0     2        0        227864  
00000000580a58dd 12  0          00000000 0        0        0     2        0        227857  
`

func TestTraceSubscriber(t *testing.T) {
	for _, c := range []struct {
		inodes map[string]bool
		want   bool
	}{
		{map[string]bool{"227863": true, "227864": true}, true},
		{map[string]bool{"227863": true}, false}, // the monitor's other socket, no groups
		{map[string]bool{"227857": true}, false}, // not the monitor's
		{nil, false},
	} {
		if got := traceSubscriber(monitorNetlink, c.inodes); got != c.want {
			t.Errorf("traceSubscriber(%v) = %v, want %v", c.inodes, got, c.want)
		}
	}
}
