package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/bullylab/bullylab/netem/bench/report"
	"github.com/bullylab/bullylab/netem/scenario"
	"github.com/bullylab/bullylab/topologies"
	"github.com/bullylab/bullylab/topologies/fault"
	"github.com/urfave/cli/v2"
)

// completionShells are the shells `bullylab completion` writes scripts for.
var completionShells = []string{"bash", "zsh", "fish"}

// completionCommand is `bullylab completion SHELL`: a static script made
// from the commands and flags of this binary, so that it is as current as
// the binary that wrote it.
func completionCommand() *cli.Command {
	return &cli.Command{
		Name:      "completion",
		Usage:     "print a shell completion script for bash, zsh or fish",
		ArgsUsage: "SHELL",
		Description: "Completes the commands, their flags, and the built-in topologies and scenarios;\n" +
			"file names elsewhere.",
		OnUsageError: onUsageError,
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usagef("completion: want one shell (%s), got %d arguments", strings.Join(completionShells, ", "), c.NArg())
			}
			shell := c.Args().First()
			cmds := completionCommands(c.App)
			switch shell {
			case "bash":
				return writeBashCompletion(c.App.Writer, cmds)
			case "zsh":
				return writeZshCompletion(c.App.Writer, cmds)
			case "fish":
				return writeFishCompletion(c.App.Writer, cmds)
			}
			return usagef("completion: unknown shell %q (want %s)", shell, strings.Join(completionShells, ", "))
		},
	}
}

// completionCmd is what a script completes of a command.
type completionCmd struct {
	name, usage string
	flags       []completionFlag
	// args are the words the command takes as arguments, if a fixed set.
	args []string
}

type completionFlag struct {
	name, usage string
	// values are the words the flag takes, if a fixed set; takesValue
	// says whether it takes one at all.
	values     []string
	takesValue bool
}

// dashed is the flag as typed.
func (f completionFlag) dashed() string { return dashedFlag(f.name) }

// completionCommands lists app's commands, and the app itself first with
// the name "".
func completionCommands(app *cli.App) []completionCmd {
	flags := func(fs []cli.Flag) []completionFlag {
		var out []completionFlag
		for _, f := range fs {
			if f.Names()[0] != "help" { // cli adds it to some lists
				out = append(out, completionFlagOf(f))
			}
		}
		return append(out, completionFlag{name: "help", usage: "show help"})
	}
	out := []completionCmd{{name: "", flags: flags(app.Flags)}}
	for _, cmd := range app.VisibleCommands() {
		cc := completionCmd{name: cmd.Name, usage: strings.ReplaceAll(cmd.Usage, "`", ""), flags: flags(cmd.Flags)}
		switch cmd.Name {
		case "up":
			cc.args = topologies.Names()
		case "completion":
			cc.args = completionShells
		case "fault":
			cc.args = fault.KindNames()
		}
		// A command of subcommands completes their names, and their flags
		// after any of them.
		for _, sub := range cmd.Subcommands {
			cc.args = append(cc.args, sub.Name)
			for _, f := range flags(sub.Flags) {
				if !slices.ContainsFunc(cc.flags, func(g completionFlag) bool { return g.name == f.name }) {
					cc.flags = append(cc.flags, f)
				}
			}
		}
		out = append(out, cc)
	}
	return out
}

func completionFlagOf(f cli.Flag) completionFlag {
	cf := completionFlag{name: f.Names()[0]}
	if df, ok := f.(cli.DocGenerationFlag); ok {
		// The help's placeholders are `NAME`; a completion shows the words.
		cf.usage = strings.ReplaceAll(df.GetUsage(), "`", "")
		cf.takesValue = df.TakesValue()
	}
	switch cf.name {
	case "topology":
		cf.values = topologies.Names()
	case "scenario":
		cf.values = scenario.BuiltinNames()
	case "backend":
		cf.values = []string{"netem", "nfqueue"}
	case "log":
		cf.values = []string{"json", "text"}
	case "set":
		for _, n := range topologies.SettingNames() {
			cf.values = append(cf.values, n+"=")
		}
	case "diagram-runs":
		cf.values = report.DiagramRunWords
	case "mode":
		for _, m := range fault.CutModes {
			cf.values = append(cf.values, string(m))
		}
	}
	return cf
}

