package rules

import (
	"context"
	"errors"
	"time"
)

// Entry is one key/value pair of a descriptor, as Envoy sends it.
type Entry struct{ Key, Value string }

// Descriptor is one list of entries a request asks about; it matches a
// rule by walking the domain's descriptor tree entry by entry.
type Descriptor struct {
	Entries []Entry
	// HitsAddend is the descriptor's own hits_addend (RLS v3 allows it per descriptor);
	// nil means the request's.
	HitsAddend *uint64
}

// Request is one ShouldRateLimit call: a domain and the descriptors to
// check and charge.
type Request struct {
	Domain      string
	Descriptors []Descriptor
	// HitsAddend is how much every descriptor is charged; 0 means 1, as in
	// envoyproxy/ratelimit (a descriptor's own HitsAddend of 0 charges
	// nothing and only reads).
	HitsAddend uint64
}

// Code is a descriptor's or a request's answer; the numbers are envoy's
// RateLimitResponse_Code.
type Code int32

// The codes, as envoy numbers them.
const (
	CodeUnknown   Code = 0
	CodeOK        Code = 1
	CodeOverLimit Code = 2
)

// Unit is a rule's unit of time; the numbers are envoy's
// RateLimitResponse_RateLimit_Unit.
type Unit int32

// The units, as envoy numbers them.
const (
	UnitUnknown Unit = 0
	UnitSecond  Unit = 1
	UnitMinute  Unit = 2
	UnitHour    Unit = 3
	UnitDay     Unit = 4
	UnitMonth   Unit = 5
	UnitYear    Unit = 6
	UnitWeek    Unit = 7
)

// RateLimit is the limit a descriptor matched, as reported back.
type RateLimit struct {
	Name            string
	RequestsPerUnit uint32
	Unit            Unit
}

// Status is the answer for one descriptor.
type Status struct {
	Code               Code
	CurrentLimit       *RateLimit // nil when no rule matched (or unlimited)
	LimitRemaining     uint32
	DurationUntilReset time.Duration
}

// Response is the answer to a Request: one Status per descriptor, in the
// request's order, and the overall code (OverLimit when any descriptor is
// over its limit and not in shadow mode).
type Response struct {
	OverallCode Code
	Statuses    []Status
}

// Checker answers a request: matches every descriptor against the domain's rules in force
// and charges the matching limits. The server's implementation runs the charge on the local
// engine for a key this node serves and forwards it to the owner in one hop in cluster mode.
//
// Implementations are safe for concurrent use.
type Checker interface {
	ShouldRateLimit(ctx context.Context, req Request) (Response, error)
}

// ErrBadRequest is wrapped by the error a Checker returns for a request
// that cannot be answered: no domain, or no descriptors.
var ErrBadRequest = errors.New("rules: bad request")
