//go:build !unix || cellserver_portable

package manual

// minSize is out of reach where arrays are not mapped: every array is made
// on the Go heap, and mapPages and unmapPages are never called.
const minSize = maxInt

func mapPages(size int) []byte { return make([]byte, size) }

func unmapPages([]byte) {}
