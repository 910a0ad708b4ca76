package metrics

import (
	"io"
	"net/http"
)

// Readiness reports whether a server is serving: ok false comes with a
// short reason ("loading", "cluster: 12 slots have no owner"). It must be
// safe for concurrent use and cheap: a probe calls it every few seconds,
// and it takes no lock a command takes.
type Readiness func() (ok bool, reason string)

// HealthHandler returns the /healthz handler: 200 "ok" to GET and HEAD
// whenever the process answers HTTP at all. It is for liveness probes,
// which restart a process that stopped answering; it does not say the
// server is ready (ReadyHandler does).
func HealthHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reply(w, r, http.StatusOK, "ok")
	})
}

// ReadyHandler returns the /readyz handler: 200 "ready" while ready says
// the server is serving, 503 Service Unavailable with ready's reason
// otherwise. It is for readiness probes and load balancers, which send
// clients only to a server that answers them.
func ReadyHandler(ready Readiness) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, reason := ready(); !ok {
			reply(w, r, http.StatusServiceUnavailable, reason)
			return
		}
		reply(w, r, http.StatusOK, "ready")
	})
}

// reply writes a one-line plain text answer that no cache keeps.
func reply(w http.ResponseWriter, r *http.Request, code int, text string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if r.Method != http.MethodHead {
		_, _ = io.WriteString(w, text+"\n")
	}
}
