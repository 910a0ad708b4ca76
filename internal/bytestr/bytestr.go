// Package bytestr views bytes as a string without copying them, for a
// call that reads the string only while it runs: RL.CHECK hands its
// arguments to the rules' checker this way, which keeps none of them.
//
// The view is unsafe.String, which every platform Go runs on has; the
// caller must not change the bytes while the string is in use, nor keep
// the string past that.
package bytestr

import "unsafe"

// String returns b's bytes as a string sharing b's memory.
func String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}
