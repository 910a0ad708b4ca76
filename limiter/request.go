package limiter

// Requests, states and outcomes of the algorithms, and the one request
// and state of any kind that commands parse (Parse) and the engine runs
// (Apply). The algorithms themselves live one file each: gcra.go,
// tokenbucket.go, slidingwindow.go, slidinglog.go, fixedwindow.go,
// leakyqueue.go.

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

// Outcome says what a request did and what to do with the key.
type Outcome struct {
	Result Result
	Write  Write
	// ExpireMs is the key's expiry (Unix ms) when Write is WriteStore:
	// ⌈idle_at/10⁶⌉, idle_at being the instant the key is idle again
	// (CL.THROTTLE: floor(now_ms) + trunc(ttl_ms), as redis-cell sets it).
	ExpireMs int64
}

// TokenBucketRequest is TB.TAKE's arguments.
type TokenBucketRequest struct {
	Capacity int64 // tokens, ≥ 1
	Refill   int64 // tokens per Period, ≥ 1
	Period   int64 // seconds, or milliseconds with Millis; ≥ 1
	Cost     int64 // tokens to take; negative: a refund; 0: a pure read
	Millis   bool  // MS: Period and the reply's times are milliseconds
}

// TokenBucketState is a bucket that is not full: it will be full again at
// FullAt + Rem/Refill ns (0 ≤ Rem < Refill), which keeps refill exact.
type TokenBucketState struct {
	FullAt int64
	Rem    int64
}

// SlidingWindowRequest is SW.HIT's arguments.
type SlidingWindowRequest struct {
	Limit  int64 // ≥ 1 (≤ 100000 with Exact)
	Window int64 // seconds, or milliseconds with Millis; ≥ 1
	Cost   int64 // negative: a refund
	Exact  bool  // EXACT: a sliding log instead of two counters
	Millis bool
}

// SlidingWindowState is the approximate sliding window: the counts of
// allowed hits in the window starting at Start (Unix ns, a multiple of the
// window) and in the one before it.
type SlidingWindowState struct {
	Start int64
	Prev  int64
	Curr  int64
}

// Hit is one entry of a sliding log: N allowed hits at instant At (Unix ns).
type Hit struct {
	At int64
	N  int64
}

// FixedWindowRequest is FW.INCR's arguments.
type FixedWindowRequest struct {
	Limit  int64 // ≥ 1
	Window int64 // seconds, or milliseconds with Millis; ≥ 1
	Cost   int64 // negative: a refund
	Millis bool
}

// FixedWindowState is the count of allowed hits in the window starting at
// Start (Unix ns, a multiple of the window).
type FixedWindowState struct {
	Start int64
	Count int64
}

// Request is one call of any kind, parsed and validated (Parse): its kind
// and, in the field of that kind, its arguments. Only that field is read.
type Request struct {
	Kind          Kind
	GCRA          GCRAParams           // KindGCRA
	TokenBucket   TokenBucketRequest   // KindTokenBucket
	SlidingWindow SlidingWindowRequest // KindSlidingWindow, KindSlidingLog (Exact)
	FixedWindow   FixedWindowRequest   // KindFixedWindow
	LeakyQueue    LeakyQueueRequest    // KindLeakyQueue
}

// State is a key's state for any kind: the first Words of Words (its
// row's), or Log for a kind whose row has Log.
type State struct {
	Words [3]int64
	Log   []Hit
}

