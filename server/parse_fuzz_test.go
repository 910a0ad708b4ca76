package server

import "testing"

// FuzzParser: no input, however cut into reads, makes the parser panic,
// loop, or claim more bytes than it was given.
func FuzzParser(f *testing.F) {
	for _, s := range []string{
		"*1\r\n$4\r\nPING\r\n", "*1\r\n$-2\r\n", "*1\r\n$9223372036854775807\r\n",
		"PING\r\n", `SET "a\x41" 'b\'c'` + "\r\n", "*0\r\n", "*-1\r\n", "$3 x\r\n",
		"*2\r\n$1\r\na\r\n$1\r\nb\r\n", "\"\r\n", "*3\r\n$1\r\n", "*1048577\r\n",
	} {
		f.Add([]byte(s), uint8(3))
	}
	f.Fuzz(func(t *testing.T, in []byte, chunk uint8) {
		var p parser
		step := int(chunk%16) + 1
		var buf []byte
		for fed := 0; fed < len(in) || len(buf) > 0; {
			if fed < len(in) {
				n := min(step, len(in)-fed)
				buf = append(buf, in[fed:fed+n]...)
				fed += n
			}
			args, used, err := p.next(buf, 1<<10, 1<<14)
			if err != nil {
				return
			}
			if used < 0 || used > len(buf) {
				t.Fatalf("used %d of %d bytes", used, len(buf))
			}
			if used == 0 {
				if fed == len(in) {
					return // incomplete at the end of the input
				}
				continue
			}
			for _, a := range args {
				if len(a) > 1<<14 {
					t.Fatalf("argument of %d bytes past the limits", len(a))
				}
			}
			buf = buf[used:]
		}
	})
}
