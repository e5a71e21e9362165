package e2e

import (
	"time"

	"github.com/rotorhq/rotor/internal/clock"
)

func fixedClock(t time.Time) clock.Clock { return clock.NewFake(t) }
