package main

import (
	"strings"

	"github.com/urfave/cli/v2"
)

// interspersed moves a command's flags in front of its positional arguments,
// so `rftpipe inspect STORE --format json` works as well as the flags-first
// form (urfave/cli v2 stops parsing flags at the first positional argument).
// Subcommands (e.g. `bench loss`) are followed; "--" ends the flags.
func interspersed(app *cli.App, args []string) []string {
	if len(args) < 2 || args[len(args)-1] == "--generate-bash-completion" {
		return args // completion: the flag must stay last
	}
	out := []string{args[0]}
	cmds := app.Commands
	i := 1
	// Global flags and the command path.
	for i < len(args) {
		a := args[i]
		if strings.HasPrefix(a, "-") {
			out = append(out, a)
			i++
			continue
		}
		cmd := findCommand(cmds, a)
		if cmd == nil {
			break
		}
		out = append(out, a)
		i++
		if len(cmd.Subcommands) > 0 {
			cmds = cmd.Subcommands
			continue
		}
		var flags, pos []string
		for i < len(args) {
			a := args[i]
			i++
			switch {
			case a == "--":
				pos = append(pos, args[i:]...)
				i = len(args)
			case strings.HasPrefix(a, "-") && len(a) > 1:
				flags = append(flags, a)
				if !strings.Contains(a, "=") && takesValue(cmd, strings.TrimLeft(a, "-")) && i < len(args) {
					flags = append(flags, args[i])
					i++
				}
			default:
				pos = append(pos, a)
			}
		}
		out = append(out, flags...)
		if len(pos) > 0 {
			out = append(out, "--")
			out = append(out, pos...)
		}
		return out
	}
	return append(out, args[i:]...)
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.HasName(name) {
			return c
		}
	}
	return nil
}

// takesValue reports whether the named flag of cmd expects a value.
func takesValue(cmd *cli.Command, name string) bool {
	for _, f := range cmd.Flags {
		for _, n := range f.Names() {
			if n == name {
				_, isBool := f.(*cli.BoolFlag)
				return !isBool
			}
		}
	}
	return false
}

// keyValues returns the NAME=VALUE arguments of a repeatable flag as given:
// urfave/cli splits a slice flag's value at commas, so a list value
// (`--arg reward_weights=1,0.5`) comes back in pieces; a piece without "="
// continues the argument before it.
func keyValues(c *cli.Context, flag string) []string {
	var out []string
	for _, p := range c.StringSlice(flag) {
		if len(out) > 0 && !strings.Contains(p, "=") {
			out[len(out)-1] += "," + p
			continue
		}
		out = append(out, p)
	}
	return out
}
