package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rotorhq/rotor/learned"
)

// A reload that changes a learned setting (mode, policy_json, adapt) gets
// a new learner, but an unchanged credential keeps its learned state
// (README, Reload): with learned_cooldown.storage memory the records
// live on in the process's one store, through apply -> shadow -> off ->
// apply.
func TestReloadKeepsMemoryLearnedStateWhenLearnedSettingsChange(t *testing.T) {
	const learn = `learned_cooldown: {mode: %s, storage: memory, policy_json: '{"buckets":[{"provider":"api","model":"decide-mini","quota_bucket":null}]}'}` + "\n"
	x := newReloadFixtureWith(t, fmt.Sprintf(learn, "apply"), cred{name: "team-a"})
	ctx := context.Background()
	id := strings.Repeat("ab", 32)
	store := x.rl.shared.lstore
	if store == nil {
		t.Fatal("no learned store in apply mode")
	}
	if _, err := store.Put(ctx, learned.Record{ID: id, State: []byte("s")}, 0, time.Now()); err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"shadow", "off", "apply"} {
		x.writeConfig(fmt.Sprintf(learn, mode), cred{name: "team-a"})
		if _, err := x.rl.reload("test"); err != nil {
			t.Fatal(err)
		}
		if x.rl.shared.lstore == nil {
			continue
		}
		if _, ok, err := x.rl.shared.lstore.Get(ctx, id, time.Now()); err != nil || !ok {
			t.Errorf("after a reload to mode %s the learned state is gone (%v, %v)", mode, ok, err)
		}
	}
}
