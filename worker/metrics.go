package worker

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/activities"
	"github.com/dqnflow/dqnflow/trainer"
)

// Metrics is a worker's Prometheus registry: the Temporal SDK's own metrics
// (through SDKHandler, set as client.Options.MetricsHandler), the trainer's
// (through the activities.TrainerMetrics methods), and the Go runtime's and
// the process's. Serve exposes them at /metrics.
//
// Trainer metrics, labelled by backend and device, the worker's short name
// for the device (deviceLabel: "cpu", "cpu:1", "cuda:0"):
//
//	dqnflow_train_steps_per_second       gradient steps per second of the last epoch's training
//	dqnflow_env_steps_per_second         environment steps (all environments) per second of the last collection
//	dqnflow_train_loss                   mean training loss of the last epoch
//	dqnflow_train_grad_norm              mean gradient norm of the last epoch
//	dqnflow_epoch_seconds                histogram of an epoch's collect plus train time
//	dqnflow_train_steps_total            gradient steps trained by this worker
//	dqnflow_env_steps_total              environment steps collected by this worker
//	dqnflow_device_memory_used_bytes     device memory in use, where the backend reports it (CUDA)
//	dqnflow_device_memory_total_bytes    device memory, likewise
//
// and the description of each device the backend reports
// (trainer.Info.Device: model, memory, driver, BLAS library, which runs to
// 200 characters) in an info metric, so that the labels above stay short
// and the description can be joined in where a dashboard shows it:
//
//	dqnflow_device_info{backend, device, name}  1
type Metrics struct {
	reg *prometheus.Registry

	stepsPerSec, envStepsPerSec, loss, gradNorm *prometheus.GaugeVec
	memUsed, memTotal                           *prometheus.GaugeVec
	epochSeconds                                *prometheus.HistogramVec
	steps, envSteps                             *prometheus.CounterVec
	deviceInfo                                  *prometheus.GaugeVec

	mu      sync.Mutex
	collect map[string]time.Duration // last collection time per run, to time whole epochs
	names   map[[2]string]string     // the description deviceInfo shows per backend and device label

	sdk *sdkMetrics
}

// NewMetrics returns a registry with the Go and process collectors and the
// trainer metrics registered.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	dev := []string{"backend", "device"}
	gauge := func(name, help string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, dev)
		reg.MustRegister(g)
		return g
	}
	counter := func(name, help string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, dev)
		reg.MustRegister(c)
		return c
	}
	m := &Metrics{
		reg:            reg,
		stepsPerSec:    gauge("dqnflow_train_steps_per_second", "Gradient steps per second of the last epoch's training."),
		envStepsPerSec: gauge("dqnflow_env_steps_per_second", "Environment steps (all environments) per second of the last collection."),
		loss:           gauge("dqnflow_train_loss", "Mean training loss of the last epoch."),
		gradNorm:       gauge("dqnflow_train_grad_norm", "Mean global gradient norm (before clipping) of the last epoch."),
		memUsed:        gauge("dqnflow_device_memory_used_bytes", "Device memory in use, where the backend reports it."),
		memTotal:       gauge("dqnflow_device_memory_total_bytes", "Device memory, where the backend reports it."),
		steps:          counter("dqnflow_train_steps_total", "Gradient steps trained by this worker."),
		envSteps:       counter("dqnflow_env_steps_total", "Environment steps collected by this worker."),
		epochSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "dqnflow_epoch_seconds", Help: "Collect plus train time of an epoch.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16), // 10 ms to 5.5 min
		}, dev),
		deviceInfo: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "dqnflow_device_info", Help: "1 for each device the worker trains on; name is the backend's description of it.",
		}, []string{"backend", "device", "name"}),
		collect: map[string]time.Duration{},
		names:   map[[2]string]string{},
	}
	reg.MustRegister(m.epochSeconds, m.deviceInfo)
	m.sdk = &sdkMetrics{reg: reg, counters: map[string]*prometheus.CounterVec{},
		gauges: map[string]*prometheus.GaugeVec{}, timers: map[string]*prometheus.HistogramVec{}}
	return m
}

