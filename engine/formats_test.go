package engine

import (
	"context"
	"sync"
	"testing"

	"agentrl/engine/batch"
	"agentrl/engine/event"
	"agentrl/engine/play"
)

// TestFormatsEndToEnd runs two steps of the built-in model in each trajectory format (env.format
// chat, retool, tool_call) on the CPU and checks every trajectory it trains on token for token
// (play.CheckEpisode): the tokens trained on are the tokens sampled, the masked ones between them
// the observations as the format appends them, and the context reads as the chat template
// renders the episode's conversation.
func TestFormatsEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("two steps of the built-in model per format")
	}
	for _, tc := range []struct {
		format string
		extra  map[string]string
	}{
		{"chat", nil},
		{"retool", nil},
		// The template's tools block is long in the built-in tokenizer's 392 tokens (572 with the
		// python tool's schema): a bare schema and prompt keep the prompt at 352 of the 512.
		{"tool_call", map[string]string{"env.tools": `[{"type": "function", "function": {"name": "python"}}]`, "env.system_prompt": "Solve it."}},
	} {
		t.Run(tc.format, func(t *testing.T) {
			over := map[string]string{"env.format": tc.format, "run.max_steps": "2", "rollout.tasks_per_step": "2", "rollout.group_size": "2"}
			for k, v := range tc.extra {
				over[k] = v
			}
			c, events := builtinRun(t, over)
			var mu sync.Mutex
			var trajs []*batch.Trajectory
			players := c.players
			players.Agent = func(ctx context.Context, tr *batch.Trajectory, seed uint64, temperature float64) error {
				err := players.PlayReTool(ctx, tr, seed, temperature)
				mu.Lock()
				trajs = append(trajs, tr)
				mu.Unlock()
				return err
			}
			steps, drift := 0, 0
			for _, e := range runEvents(t, c, events) {
				switch v := e.(type) {
				case event.StepMetrics:
					steps++
				case event.Alarm:
					if v.Kind == event.AlarmTokenDrift {
						drift++
					}
				}
			}
			if steps != 2 || len(trajs) != 8 {
				t.Fatalf("%d steps, %d trajectories; want 2 and 8", steps, len(trajs))
			}
			tools, inTurn := 0, 0
			for _, tr := range trajs {
				if err := play.CheckEpisode(c.opts.Tokenizer, c.recipe, c.imEnd, tr); err != nil {
					t.Errorf("%s sample %d: %v", tr.Task.ID, tr.Sample, err)
				}
				tools += tr.Summary.ToolCalls
				if tc.format == "retool" && len(tr.Chat) == 3 && len(tr.Turns) > 1 {
					inTurn++
				}
			}
			if drift != 0 {
				t.Errorf("%d token-drift alarms", drift)
			}
			t.Logf("%s: %d trajectories, %d tool calls, %d responses going on after an in-turn observation", tc.format, len(trajs), tools, inTurn)
			if tc.format != "tool_call" && tools == 0 {
				t.Errorf("the built-in model ran no code in the %s format", tc.format)
			}
		})
	}
}
