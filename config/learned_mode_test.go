package config

import (
	"reflect"
	"testing"
)

// LEARNED_COOLDOWN_MODE is read as package learned reads it (ParseMode):
// off, shadow or apply exactly; any other spelling is malformed, warns by
// name and turns learning off, so the file, the variable and the learner
// agree on what a mode is.
func TestLearnedModeIsExact(t *testing.T) {
	for _, v := range []string{"Apply", "SHADOW", "Off", "apply!"} {
		var warned []string
		got := ResolveLearned(env(map[string]string{"LEARNED_COOLDOWN_MODE": v}), nil, nil, nil, func(s, _ string) { warned = append(warned, s) })
		if got.Mode != "off" || !reflect.DeepEqual(warned, []string{"LEARNED_COOLDOWN_MODE"}) {
			t.Errorf("mode %q: got mode %s, warnings %v; want off and one warning naming LEARNED_COOLDOWN_MODE", v, got.Mode, warned)
		}
	}
}
