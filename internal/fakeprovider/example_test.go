package fakeprovider_test

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/rotorhq/rotor/internal/fakeprovider"
)

func Example() {
	fp, err := fakeprovider.Start(fakeprovider.Options{})
	if err != nil {
		panic(err)
	}
	defer fp.Close()
	fp.AddKey("sk-a", "decide-mini")
	fp.Script("sk-a", "decide-mini", fakeprovider.RateLimited("30"))

	body := `{"model":"decide-mini","input":"Is the sky blue?","question":{"type":"predicate"}}`
	for range 2 {
		req, _ := http.NewRequest(http.MethodPost, fp.URL()+fakeprovider.PathDecisions, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		resp.Body.Close()
		fmt.Printf("%d Retry-After=%q\n", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	for _, r := range fp.Requests() {
		fmt.Println(r.Key, r.Model, r.Step, r.Status)
	}
	// Output:
	// 429 Retry-After="30"
	// 200 Retry-After=""
	// sk-a decide-mini RateLimited(30) 429
	// sk-a decide-mini OK 200
}
