package decisions

import (
	"encoding/json"
	"net/http"
	"slices"
	"sync"

	"github.com/rotorhq/rotor/internal/httpx"
)

// modelEntry is one model of GET /v1/models in the OpenAI list shape.
type modelEntry struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	OwnedBy string `json:"owned_by"`
}

// serveModels answers GET /v1/models: every model eligible in each pool
// for at least one OpenAI route, once, with the prefix a caller must
// write, from fresh catalogs (stale ones discovered within
// catalog_timeout) in the region of X-Rotor-Region or the pool's default
// one. No admission, no row; 502 catalog_unavailable when every discovery
// fails.
func (rt *Route) serveModels(w http.ResponseWriter, r *http.Request) {
	type probe struct {
		pool string
		c    *credential
		cat  *catalogResult
	}
	var probes []*probe
	want := r.Header.Get(RegionHeader)
	for _, name := range PoolNames {
		ps := rt.pools[name]
		if ps == nil {
			continue
		}
		region := ps.firstRegion
		if want != "" {
			region = want
		}
		for _, c := range ps.creds {
			if c.Region == region {
				probes = append(probes, &probe{pool: name, c: c})
			}
		}
	}
	if want != "" && len(probes) == 0 {
		// As the other routes answer it: an empty list would read as
		// "no models".
		rt.refused("unknown_region")
		e := httpx.NewError(httpx.CodeUnknownRegion).WithMessage("no enabled credential serves region %q", want)
		httpx.AccessInfoFrom(r.Context()).Code = e.Code
		httpx.WriteError(w, e)
		return
	}
	var wg sync.WaitGroup
	for _, p := range probes {
		wg.Go(func() {
			if cat, outcome, _ := rt.catalogs.get(r.Context(), p.c); outcome == catalogOK {
				p.cat = cat
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	data := []modelEntry{}
	fetched := 0
	for _, p := range probes {
		if p.cat == nil {
			continue
		}
		fetched++
		for m := range p.cat.models {
			id := p.pool + "/" + m
			if seen[id] || !p.c.allows(m) || !slices.ContainsFunc(OpenAIKinds, func(k *Kind) bool { return k.eligible(p.c, m) }) {
				continue
			}
			seen[id] = true
			data = append(data, modelEntry{ID: id, Object: "model", OwnedBy: "rotor"})
		}
	}
	if len(probes) > 0 && fetched == 0 {
		httpx.AccessInfoFrom(r.Context()).Code = httpx.CodeCatalogUnavailable
		httpx.WriteError(w, httpx.NewError(httpx.CodeCatalogUnavailable))
		return
	}
	slices.SortFunc(data, func(a, b modelEntry) int {
		switch {
		case a.ID < b.ID:
			return -1
		case a.ID > b.ID:
			return 1
		}
		return 0
	})
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(struct {
		Object string       `json:"object"`
		Data   []modelEntry `json:"data"`
	}{"list", data})
}
