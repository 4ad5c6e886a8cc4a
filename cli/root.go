// Package cli is agentrl-tui's command line: one file per command or close family, each owning
// its flags, its help text and its output format, and calling one or two functions of the
// engine, store, envs or ui packages for the work itself.
package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Env is what a command reads and writes, and the built-in model's files (embedded in the binary;
// their root holds config.json, model.safetensors and tokenizer.json).
type Env struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Builtin        fs.FS
}

// Main runs the command line on args (without the program's name) and returns the exit code:
// 0 on success or help, 1 after printing the error (and, for a malformed command line, the usage
// of the command it was meant for) to standard error; a run stopped by a signal returns 128 + the
// signal (see stop.go).
func Main(args []string, env Env) int {
	err := Run(args, env)
	if err == nil {
		return 0
	}
	var code exitStatus
	if errors.As(err, &code) {
		return int(code)
	}
	fmt.Fprintln(env.Stderr, "agentrl-tui:", err)
	var ue *usageError
	if errors.As(err, &ue) {
		fmt.Fprint(env.Stderr, "\n"+ue.cmd.UsageString())
	}
	return 1
}

// Run runs the command line on args and returns its error; tests call it in place of Main.
func Run(args []string, env Env) error {
	root := newRoot(env)
	root.SetArgs(longFlags(root, args))
	return root.Execute()
}

// usageError is a command line that does not say what to do: Main follows it with the usage.
type usageError struct {
	cmd *cobra.Command
	msg string
}

func (e *usageError) Error() string { return e.msg }

func usagef(cmd *cobra.Command, format string, a ...any) error {
	return &usageError{cmd: cmd, msg: fmt.Sprintf(format, a...)}
}

func newRoot(env Env) *cobra.Command {
	root := runCommand(env, "agentrl-tui [RECIPE.yaml] [flags]")
	root.Short = "agentic RL on one GPU: train tool-using language models in a terminal workbench"
	root.Long = `agentrl-tui — agentic RL on one GPU

Without a sub-command it runs a recipe (see recipes/): rollout → score → reference/teacher →
advantages → train → sync → eval → save, in the workbench on a terminal, else one line (or, with
--ui json, one JSON object) per event. q, Ctrl-C, SIGTERM or SIGHUP stop the run within seconds,
keeping its last trained step (exit 0; 143 for SIGTERM, 129 for SIGHUP); a second one aborts.`
	root.Example = "  agentrl-tui recipes/retool.yaml\n  agentrl-tui recipes/retool-baseline.yaml --ui plain --seed 2 --set train.lr=1e-5"
	root.SilenceErrors = true
	root.SilenceUsage = true
	root.SuggestionsMinimumDistance = 2
	root.CompletionOptions.HiddenDefaultCmd = false
	root.SetIn(env.Stdin)
	root.SetOut(env.Stdout)
	root.SetErr(env.Stderr)
	root.PersistentPreRunE = kernelsHook(env) // the CPU's matrix kernels, chosen before the work starts
	root.SetFlagErrorFunc(func(cmd *cobra.Command, err error) error {
		return usagef(cmd, "%s: %v", cmd.Name(), err)
	})
	root.AddGroup(&cobra.Group{ID: "run", Title: "Running and inspecting runs:"},
		&cobra.Group{ID: "model", Title: "Models, tokenizers and tools:"})
	for _, c := range []*cobra.Command{
		runCommand(env, "run RECIPE.yaml [flags]"), resumeCommand(env), viewCommand(env), runsCommand(env),
		evalCommand(env), compareCommand(env), regradeCommand(env), exportCommand(env), planCommand(env), benchCommand(env), serveCommand(env),
	} {
		c.GroupID = "run"
		root.AddCommand(c)
	}
	for _, c := range []*cobra.Command{
		scoreCommand(env), generateCommand(env), tokenizeCommand(env), tokenizerCommand(env), sftCommand(env), toolCommand(env), dataCommand(env), verifyCommand(env), kernelsCommand(env), doctorCommand(env), devCommand(env),
	} {
		c.GroupID = "model"
		root.AddCommand(c)
	}
	return root
}

// oneArg accepts at most one positional argument (what flagsAfter allowed before: flags may
// come before or after it).
func oneArg(cmd *cobra.Command, args []string) error {
	if len(args) > 1 {
		return usagef(cmd, "%s: unexpected arguments %q", cmd.Name(), args[1:])
	}
	return nil
}

// verbs makes cmd a parent whose own invocation, or one with an unknown verb, is a usage error
// that says which verbs there are.
func verbs(cmd *cobra.Command, need string) {
	cmd.Args = cobra.ArbitraryArgs
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		if len(args) > 0 {
			return usagef(cmd, "unknown %s %q; %s", cmd.Name(), args[0], need)
		}
		return usagef(cmd, "%s", need)
	}
}

// longFlags lets a long flag be written with one dash, as Go's flag package (the command line's
// first parser) accepted: -json, -max-steps 3. A one-dash word is rewritten only where it names a
// long flag of the command the arguments select and stands where a flag can stand (not as the
// value of the flag before it).
func longFlags(root *cobra.Command, args []string) []string {
	if len(args) > 0 && strings.HasPrefix(args[0], "__complete") {
		return args
	}
	cmd, _, err := root.Find(args)
	if err != nil || cmd == nil {
		cmd = root
	}
	out := make([]string, 0, len(args))
	takesValue := false
	for _, a := range args {
		if takesValue {
			out = append(out, a)
			takesValue = false
			continue
		}
		if a == "--" {
			out = append(out, args[len(out):]...)
			break
		}
		name, hasValue := "", false
		switch {
		case strings.HasPrefix(a, "--"):
			name, _, hasValue = strings.Cut(a[2:], "=")
		case len(a) > 2 && a[0] == '-' && a[1] != '-':
			name, _, hasValue = strings.Cut(a[1:], "=")
			if f := lookup(cmd, name); f != nil {
				a = "-" + a
			}
		}
		if f := lookup(cmd, name); f != nil && !hasValue && f.NoOptDefVal == "" {
			takesValue = true
		}
		out = append(out, a)
	}
	return out
}

func lookup(cmd *cobra.Command, name string) *pflag.Flag {
	if len(name) < 2 {
		return nil
	}
	if f := cmd.Flags().Lookup(name); f != nil {
		return f
	}
	return cmd.InheritedFlags().Lookup(name)
}

// writeJSON prints v as one line of JSON, leaving <, > and & readable (token strings contain them).
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// isTerminal reports whether f is an *os.File on a terminal.
func isTerminal(f any) bool {
	file, ok := f.(*os.File)
	if !ok {
		return false
	}
	st, err := file.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// readAll reads r to its end as text.
func readAll(r io.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}
