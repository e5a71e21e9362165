// Command rotor is a CLI-first local bridge and budget ledger for LLM
// provider credentials. See README.md.
package main

import (
	"os"
)

func main() {
	os.Exit(Main(os.Args[1:], DefaultIO()))
}
