package worker

import (
	"context"
	"io"
	"net"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/dqnflow/dqnflow/trainer"
)

// TestSDKMetricsWithDifferentTagsShareOneFamily: the SDK tags one metric
// name differently at different call sites; each gets the full label set,
// so none is dropped and the registry stays consistent.
func TestSDKMetricsWithDifferentTagsShareOneFamily(t *testing.T) {
	m := NewMetrics()
	h := m.SDKHandler()
	h.WithTags(map[string]string{"namespace": "default", "task_queue": "q"}).Counter("temporal_request").Inc(2)
	h.WithTags(map[string]string{"namespace": "default", "operation": "PollActivityTaskQueue", "unknown_tag": "x"}).Counter("temporal_request").Inc(3)
	h.Timer("temporal_request_latency").Record(20 * time.Millisecond)
	h.Gauge("temporal_num_pollers").Update(4)
	if got := testutil.ToFloat64(m.sdk.counters["temporal_request"].WithLabelValues(labelValues(map[string]string{"namespace": "default", "task_queue": "q"})...)); got != 2 {
		t.Errorf("temporal_request_total{task_queue=q} = %v, want 2", got)
	}
	if n, err := testutil.GatherAndCount(m.Registry(), "temporal_request_total"); err != nil || n != 2 {
		t.Errorf("temporal_request_total has %d series (%v), want 2", n, err)
	}
	names := strings.Join(metricNames(m.Registry()), " ")
	for _, want := range []string{"temporal_request_latency_seconds", "temporal_num_pollers", "go_goroutines", "process_cpu_seconds_total"} {
		if !strings.Contains(names, want) {
			t.Errorf("registry lacks %s: %s", want, names)
		}
	}
}

func labelValues(tags map[string]string) []string {
	var v []string
	for _, k := range sdkLabels {
		v = append(v, tags[k])
	}
	return v
}

