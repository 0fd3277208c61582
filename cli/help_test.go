package cli

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// commandPaths lists the path of every command a user can run, the top
// level's own commands first ("run", then "run start"...).
func commandPaths(t *testing.T) [][]string {
	t.Helper()
	root := newRoot(newEnv(&bytes.Buffer{}, &bytes.Buffer{}))
	var paths [][]string
	walk(root, func(c *cobra.Command) {
		if c == root || !c.IsAvailableCommand() {
			return
		}
		paths = append(paths, strings.Fields(strings.TrimPrefix(c.CommandPath(), "dqnflow ")))
	})
	if len(paths) < 30 {
		t.Fatalf("only %d commands found: %v", len(paths), paths)
	}
	return paths
}

// TestEveryCommandHasHelpWithExamples: "CMD --help", "CMD -h" and "help
// CMD" print the same help, exit 0, and show at least one example that
// runs the command itself (after an environment assignment, perhaps).
func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	for _, p := range commandPaths(t) {
		name := strings.Join(p, " ")
		out, errOut, code := run(t, append(p, "--help")...)
		if code != 0 || errOut != "" {
			t.Errorf("dqnflow %s --help: exit %d, stderr %q", name, code, errOut)
			continue
		}
		_, ex, ok := strings.Cut(out, "Examples:\n")
		if !ok || !strings.Contains(ex, "dqnflow "+name) {
			t.Errorf("dqnflow %s --help shows no example of itself:\n%s", name, out)
		}
		if !strings.Contains(out, "Usage:\n  dqnflow "+name) {
			t.Errorf("dqnflow %s --help has no usage line of its own:\n%s", name, out)
		}
		for _, other := range [][]string{append(slices.Clone(p), "-h"), append([]string{"help"}, p...)} {
			if o, _, c := run(t, other...); c != 0 || o != out {
				t.Errorf("dqnflow %s: exit %d, and its help differs from --help's:\n%s", strings.Join(other, " "), c, o)
			}
		}
	}
}

// TestHelpOfACommandIsItsOwn: "dqnflow help train" is train's help (its
// flags), not the top-level list of commands.
func TestHelpOfACommandIsItsOwn(t *testing.T) {
	top, _, _ := run(t, "help")
	for _, c := range []struct {
		args []string
		want []string
	}{
		{[]string{"help", "train"}, []string{"dqnflow train [flags]", "--epochs int", "--config string"}},
		{[]string{"help", "run", "start"}, []string{"dqnflow run start [flags]", "--wait", "--address string"}},
		{[]string{"help", "schedule"}, []string{"dqnflow schedule COMMAND", "create", "delete", "dqnflow schedule create --id daily"}},
	} {
		out, errOut, code := run(t, c.args...)
		if code != 0 || out == top {
			t.Errorf("dqnflow %s: exit %d, the top-level help: %t\n%s%s", strings.Join(c.args, " "), code, out == top, out, errOut)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("dqnflow %s lacks %q:\n%s", strings.Join(c.args, " "), w, out)
			}
		}
	}
}

// TestMistypedCommandOrFlagSuggestsTheNearest: a mistyped command,
// subcommand, help topic or flag is a usage error (exit 2) that names
// the nearest one; a long flag given Go-style with one dash is named with
// its two dashes.
func TestMistypedCommandOrFlagSuggestsTheNearest(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"trian"}, `unknown command "trian": did you mean "train"?`},
		{[]string{"run", "strat"}, `unknown run command "strat": did you mean "start"?`},
		{[]string{"schedule", "lst"}, `did you mean "list"?`},
		{[]string{"help", "reprot"}, `unknown command "reprot": did you mean "report"?`},
		{[]string{"train", "--epoks", "3"}, "unknown flag: --epoks: did you mean --epochs?"},
		{[]string{"worker", "--metrics-adr", ":9464"}, "did you mean --metrics-addr?"},
		{[]string{"run", "show", "--adress", "x:1", "r"}, "did you mean --address?"},
		{[]string{"backtest", "-json"}, "flag -json: a long flag takes two dashes: --json"},
		{[]string{"run", "list", "-limit=3"}, "--limit"},
		{[]string{"frobnicate"}, `unknown command "frobnicate": "dqnflow help" lists the commands`},
		{[]string{"run"}, "want a command: compare, list, pause, resume, show, start, stop or watch"},
		{[]string{"train", "extra"}, `unexpected argument "extra"`},
		{[]string{"run", "watch"}, `want "dqnflow run watch RUN [flags]"`},
	} {
		out, errOut, code := run(t, c.args...)
		if code != 2 || !strings.Contains(errOut, c.want) || out != "" {
			t.Errorf("dqnflow %s: exit %d, stdout %q, stderr %q; want exit 2 and %q", strings.Join(c.args, " "), code, out, errOut, c.want)
		}
	}
}

