package report

import (
	"encoding/json"
	"fmt"
	"html/template"
	"time"

	"github.com/dqnflow/dqnflow/market/sim"
	"github.com/dqnflow/dqnflow/metadata"
)

// page is what pageTemplate renders: a title and sections, each with an
// optional table, figures and preformatted text.
type page struct {
	Title     string
	Subtitle  string
	Generated string
	Sections  []section
}

type section struct {
	Title   string
	Text    string
	Table   *table
	Figures []Figure
	Pre     string
}

type table struct {
	Header []string
	Rows   [][]string
	// Mark is the index of the row to highlight (the best), or -1.
	Mark int
}

var pageTemplate = template.Must(template.New("report").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2rem auto; max-width: 70rem; padding: 0 1rem; color: #1b1b1b; }
h1 { margin-bottom: .2rem; } .sub { color: #555; margin-top: 0; }
h2 { border-bottom: 1px solid #ddd; padding-bottom: .3rem; margin-top: 2.2rem; }
table { border-collapse: collapse; font-size: .9rem; margin: .5rem 0; }
th, td { border: 1px solid #ddd; padding: .25rem .6rem; text-align: right; }
th { background: #f4f4f4; } td:first-child, th:first-child { text-align: left; }
tr.mark td { background: #fff6d6; font-weight: 600; }
figure { margin: 1.2rem 0; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: .85rem; }
pre { background: #f7f7f7; padding: .8rem; overflow-x: auto; font-size: .8rem; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
<p class="sub">{{.Subtitle}} · generated {{.Generated}} by dqnflow report</p>
{{range .Sections}}
<h2>{{.Title}}</h2>
{{if .Text}}<p>{{.Text}}</p>{{end}}
{{with .Table}}<table>
<tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{$mark := .Mark}}{{range $i, $r := .Rows}}<tr{{if eq $i $mark}} class="mark"{{end}}>{{range $r}}<td>{{.}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{range .Figures}}<figure><img src="{{.DataURI}}" alt="{{.Title}}"><figcaption><b>{{.Title}}.</b> {{.Note}} ({{.Name}})</figcaption></figure>
{{end}}
{{if .Pre}}<pre>{{.Pre}}</pre>{{end}}
{{end}}
</body>
</html>
`))

func f3(p *float64) string {
	if p == nil {
		return "–"
	}
	return fmt.Sprintf("%.3f", *p)
}

func pct(v float64) string { return fmt.Sprintf("%.2f%%", 100*v) }

// runPage lays out a run's report.
func runPage(r Run, figs []Figure) page {
	run := r.Run
	ran := "–"
	if run.Backend != "" {
		ran = fmt.Sprintf("%s backend on %s, %s", run.Backend, run.Device, run.Precision)
	}
	best := "–"
	if run.BestValidSharpe != nil && run.BestEpoch != nil {
		best = fmt.Sprintf("%.3f at epoch %d", *run.BestValidSharpe, *run.BestEpoch)
	}
	var trainTime time.Duration
	for _, e := range r.Epochs {
		trainTime += time.Duration(e.DurationMS) * time.Millisecond
	}
	summary := &table{Header: []string{"", ""}, Mark: -1, Rows: [][]string{
		{"status", string(run.Status)},
		{"ran on", ran},
		{"lineage", run.Lineage},
		{"epochs", fmt.Sprint(run.EpochsDone)},
		{"best validation Sharpe", best},
		{"training time (collect + train)", trainTime.Round(time.Millisecond).String()},
		{"created", run.CreatedAt.Format(time.RFC3339)},
	}}
	if run.FinishedAt != nil {
		summary.Rows = append(summary.Rows, []string{"finished", run.FinishedAt.Format(time.RFC3339)})
	}
	if run.Error != "" {
		summary.Rows = append(summary.Rows, []string{"error", run.Error})
	}
	p := page{
		Title:     "Run " + run.RunID,
		Subtitle:  ran,
		Generated: time.Now().UTC().Format("2006-01-02 15:04 MST"),
		Sections:  []section{{Title: "Summary", Table: summary}},
	}
	var training, backtest []Figure
	for _, f := range figs {
		switch f.Name {
		case "loss.png", "mean_q.png", "grad_norm.png", "epsilon.png", "valid_sharpe.png":
			training = append(training, f)
		default:
			backtest = append(backtest, f)
		}
	}
	if r.Best != nil {
		rep := r.Best.Report
		m := &table{Header: []string{"", "agent", "buy and hold", "flat"}, Mark: -1}
		row := func(name string, f func(sim.Metrics) string) {
			m.Rows = append(m.Rows, []string{name, f(rep.Metrics), f(rep.BuyAndHold), f(rep.Flat)})
		}
		num := func(v float64) string { return fmt.Sprintf("%.3f", v) }
		row("total return", func(x sim.Metrics) string { return pct(x.TotalReturn) })
		row("annual return", func(x sim.Metrics) string { return pct(x.AnnualReturn) })
		row("volatility", func(x sim.Metrics) string { return pct(x.Volatility) })
		row("Sharpe", func(x sim.Metrics) string { return num(x.Sharpe) })
		row("Sortino", func(x sim.Metrics) string { return num(x.Sortino) })
		row("max drawdown", func(x sim.Metrics) string { return pct(x.MaxDrawdown) })
		row("Calmar", func(x sim.Metrics) string { return num(x.Calmar) })
		row("CVaR 5%", func(x sim.Metrics) string { return pct(x.CVaR5) })
		row("trades", func(x sim.Metrics) string { return fmt.Sprint(x.Trades) })
		row("win rate", func(x sim.Metrics) string { return pct(x.WinRate) })
		row("profit factor", func(x sim.Metrics) string { return num(x.ProfitFactor) })
		row("exposure", func(x sim.Metrics) string { return pct(x.Exposure) })
		text := fmt.Sprintf("%s to %s, %d bars; checkpoint %s.", rep.From.Format("2006-01-02 15:04"), rep.To.Format("2006-01-02 15:04"),
			rep.Bars, r.Best.URI)
		if n := r.Best.Notice; n != "" {
			text = "Note: " + n + ". " + text
		}
		p.Sections = append(p.Sections, section{
			Title: fmt.Sprintf("Best checkpoint (epoch %d) on the validation range", r.Best.Epoch),
			Text:  text,
			Table: m, Figures: backtest,
		})
	} else if r.BestNote != "" {
		p.Sections = append(p.Sections, section{Title: "Best checkpoint", Text: r.BestNote})
	}
	p.Sections = append(p.Sections, section{Title: "Training", Figures: training})
	ep := &table{Header: []string{"epoch", "step", "loss", "grad norm", "mean Q", "ε", "mean reward", "valid Sharpe", "time"}, Mark: -1}
	for i, e := range r.Epochs {
		m := func(key, format string) string {
			if v, ok := e.Metrics[key]; ok {
				return fmt.Sprintf(format, v)
			}
			return "–"
		}
		if run.BestEpoch != nil && e.Epoch == *run.BestEpoch {
			ep.Mark = i
		}
		ep.Rows = append(ep.Rows, []string{fmt.Sprint(e.Epoch), fmt.Sprint(e.GlobalStep), fmt.Sprintf("%.4f", e.Loss),
			fmt.Sprintf("%.3f", e.GradNorm), m("mean_q", "%.4f"), m("epsilon", "%.3f"), m("mean_reward", "%.5f"),
			f3(e.ValidSharpe), (time.Duration(e.DurationMS) * time.Millisecond).String()})
	}
	p.Sections = append(p.Sections, section{Title: "Epochs", Text: "The best epoch is highlighted.", Table: ep})
	ck := &table{Header: []string{"epoch", "step", "valid Sharpe", "bytes", "state", "sha256"}, Mark: -1}
	for i, c := range r.Checkpoints {
		state := "kept"
		if c.Pruned {
			state = "pruned"
		}
		if c.IsBest {
			state, ck.Mark = "best", i
		}
		ck.Rows = append(ck.Rows, []string{fmt.Sprint(c.Epoch), fmt.Sprint(c.GlobalStep), f3(c.ValidSharpe), fmt.Sprint(c.Bytes), state, c.SHA256[:12] + "…"})
	}
	p.Sections = append(p.Sections, section{Title: "Checkpoints", Table: ck})
	p.Sections = append(p.Sections, section{Title: "Config that ran", Pre: configJSON(run.Config)})
	return p
}

// storeStatus is a status for the sweep table.
func storeStatus(s metadata.Status, err string) string {
	if err != "" {
		return "failed: " + err
	}
	return string(s)
}

// rawValue prints a grid value as JSON.
func rawValue(v json.RawMessage) string {
	if len(v) == 0 {
		return "–"
	}
	return string(v)
}
