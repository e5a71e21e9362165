package pool

import "time"

// Snapshot is a pool's cooldown state for `rotor status` and GET
// /v1/status. It holds credential names (labels) and times; never a key, a
// digest or a model or bucket name. Zero times mean "none".
type Snapshot struct {
	Pool                 string             `json:"pool"`
	ModelCooldownEnabled bool               `json:"model_cooldown_enabled"`
	Credentials          []CredentialStatus `json:"credentials"`
	// StoreLive and StoreCapacity count the live observations of the
	// process-wide store, across every pool, and its limit.
	StoreLive     int `json:"store_live"`
	StoreCapacity int `json:"store_capacity"`
	// OverflowUntil is the capacity guard's deadline while new scoped
	// admission fails closed.
	OverflowUntil time.Time `json:"overflow_until,omitzero"`
}

// CredentialStatus is one credential's part of a Snapshot.
type CredentialStatus struct {
	Name string `json:"name"`
	// RestingUntil is the legacy provider-wide rest.
	RestingUntil time.Time `json:"resting_until,omitzero"`
	// AuthCoolingUntil is the model store's credential-wide auth
	// observation, which cools every model of the credential.
	AuthCoolingUntil time.Time `json:"auth_cooling_until,omitzero"`
	// ScopedObservations counts the live model and bucket observations;
	// EarliestRelease and LatestRelease are their first and last releases.
	ScopedObservations int       `json:"scoped_observations"`
	EarliestRelease    time.Time `json:"earliest_release,omitzero"`
	LatestRelease      time.Time `json:"latest_release,omitzero"`
}

// Snapshot returns the pool's cooldown state now. It scans the store, so
// it costs O(live observations): meant for status, not the request path.
func (p *Pool) Snapshot() Snapshot {
	st := p.store
	now := st.since(p.clk.Now())
	snap := Snapshot{
		Pool:                 p.name,
		ModelCooldownEnabled: p.enabled,
		Credentials:          make([]CredentialStatus, len(p.creds)),
		StoreCapacity:        st.limit,
	}
	byID := make(map[digest][]int, len(p.ids))
	for i, c := range p.creds {
		snap.Credentials[i].Name = c.Name
		if r := p.legacy[p.rest[i]].Load(); r > now {
			snap.Credentials[i].RestingUntil = st.at(r)
		}
		byID[p.ids[i]] = append(byID[p.ids[i]], i)
	}
	first := make([]int64, len(p.creds))
	last := make([]int64, len(p.creds))
	auth := make([]int64, len(p.creds))
	st.mu.Lock()
	st.prune(now)
	for _, i := range st.index {
		sl := &st.slots[i]
		for _, c := range byID[sl.key.cred] {
			if sl.key.scope == st.authScope {
				auth[c] = sl.until
				continue
			}
			snap.Credentials[c].ScopedObservations++
			if first[c] == 0 || sl.until < first[c] {
				first[c] = sl.until
			}
			last[c] = max(last[c], sl.until)
		}
	}
	snap.StoreLive = len(st.index)
	overflow := st.overflowUntil(now)
	st.mu.Unlock()
	for c := range snap.Credentials {
		cs := &snap.Credentials[c]
		if auth[c] != 0 {
			cs.AuthCoolingUntil = st.at(auth[c])
		}
		if first[c] != 0 {
			cs.EarliestRelease, cs.LatestRelease = st.at(first[c]), st.at(last[c])
		}
	}
	if overflow != 0 {
		snap.OverflowUntil = st.at(overflow)
	}
	return snap
}
