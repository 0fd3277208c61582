package cli

import (
	"strings"
	"testing"
)

// TestEveryCommandHasHelpWithExamples: "-h" on every command and every
// subcommand exits 0 and shows at least one example that starts with
// "dqnflow" (or an environment assignment before it).
func TestEveryCommandHasHelpWithExamples(t *testing.T) {
	var paths [][]string
	for _, c := range commands() {
		if c.summary == "" {
			continue // hidden
		}
		if subs := subcommands[c.name]; subs != nil {
			paths = append(paths, []string{c.name})
			for _, s := range subs {
				paths = append(paths, []string{c.name, s})
			}
			continue
		}
		paths = append(paths, []string{c.name})
	}
	for _, p := range paths {
		out, errOut, code := run(t, append(p, "-h")...)
		all := out + errOut
		if code != 0 {
			t.Errorf("dqnflow %s -h: exit %d\n%s", strings.Join(p, " "), code, all)
			continue
		}
		_, ex, ok := strings.Cut(all, "Examples:\n")
		if !ok || !strings.Contains(ex, "dqnflow "+p[0]) {
			t.Errorf("dqnflow %s -h shows no example of itself:\n%s", strings.Join(p, " "), all)
		}
	}
}

// TestCompletionOffersCommandsSubcommandsAndFlags: the completion scripts
// call "__complete"; it completes command names, subcommands and each
// command's own flags.
func TestCompletionOffersCommandsSubcommandsAndFlags(t *testing.T) {
	for _, c := range []struct {
		words []string
		want  string
	}{
		{[]string{"re"}, "report\n"},
		{[]string{"run", "c"}, "compare\n"},
		{[]string{"report", "--o"}, "--out\n"},
		{[]string{"run", "show", "--j"}, "--json\n"},
		{[]string{"run", "show", "--tls-c"}, "--tls-ca-path\n--tls-cert-path\n"},
		{[]string{"worker", "--met"}, "--metrics-addr\n"},
	} {
		out, _, code := run(t, append([]string{completeCommand}, c.words...)...)
		if code != 0 || out != c.want {
			t.Errorf("__complete %q = %q (exit %d), want %q", c.words, out, code, c.want)
		}
	}
	for _, shell := range []string{"bash", "zsh", "fish"} {
		out, _, code := run(t, "completion", shell)
		if code != 0 || !strings.Contains(out, "dqnflow __complete") {
			t.Errorf("completion %s: exit %d, script without __complete:\n%s", shell, code, out)
		}
	}
	if _, _, code := run(t, "completion", "tcsh"); code != 2 {
		t.Errorf("completion tcsh: exit %d, want 2 (usage)", code)
	}
}
