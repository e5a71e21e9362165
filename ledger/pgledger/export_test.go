package pgledger

// Test-only hooks.

// QueuedWrites reports how many writes wait behind the writer's running
// batch.
func (s *Store) QueuedWrites() int { return s.w.q.Len() }
