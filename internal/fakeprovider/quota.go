package fakeprovider

import (
	"net/http"
	"strconv"
	"time"
)

// Quota is a hidden provider rate limit, for demos and simulations: at most
// Requests successful answers on the POST routes (200 answers, refusals and
// streams included) per Window.
// Beyond it a request gets 429 rate_limit_exceeded until the window ends.
//
// Windows are fixed: one starts with the first success after the previous
// window ended, and they are read from Options.Now, so a test with a fake
// clock advances it instead of sleeping. Requests that fail for another
// reason (unknown model, scripted errors) do not count.
type Quota struct {
	// Requests is the number of successful answers per window; 0 with a
	// positive Window rejects every request.
	Requests int
	// Window is the window length. Zero or negative removes the quota.
	Window time.Duration
	// SendRetryAfter adds Retry-After to the 429: the whole seconds until
	// the window ends, rounded up, at least 1. Without it the 429 carries no
	// advice, as some providers do.
	SendRetryAfter bool
	// RetryAfter, when set, is sent as Retry-After instead of the true value
	// (a provider that lies), whatever SendRetryAfter says.
	RetryAfter string
}

type quotaState struct {
	q     Quota
	start time.Time
	used  int
}

// roll starts a new window if the current one has ended.
func (st *quotaState) roll(now time.Time) {
	if st.start.IsZero() || !now.Before(st.start.Add(st.q.Window)) {
		st.start = now
		st.used = 0
	}
}

// SetQuota sets a hidden quota on key's successful answers for model, or
// for all its models together when model is "". A request is admitted only
// if every quota that applies to it, (key, model) and (key, ""), has room;
// a success counts against both. Setting a quota again starts it afresh; a
// Window <= 0 removes it. Quotas apply to answers that would be 200 (OK and
// defaults), not to scripted errors. Answers under a quota carry the
// x-ratelimit-limit-requests, x-ratelimit-remaining-requests and
// x-ratelimit-reset-requests headers of the tightest quota.
func (s *Server) SetQuota(key, model string, q Quota) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sc := scope{key, model}
	if q.Window <= 0 {
		delete(s.quotas, sc)
		return
	}
	s.quotas[sc] = &quotaState{q: q}
}

// quotaResult is the outcome of a quota check.
type quotaResult struct {
	applies   bool
	ok        bool
	limit     int
	remaining int
	reset     time.Duration
	q         Quota
}

func (r quotaResult) headers() http.Header {
	h := http.Header{
		"X-Ratelimit-Limit-Requests":     {strconv.Itoa(r.limit)},
		"X-Ratelimit-Remaining-Requests": {strconv.Itoa(r.remaining)},
		"X-Ratelimit-Reset-Requests":     {r.reset.Round(time.Millisecond).String()},
	}
	if !r.ok {
		switch {
		case r.q.RetryAfter != "":
			h["Retry-After"] = []string{r.q.RetryAfter}
		case r.q.SendRetryAfter:
			secs := int64((r.reset + time.Second - 1) / time.Second)
			if secs < 1 {
				secs = 1
			}
			h["Retry-After"] = []string{strconv.FormatInt(secs, 10)}
		}
	}
	return h
}

// takeQuota admits one success for key and model, or reports the quota that
// blocks it.
func (s *Server) takeQuota(key, model string) quotaResult {
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	var states []*quotaState
	for _, sc := range [2]scope{{key, model}, {key, ""}} {
		if st := s.quotas[sc]; st != nil {
			st.roll(now)
			states = append(states, st)
		}
	}
	if len(states) == 0 {
		return quotaResult{}
	}
	// Report the tightest quota: a blocking one if any, else the one with
	// the fewest requests left.
	var tight *quotaState
	for _, st := range states {
		if tight == nil || st.q.Requests-st.used < tight.q.Requests-tight.used {
			tight = st
		}
	}
	res := quotaResult{
		applies: true,
		ok:      tight.used < tight.q.Requests,
		limit:   tight.q.Requests,
		reset:   tight.start.Add(tight.q.Window).Sub(now),
		q:       tight.q,
	}
	if res.ok {
		for _, st := range states {
			st.used++
		}
	}
	res.remaining = max(tight.q.Requests-tight.used, 0)
	return res
}
