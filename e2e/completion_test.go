package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestBashCompletionWorksWithoutBashCompletion sources "dqnflow completion
// bash" in a bash that has not loaded the bash-completion package (as on
// a minimal install or in a container) and completes a command, a
// subcommand, a flag and a flag's values through the binary's __complete,
// as the README promises.
func TestBashCompletionWorksWithoutBashCompletion(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("no bash here")
	}
	bin := dqnflowBinary(t)
	if filepath.Base(bin) != "dqnflow" {
		t.Fatalf("the completion script calls the binary by its name, dqnflow; %s is named otherwise", bin)
	}
	script := filepath.Join(t.TempDir(), "dqnflow.bash")
	out, err := exec.Command(bin, "completion", "bash").Output()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, out, 0o644); err != nil {
		t.Fatal(err)
	}
	// complete WORDS... runs the completion function as bash would for
	// the command line WORDS, the last one being typed.
	prog := `source "$1"; shift
declare -F _init_completion >/dev/null && { echo "bash-completion is loaded" >&2; exit 3; }
complete_words() {
    COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
    __start_dqnflow dqnflow "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
    echo "${COMPREPLY[*]}"
}
complete_words dqnflow re
complete_words dqnflow run sh
complete_words dqnflow worker --metrics-a
complete_words dqnflow train --device ""
`
	cmd := exec.Command(bash, "--norc", "--noprofile", "-c", prog, "bash", script)
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("bash: %v\n%s%s", err, got, stderrOf(err))
	}
	want := []string{"report", "show", "--metrics-addr", "auto cpu cuda cuda:0"}
	lines := strings.Split(strings.TrimSpace(string(got)), "\n")
	if len(lines) != len(want) {
		t.Fatalf("completions:\n%s\nwant %q", got, want)
	}
	for i, w := range want {
		if strings.TrimSpace(lines[i]) != w {
			t.Errorf("completion %d = %q, want %q", i, lines[i], w)
		}
	}
}
