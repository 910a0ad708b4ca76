package grpcsvc

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cellserver/cellserver/rules"
)

// The /json endpoint takes envoyproxy/ratelimit's body and answers with
// protojson: 200 when OK, 429 over the limit, 400 "Bad Request" on a body
// that does not parse or a request the checker refuses, 413 past
// MaxJSONBody, 411 without a declared length, 503 when the checker
// cannot answer.
func TestJSONHandler(t *testing.T) {
	s, err := New(&fakeChecker{then: limited}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	h := s.JSONHandler()
	do := func(body string, chunked bool) (int, string, string) {
		t.Helper()
		r := httptest.NewRequest(http.MethodPost, JSONPath, strings.NewReader(body))
		if chunked {
			r.ContentLength = -1
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		b, _ := io.ReadAll(w.Result().Body)
		return w.Code, w.Header().Get("Content-Type"), strings.TrimSpace(string(b))
	}
	// protojson's spacing is not stable on purpose: compare without it.
	flat := func(s string) string { return strings.Join(strings.Fields(s), "") }
	for _, tc := range []struct {
		name, body string
		chunked    bool
		code       int
		want       string
	}{
		{"ok", `{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"42"}]}]}`, false, 200,
			`{"overallCode":"OK","statuses":[{"code":"OK","currentLimit":{"name":"ten","requestsPerUnit":10,"unit":"MINUTE"},"limitRemaining":3,"durationUntilReset":"42.500s"}]}`},
		{"over", `{"domain":"rl","descriptors":[{"entries":[{"key":"user","value":"over"}]},{"entries":[{"key":"user","value":"none"}]}]}`, false, 429,
			`{"overallCode":"OVER_LIMIT","statuses":[{"code":"OVER_LIMIT","currentLimit":{"name":"ten","requestsPerUnit":10,"unit":"MINUTE"},"durationUntilReset":"42.500s"},{"code":"OK"}]}`},
		{"hits_addend", `{"domain":"rl","hits_addend":3,"descriptors":[{"entries":[{"key":"user","value":"42"}],"hits_addend":0}]}`, false, 200, ""},
		{"not json", `{"domain":`, false, 400, "Bad Request"},
		{"unknown field", `{"domain":"rl","nope":1}`, false, 400, "Bad Request"},
		{"no domain", `{"descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`, false, 400, "Bad Request"},
		{"no descriptors", `{"domain":"rl"}`, false, 400, "Bad Request"},
		{"empty body", ``, false, 400, "Bad Request"},
		{"too large", `{"domain":"` + strings.Repeat("x", MaxJSONBody) + `"}`, false, 413, "Request Entity Too Large"},
		{"chunked", `{"domain":"rl"}`, true, 411, "Length Required"},
	} {
		code, ctype, body := do(tc.body, tc.chunked)
		if code != tc.code || tc.want != "" && flat(body) != flat(tc.want) {
			t.Errorf("%s: %d %s, want %d %s", tc.name, code, body, tc.code, tc.want)
		}
		if code < 300 && ctype != "application/json" {
			t.Errorf("%s: Content-Type %q", tc.name, ctype)
		}
	}
	fc := s.checker.(*fakeChecker)
	var addend *uint64
	for _, r := range fc.got {
		if r.HitsAddend == 3 {
			addend = r.Descriptors[0].HitsAddend
		}
	}
	if addend == nil || *addend != 0 {
		t.Errorf("hits_addend: the descriptor's own 0 did not reach the checker: %v", fc.got)
	}

	failing := &fakeChecker{then: func(r rules.Request) (rules.Response, error) { return rules.Response{}, io.ErrUnexpectedEOF }}
	s2, _ := New(failing, Config{})
	w := httptest.NewRecorder()
	s2.JSONHandler().ServeHTTP(w, httptest.NewRequest(http.MethodPost, JSONPath, strings.NewReader(`{"domain":"rl","descriptors":[{"entries":[{"key":"a","value":"b"}]}]}`)))
	if w.Code != http.StatusServiceUnavailable {
		t.Errorf("a failing checker: %d, want 503", w.Code)
	}
}

// AcceptsBody: only /json with a declared, bounded length.
func TestAcceptsBody(t *testing.T) {
	for _, tc := range []struct {
		path string
		n    int64
		want bool
	}{
		{JSONPath, 10, true}, {JSONPath, MaxJSONBody, true}, {JSONPath, MaxJSONBody + 1, false},
		{JSONPath, -1, false}, {JSONPath, 0, false}, {"/metrics", 10, false},
	} {
		r := httptest.NewRequest(http.MethodPost, tc.path, nil)
		r.ContentLength = tc.n
		if got := AcceptsBody(r); got != tc.want {
			t.Errorf("AcceptsBody(%s, %d) = %v", tc.path, tc.n, got)
		}
	}
}
