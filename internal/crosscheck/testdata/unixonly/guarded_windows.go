package unixonly

// A file for Windows alone: its error shows that go list's build
// constraints choose the files, as go build's do.
var windowsOnly int = "not an int"
