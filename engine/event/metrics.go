package event

// Metric names one of a training step's numbers (StepMetrics.Metrics). The engine sets them and
// the workbench reads them by these names; as JSON and in the store they are plain strings.
type Metric string

// The rollout phase's metrics: what the trained batch scored and how the generator was used.
const (
	MetricRewardMean         Metric = "reward_mean"       // mean total reward of the trained batch
	MetricAccuracy           Metric = "accuracy"          // share of the trained batch that is correct
	MetricTokensPerSecond    Metric = "tokens_per_s"      // tokens the generator sampled per second of its step time
	MetricRolloutOccupancy   Metric = "rollout_occupancy" // share of the rollout's slot-steps with a request in progress
	MetricRolloutTailSeconds Metric = "rollout_tail_s"    // seconds from 90 % of the rollout's trajectories done to the last
	MetricToolStallShare     Metric = "tool_stall_share"  // share of the rollout's slot-steps idle while a tool ran
	MetricToolQueueSeconds   Metric = "tool_queue_s"      // seconds the rollout's trajectories queued for a sandbox worker
)

// The hints' metrics (hindsight hints, their usefulness probe and the judge).
const (
	MetricHintedShare        Metric = "hinted_share"          // share of the trained batch whose advantage used a hint
	MetricHintsShortened     Metric = "hints_shortened"       // hints shortened to fit hinter.max_hint_tokens
	MetricHintsDropped       Metric = "hints_dropped"         // hints dropped as not even their first sentence fits
	MetricHintsGated         Metric = "hints_gated"           // hints dropped by hinter.gate lift: no lift of a correct solution
	MetricHintsGateMeasured  Metric = "hints_gate_measured"   // hints hinter.gate lift measured
	MetricHintGain           Metric = "hint_gain"             // mean teacher − student log-prob over hinted responses
	MetricHintLift           Metric = "hint_lift"             // mean lift of a correct sibling's reference log-prob by the hint
	MetricHintLiftProbed     Metric = "hint_lift_probed"      // hinted trajectories whose hint_lift was measured
	MetricHintLiftDemo       Metric = "hint_lift_demo"        // the hint's mean lift of the task's reference demonstration
	MetricHintLiftDemoProbed Metric = "hint_lift_demo_probed" // hinted trajectories whose hint_lift_demo was measured
	MetricJudgeUnparsed      Metric = "judge_unparsed"        // judge replies with no usable \boxed{} in the step
)

// The model PRM's metrics (prm.kind model only, so other runs' metrics are as they were).
const (
	MetricHintRate     Metric = "hint_rate"     // share of the trajectories the PRM judged that it gave a bridge thought
	MetricPRMJudged    Metric = "prm_judged"    // trajectories with at least one well-formed PRM reply
	MetricPRMMalformed Metric = "prm_malformed" // PRM replies that could not be read (no usable \boxed{}, a step without a verdict)
	MetricPRMUnjudged  Metric = "prm_unjudged"  // trajectories the PRM could not judge (endpoint down past its retries, too long)
	// prm_agreement: how often the PRM's verdicts agree with what the environment knows — of the
	// final step, with the verifier's outcome; of every judged step, with the step's checked result
	// (retool.CheckedSteps: its tool run failed or printed another value, it was malformed).
	MetricPRMAgreementFinal Metric = "prm_agreement_final"
	MetricPRMAgreementSteps Metric = "prm_agreement_steps"
)

// The train phase's metrics (the reference phase's switch included); the update's figures are
// those of its first epoch.
const (
	MetricSwitchToTrainSeconds Metric = "switch_to_train_s"  // seconds switching the device from rollout to training
	MetricLR                   Metric = "lr"                 // the step's learning rate
	MetricProximalSeconds      Metric = "proximal_s"         // seconds of the proximal log-probs' forward pass (partial rollouts)
	MetricLoss                 Metric = "loss"               // policy loss of the step's last epoch
	MetricLogProbDiffMean      Metric = "logprob_diff_mean"  // mean |trainer − rollout log-prob| before the update
	MetricLogProbDiffMax       Metric = "logprob_diff_max"   // max |trainer − rollout log-prob| before the update
	MetricClipFrac             Metric = "clip_frac"          // share of policy tokens whose ratio was clipped
	MetricGradNorm             Metric = "grad_norm"          // gradient norm of the update
	MetricEntropy              Metric = "entropy"            // mean entropy of the policy's next-token distribution
	MetricRefKL                Metric = "ref_kl"             // mean KL estimate to the reference model
	MetricUpdates              Metric = "updates"            // AdamW updates applied
	MetricValueLoss            Metric = "value_loss"         // mean ½(V − R)² of the value head (ppo)
	MetricExplainedVariance    Metric = "explained_variance" // 1 − Var(R − V) ÷ Var(R) of the value head (ppo)
)

// Supervised fine-tuning's metrics (sft --data), beside loss (the step's mean NLL of the trained
// tokens, before its update), lr and tokens_per_s (the tokens a step's passes read per second).
const (
	MetricEvalLoss      Metric = "eval_loss"      // mean NLL of the held-out conversations' trained tokens
	MetricTrainedTokens Metric = "trained_tokens" // tokens under the loss mask in the step
	MetricETASeconds    Metric = "eta_s"          // seconds left in the run at the pace so far
)

// The sync phase's metrics.
const (
	MetricSyncDiffMax            Metric = "sync_diff_max"       // max difference of the synced inference weights from the master's
	MetricSwitchToRolloutSeconds Metric = "switch_to_rollout_s" // seconds switching the device back to rollout (the sync)
)

// Remote rollout engines' metrics (rollout.engines).
const (
	MetricEngineProbeDiffMax Metric = "engine_probe_diff_max" // max |engine − trainer| log-prob of the probe after the step's weight push
	MetricEngineFailovers    Metric = "engine_failovers"      // requests moved to another engine after one failed or stalled, in the step
	MetricEnginesDown        Metric = "engines_down"          // engines out of the rotation after the step's weight push
	MetricEngineSyncSeconds  Metric = "engine_sync_s"         // seconds writing the weights and reloading and probing the engines
)

// Partial rollouts' metrics (rollout.partial).
const (
	MetricPaused        Metric = "paused"         // trajectories paused at the rollout's end
	MetricResumed       Metric = "resumed"        // trajectories resumed in the rollout
	MetricStaleDropped  Metric = "stale_dropped"  // samples dropped as more than max_staleness updates old
	MetricStalenessMean Metric = "staleness_mean" // mean updates between a trained sample's oldest tokens and the trained weights
)

// The compile budget's metrics.
const (
	MetricCompiles            Metric = "compiles"        // programs compiled so far in the run
	MetricCompilesNew         Metric = "compiles_new"    // programs compiled since the previous step's metrics
	MetricCompileSeconds      Metric = "compile_s"       // seconds compiling since the previous step's metrics
	MetricCompileTotalSeconds Metric = "compile_total_s" // seconds compiling so far in the run
)

// An external agent's dropped trajectories (none for a ReTool run).
const (
	MetricDropped Metric = "dropped" // trajectories dropped as unusable, for any reason
)

// MetricDroppedFor names the count of an external agent's trajectories dropped for reason
// (crashed, timeout, no_result, bad_result, no_requests, not_started, cancelled): dropped_REASON.
func MetricDroppedFor(reason string) Metric { return MetricDropped + "_" + Metric(reason) }