// Registry is the registry that Serve exposes; a test gathers from it.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// SDKHandler is the Temporal SDK's metrics handler for client.Options.
func (m *Metrics) SDKHandler() client.MetricsHandler { return sdkHandler{m: m.sdk} }

// Labels longer than these are cut: a label value is a short, bounded
// identifier (a device name is "cuda:12" at most), and a description
// longer than maxNameLabel says nothing more a dashboard could show.
const (
	maxDeviceLabel = 32
	maxNameLabel   = 256
)

// labels are the backend and device labels of a trainer's metrics, for
// the worker's name of the device (trainer.Device.Name; empty for a
// worker's only unnamed device, which is labelled with its backend), and
// records the device's description in dqnflow_device_info.
func (m *Metrics) labels(device string, info trainer.Info) prometheus.Labels {
	if device == "" {
		device = info.Backend
	}
	backend, device, name := cut(info.Backend, maxDeviceLabel), cut(device, maxDeviceLabel), cut(info.Device, maxNameLabel)
	m.mu.Lock()
	key := [2]string{backend, device}
	if old, ok := m.names[key]; ok && old != name {
		m.deviceInfo.DeleteLabelValues(backend, device, old)
	}
	m.names[key] = name
	m.mu.Unlock()
	m.deviceInfo.WithLabelValues(backend, device, name).Set(1)
	return prometheus.Labels{"backend": backend, "device": device}
}

// cut returns s cut to at most n bytes, at a UTF-8 boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// Collected records one collection of run runID on device (see labels).
func (m *Metrics) Collected(runID, device string, info trainer.Info, st trainer.CollectStats, transitions int64, d time.Duration) {
	l := m.labels(device, info)
	m.envSteps.With(l).Add(float64(transitions))
	if d > 0 {
		m.envStepsPerSec.With(l).Set(float64(transitions) / d.Seconds())
	}
	m.mu.Lock()
	m.collect[runID] = d
	m.mu.Unlock()
}

// Trained records one epoch's training of run runID, and with the run's
// last collection the epoch's time.
func (m *Metrics) Trained(runID, device string, info trainer.Info, st trainer.TrainStats, d time.Duration) {
	l := m.labels(device, info)
	m.steps.With(l).Add(float64(st.Steps))
	if d > 0 {
		m.stepsPerSec.With(l).Set(float64(st.Steps) / d.Seconds())
	}
	m.loss.With(l).Set(st.Loss)
	m.gradNorm.With(l).Set(st.GradNorm)
	m.mu.Lock()
	c := m.collect[runID]
	delete(m.collect, runID)
	m.mu.Unlock()
	m.epochSeconds.With(l).Observe((c + d).Seconds())
}

// DeviceMemory records the device's memory as the trainer reports it.
func (m *Metrics) DeviceMemory(device string, info trainer.Info, used, total uint64) {
	l := m.labels(device, info)
	m.memUsed.With(l).Set(float64(used))
	m.memTotal.With(l).Set(float64(total))
}

// Serve listens on addr and serves /metrics, without authentication,
// until ctx ends. It returns the address the listener is bound to (addr
// may ask for port 0). An address without a host (":9464") binds the
// loopback interface only, 127.0.0.1: the endpoint has no authentication,
// so every interface is used only when named (0.0.0.0:9464 or
// [::]:9464), and a host or address is used as given.
func (m *Metrics) Serve(ctx context.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", fmt.Errorf("metrics address %q: want HOST:PORT, :PORT (loopback) or 0.0.0.0:PORT (every interface): %w", addr, err)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	l, err := net.Listen("tcp", net.JoinHostPort(host, port))
	if err != nil {
		return "", fmt.Errorf("metrics: listen on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(sctx)
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			l.Close()
		}
	}()
	return l.Addr().String(), nil
}

// sdkLabels are the tags the Temporal SDK puts on its metrics
// (internal/common/metrics/constants.go). Every SDK metric carries all of
// them, empty where the SDK gives none, because Prometheus needs one label
// set per metric name and the SDK's sets differ between call sites. Other
// tags are dropped.
var sdkLabels = []string{"namespace", "client_name", "poller_type", "worker_type", "workflow_type", "activity_type",
	"nexus_service", "nexus_operation", "failure_reason", "task_queue", "operation", "cause"}

