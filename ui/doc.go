// Package ui shows a run: the interactive workbench (RunTUI, bubbletea) and the headless
// reporters that print the same event stream as plain lines (Plain) or JSON Lines (JSONLines).
//
// The workbench has seven panes, one model each, under a root model that routes keys and lays
// them out as a pure function of the terminal size (Compute; usable from 80×24, side column from
// 120×30). Screen text that end-to-end tests rely on, kept stable:
//
//   - Pane titles, in tab order and on the number keys: 1 "Status", 2 "GPU", 3 "Trajectories",
//     4 "Detail", 5 "Hints", 6 "Curves", 7 "Checkpoints". The first row lists them; the focused
//     pane's frame title is "N Name" (e.g. "3 Trajectories · 640"), the focused tab "[N Name]".
//   - tab / shift+tab cycle the panes, 1..7 jump, ? shows help (generated from the key table),
//     esc goes back (closes help, clears a filter, leaves Detail), q and ctrl+c quit; on a live
//     run that has not ended they first ask it to stop (Controller.Stop with ReasonQuit), and the
//     caller waits for the run and says what it did.
//   - In Trajectories, enter opens the selected trajectory in Detail; esc returns. / filters,
//     s sorts, r reverses, f toggles follow-latest, e shows all / training only / evaluation only
//     ("training only (e)" in the info line). The column "set" says "train" or "eval". An
//     external agent's dropped trajectory shows "⊘" in the "ok" column and its reason (crash,
//     timeout, no-res, bad-res, no-req) in the "reward" column; its Detail starts "dropped, not
//     trained on: REASON" and ends with "Agent's stderr"; the plain log has a line "step N
//     dropped TASK #S: REASON".
//     With rollout.partial a paused trajectory shows "⏸" in "ok" and "paused" in "reward", its
//     Detail "⏸ paused unfinished"; a resumed one "✓↻" or "✗↻" and, in its Detail, "resumed, N
//     segments (from token F: step S, policy vV; …)"; the Status pane's slot section has a line
//     "partial: P paused · R resumed · D stale dropped · staleness X".
//   - While a phase reports progress the header says "ETA <phase> <time>, run <time>" ("run ≥ …"
//     before a training step is timed); an evaluation in progress shows "eval so far pass@1 …
//     (n/N tasks)" on the strip's last row.
//   - In Checkpoints, b (or space) marks the selected checkpoint best: its row then shows
//     "★ manual" (the run's own choice shows "best*"); e exports it (the footer says where).
//   - S (shift+s, any pane) asks "Stop the run now? It keeps its last trained step (y/n)" in the
//     footer; y confirms, after which the status line shows "stopping" and the footer what the stop
//     does ("stopping now: …"); n or esc cancels.
//   - p pauses and resumes: the status line shows "paused".
//   - An alarm shows at once in the status line as "!! ALARM kind at step N: …" and stays until
//     a acknowledges it (A: all).
//   - When the stream ends the status line shows "run finished" / "run stopped: reason" /
//     "run failed: reason" (from the run's end event, else "run ended (stream closed)"), the
//     Status pane's State the whole end (EndLine), and the workbench stays open until the user quits.
//   - Several keys arriving in one terminal read (tmux send-keys "7" "b") act one by one.
//   - With a nil Controller (the read-only view) the pause, stop, mark and export keys are
//     hidden and the first row says "view (read-only)" when it has room.
package ui
