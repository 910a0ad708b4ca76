package server

import "testing"

// FuzzParser: no input, however cut into reads, makes the parser panic,
// loop, or claim more bytes than it was given; and cutting it into reads
// does not change what it parses. Every request quick takes, the parser
// reads the same.
func FuzzParser(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n", "*1\r\n$-2\r\n", "*1\r\n$9223372036854775807\r\n",
		"PING\r\n", `SET "a\x41" 'b\'c'` + "\r\n", "*0\r\n", "*-1\r\n", "$3 x\r\n",
		"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "\"\r\n", "*3\r\n$1\r\n", "*1048577\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		whole := parseChunked(t, in, len(in)+1)
		if cut := parseChunked(t, in, int(chunk%16)+1); cut != whole {
			t.Fatalf("parsed whole: %q\nin reads of %d: %q", whole, chunk%16+1, cut)
		}
		checkQuick(t, in)
	})
}

// checkQuick parses in request by request and checks that wherever quick
// takes a request, the parser reads the same arguments and length from it:
// under the strictest limits (a client that has not authenticated) and
// under limits above Redis's for such a client, from a fresh parser and
// from one that read the request's first part earlier.
func checkQuick(t *testing.T, in []byte) {
	for _, lim := range []bounds{
		{maxBulk: 1 << 10, maxQuery: 1 << 14},
		{maxBulk: 1 << 20, maxQuery: 1 << 20, authed: true},
	} {
		for _, split := range []bool{false, true} {
			var p parser
			for b := in; len(b) > 0; {
				var spans [quickMaxArgs]span
				n, qused := quick(b, lim, &spans)
				if split && qused > 0 {
					_, _, _ = p.next(b[:qused/2], lim) // part way: incomplete, or an error that resets it
				}
				args, used, err := p.next(b, lim)
				if qused > 0 {
					same := err == nil && used == qused && len(args) == n
					for i := 0; same && i < n; i++ {
						s := spans[i]
						same = len(args[i]) == s.n && (s.n == 0 || &args[i][0] == &b[s.off]) // an empty slice points anywhere
					}
					if !same {
						t.Fatalf("quick(%q) = %v, %d; parser (%+v, split %v): %q, %d, %v", b, spans[:n], qused, lim, split, args, used, err)
					}
				}
				if err != nil || used == 0 {
					break
				}
				b = b[used:]
			}
		}
	}
}

// parseChunked parses in as reads of step bytes would deliver it and
// describes what it got: each request's arguments, then how it ended.
func parseChunked(t *testing.T, in []byte, step int) string {
	var p parser
	var out, buf []byte
	for fed := 0; fed < len(in) || len(buf) > 0; {
		if fed < len(in) {
			n := min(step, len(in)-fed)
			buf = append(buf, in[fed:fed+n]...)
			fed += n
		}
		args, used, err := p.next(buf, bounds{maxBulk: 1 << 10, maxQuery: 1 << 14, authed: true})
		if err != nil {
			return string(out) + "error: " + err.Error()
		}
		if used < 0 || used > len(buf) {
			t.Fatalf("used %d of %d bytes", used, len(buf))
		}
		if used == 0 {
			if fed == len(in) {
				return string(out) + "incomplete"
			}
			continue
		}
		for _, a := range args {
			if len(a) > 1<<14 {
				t.Fatalf("argument of %d bytes past the limits", len(a))
			}
			out = append(out, a...)
			out = append(out, 0xff)
		}
		out = append(out, '\n')
		buf = buf[used:]
	}
	return string(out) + "end"
}
