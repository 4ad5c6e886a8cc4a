// Command agentrl-tui is a terminal workbench for agentic reinforcement learning on one GPU.
//
// main.go only hands over to the command-line package (cli/); the built-in model is embedded
// here because go:embed reaches only files below the embedding package's folder.
package main

import (
	"embed"
	"fmt"
	"io/fs"
	"os"

	"agentrl/cli"
	"agentrl/engine/device"
)

//go:embed testdata/builtin
var builtinFS embed.FS

func main() {
	device.AllowRestart()
	builtin, err := fs.Sub(builtinFS, "testdata/builtin")
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentrl-tui:", err)
		os.Exit(1)
	}
	os.Exit(cli.Main(os.Args[1:], cli.Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Builtin: builtin}))
}
