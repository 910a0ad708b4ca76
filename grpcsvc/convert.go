package grpcsvc

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	corev3 "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	pb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/cellserver/cellserver/rules"
)

// The response headers ResponseHeaders adds, named as envoyproxy/ratelimit
// names them by default (LIMIT_LIMIT_HEADER, LIMIT_REMAINING_HEADER,
// LIMIT_RESET_HEADER): the limit's requests per unit, what is left of it,
// and the seconds until its window resets.
const (
	HeaderLimit     = "RateLimit-Limit"
	HeaderRemaining = "RateLimit-Remaining"
	HeaderReset     = "RateLimit-Reset"
)

// toRequest turns Envoy's request into the checker's. A descriptor's
// limit override (RateLimitDescriptor.limit) and is_negative_hits are
// not read: the rules in force decide the limit, and every hit charges.
// It refuses only what the wire cannot carry but a Go caller can: a nil
// request, descriptor or entry. An empty domain or descriptor list is the
// checker's to refuse (rules.ErrBadRequest).
func toRequest(in *pb.RateLimitRequest) (rules.Request, error) {
	if in == nil {
		return rules.Request{}, errors.New("grpcsvc: no request")
	}
	out := rules.Request{Domain: in.GetDomain(), HitsAddend: uint64(in.GetHitsAddend())}
	descs := in.GetDescriptors()
	if len(descs) == 0 {
		return out, nil
	}
	out.Descriptors = make([]rules.Descriptor, len(descs))
	n := 0
	for _, d := range descs {
		n += len(d.GetEntries())
	}
	entries := make([]rules.Entry, 0, n) // one allocation for every descriptor's entries
	for i, d := range descs {
		if d == nil {
			return rules.Request{}, fmt.Errorf("grpcsvc: descriptor %d is missing", i)
		}
		start := len(entries)
		for j, e := range d.GetEntries() {
			if e == nil {
				return rules.Request{}, fmt.Errorf("grpcsvc: descriptor %d's entry %d is missing", i, j)
			}
			entries = append(entries, rules.Entry{Key: e.GetKey(), Value: e.GetValue()})
		}
		out.Descriptors[i].Entries = entries[start:len(entries):len(entries)]
		if h := d.GetHitsAddend(); h != nil {
			v := h.GetValue()
			out.Descriptors[i].HitsAddend = &v
		}
	}
	return out, nil
}

// fromResponse turns the checker's answer into Envoy's, with the
// RateLimit-* headers when headers is set.
func fromResponse(in rules.Response, headers bool) *pb.RateLimitResponse {
	out := &pb.RateLimitResponse{OverallCode: pb.RateLimitResponse_Code(in.OverallCode)}
	if len(in.Statuses) == 0 {
		return out
	}
	sts := make([]pb.RateLimitResponse_DescriptorStatus, len(in.Statuses))
	out.Statuses = make([]*pb.RateLimitResponse_DescriptorStatus, len(in.Statuses))
	nlim := 0
	for _, st := range in.Statuses {
		if st.CurrentLimit != nil {
			nlim++
		}
	}
	lims := make([]pb.RateLimitResponse_RateLimit, nlim)
	durs := make([]durationpb.Duration, nlim)
	k := 0
	for i, st := range in.Statuses {
		o := &sts[i]
		o.Code = pb.RateLimitResponse_Code(st.Code)
		o.LimitRemaining = st.LimitRemaining
		if l := st.CurrentLimit; l != nil {
			// As envoyproxy/ratelimit: a status with a limit always
			// carries its time to reset, one without neither.
			lims[k].Name, lims[k].RequestsPerUnit, lims[k].Unit = l.Name, l.RequestsPerUnit, pb.RateLimitResponse_RateLimit_Unit(l.Unit)
			durs[k].Seconds = int64(st.DurationUntilReset / time.Second)
			durs[k].Nanos = int32(st.DurationUntilReset % time.Second)
			o.CurrentLimit, o.DurationUntilReset = &lims[k], &durs[k]
			k++
		}
		out.Statuses[i] = o
	}
	if headers {
		if st := headerStatus(in.Statuses); st != nil {
			out.ResponseHeadersToAdd = []*corev3.HeaderValue{
				{Key: HeaderLimit, Value: strconv.FormatUint(uint64(st.CurrentLimit.RequestsPerUnit), 10)},
				{Key: HeaderRemaining, Value: strconv.FormatUint(uint64(st.LimitRemaining), 10)},
				{Key: HeaderReset, Value: strconv.FormatInt(resetSeconds(st.DurationUntilReset), 10)},
			}
		}
	}
	return out
}

// headerStatus picks the status the headers describe, as
// envoyproxy/ratelimit does: the last descriptor over its limit if any,
// else the first with a limit and the least remaining; nil when no
// descriptor has a limit.
func headerStatus(sts []rules.Status) *rules.Status {
	var pick *rules.Status
	least := uint32(math.MaxUint32)
	for i := range sts {
		st := &sts[i]
		if st.CurrentLimit != nil && st.LimitRemaining < least {
			pick, least = st, st.LimitRemaining
		}
		if st.Code == rules.CodeOverLimit && st.CurrentLimit != nil {
			pick, least = st, 0
		}
	}
	return pick
}

// resetSeconds is the RateLimit-Reset value: whole seconds, a part of a
// second counting as one (envoyproxy/ratelimit's windows reset on whole
// seconds, so its value is always whole; other algorithms' are not).
func resetSeconds(d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return int64((d + time.Second - 1) / time.Second)
}
