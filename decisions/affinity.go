package decisions

import (
	"sync"
	"time"

	"github.com/rotorhq/rotor/internal/clock"
	"github.com/rotorhq/rotor/internal/jsonobj"
)

// Responses state lives with one provider account: a previous_response_id
// is served only by the credential that answered it (DESIGN,
// "OpenAI-compatible routes").
const (
	affinityTTL = 24 * time.Hour
	affinityMax = 100_000
)

// affinity remembers which credential answered each Responses id, in
// memory, for affinityTTL, at most affinityMax ids (the oldest go first).
type affinity struct {
	clk   clock.Clock
	mu    sync.Mutex
	m     map[string]pin
	order []string // ids in the order remembered
}

type pin struct {
	credential string
	at         time.Time
}

func newAffinity(clk clock.Clock) *affinity { return &affinity{clk: clk, m: map[string]pin{}} }

func (a *affinity) remember(id, credential string) {
	if id == "" || credential == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.clk.Now()
	for len(a.order) > 0 && (len(a.m) >= affinityMax || now.Sub(a.m[a.order[0]].at) >= affinityTTL) {
		delete(a.m, a.order[0])
		a.order = a.order[1:]
	}
	if _, ok := a.m[id]; !ok {
		a.order = append(a.order, id)
	}
	a.m[id] = pin{credential: credential, at: now}
}

// lookup returns the credential that answered id, if remembered.
func (a *affinity) lookup(id string) (string, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	p, ok := a.m[id]
	if !ok || a.clk.Now().Sub(p.at) >= affinityTTL {
		return "", false
	}
	return p.credential, true
}

// responseID is a Responses answer's top-level id.
func responseID(body []byte) string {
	id, _ := stringMember(body, "id")
	return id
}

// stringMember is a top-level string member of a JSON object.
func stringMember(body []byte, name string) (string, bool) {
	raw, ok := jsonobj.Member(body, name)
	if !ok {
		return "", false
	}
	return jsonobj.Unquote(raw)
}