// sdkMetrics holds the SDK's metrics, created on first use.
type sdkMetrics struct {
	reg      *prometheus.Registry
	mu       sync.Mutex
	counters map[string]*prometheus.CounterVec
	gauges   map[string]*prometheus.GaugeVec
	timers   map[string]*prometheus.HistogramVec
}

// sdkHandler is client.MetricsHandler with a set of tags.
type sdkHandler struct {
	m    *sdkMetrics
	tags map[string]string
}

// WithTags returns a handler with tags added (a key already set is
// overwritten).
func (h sdkHandler) WithTags(tags map[string]string) client.MetricsHandler {
	merged := make(map[string]string, len(h.tags)+len(tags))
	for k, v := range h.tags {
		merged[k] = v
	}
	for k, v := range tags {
		merged[k] = v
	}
	return sdkHandler{m: h.m, tags: merged}
}

func (h sdkHandler) labels() prometheus.Labels {
	l := make(prometheus.Labels, len(sdkLabels))
	for _, k := range sdkLabels {
		l[k] = h.tags[k]
	}
	return l
}

// promName turns an SDK metric name ("temporal_request_latency") into a
// valid Prometheus name; the SDK's names already are, bar odd characters.
func promName(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == ':' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9') {
			return r
		}
		return '_'
	}, name)
}

// sdkVec returns the vector of the SDK metric name from vecs, made by
// newVec and registered the first time the SDK asks for it. It is nil when
// the registry refused it (a name that clashes with one of ours), and
// stays so: the handler answers with a no-op metric.
func sdkVec[V prometheus.Collector](m *sdkMetrics, vecs map[string]V, name string, newVec func() V) V {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := vecs[name]
	if !ok {
		v = newVec()
		if err := m.reg.Register(v); err != nil {
			var none V
			v = none
		}
		vecs[name] = v
	}
	return v
}

// Counter returns the named counter with the handler's tags.
func (h sdkHandler) Counter(name string) client.MetricsCounter {
	v := sdkVec(h.m, h.m.counters, name, func() *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: promName(name) + "_total", Help: "Temporal SDK counter " + name + "."}, sdkLabels)
	})
	if v == nil {
		return client.MetricsNopHandler.Counter(name)
	}
	c := v.With(h.labels())
	return counterFunc(func(d int64) { c.Add(float64(d)) })
}

// Gauge returns the named gauge with the handler's tags.
func (h sdkHandler) Gauge(name string) client.MetricsGauge {
	v := sdkVec(h.m, h.m.gauges, name, func() *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: promName(name), Help: "Temporal SDK gauge " + name + "."}, sdkLabels)
	})
	if v == nil {
		return client.MetricsNopHandler.Gauge(name)
	}
	g := v.With(h.labels())
	return gaugeFunc(g.Set)
}

// Timer returns the named timer, a histogram in seconds, with the
// handler's tags.
func (h sdkHandler) Timer(name string) client.MetricsTimer {
	v := sdkVec(h.m, h.m.timers, name, func() *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: promName(name) + "_seconds", Help: "Temporal SDK timer " + name + ".",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}, sdkLabels) // 1 ms to 131 s
	})
	if v == nil {
		return client.MetricsNopHandler.Timer(name)
	}
	o := v.With(h.labels())
	return timerFunc(func(d time.Duration) { o.Observe(d.Seconds()) })
}

type counterFunc func(int64)

func (f counterFunc) Inc(d int64) { f(d) }

type gaugeFunc func(float64)

func (f gaugeFunc) Update(v float64) { f(v) }

type timerFunc func(time.Duration)

func (f timerFunc) Record(d time.Duration) { f(d) }

// metricNames returns the names of the families the registry has now, for
// messages and tests.
func metricNames(reg *prometheus.Registry) []string {
	fams, _ := reg.Gather()
	var out []string
	for _, f := range fams {
		out = append(out, f.GetName())
	}
	sort.Strings(out)
	return out
}

var _ activities.TrainerMetrics = (*Metrics)(nil)
