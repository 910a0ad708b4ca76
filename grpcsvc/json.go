package grpcsvc

import (
	"io"
	"net/http"

	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
)

// JSONPath is where the HTTP port serves JSONHandler, as envoyproxy/ratelimit
// does.
const JSONPath = "/json"

// MaxJSONBody is the largest request body JSONHandler reads; a larger one
// is refused (413) unread.
const MaxJSONBody = 64 << 10

// AcceptsBody reports whether r is a request whose body JSONHandler
// reads: one to JSONPath with a declared length of 1 to MaxJSONBody
// bytes. The HTTP server answers any other request that carries a body
// without reading it, so that no client holds a connection by sending a
// body slowly or without end.
func AcceptsBody(r *http.Request) bool {
	return r.URL.Path == JSONPath && r.ContentLength > 0 && r.ContentLength <= MaxJSONBody
}

// JSONHandler answers ShouldRateLimit as envoyproxy/ratelimit's /json
// endpoint does: the body is a RateLimitRequest in protobuf's JSON
// mapping, such as
//
//	{"domain": "rl", "descriptors": [{"entries": [{"key": "user", "value": "42"}]}]}
//
// and the reply is the RateLimitResponse in the same mapping, with status
// 200 when the overall code is OK, 429 when it is OVER_LIMIT and 500 when
// it is UNKNOWN. A body that does not parse, or a request the checker
// refuses (no domain, no descriptors), is answered 400 with the text "Bad
// Request"; a body over MaxJSONBody 413, one of no declared length
// (chunked) 411, both unread; a
// checker that cannot answer now (cluster mode: the key's owner is
// unreachable), 503.
func (s *Service) JSONHandler() http.Handler {
	return http.HandlerFunc(s.serveJSON)
}

func (s *Service) serveJSON(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength < 0 || r.ContentLength > MaxJSONBody {
		// Not read: the HTTP port's server closes the connection.
		w.Header().Set("Connection", "close")
		if r.ContentLength < 0 {
			writeStatus(w, http.StatusLengthRequired)
		} else {
			writeStatus(w, http.StatusRequestEntityTooLarge)
		}
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxJSONBody))
	if err != nil {
		writeStatus(w, http.StatusBadRequest)
		return
	}
	var req pb.RateLimitRequest
	if err := protojson.Unmarshal(body, &req); err != nil {
		writeStatus(w, http.StatusBadRequest)
		return
	}
	resp, err := s.check(r.Context(), &req)
	if err != nil {
		switch status.Code(err) {
		case codes.InvalidArgument:
			writeStatus(w, http.StatusBadRequest)
		case codes.Canceled, codes.DeadlineExceeded:
			writeStatus(w, http.StatusServiceUnavailable)
		default:
			if s.cfg.Logf != nil {
				s.cfg.Logf("verbose", "grpcsvc: /json: %v", err)
			}
			writeStatus(w, http.StatusServiceUnavailable)
		}
		return
	}
	out, err := protojson.Marshal(resp)
	if err != nil {
		writeStatus(w, http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	switch resp.GetOverallCode() {
	case pb.RateLimitResponse_UNKNOWN:
		w.WriteHeader(http.StatusInternalServerError)
	case pb.RateLimitResponse_OVER_LIMIT:
		w.WriteHeader(http.StatusTooManyRequests)
	}
	_, _ = w.Write(out)
}

// writeStatus answers with code and its text, as envoyproxy/ratelimit's
// handler does.
func writeStatus(w http.ResponseWriter, code int) {
	http.Error(w, http.StatusText(code), code)
}
