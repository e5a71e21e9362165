package httpx

import (
	"errors"
	"net"
)

// NotSent reports whether err, from an HTTP client call, happened before
// any byte of the request could reach the server (the dial or the name
// lookup failed): the call may be made again, elsewhere, without the risk
// that the server runs it twice.
func NotSent(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return true
	}
	var dns *net.DNSError
	return errors.As(err, &dns)
}
