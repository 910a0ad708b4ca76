package engine

// Kind is the kind of limiter a key holds.
type Kind uint8

// The kinds of key. Each key holds exactly one. A new kind is one
// constant here, one row in kinds below, its algorithm in package limiter
// and its View method (view.go); everything else (records, statistics,
// TYPE, INFO) is derived from this list.
const (
	KindNone          Kind = iota
	KindGCRA               // CL.THROTTLE
	KindTokenBucket        // TB.TAKE
	KindSlidingWindow      // SW.HIT (approximate counter)
	KindSlidingLog         // SW.HIT EXACT
	KindFixedWindow        // FW.INCR

	// NumKinds is one more than the last kind: arrays indexed by Kind
	// have NumKinds elements.
	NumKinds = iota
)

// kindSpec describes one kind of key.
type kindSpec struct {
	typeName string // what TYPE answers
	infoName string // its fields' prefix in INFO's limiter section
	words    int    // state words in its record (entry's a, b, c)
	log      bool   // its state is a sliding log (entry's log)
}

// kinds describes every kind. Its length is NumKinds: a kind added above
// without its row here does not compile.
var kinds = [NumKinds]kindSpec{
	KindNone:          {typeName: "none"},
	KindGCRA:          {typeName: "string", infoName: "cl_throttle", words: 1},
	KindTokenBucket:   {typeName: "tokenbucket", infoName: "tb_take", words: 2},
	KindSlidingWindow: {typeName: "slidingwindow", infoName: "sw_hit", words: 3},
	KindSlidingLog:    {typeName: "slidinglog", infoName: "sw_hit_exact", log: true},
	KindFixedWindow:   {typeName: "fixedwindow", infoName: "fw_incr", words: 2},
}

// Valid reports whether k is a kind a key can hold (not KindNone).
func (k Kind) Valid() bool { return k > KindNone && k < NumKinds }

// TypeName is what TYPE answers for a key of kind k: "none" for KindNone
// and for a value that is no kind.
func (k Kind) TypeName() string {
	if k >= NumKinds {
		return "none"
	}
	return kinds[k].typeName
}

// InfoName is the prefix of k's fields in INFO's limiter section, e.g.
// "cl_throttle"; empty for KindNone.
func (k Kind) InfoName() string {
	if !k.Valid() {
		return ""
	}
	return kinds[k].infoName
}

// KindByTypeName returns the kind TYPE names name, and false for none.
func KindByTypeName(name string) (Kind, bool) {
	for k := KindGCRA; k < NumKinds; k++ {
		if kinds[k].typeName == name {
			return k, true
		}
	}
	return KindNone, false
}
