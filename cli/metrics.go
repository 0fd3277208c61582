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
// when addr is empty) until ctx ends, and makes the Temporal clients that
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
	host, port, _ := net.SplitHostPort(at)
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "localhost"
	}
	url := fmt.Sprintf("http://%s/metrics", net.JoinHostPort(host, port))
	fmt.Fprintf(e.stderr, "metrics: Prometheus metrics at %s\n", url)
	return m, url, nil
}
