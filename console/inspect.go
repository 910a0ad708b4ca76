package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/cellserver/cellserver/engine"
	"github.com/cellserver/cellserver/limiter"
)

// KeyState is a key's state as a cost-0 call reads it: what the kind's
// command would answer, without the charge. RetryAfter and ResetAfter are
// in the reply unit of the parameters given (seconds, or milliseconds
// with MS).
type KeyState struct {
	Limited    bool  `json:"limited"`
	Limit      int64 `json:"limit"`
	Remaining  int64 `json:"remaining"`
	RetryAfter int64 `json:"retry_after"`
	ResetAfter int64 `json:"reset_after"`
}

// KeyInfo is the reply of GET /api/v1/key.
type KeyInfo struct {
	Key    string `json:"key"`
	Exists bool   `json:"exists"`
	Kind   string `json:"kind"`   // as TYPE answers; "none" when there is no key
	TTLMs  int64  `json:"ttl_ms"` // as PTTL answers: -2 when there is no key
	// Command is the kind's command, whose parameters args gives.
	Command string `json:"command,omitempty"`
	// Params names the parameters the state read needs: a key stores its
	// state, not the parameters it was last called with, so the caller
	// supplies them (args).
	Params []string `json:"params,omitempty"`
	// State is read with a cost-0 call when args is given; null otherwise.
	State *KeyState `json:"state"`
}

// key answers the key inspector: key's kind and TTL, and with args (the
// words the kind's command takes after the key) its state, read by the
// engine's own call with the cost made 0 (limiter.Request.Uncharged),
// which changes nothing and charges nothing. It counts as one allowed
// request of the kind in the limiter counters, as a cost-0 call on the
// RESP port does.
func (c *console) key(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	if !q.Has("key") {
		fail(w, http.StatusBadRequest, "key is required")
		return
	}
	key := []byte(q.Get("key"))
	v := c.src.Engine().NewView()
	k := v.Type(key, nil)
	info := KeyInfo{Key: string(key), Kind: k.TypeName(), TTLMs: v.PTTL(key, nil)}
	info.Exists = k.Valid()
	if k.Valid() {
		base := k
		for b := range limiter.Kind(limiter.NumKinds) {
			if b.Base() && limiter.Kinds[b].Exact == k {
				base = b
			}
		}
		info.Command = strings.ToUpper(limiter.Kinds[base].Command)
		info.Params = limiter.Kinds[base].Params
		if args := strings.Fields(q.Get("args")); len(args) > 0 {
			words := make([][]byte, len(args))
			for i, a := range args {
				words[i] = []byte(a)
			}
			var req limiter.Request
			if err := limiter.Parse(base, words, &req); err != nil {
				fail(w, http.StatusBadRequest, "args: "+err.Error())
				return
			}
			if req.Kind != k {
				fail(w, http.StatusConflict, "args name a "+req.Kind.TypeName()+", the key is a "+k.TypeName())
				return
			}
			read := req.Uncharged()
			res, err := v.Apply(key, &read, nil)
			switch {
			case errors.Is(err, engine.ErrWrongType):
				fail(w, http.StatusConflict, "the key changed kind meanwhile")
				return
			case err != nil:
				fail(w, http.StatusBadRequest, err.Error())
				return
			}
			info.State = &KeyState{Limited: res.Limited, Limit: res.Limit, Remaining: res.Remaining,
				RetryAfter: res.RetryAfter, ResetAfter: res.ResetAfter}
		}
	}
	writeJSON(w, http.StatusOK, info)
}
