package cli

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"testing"
)

// TestMetricsLogTheAddressBound: "--metrics-addr :0" serves on the
// loopback interface and the log line names exactly that address, not
// "localhost" over a listener on every interface; "0.0.0.0:0" says it is
// every interface.
func TestMetricsLogTheAddressBound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for addr, want := range map[string]string{
		":0":        `^metrics: Prometheus metrics at http://127\.0\.0\.1:\d+/metrics\n$`,
		"0.0.0.0:0": `^metrics: Prometheus metrics at http://\[::\]:\d+/metrics \(every interface, no authentication\)\n$`,
	} {
		var stderr bytes.Buffer
		e := &env{stdout: io.Discard, stderr: &stderr}
		_, url, err := startMetrics(ctx, e, addr, false)
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(want).MatchString(stderr.String()) {
			t.Errorf("--metrics-addr %s logs %q, want %s", addr, stderr.String(), want)
		}
		resp, err := http.Get(url)
		if err != nil {
			t.Errorf("the logged URL %s does not answer: %v", url, err)
			continue
		}
		resp.Body.Close()
	}
}
