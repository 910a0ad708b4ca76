package integration

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/cellserver/cellserver/rules"
	"github.com/cellserver/cellserver/rules/rulestest"
	"github.com/redis/go-redis/v9"
)

// respFront asks a server over RESP with go-redis: RULES SET puts a
// domain in force, RL.CHECK … DESCRIPTORS asks. RL.CHECK's reply carries
// no unit, so the front keeps the units of the rules it set, by the name
// the reply gives (the rule's name, else its key).
type respFront struct {
	rdb   *redis.Client
	rules map[string]*rules.Rule
}

func newRESPFront(t *testing.T) rulestest.Front {
	return &respFront{rdb: startServer(t).client(t), rules: map[string]*rules.Rule{}}
}

func (f *respFront) SetRules(t *testing.T, text string) error {
	name := "bad"
	if d, err := rules.Parse("local", []byte(text)); err == nil {
		name = d.Name
		for _, r := range d.Rules {
			f.rules[r.Key] = r
			if r.Name != "" {
				f.rules[r.Name] = r
			}
		}
	} else if m := strings.SplitN(text, "domain:", 2); len(m) == 2 {
		if w := strings.Fields(m[1]); len(w) > 0 {
			name = w[0]
		}
	}
	return f.rdb.Do(ctx, "RULES", "SET", name, text).Err()
}

func (f *respFront) SetClock(t *testing.T, ns int64) { setClock(t, f.rdb, ns) }

func (f *respFront) Check(t *testing.T, req rules.Request) (rules.Response, error) {
	args := []any{"RL.CHECK", req.Domain, "DESCRIPTORS", len(req.Descriptors)}
	for _, d := range req.Descriptors {
		if d.HitsAddend != nil {
			t.Skip("RL.CHECK has no hits per descriptor")
		}
		args = append(args, len(d.Entries))
		for _, e := range d.Entries {
			args = append(args, e.Key, e.Value)
		}
	}
	if req.HitsAddend != 0 {
		args = append(args, "HITS", req.HitsAddend)
	}
	v, err := f.rdb.Do(ctx, args...).Slice()
	if err != nil {
		return rules.Response{}, err
	}
	var resp rules.Response
	resp.OverallCode = rules.CodeOK
	if v[0].(int64) == 1 {
		resp.OverallCode = rules.CodeOverLimit
	}
	for _, x := range v[1:] {
		a := x.([]any)
		var st rules.Status
		st.Code = rules.CodeOK
		if a[0].(int64) == 1 {
			st.Code = rules.CodeOverLimit
		}
		st.LimitRemaining = uint32(a[2].(int64))
		if name, ok := a[5].(string); ok && a[5] != nil {
			r := f.rules[name]
			if r == nil {
				return resp, errors.New("no rule named " + name)
			}
			if !r.Unlimited {
				lim := r.Limit
				st.CurrentLimit = &lim
				unit := time.Second
				if r.Millis {
					unit = time.Millisecond
				}
				st.DurationUntilReset = time.Duration(a[4].(int64)) * unit
			}
		}
		resp.Statuses = append(resp.Statuses, st)
	}
	return resp, nil
}

func (f *respFront) Stats(t *testing.T, key string) string { return "" }

// TestRulesTranscriptsOverRESP runs the rules' transcripts (envoyproxy/
// ratelimit's README examples, its corners, the extensions) through
// RULES SET and RL.CHECK: the answers are the Service's, to the line.
func TestRulesTranscriptsOverRESP(t *testing.T) {
	rulestest.Run(t, "../../rules/testdata", newRESPFront)
}
