package commands

import "testing"

// REPLCONF ip-address takes an address or a host name only: what a
// replica announces is printed in INFO's slaveN line, which Sentinel
// parses, and a CR LF or a comma in it forged lines or fields there
// ("slave0:ip=1.2.3.4\r\nslave1:ip=…").
func TestReplconfIPAddress(t *testing.T) {
	h := newHarness(t, "")
	for _, c := range []struct{ ip, want string }{
		{"10.0.0.9", "+OK\r\n"},
		{"fe80::1%eth0", "+OK\r\n"},
		{"replica-1.example.com", "+OK\r\n"},
		{"1.2.3.4\r\nslave1:ip=6.6.6.6", "-" + errReplIP + "\r\n"},
		{"1.2.3.4,port=1", "-" + errReplIP + "\r\n"},
		{"", "-" + errReplIP + "\r\n"},
	} {
		if got := h.do("REPLCONF", "ip-address", c.ip); got != c.want {
			t.Errorf("REPLCONF ip-address %q: got %q, want %q", c.ip, got, c.want)
		}
	}
}

// A WAIT timeout too large for a time.Duration in ms is refused, as
// Redis refuses one past its clock's range: 18446744073710 ms wrapped to
// under a millisecond, and WAIT answered at once.
func TestWaitTimeoutOutOfRange(t *testing.T) {
	h := newHarness(t, "")
	for _, ms := range []string{"18446744073710", "9223372036854775807"} {
		if got, want := h.do("WAIT", "1", ms), "-"+errWaitRange+"\r\n"; got != want {
			t.Errorf("WAIT 1 %s: got %q, want %q", ms, got, want)
		}
	}
	if got := h.do("WAIT", "0", "9223372036854"); got != ":0\r\n" {
		t.Errorf("WAIT 0 at the bound: %q", got)
	}
}
