package cli

import (
	"flag"
	"fmt"
	"io"
	"strings"
)

// subcommands lists the subcommands of each command group, in the order
// help shows them.
var subcommands = map[string][]string{
	"run":        {"start", "list", "show", "watch", "compare", "pause", "resume", "stop"},
	"checkpoint": {"export", "verify", "list", "keygen"},
	"schedule":   {"create", "list", "delete"},
	"sweep":      {"start"},
	"config":     {"defaults"},
	"completion": {"bash", "zsh", "fish"},
}

// examples are what "-h" shows under each command's flags: commands a user
// can paste, in the order they would run them.
var examples = map[string][]string{
	"train": {
		"dqnflow train --device cpu --epochs 5 --out runs/local",
		"dqnflow train --device cuda --config my.json --data prices.csv --out runs/gpu",
	},
	"backtest": {
		"dqnflow backtest --checkpoint runs/local/epoch-000005.safetensors --data bundled:USA500IDXUSD_H1.csv",
		"dqnflow backtest --checkpoint ck.safetensors --data prices.csv --from 2024-01-01 --to 2024-07-01 --json",
	},
	"predict":           {"dqnflow predict --checkpoint ck.safetensors --data prices.csv --from 2024-09-01 --json > q.json"},
	"checkpoint export": {"dqnflow checkpoint export --checkpoint ck.safetensors --dtype bf16 --out weights-bf16.safetensors"},
	"checkpoint verify": {"dqnflow checkpoint verify checkpoints/run-1/.../epoch-000010.safetensors"},
	"checkpoint list":   {"dqnflow checkpoint list run-20261201-120000-ab12cd34", "dqnflow checkpoint list RUN --json | jq '.[] | select(.is_best)'"},
	"checkpoint keygen": {"dqnflow checkpoint keygen --out /etc/dqnflow/checkpoint.key   # then: dqnflow worker --checkpoint-key-file /etc/dqnflow/checkpoint.key"},
	"config defaults":   {"dqnflow config defaults > my.json   # then edit and: dqnflow run start --config my.json"},
	"bench": {
		"dqnflow bench --device cpu --json",
		"dqnflow bench --device cuda --precision bf16-mixed --batch 4096 --profile --json",
		"dqnflow bench --temporal --epochs 50   # needs dqnflow dev running",
	},
	"learn-check": {"dqnflow learn-check --json"},
	"parity": {
		"dqnflow parity --device cuda --out runs/parity          # 50 epochs in fp32, bf16-mixed, bf16 and bf16 with stochastic rounding",
		"dqnflow parity --device cpu --config small.json --epochs 3 --modes fp32,bf16 --json",
	},
	"evaluate": {
		"dqnflow evaluate --out reports/eval          # trains the defaults on every bundled series and the synthetic one",
		"dqnflow evaluate --data bundled:USA500IDXUSD_H1.csv --seeds 8   # eight runs: how much of one result is the seed",
		"dqnflow evaluate --checkpoint ck.safetensors --data bundled:bitcoin_2024.csv --out reports/ck",
	},
	"walkforward": {
		"dqnflow walkforward --data bundled:bitcoin_2024.csv --windows 3 --epochs 10 --out runs/wf",
		"dqnflow walkforward --config my.json --windows 4 --train-bars 20000 --json",
		"dqnflow walkforward --data bundled:USA500IDXUSD_H1.csv --windows 4 --gate window",
	},
	"baselines": {
		"dqnflow baselines --data bundled:USA500IDXUSD_H1.csv            # walkforward's four windows, momentum and reversal chosen on validation",
		"dqnflow baselines --data bundled:bitcoin_2024.csv --lookbacks 6,24,120 --json",
	},
	"dev": {
		"dqnflow dev               # Temporal + UI on :8233, a worker, metrics on :9464",
		"dqnflow dev --demo        # and a small demo run, watched to the end",
		"DATABASE_URL=postgres://user@db/dqnflow dqnflow dev --metrics-addr :9500",
	},
	"worker": {
		"dqnflow worker --role control",
		"dqnflow worker --role gpu --device cuda --runs-per-device 2 --metrics-addr 0.0.0.0:9464 --checkpoint-store /mnt/ckpt   # metrics on every interface, for a Prometheus elsewhere",
		"dqnflow worker --role gpu --device cuda --checkpoint-store 's3://dqnflow/ckpt?endpoint=http://s3:7070&use_path_style=true'  # AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY in the environment",
	},
	"run start": {
		"dqnflow run start                               # the defaults on the bundled S&P 500 data",
		"dqnflow run start --config my.json --id lr-3e-4 --wait",
	},
	"run list":    {"dqnflow run list", "dqnflow run list --lineage daily --limit 5 --json"},
	"run show":    {"dqnflow run show lr-3e-4", "dqnflow run show lr-3e-4 --json | jq '.epochs[-1]'"},
	"run watch":   {"dqnflow run watch lr-3e-4"},
	"run compare": {"dqnflow run compare lr-3e-4 lr-1e-3", "dqnflow run compare A B C --json"},
	"run pause":   {"dqnflow run pause lr-3e-4"},
	"run resume":  {"dqnflow run resume lr-3e-4"},
	"run stop":    {"dqnflow run stop lr-3e-4"},
	"report": {
		"dqnflow report lr-3e-4 --out reports/lr-3e-4 && open reports/lr-3e-4/index.html",
		"dqnflow report sweep-20261201-120000-ab12cd34 --out reports/sweep",
	},
	"schedule create": {"dqnflow schedule create --id daily --every 24h --config rolling.json"},
	"schedule list":   {"dqnflow schedule list --json"},
	"schedule delete": {"dqnflow schedule delete daily"},
	"sweep start": {
		"dqnflow sweep start --grid optim.lr=1e-4,3e-4,1e-3 --grid seed=1,2 --max-concurrent 4 --wait",
	},
	"migrate": {"DATABASE_URL=postgres://user@db:5432/dqnflow dqnflow migrate"},
	"doctor":  {"dqnflow doctor", "TEMPORAL_ADDRESS=temporal:7233 dqnflow doctor --json"},
	"completion bash": {
		"source <(dqnflow completion bash)            # this shell",
		"dqnflow completion bash > /etc/bash_completion.d/dqnflow",
	},
	"completion zsh":  {"dqnflow completion zsh > \"${fpath[1]}/_dqnflow\""},
	"completion fish": {"dqnflow completion fish > ~/.config/fish/completions/dqnflow.fish"},
}

