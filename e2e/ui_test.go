package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"go.temporal.io/sdk/client"

	"github.com/dqnflow/dqnflow/workflows"
)

// Environment of the browser test.
const (
	// envChromium names the browser; default: chromium, chromium-browser or
	// google-chrome on PATH (CI installs Debian's chromium).
	envChromium = "DQNFLOW_CHROMIUM"
	// envArtifacts is the directory the screenshots go to (make test sets
	// artifacts/); default: a directory under the system's temp dir.
	envArtifacts = "DQNFLOW_ARTIFACTS"
)

// chromium returns the browser to drive. Its absence fails the test: the
// UI is what users start runs from, and this test is its only check.
func chromium(t *testing.T) string {
	t.Helper()
	if p := os.Getenv(envChromium); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatalf("no Chromium found: install it (Debian: apt-get install chromium; .ci/run does) or set %s", envChromium)
	return ""
}

// artifacts returns the directory for this test's screenshots.
func artifacts(t *testing.T) string {
	t.Helper()
	dir := os.Getenv(envArtifacts)
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "dqnflow-artifacts")
	}
	dir = filepath.Join(dir, t.Name())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// uiColumns is the workflow list's column set that docs/ui.md describes:
// the UI keeps it in local storage per namespace.
var uiColumns = []map[string]any{
	{"label": "Status", "pinned": true}, {"label": "Workflow ID", "pinned": true},
	{"label": "DqnStatus", "pinned": false}, {"label": "DqnEpoch", "pinned": false},
	{"label": "DqnBestValidSharpe", "pinned": false}, {"label": "Type", "pinned": false}, {"label": "Start", "pinned": false},
}

