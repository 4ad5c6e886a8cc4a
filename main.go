// Command agentrl-tui is a terminal workbench for agentic reinforcement learning on one GPU.
//
// main.go holds flags, sub-commands and wiring only; the logic lives in engine/, envs/, store/ and ui/.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "usage: agentrl-tui RECIPE.yaml | tokenize | score | ...")
	os.Exit(2)
}
