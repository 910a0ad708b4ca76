package engine

// Kind is the kind of limiter a key holds.
type Kind uint8

// The kinds of key. Each key holds exactly one.
const (
	KindNone          Kind = iota
	KindGCRA               // CL.THROTTLE
	KindTokenBucket        // TB.TAKE
	KindSlidingWindow      // SW.HIT (approximate counter)
	KindSlidingLog         // SW.HIT EXACT
	KindFixedWindow        // FW.INCR
)

// TypeName is what TYPE answers for a key of kind k.
func (k Kind) TypeName() string {
	switch k {
	case KindGCRA:
		return "string"
	case KindTokenBucket:
		return "tokenbucket"
	case KindSlidingWindow:
		return "slidingwindow"
	case KindSlidingLog:
		return "slidinglog"
	case KindFixedWindow:
		return "fixedwindow"
	}
	return "none"
}

// KindByTypeName returns the kind TYPE names name, and false for none.
func KindByTypeName(name string) (Kind, bool) {
	for k := KindGCRA; k <= KindFixedWindow; k++ {
		if k.TypeName() == name {
			return k, true
		}
	}
	return KindNone, false
}

// Write says what an algorithm wants done with a key's state.
type Write uint8

const (
	// WriteNone leaves the key as it was (a limited request, a pure read).
	WriteNone Write = iota
	// WriteStore stores the returned state with the returned expiry.
	WriteStore
	// WriteDelete removes the key: it is back to its idle state.
	WriteDelete
)
