package engine

import (
	"agentrl/engine/compare"
	"agentrl/envs"
)

// TaskGroup is compare.TaskGroup, forwarded for the hint probe's breakdown by kind of task
// (hintkinds.go) until that calls compare.TaskGroup itself; the kinds the probe and
// `compare --group` name stay one definition. Remove this file then.
//
// Deprecated: use compare.TaskGroup.
func TaskGroup(t envs.Task) string { return compare.TaskGroup(t) }
