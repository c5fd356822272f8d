package main

import (
	"fmt"

	"github.com/rftpipe/rftpipe/schema"
	"github.com/urfave/cli/v2"
)

// bashCompletion asks rftpipe itself for the words that may follow
// (urfave/cli's --generate-bash-completion): commands, then their flags.
const bashCompletion = `# rftpipe completion for bash: source <(rftpipe completion bash)
_rftpipe_complete() {
  local cur opts
  COMPREPLY=()
  cur="${COMP_WORDS[COMP_CWORD]}"
  if [[ "$cur" == "-"* ]]; then
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" "$cur" --generate-bash-completion 2>/dev/null)
  else
    opts=$("${COMP_WORDS[@]:0:$COMP_CWORD}" --generate-bash-completion 2>/dev/null)
  fi
  COMPREPLY=($(compgen -W "$opts" -- "$cur"))
  return 0
}
complete -o bashdefault -o default -F _rftpipe_complete rftpipe
`

// zshCompletion loads the bash function through zsh's bashcompinit.
const zshCompletion = `# rftpipe completion for zsh: source <(rftpipe completion zsh)
autoload -U +X compinit && compinit
autoload -U +X bashcompinit && bashcompinit
` + bashCompletion

func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print the shell completion script (bash or zsh)",
		ArgsUsage: "[bash|zsh]",
		Description: "Add to ~/.bashrc:  source <(rftpipe completion bash)\n" +
			"or to ~/.zshrc:    source <(rftpipe completion zsh)",
		Action: func(c *cli.Context) error {
			script := bashCompletion
			switch shell := c.Args().First(); shell {
			case "", "bash":
			case "zsh":
				script = zshCompletion
			default:
				return schema.Usagef("completion: unknown shell %q (bash or zsh)", shell)
			}
			if c.NArg() > 1 {
				return schema.Usagef("completion takes one shell name")
			}
			_, err := fmt.Fprint(c.App.Writer, script)
			return err
		},
	}
}