func writeBashCompletion(w io.Writer, cmds []completionCmd) error {
	var b strings.Builder
	b.WriteString(`# bash completion for bullylab; load it with: source <(bullylab completion bash)
_bullylab() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]} cmd= i
	for ((i = 1; i < COMP_CWORD; i++)); do
		case ${COMP_WORDS[i]} in
		-*) ;;
		*) cmd=${COMP_WORDS[i]}; break ;;
		esac
	done
	local words=
	case $cmd:$prev in
`)
	for _, c := range cmds {
		for _, f := range c.flags {
			if len(f.values) > 0 {
				fmt.Fprintf(&b, "\t%s:%s) words=%s ;;\n", bashWord(c.name), f.dashed(), bashWord(strings.Join(f.values, " ")))
			}
		}
	}
	b.WriteString("\t*)\n\t\tcase $cmd in\n")
	for _, c := range cmds {
		var words []string
		if c.name == "" {
			for _, s := range cmds[1:] {
				words = append(words, s.name)
			}
		}
		for _, f := range c.flags {
			words = append(words, f.dashed())
		}
		words = append(words, c.args...)
		pattern := bashWord(c.name)
		if c.name == "" {
			pattern = `""`
		}
		fmt.Fprintf(&b, "\t\t%s) words=%s ;;\n", pattern, bashWord(strings.Join(words, " ")))
	}
	b.WriteString(`		esac ;;
	esac
	COMPREPLY=($(compgen -W "$words" -- "$cur"))
}
complete -o default -F _bullylab bullylab
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// bashWord quotes s for bash, single quotes.
func bashWord(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func writeZshCompletion(w io.Writer, cmds []completionCmd) error {
	var b strings.Builder
	b.WriteString(`#compdef bullylab
# zsh completion for bullylab: write it as _bullylab into a directory of
# $fpath, or load it with: source <(bullylab completion zsh)
_bullylab() {
	local cmd=${words[2]}
	if (( CURRENT == 2 )); then
		local -a cmds=(
`)
	for _, c := range cmds[1:] {
		fmt.Fprintf(&b, "\t\t\t%s\n", bashWord(c.name+":"+zshEscape(c.usage)))
	}
	b.WriteString(`		)
		_describe command cmds
		return
	fi
	case $cmd:${words[CURRENT-1]} in
`)
	for _, c := range cmds[1:] {
		for _, f := range c.flags {
			if len(f.values) > 0 {
				fmt.Fprintf(&b, "\t%s:%s) compadd -- %s; return ;;\n", bashWord(c.name), f.dashed(), strings.Join(f.values, " "))
			}
		}
	}
	b.WriteString("\tesac\n\tif [[ ${words[CURRENT]} == -* ]]; then\n\t\tcase $cmd in\n")
	for _, c := range cmds[1:] {
		var flags []string
		for _, f := range c.flags {
			flags = append(flags, f.dashed())
		}
		fmt.Fprintf(&b, "\t\t%s) compadd -- %s ;;\n", bashWord(c.name), strings.Join(flags, " "))
	}
	b.WriteString("\t\tesac\n\t\treturn\n\tfi\n\tcase $cmd in\n")
	for _, c := range cmds[1:] {
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "\t%s) compadd -- %s ;;\n", bashWord(c.name), strings.Join(c.args, " "))
		}
	}
	b.WriteString(`	esac
	_files
}
if [[ $funcstack[1] == _bullylab ]]; then
	_bullylab "$@"
else
	compdef _bullylab bullylab
fi
`)
	_, err := io.WriteString(w, b.String())
	return err
}

// zshEscape escapes the colons _describe would take for separators.
func zshEscape(s string) string {
	return strings.ReplaceAll(s, ":", `\:`)
}

func writeFishCompletion(w io.Writer, cmds []completionCmd) error {
	var b strings.Builder
	b.WriteString("# fish completion for bullylab: write it to ~/.config/fish/completions/bullylab.fish\n")
	b.WriteString("complete -c bullylab -f\n")
	var names []string
	for _, c := range cmds[1:] {
		names = append(names, c.name)
		fmt.Fprintf(&b, "complete -c bullylab -n __fish_use_subcommand -a %s -d %s\n", c.name, fishWord(c.usage))
	}
	for _, c := range cmds {
		cond := "__fish_use_subcommand"
		if c.name != "" {
			cond = "__fish_seen_subcommand_from " + c.name
		}
		for _, f := range c.flags {
			opt := "-l " + f.name
			if len(f.name) == 1 {
				opt = "-s " + f.name
			}
			line := fmt.Sprintf("complete -c bullylab -n %s %s -d %s", fishWord(cond), opt, fishWord(f.usage))
			switch {
			case len(f.values) > 0:
				line += " -x -a " + fishWord(strings.Join(f.values, " "))
			case f.takesValue:
				line += " -r -F"
			}
			b.WriteString(line + "\n")
		}
		if len(c.args) > 0 {
			fmt.Fprintf(&b, "complete -c bullylab -n %s -a %s\n", fishWord(cond), fishWord(strings.Join(c.args, " ")))
		}
		if slices.Contains([]string{"analyze", "compare", "report", "history", "up"}, c.name) {
			fmt.Fprintf(&b, "complete -c bullylab -n %s -F\n", fishWord(cond))
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// fishWord quotes s for fish, whose single quotes escape \ and '.
func fishWord(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(s) + "'"
}