// TestStartTrainingRunFromTheUIInABrowser drives the Temporal UI of
// "dqnflow dev" in headless Chromium as a user would: Start Workflow with
// type TrainingRun, task queue dqnflow-control and input {} (the defaults),
// then, once the first epoch is done, the run list with the DqnStatus,
// DqnEpoch and DqnBestValidSharpe columns, and the run's page with its
// current details (phase, epoch, step, loss). Screenshots of each step are
// kept in $DQNFLOW_ARTIFACTS.
func TestStartTrainingRunFromTheUIInABrowser(t *testing.T) {
	endToEnd(t, "dqnflow dev and a browser")
	browser := chromium(t)
	shots := artifacts(t)
	d := startDev(t)
	c, err := client.Dial(client.Options{HostPort: d.addr})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	actx, cancel := chromedp.NewExecAllocator(context.Background(), append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browser), chromedp.NoSandbox, chromedp.WindowSize(1440, 900))...)
	defer cancel()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	do := func(what string, steps ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, steps...); err != nil {
			shot(t, ctx, shots, "failed.png")
			t.Fatalf("browser: %s: %v", what, err)
		}
	}
	// bodyText is the page's text and that of its frames (the UI renders
	// markdown, such as the current details, in sandboxed frames).
	bodyText := func() string {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](`[document.body.innerText].concat(
			Array.from(document.querySelectorAll("iframe")).map(f => {
				try { if (f.contentDocument) return f.contentDocument.body.innerText; } catch (e) {}
				return f.srcdoc || "";
			})).join("\n")`))
		if err != nil {
			t.Logf("browser: read the page: %v", err)
		}
		return s
	}
	// until reloads url until the page's text satisfies ok. After each
	// load it watches the page for up to 10 s: on a loaded machine the UI
	// renders its list late, and the body's text can read empty before it
	// does.
	until := func(what, url string, timeout time.Duration, ok func(text string) bool) string {
		t.Helper()
		deadline := time.Now().Add(timeout)
		for {
			do("open "+url, chromedp.Navigate(url), chromedp.WaitReady(chromedp.CSS("body")), chromedp.Sleep(1500*time.Millisecond))
			text := bodyText()
			for i := 0; i < 10 && !(text != "" && ok(text)); i++ {
				time.Sleep(time.Second)
				text = bodyText()
			}
			if text != "" && ok(text) {
				return text
			}
			if err := d.proc.alive(); err != nil {
				t.Fatal(err)
			}
			if time.Now().After(deadline) {
				shot(t, ctx, shots, "failed.png")
				t.Fatalf("%s did not happen within %s; the page shows:\n%s", what, timeout, text)
			}
			time.Sleep(time.Second)
		}
	}

	// The run list's columns: what docs/ui.md tells users to pick.
	cols, _ := json.Marshal(map[string]any{"default": uiColumns})
	do("open the UI", chromedp.Navigate(d.ui+"/namespaces/default/workflows"), chromedp.WaitReady(chromedp.CSS("body")))
	if _, err := chromedp.Run(ctx, chromedp.Evaluate[bool](fmt.Sprintf(
		`localStorage.setItem("namespace-workflow-table-columns", %s), true`, strconv.Quote(string(cols))))); err != nil {
		t.Fatalf("browser: set the list's columns: %v", err)
	}

	// Start Workflow: the form as a user fills it.
	id := "ui-" + randomHex(t, 4)
	do("fill the Start Workflow form",
		chromedp.Navigate(d.ui+"/namespaces/default/workflows/start-workflow"),
		chromedp.WaitVisible(chromedp.ID("workflowId")),
		chromedp.SendKeys(chromedp.ID("workflowId"), id),
		chromedp.SendKeys(chromedp.ID("taskQueue"), workflows.ControlTaskQueue),
		chromedp.SendKeys(chromedp.ID("workflowType"), workflows.TrainingRunName),
	)
	// The input editor (CodeMirror) may not take keys until it has rendered:
	// type {} while it is empty, and wait until it shows them. On a loaded
	// machine the first keystrokes can be lost.
	editor := func() string {
		in, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector(".cm-content").innerText`))
		return strings.TrimSpace(in)
	}
	in := ""
	for try := 0; try < 3 && in != "{}"; try++ {
		if editor() == "" {
			do("type the input", chromedp.Click(chromedp.CSS(".cm-content")), chromedp.KeyEvent("{}"))
		}
		for range 40 {
			if in = editor(); in == "{}" {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	if in != "{}" {
		t.Fatalf("the input editor holds %q, want {}", in)
	}
	shot(t, ctx, shots, "1-start-workflow.png")
	do("start the workflow", chromedp.Click(chromedp.Search(`//button[normalize-space(.)="Start Workflow"]`)))

	// The run trains the defaults; wait for its first epoch.
	waitFor(t, "the run started from the UI to finish epoch 1", 5*time.Minute, time.Second, func() (bool, error) {
		if err := d.proc.alive(); err != nil {
			return false, err
		}
		v, err := c.QueryWorkflow(context.Background(), id, "", workflows.ProgressQuery)
		if err != nil {
			return false, nil // not started or no answer yet
		}
		var p workflows.Progress
		if err := v.Get(&p); err != nil {
			return false, err
		}
		if p.Epochs != 20 {
			return false, fmt.Errorf("the run from input {} trains %d epochs, want the default 20", p.Epochs)
		}
		return p.Epoch >= 1, nil
	})

	// The list shows the run with its epoch, best Sharpe and status.
	// The text and the row are read at different moments: wait until the
	// text read also holds the columns (a clean-clone CI run once read it
	// while the table was still empty, just before the row rendered).
	text := until("the run list to show epoch 1", d.ui+"/namespaces/default/workflows", 2*time.Minute, func(text string) bool {
		row := rowText(ctx, id)
		return strings.Contains(row, "running") && !strings.Contains(row, "\t0\t") && strings.Contains(text, "DqnStatus")
	})
	for _, col := range []string{"DqnStatus", "DqnEpoch", "DqnBestValidSharpe"} {
		if !strings.Contains(text, col) {
			t.Errorf("the run list has no %s column:\n%s", col, text)
		}
	}
	row := rowText(ctx, id)
	if !strings.Contains(row, id) || !strings.Contains(row, "TrainingRun") || !strings.Contains(row, "running") {
		t.Errorf("the run's row is %q, want its id, TrainingRun and running", row)
	}
	shot(t, ctx, shots, "2-workflow-list.png")

	// The run's page, reached as a user does (its link in the list), shows
	// its current details.
	do("open the run's page from the list", chromedp.Click(chromedp.Search(fmt.Sprintf(`//a[normalize-space(.)=%q]`, id))),
		chromedp.WaitVisible(chromedp.Search(`//*[normalize-space(text())="User Metadata"]`)))
	shot(t, ctx, shots, "3-workflow-page.png")
	do("open its User Metadata tab", chromedp.Click(chromedp.Search(`//*[normalize-space(text())="User Metadata"]`)))
	deadline := time.Now().Add(time.Minute)
	for text = bodyText(); !(strings.Contains(text, "Phase:") && strings.Contains(text, "Loss:")); text = bodyText() {
		if time.Now().After(deadline) {
			shot(t, ctx, shots, "failed.png")
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			t.Fatalf("the run's page (%s) shows no current details within a minute:\n%s", loc, text)
		}
		time.Sleep(time.Second)
	}
	for _, want := range []string{"Phase:", "Status:", "running", "Epoch:", "of 20", "Step:", "Loss:", "Best validation Sharpe:", "Trainer:"} {
		if !strings.Contains(text, want) {
			t.Errorf("the run's page lacks %q:\n%s", want, text)
		}
	}
	shot(t, ctx, shots, "4-current-details.png")
	t.Logf("screenshots in %s", shots)
	if err := c.TerminateWorkflow(context.Background(), id, "", "browser test done"); err != nil {
		t.Log(err)
	}
}

// rowText is the text of the list's row that names id, cells separated by
// tabs, or "" when there is none.
func rowText(ctx context.Context, id string) string {
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](fmt.Sprintf(`(() => {
		for (const tr of document.querySelectorAll("tr")) {
			if (tr.innerText.includes(%q)) return Array.from(tr.children).map(td => td.innerText.trim()).join("\t");
		}
		return "";
	})()`, id)))
	return s
}

// shot saves a screenshot of the page as dir/name.
func shot(t *testing.T, ctx context.Context, dir, name string) {
	t.Helper()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, name), png, 0o644); err != nil {
		t.Log(err)
	}
}