// Parse reads a call of base kind k's command (or of k's word in
// ML.THROTTLE): args are the words after the key, k's Params as integers,
// then an optional cost, then any of k's Options (one that takes a value,
// MAXWAIT, followed by its integer). It fills r and
// validates it: r.Kind is k, or k's Exact kind when EXACT is given. A word
// that is not what its place takes is an *ArgError (ErrNotInteger,
// ErrSyntax); fewer words than k's Params is ErrArity; every other error
// is its algorithm's validation error. Integers are read as ParseInt
// reads them. It allocates nothing unless it fails.
func Parse(k Kind, args [][]byte, r *Request) error {
	if !k.Valid() { // a kind reached by EXACT has no case below: ErrKind too
		return ErrKind
	}
	spec := &Kinds[k]
	n := len(spec.Params)
	if len(args) < n {
		return ErrArity
	}
	var v [3]int64
	for i := range n {
		x, ok := ParseInt(args[i])
		if !ok {
			return &ArgError{Err: ErrNotInteger, Arg: string(args[i])}
		}
		v[i] = x
	}
	cost, rest := int64(1), args[n:]
	if len(rest) > 0 {
		if x, ok := ParseInt(rest[0]); ok {
			cost, rest = x, rest[1:]
		}
	}
	var opts Option
	var vals [len(options)]int64 // the values of the options that take one
	for i := 0; i < len(rest); i++ {
		w := rest[i]
		o := optionOf(w)
		if o == 0 || spec.Options&o == 0 || opts&o != 0 {
			return syntaxError(k, w, o, opts)
		}
		opts |= o
		if o&valued != 0 {
			if i++; i == len(rest) {
				return &ArgError{Err: ErrSyntax, Arg: string(w), Kind: k, Reason: MissingValue}
			}
			x, ok := ParseInt(rest[i])
			if !ok {
				return &ArgError{Err: ErrNotInteger, Arg: string(rest[i])}
			}
			vals[optionIndex(o)] = x
		}
	}
	ms, exact := opts&OptMS != 0, opts&OptExact != 0
	r.Kind = k
	switch k {
	case KindGCRA:
		var err error
		r.GCRA, err = GCRARequest{MaxBurst: v[0], Count: v[1], Period: v[2], Quantity: cost}.Params()
		return err
	case KindTokenBucket:
		r.TokenBucket = TokenBucketRequest{Capacity: v[0], Refill: v[1], Period: v[2], Cost: cost, Millis: ms}
		return r.TokenBucket.Validate()
	case KindSlidingWindow:
		if exact {
			r.Kind = spec.Exact
		}
		r.SlidingWindow = SlidingWindowRequest{Limit: v[0], Window: v[1], Cost: cost, Exact: exact, Millis: ms}
		return r.SlidingWindow.Validate()
	case KindFixedWindow:
		r.FixedWindow = FixedWindowRequest{Limit: v[0], Window: v[1], Cost: cost, Millis: ms}
		return r.FixedWindow.Validate()
	case KindLeakyQueue:
		r.LeakyQueue = LeakyQueueRequest{Capacity: v[0], Rate: v[1], Period: v[2], Cost: cost, Millis: ms,
			MaxWait: vals[optionIndex(OptMaxWait)], HasMaxWait: opts&OptMaxWait != 0}
		return r.LeakyQueue.Validate()
	}
	return ErrKind
}

// syntaxError is the *ArgError for the word w after k's integers, o
// being the option w names (0: none) and opts the options before it.
func syntaxError(k Kind, w []byte, o, opts Option) error {
	e := &ArgError{Err: ErrSyntax, Arg: string(w), Kind: k}
	_, isInt := ParseInt(w)
	switch {
	case o != 0 && opts&o != 0:
		e.Reason = OptionTwice
	case isInt && opts != 0:
		e.Reason = CostAfterOption
	case isInt:
		e.Reason = ExtraInteger
	}
	return e
}

// optionOf returns the Option the word w names, in any case; 0 for none.
func optionOf(w []byte) Option {
	for i := range options {
		if equalFold(w, options[i].word) {
			return options[i].opt
		}
	}
	return 0
}

