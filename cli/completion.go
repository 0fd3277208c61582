package cli

import (
	"io"

	"github.com/spf13/cobra"
)

// completionCmd is "dqnflow completion bash|zsh|fish|powershell": cobra's
// completion scripts for root. Each script asks the binary's hidden
// "__complete" command (cobra's) for the candidates, so commands,
// subcommands, flags and the values of enumerated flags are never out of
// date; file names are offered where a flag or argument takes a file.
func completionCmd(root *cobra.Command) *cobra.Command {
	shell := func(name, long string, gen func(*cobra.Command) error, example ...string) *cobra.Command {
		c := leaf(name, "the "+name+" completion script", long, example...)
		c.RunE = func(c *cobra.Command, _ []string) error { return gen(c) }
		return c
	}
	c := group("completion", "shell completion scripts: bash, zsh, fish, powershell",
		"completion prints the script that completes dqnflow's commands, flags and flag values in your shell.",
		shell("bash", "The bash completion script (bash 4.1 or newer). It uses the bash-completion package where it is loaded, and a simpler word split where not.",
			func(c *cobra.Command) error {
				if _, err := io.WriteString(c.OutOrStdout(), bashWithoutBashCompletion); err != nil {
					return err
				}
				return root.GenBashCompletionV2(c.OutOrStdout(), true)
			},
			"source <(dqnflow completion bash)            # this shell",
			"dqnflow completion bash > /etc/bash_completion.d/dqnflow"),
		shell("zsh", "The zsh completion script (compinit must be loaded).",
			func(c *cobra.Command) error { return root.GenZshCompletion(c.OutOrStdout()) },
			"dqnflow completion zsh > \"${fpath[1]}/_dqnflow\""),
		shell("fish", "The fish completion script.",
			func(c *cobra.Command) error { return root.GenFishCompletion(c.OutOrStdout(), true) },
			"dqnflow completion fish > ~/.config/fish/completions/dqnflow.fish"),
		shell("powershell", "The PowerShell completion script.",
			func(c *cobra.Command) error { return root.GenPowerShellCompletionWithDesc(c.OutOrStdout()) },
			"dqnflow completion powershell | Out-String | Invoke-Expression   # this session",
			"dqnflow completion powershell >> $PROFILE"),
	)
	return c
}

// bashWithoutBashCompletion comes before cobra's bash script, which calls
// _get_comp_words_by_ref of the bash-completion package: where that
// package is not loaded (a container, a minimal install), this stands in
// for it with bash's own word split, so that "source <(dqnflow completion
// bash)" works there too. Loading bash-completion later replaces it.
const bashWithoutBashCompletion = `# dqnflow: without the bash-completion package, split the words as bash does.
if ! declare -F _get_comp_words_by_ref >/dev/null 2>&1; then
_get_comp_words_by_ref() {
    cur=${COMP_WORDS[COMP_CWORD]}
    prev=${COMP_WORDS[COMP_CWORD-1]}
    words=("${COMP_WORDS[@]}")
    cword=$COMP_CWORD
}
fi
`

// deviceValues are what --device takes; cuda:N for a device of its own.
var deviceValues = []string{"auto", "cpu", "cuda", "cuda:0"}
