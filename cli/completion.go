package cli

import (
	"bytes"
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// completeCommand is the hidden command the completion scripts call with
// the words typed so far; it prints the candidates for the last one.
const completeCommand = "__complete"

// runCompletion implements "dqnflow completion bash|zsh|fish".
func runCompletion(ctx context.Context, e *env, args []string) error {
	if len(args) != 1 {
		return fmt.Errorf("%w: want \"dqnflow completion bash|zsh|fish\"", errUsage)
	}
	script, ok := completionScripts[args[0]]
	if !ok {
		return fmt.Errorf("%w: unknown shell %q: want bash, zsh or fish", errUsage, args[0])
	}
	_, err := fmt.Fprint(e.stdout, script)
	return err
}

// completionScripts ask "dqnflow __complete WORDS..." for candidates and
// fall back to file names when it has none (flag values, data files).
var completionScripts = map[string]string{
	"bash": `# bash completion for dqnflow: source <(dqnflow completion bash)
_dqnflow() {
  local cur="${COMP_WORDS[COMP_CWORD]}" IFS=$'\n'
  COMPREPLY=($(dqnflow __complete "${COMP_WORDS[@]:1:COMP_CWORD}" 2>/dev/null))
  if [ ${#COMPREPLY[@]} -eq 0 ]; then
    COMPREPLY=($(compgen -f -- "$cur"))
  fi
}
complete -o filenames -F _dqnflow dqnflow
`,
	"zsh": `#compdef dqnflow
# zsh completion for dqnflow: dqnflow completion zsh > "${fpath[1]}/_dqnflow"
_dqnflow() {
  local -a cands
  cands=("${(@f)$(dqnflow __complete "${(@)words[2,CURRENT]}" 2>/dev/null)}")
  if [[ -n "${cands[1]}" ]]; then
    compadd -- "${cands[@]}"
  else
    _files
  fi
}
if [[ "$funcstack[1]" = "_dqnflow" ]]; then _dqnflow "$@"; else compdef _dqnflow dqnflow; fi
`,
	"fish": `# fish completion for dqnflow: dqnflow completion fish > ~/.config/fish/completions/dqnflow.fish
function __dqnflow_complete
    set -l words (commandline -opc) (commandline -ct)
    dqnflow __complete $words[2..-1] 2>/dev/null
end
complete -c dqnflow -a '(__dqnflow_complete)'
`,
}

// flagLine matches a flag in flag.PrintDefaults' output: "  -name value".
var flagLine = regexp.MustCompile(`(?m)^  -([A-Za-z0-9][A-Za-z0-9-]*)`)

// runComplete prints the candidates for the last of args (the word being
// typed): commands, then subcommands, then the command's flags, taken from
// its own -h so that they are never out of date.
func runComplete(ctx context.Context, e *env, args []string) error {
	if len(args) == 0 {
		args = []string{""}
	}
	cur, done := args[len(args)-1], args[:len(args)-1]
	var cands []string
	switch {
	case len(done) == 0:
		for _, c := range commands() {
			if c.summary != "" {
				cands = append(cands, c.name)
			}
		}
	case len(done) == 1 && subcommands[done[0]] != nil && !strings.HasPrefix(cur, "-"):
		cands = subcommands[done[0]]
	case strings.HasPrefix(cur, "-"):
		path := done[:1]
		if subcommands[done[0]] != nil && len(done) > 1 {
			path = done[:2]
		}
		var out, errb bytes.Buffer
		Main(ctx, append(append([]string{}, path...), "-h"), &out, &errb)
		for _, m := range flagLine.FindAllStringSubmatch(errb.String()+out.String(), -1) {
			cands = append(cands, "--"+m[1])
		}
	}
	sort.Strings(cands)
	for _, c := range cands {
		if strings.HasPrefix(c, cur) {
			fmt.Fprintln(e.stdout, c)
		}
	}
	return nil
}