// Apply runs r's algorithm at now (Unix ns) on st, the state of a key of
// r's kind (exists false: no key), and writes what it did to out. st is
// changed as out.Write says (its Log as SlidingLog says). It returns the
// algorithm's error, ErrKind for a request of no kind.
func Apply(st *State, exists bool, now int64, r *Request, out *Outcome) error {
	var err error
	switch r.Kind {
	case KindGCRA:
		var s GCRAState
		s, *out, err = GCRA(GCRAState{TAT: st.Words[0]}, exists, now, r.GCRA)
		st.Words[0] = s.TAT
	case KindTokenBucket:
		var s TokenBucketState
		s, *out, err = TokenBucket(TokenBucketState{FullAt: st.Words[0], Rem: st.Words[1]}, exists, now, r.TokenBucket)
		st.Words[0], st.Words[1] = s.FullAt, s.Rem
	case KindSlidingWindow:
		var s SlidingWindowState
		s, *out, err = SlidingWindow(SlidingWindowState{Start: st.Words[0], Prev: st.Words[1], Curr: st.Words[2]}, exists, now, r.SlidingWindow)
		st.Words[0], st.Words[1], st.Words[2] = s.Start, s.Prev, s.Curr
	case KindSlidingLog:
		st.Log, *out, err = SlidingLog(st.Log, now, r.SlidingWindow)
	case KindFixedWindow:
		var s FixedWindowState
		s, *out, err = FixedWindow(FixedWindowState{Start: st.Words[0], Count: st.Words[1]}, exists, now, r.FixedWindow)
		st.Words[0], st.Words[1] = s.Start, s.Count
	case KindLeakyQueue:
		var s LeakyQueueState
		s, *out, err = LeakyQueue(LeakyQueueState{EmptyAt: st.Words[0], Rem: st.Words[1]}, exists, now, r.LeakyQueue)
		st.Words[0], st.Words[1] = s.EmptyAt, s.Rem
	default:
		err = ErrKind
	}
	return err
}

// Uncharged returns r as a pure read: its cost (quantity) made 0, which
// tells what a key holds without changing it.
func (r *Request) Uncharged() Request {
	q := *r
	switch q.Kind {
	case KindGCRA:
		q.GCRA.Increment = 0
	case KindTokenBucket:
		q.TokenBucket.Cost = 0
	case KindSlidingWindow, KindSlidingLog:
		q.SlidingWindow.Cost = 0
	case KindFixedWindow:
		q.FixedWindow.Cost = 0
	case KindLeakyQueue:
		q.LeakyQueue.Cost = 0
	}
	return q
}

// ParseInt parses a limiter's integer argument as redis-cell does, with
// Rust's i64::from_str: an optional single leading '+' or '-', then one or
// more digits, nothing else, the value within int64. It takes any number
// of leading zeros, so "003153599999999999998" (21 bytes) is
// 3153599999999999998.
func ParseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && (b[0] == '-' || b[0] == '+') {
		neg = b[0] == '-'
		b = b[1:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' || n > (1<<63)/10 {
			return 0, false
		}
		if n = n*10 + uint64(c-'0'); n > 1<<63 {
			return 0, false
		}
	}
	if neg {
		return int64(-n), true // n ≤ 2⁶³, checked above
	}
	if n > 1<<63-1 {
		return 0, false
	}
	return int64(n), true
}

// Request returns a request for p, for code that builds its calls rather
// than parsing them (tests, tools); the algorithm validates it as it runs.
func (p GCRAParams) Request() *Request { return &Request{Kind: KindGCRA, GCRA: p} }

// Request returns a request for r, as GCRAParams.Request.
func (r TokenBucketRequest) Request() *Request {
	return &Request{Kind: KindTokenBucket, TokenBucket: r}
}

// Request returns a request for r, of KindSlidingLog when r.Exact, as
// GCRAParams.Request.
func (r SlidingWindowRequest) Request() *Request {
	q := &Request{Kind: KindSlidingWindow, SlidingWindow: r}
	if r.Exact {
		q.Kind = Kinds[KindSlidingWindow].Exact
	}
	return q
}

// Request returns a request for r, as GCRAParams.Request.
func (r FixedWindowRequest) Request() *Request {
	return &Request{Kind: KindFixedWindow, FixedWindow: r}
}

// Request returns a request for r, as GCRAParams.Request.
func (r LeakyQueueRequest) Request() *Request {
	return &Request{Kind: KindLeakyQueue, LeakyQueue: r}
}