// setUsage makes fs print its command's synopsis, flags and examples.
func setUsage(fs *flag.FlagSet, name string) {
	fs.Usage = func() {
		w := fs.Output()
		fmt.Fprintf(w, "Usage: dqnflow %s [flags]\n", name)
		if summary := commandSummary(name); summary != "" {
			fmt.Fprintf(w, "\n%s\n", summary)
		}
		fmt.Fprintln(w, "\nFlags:")
		fs.PrintDefaults()
		printExamples(w, name)
	}
}

// commandSummary is the top-level summary of name's command.
func commandSummary(name string) string {
	top, _, _ := strings.Cut(name, " ")
	for _, c := range commands() {
		if c.name == top {
			return c.summary
		}
	}
	return ""
}

func printExamples(w io.Writer, name string) {
	ex := examples[name]
	if len(ex) == 0 {
		return
	}
	fmt.Fprintln(w, "\nExamples:")
	for _, x := range ex {
		fmt.Fprintf(w, "  %s\n", x)
	}
}

// groupHelp prints a command group's subcommands and their examples.
func groupHelp(w io.Writer, group string) {
	fmt.Fprintf(w, "Usage: dqnflow %s %s ...\n\n%s\n", group, strings.Join(subcommands[group], "|"), commandSummary(group))
	fmt.Fprintf(w, "\nRun \"dqnflow %s SUBCOMMAND -h\" for its flags.\n\nExamples:\n", group)
	for _, sub := range subcommands[group] {
		for _, x := range examples[group+" "+sub] {
			fmt.Fprintf(w, "  %s\n", x)
		}
	}
}

// flagless are the commands without flags, whose "-h" Main answers.
var flagless = map[string]bool{"config defaults": true, "completion bash": true, "completion zsh": true, "completion fish": true}

// flaglessHelp prints the synopsis and examples of a command without flags.
func flaglessHelp(w io.Writer, name string) {
	fmt.Fprintf(w, "Usage: dqnflow %s\n\n%s\n", name, commandSummary(name))
	printExamples(w, name)
}

// isHelp reports whether arg asks for help.
func isHelp(arg string) bool {
	return arg == "-h" || arg == "--help" || arg == "-help" || arg == "help"
}