// TestTrainerMetricsAreRatesOfTheLastEpoch: steps/s and env steps/s are
// the last epoch's steps over its time; the epoch histogram sees collect
// plus train; totals add up; /metrics serves them.
func TestTrainerMetricsAreRatesOfTheLastEpoch(t *testing.T) {
	m := NewMetrics()
	info := trainer.Info{Backend: "cpu", Device: "cpu (2 threads)"}
	m.Collected("r", "cpu", info, trainer.CollectStats{}, 2048, 500*time.Millisecond)
	m.Trained("r", "cpu", info, trainer.TrainStats{Steps: 300, Loss: 1.5, GradNorm: 0.25}, 2*time.Second)
	m.Collected("r", "cpu", info, trainer.CollectStats{}, 2048, time.Second)
	m.Trained("r", "cpu", info, trainer.TrainStats{Steps: 300, Loss: 1.25, GradNorm: 0.5}, 3*time.Second)
	m.DeviceMemory("cpu", info, 1<<30, 80<<30)
	l := []string{"cpu", "cpu"}
	for name, c := range map[string]struct{ got, want float64 }{
		"steps/s":     {testutil.ToFloat64(m.stepsPerSec.WithLabelValues(l...)), 100},
		"env steps/s": {testutil.ToFloat64(m.envStepsPerSec.WithLabelValues(l...)), 2048},
		"loss":        {testutil.ToFloat64(m.loss.WithLabelValues(l...)), 1.25},
		"steps total": {testutil.ToFloat64(m.steps.WithLabelValues(l...)), 600},
		"env total":   {testutil.ToFloat64(m.envSteps.WithLabelValues(l...)), 4096},
		"mem used":    {testutil.ToFloat64(m.memUsed.WithLabelValues(l...)), 1 << 30},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", name, c.got, c.want)
		}
	}
	body := scrape(t, m)
	for _, want := range []string{
		`dqnflow_epoch_seconds_sum{backend="cpu",device="cpu"} 6.5`,
		`dqnflow_epoch_seconds_count{backend="cpu",device="cpu"} 2`,
		`dqnflow_train_grad_norm{backend="cpu",device="cpu"} 0.5`,
		`dqnflow_device_info{backend="cpu",device="cpu",name="cpu (2 threads)"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// scrape serves m on a loopback port and returns what /metrics says.
func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(body)
}

// TestDeviceLabelIsShortAndItsDescriptionAnInfoMetric: the device label of
// every trainer metric is the worker's short name for the device (cuda:0,
// cpu:1; the backend for a worker's only unnamed device), never the
// backend's description, which a CUDA device makes 170 characters long;
// the description is the name label of dqnflow_device_info, once per
// device, replaced (not added to) when it changes.
func TestDeviceLabelIsShortAndItsDescriptionAnInfoMetric(t *testing.T) {
	m := NewMetrics()
	h100 := "NVIDIA H100 80GB HBM3 (cuda:0, sm_90, 132 SMs, 79.1 GiB, driver 580.95.05, CUDA 13.0; NVRTC 13.0 from libnvrtc.so.13; kernels compiled for sm_90a; GEMMs on wgmma)"
	if len(h100) < 150 {
		t.Fatalf("the description is %d characters; the test needs a long one", len(h100))
	}
	gpu := trainer.Info{Backend: "cuda", Device: h100}
	cpu := trainer.Info{Backend: "cpu", Device: "cpu (2 threads, linux/amd64), blas openblas 0.3.21 (Haswell kernels; pthreads, 2 threads, libopenblas.so.0)"}
	m.Trained("r1", "cuda:0", gpu, trainer.TrainStats{Steps: 300}, time.Second)
	m.DeviceMemory("cuda:0", gpu, 1<<30, 80<<30)
	m.Collected("r2", "", cpu, trainer.CollectStats{}, 64, time.Second) // a worker's only, unnamed device
	m.Trained("r3", "cpu:1", cpu, trainer.TrainStats{Steps: 7}, time.Second)
	m.Trained("r1", "cuda:0", trainer.Info{Backend: "cuda", Device: "NVIDIA H100 (after a driver update)"}, trainer.TrainStats{Steps: 300}, time.Second)
	// Labels over the bounds are cut at a rune boundary: 40 bytes of
	// device name to maxDeviceLabel (32), 600 bytes of 3-byte runes to the
	// 85 runes (255 bytes) that fit in maxNameLabel (256).
	m.Trained("r4", strings.Repeat("d", 40), trainer.Info{Backend: "cpu", Device: strings.Repeat("価", 200)}, trainer.TrainStats{Steps: 1}, time.Second)
	body := scrape(t, m)
	for _, want := range []string{
		`dqnflow_train_steps_total{backend="cuda",device="cuda:0"} 600`,
		`dqnflow_device_memory_total_bytes{backend="cuda",device="cuda:0"} 8.589934592e+10`,
		`dqnflow_env_steps_total{backend="cpu",device="cpu"} 64`,
		`dqnflow_train_steps_total{backend="cpu",device="cpu:1"} 7`,
		`dqnflow_device_info{backend="cuda",device="cuda:0",name="NVIDIA H100 (after a driver update)"} 1`,
		`dqnflow_device_info{backend="cpu",device="cpu",name="` + cpu.Device + `"} 1`,
		`dqnflow_device_info{backend="cpu",device="cpu:1",name="` + cpu.Device + `"} 1`,
		`dqnflow_device_info{backend="cpu",device="` + strings.Repeat("d", 32) + `",name="` + strings.Repeat("価", 85) + `"} 1`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(body, h100) {
		t.Error("the replaced description of cuda:0 is still exported")
	}
	device := regexp.MustCompile(`device="([^"]*)"`)
	for _, line := range strings.Split(body, "\n") {
		if !strings.HasPrefix(line, "dqnflow_") {
			continue
		}
		for _, d := range device.FindAllStringSubmatch(line, -1) {
			if len(d[1]) > maxDeviceLabel {
				t.Errorf("device label of %d characters: %s", len(d[1]), line)
			}
		}
	}
}

// TestMetricsWithoutAHostListenOnLoopbackOnly: "--metrics-addr :0" (no
// host) binds 127.0.0.1 and nothing else, and Serve returns the address
// actually bound; every interface takes an explicit 0.0.0.0 or [::].
func TestMetricsWithoutAHostListenOnLoopbackOnly(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := NewMetrics()
	addr, err := m.Serve(ctx, ":0")
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host != "127.0.0.1" {
		t.Fatalf("Serve(:0) bound %q (%v), want 127.0.0.1:PORT", addr, err)
	}
	if resp, err := http.Get("http://" + addr + "/metrics"); err != nil {
		t.Errorf("the loopback address does not answer: %v", err)
	} else {
		resp.Body.Close()
	}
	// Every other address of this host must be refused on that port.
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	others := 0
	for _, a := range addrs {
		ip, _, err := net.ParseCIDR(a.String())
		if err != nil || ip.IsLoopback() || ip.IsLinkLocalUnicast() {
			continue
		}
		others++
		if c, err := net.DialTimeout("tcp", net.JoinHostPort(ip.String(), port), 2*time.Second); err == nil {
			c.Close()
			t.Errorf("%s:%s answers: the metrics endpoint listens beyond the loopback interface", ip, port)
		}
	}
	t.Logf("bound %s; %d other addresses of the host refused", addr, others)
	all, err := m.Serve(ctx, "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if host, _, _ := net.SplitHostPort(all); !net.ParseIP(host).IsUnspecified() {
		t.Errorf("Serve(0.0.0.0:0) bound %s, want every interface", all)
	}
	if _, err := m.Serve(ctx, "9464"); err == nil || !strings.Contains(err.Error(), "HOST:PORT") {
		t.Errorf("Serve(9464): %v, want an error saying HOST:PORT", err)
	}
}
