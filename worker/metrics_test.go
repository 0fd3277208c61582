package worker

import (
	"context"
	"io"
	"net/http"
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
	m.Collected("r", info, trainer.CollectStats{}, 2048, 500*time.Millisecond)
	m.Trained("r", info, trainer.TrainStats{Steps: 300, Loss: 1.5, GradNorm: 0.25}, 2*time.Second)
	m.Collected("r", info, trainer.CollectStats{}, 2048, time.Second)
	m.Trained("r", info, trainer.TrainStats{Steps: 300, Loss: 1.25, GradNorm: 0.5}, 3*time.Second)
	m.DeviceMemory(info, 1<<30, 80<<30)
	l := []string{"cpu", "cpu (2 threads)"}
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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := m.Serve(ctx, "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{
		`dqnflow_epoch_seconds_sum{backend="cpu",device="cpu (2 threads)"} 6.5`,
		`dqnflow_epoch_seconds_count{backend="cpu",device="cpu (2 threads)"} 2`,
		`dqnflow_train_grad_norm{backend="cpu",device="cpu (2 threads)"} 0.5`,
	} {
		if !strings.Contains(string(body), want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}