// TestManyFlagsAreGroupedInHelp: the Temporal connection flags have a
// heading of their own wherever a command takes them, and so do dev's
// worker flags and backtest's cost flags.
func TestManyFlagsAreGroupedInHelp(t *testing.T) {
	for _, c := range []struct {
		cmd          []string
		heading      string
		inside, ours string // a flag under the heading, one under "Flags:"
	}{
		{[]string{"worker"}, "Temporal connection flags:", "--tls-ca-path", "--role"},
		{[]string{"run", "show"}, "Temporal connection flags:", "--api-key-file", "--json"},
		{[]string{"dev"}, "Worker flags:", "--runs-per-device", "--ui-port"},
		{[]string{"backtest"}, "Instrument and cost flags:", "--slippage-ticks", "--range"},
	} {
		out, _, _ := run(t, append(c.cmd, "--help")...)
		own, rest, ok := strings.Cut(out, "\n"+c.heading+"\n")
		if !ok {
			t.Errorf("dqnflow %s --help has no %q:\n%s", strings.Join(c.cmd, " "), c.heading, out)
			continue
		}
		group, _, _ := strings.Cut(rest, "\n\n")
		if !strings.Contains(group, c.inside) || strings.Contains(own, c.inside) || !strings.Contains(own, c.ours) {
			t.Errorf("dqnflow %s --help: %s not under %q alone, or %s not under Flags:\n%s", strings.Join(c.cmd, " "), c.inside, c.heading, c.ours, out)
		}
	}
	if out, _, _ := run(t, "worker", "--help"); strings.Contains(out, "--checkpoint-dir string") || strings.Contains(out, "--slots int") {
		t.Errorf("worker --help lists the older flag names:\n%s", out)
	}
}

// complete returns the candidates cobra's __complete prints for words
// (the last one being typed), without their descriptions.
func complete(t *testing.T, words ...string) []string {
	t.Helper()
	out, _, code := run(t, append([]string{cobra.ShellCompRequestCmd}, words...)...)
	if code != 0 {
		t.Fatalf("__complete %q: exit %d", words, code)
	}
	var cands []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, ":") {
			break // the directive ends the candidates
		}
		c, _, _ := strings.Cut(l, "\t")
		cands = append(cands, c)
	}
	return cands
}

// TestCompletionOffersCommandsSubcommandsFlagsAndValues: completion
// scripts for bash, zsh, fish and PowerShell call the binary's
// __complete, which completes commands, subcommands, each command's own
// flags and the values of enumerated flags.
func TestCompletionOffersCommandsSubcommandsFlagsAndValues(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  []string
	}{
		{[]string{"re"}, []string{"report"}},
		{[]string{"run", "c"}, []string{"compare"}},
		{[]string{"report", "--o"}, []string{"--out"}},
		{[]string{"run", "show", "--j"}, []string{"--json"}},
		{[]string{"run", "show", "--tls-c"}, []string{"--tls-ca-path", "--tls-cert-path"}},
		{[]string{"worker", "--met"}, []string{"--metrics-addr"}},
		{[]string{"train", "--device", ""}, []string{"auto", "cpu", "cuda", "cuda:0"}},
		{[]string{"worker", "--role", ""}, []string{"all", "control", "gpu"}},
		{[]string{"completion", ""}, []string{"bash", "fish", "powershell", "zsh"}},
	} {
		if got := complete(t, c.words...); !slices.Equal(got, c.want) {
			t.Errorf("__complete %q = %q, want %q", c.words, got, c.want)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, _, code := run(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "__complete") || len(out) < 1000 {
			t.Errorf("completion %s: exit %d, %d bytes of script, which does not call __complete", shell, code, len(out))
		}
	}
	if _, _, code := run(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2 (usage)", code)
	}
}

// TestPositionalArgumentsAreTaken: every command whose synopsis names
// arguments takes them, and one too few or too many is a usage error
// (exit 2); with them, the command goes on to fail on the unreachable
// servers (exit 1), not on its arguments.
func TestPositionalArgumentsAreTaken(t *testing.T) {
	t.Setenv("DATABASE_URL", "postgres://nobody@127.0.0.1:1/none?sslmode=disable&connect_timeout=1")
	t.Setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
	missing := filepath.Join(t.TempDir(), "absent.safetensors")
	for _, c := range []struct {
		cmd  []string
		args []string
	}{
		{[]string{"checkpoint", "verify"}, []string{missing}},
		{[]string{"checkpoint", "list"}, []string{"r"}},
		{[]string{"run", "show"}, []string{"r"}},
		{[]string{"run", "watch"}, []string{"r"}},
		{[]string{"run", "compare"}, []string{"a", "b", "c"}},
		{[]string{"run", "pause"}, []string{"r"}},
		{[]string{"run", "resume"}, []string{"r"}},
		{[]string{"run", "stop"}, []string{"r"}},
		{[]string{"report"}, []string{"r", "--out", t.TempDir()}},
		{[]string{"schedule", "delete"}, []string{"daily"}},
	} {
		name := strings.Join(c.cmd, " ")
		if _, errOut, code := run(t, append(slices.Clone(c.cmd), c.args...)...); code != 1 {
			t.Errorf("dqnflow %s %s: exit %d, want 1 (the servers are unreachable): %s", name, strings.Join(c.args, " "), code, errOut)
		}
		if _, errOut, code := run(t, c.cmd...); code != 2 || !strings.Contains(errOut, "want \"dqnflow "+name) {
			t.Errorf("dqnflow %s without arguments: exit %d, %q; want a usage error with the synopsis", name, code, errOut)
		}
		if _, _, code := run(t, append(append(slices.Clone(c.cmd), c.args...), "extra", "more", "and", "more")...); code != 2 && name != "run compare" {
			t.Errorf("dqnflow %s with extra arguments: exit %d, want 2", name, code)
		}
	}
}
