package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// bridgeFileName is the file in the home folder where a running bridge
// records itself, so that `rotor status` finds one started on a free port
// (shared/DESIGN.md, "Reload").
const bridgeFileName = "bridge.json"

// bridgeRecord is the content of <home>/bridge.json.
type bridgeRecord struct {
	PID int    `json:"pid"`
	URL string `json:"url"`
}

// writeBridgeRecord records a bridge that serves url. It returns a func
// that removes the record at a clean stop, unless another bridge has
// replaced it since.
func writeBridgeRecord(home, url string) (remove func(), err error) {
	path := filepath.Join(home, bridgeFileName)
	rec := bridgeRecord{PID: os.Getpid(), URL: url}
	b, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, append(b, '\n'), 0o600); err != nil {
		return nil, err
	}
	return func() {
		if cur, err := readBridgeRecord(home); err == nil && cur == rec {
			os.Remove(path)
		}
	}, nil
}

// readBridgeRecord reads <home>/bridge.json; fs.ErrNotExist when no bridge
// recorded itself there.
func readBridgeRecord(home string) (bridgeRecord, error) {
	path := filepath.Join(home, bridgeFileName)
	b, err := os.ReadFile(path)
	if err != nil {
		return bridgeRecord{}, err
	}
	var rec bridgeRecord
	if err := json.Unmarshal(b, &rec); err != nil || rec.URL == "" {
		return bridgeRecord{}, fmt.Errorf("%s is not a bridge record; remove it, or pass --url", path)
	}
	return rec, nil
}
