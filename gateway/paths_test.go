package gateway

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
)

// A path that is not one of the runtime's own, byte for byte (a doubled
// slash, a dot segment, a trailing slash, a CONNECT), is 404 not_found in
// JSON, as on the bridge: never net/http's redirect to the cleaned path
// (which a client follows, re-sending the body to a route it did not
// name) nor its plain-text "404 page not found".
func TestRuntimeUncleanPathsAre404JSON(t *testing.T) {
	r := newRig(t)
	noFollow := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	check := func(t *testing.T, resp *http.Response) {
		t.Helper()
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var e struct {
			Error struct{ Code string } `json:"error"`
		}
		if resp.StatusCode != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Error.Code != "not_found" {
			t.Errorf("%d %q (Location %q), want 404 not_found in JSON", resp.StatusCode, body, resp.Header.Get("Location"))
		}
	}
	for _, p := range []string{"//v1/decisions", "/v1/./decisions", "/x/../v1/decisions", "//v1/chat/completions"} {
		t.Run(p, func(t *testing.T) {
			req, _ := http.NewRequest("POST", r.srv.URL+p, strings.NewReader(`{"model":"api/decide-mini"}`))
			req.Header.Set("Authorization", "Bearer "+runtimeToken)
			resp, err := noFollow.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			check(t, resp)
		})
	}
	t.Run("stored responses subtree", func(t *testing.T) {
		// Under /v1/responses/ any path is the OpenAI route's (it answers
		// not_found itself), as the bridge forwards it: not a redirect.
		req, _ := http.NewRequest("GET", r.srv.URL+"/v1/responses//x", nil)
		req.Header.Set("Authorization", "Bearer "+runtimeToken)
		resp, err := noFollow.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 3 || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("%d %q, want the route's JSON answer", resp.StatusCode, resp.Header.Get("Content-Type"))
		}
	})
	t.Run("CONNECT", func(t *testing.T) {
		addr := strings.TrimPrefix(r.srv.URL, "http://")
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "CONNECT "+addr+" HTTP/1.1\r\nHost: "+addr+"\r\nAuthorization: Bearer "+runtimeToken+"\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		check(t, resp)
	})
	if n := len(r.route.served()) + len(r.openAI.served()); n != 0 {
		t.Errorf("routes served %d of these requests, want none", n)
	}
}
