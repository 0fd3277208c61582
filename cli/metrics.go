package cli

import (
	"context"
	"fmt"
	"net"

	"github.com/dqnflow/dqnflow/worker"
)

// defaultDevMetricsAddr is where "dqnflow dev" serves metrics: Prometheus'
// customary exporter port range, on the loopback interface.
const defaultDevMetricsAddr = "127.0.0.1:9464"

// startMetrics serves the worker's Prometheus metrics at addr (nothing
// when addr is empty; ":PORT" is the loopback interface, "0.0.0.0:PORT"
// every interface) until ctx ends, and makes the Temporal clients that
// this process dials afterwards report the SDK's metrics there. With
// fallback (the default address of "dqnflow dev"), a port in use gives
// way to a free one; an address the user chose must be free. It returns
// the metrics URL.
func startMetrics(ctx context.Context, e *env, addr string, fallback bool) (*worker.Metrics, string, error) {
	if addr == "" {
		return nil, "", nil
	}
	m := worker.NewMetrics()
	at, err := m.Serve(ctx, addr)
	if err != nil && fallback {
		host, _, _ := net.SplitHostPort(addr)
		at, err = m.Serve(ctx, net.JoinHostPort(host, "0"))
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w (set --metrics-addr to a free address, or \"\" for none)", err)
	}
	e.metrics = m.SDKHandler()
	// The address the listener is bound to, as it is: a bare :PORT binds
	// the loopback interface (worker.Metrics.Serve), and one that binds
	// every interface says so, since the endpoint has no authentication.
	url := "http://" + at + "/metrics"
	where := ""
	if host, _, _ := net.SplitHostPort(at); net.ParseIP(host).IsUnspecified() {
		where = " (every interface, no authentication)"
	}
	fmt.Fprintf(e.stderr, "metrics: Prometheus metrics at %s%s\n", url, where)
	return m, url, nil
}
