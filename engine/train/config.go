package train

import (
	"fmt"
	"math"

	"agentrl/engine/compiles"
)

// DefaultLogitChunkTokens is the most tokens (micro-batch rows × positions) whose float32
// vocabulary logits exist at once when LogitsChunk is 0; the memory ledger assumes this bound.
const DefaultLogitChunkTokens = 1024

// RunLogitsChunk is the vocabulary-projection chunk a recipe run trains with for a micro-batch of
// rows: 32 positions, or more for a micro-batch under 8 rows, so that a chunk projects at least
// 256 tokens (rows × positions). Each chunk's three products with the vocabulary matrix (logits,
// the hidden states' gradient, the matrix's own gradient) read or write the whole [vocab, hidden]
// matrix, so below about 256 tokens a chunk costs the matrix's memory traffic more than its
// arithmetic: at Qwen3's 151,936 words one 512-token sequence in chunks of 32 streamed the
// 622 MB matrix 48 times. Micro-batches of 8 to 32 rows keep 32 (the runs' chunk before this
// rule, so their results are unchanged); above 32 rows the chunk shrinks so that it never holds
// more than DefaultLogitChunkTokens tokens' logits, the bound the memory ledger counts.
func RunLogitsChunk(rows int) int {
	const positions, tokens = 32, 256
	switch {
	case rows <= 0:
		return positions
	case rows*positions > DefaultLogitChunkTokens:
		return max(1, DefaultLogitChunkTokens/rows)
	case rows*positions >= tokens:
		return positions
	}
	n := (tokens + rows - 1) / rows
	return (n + positions - 1) / positions * positions
}

// Aggregations of per-token losses.
const (
	TokenMean = "token-mean" // Σ over every policy token of the update ÷ their count
	SeqMean   = "seq-mean"   // per sequence mean over its policy tokens, then the mean over sequences
)

// KL estimators of the per-token divergence from the reference model.
const (
	K1 = "k1" // logp − ref
	K3 = "k3" // exp(ref − logp) − (ref − logp) − 1: unbiased, never negative
)

// Config holds the policy-loss and optimizer settings (the controller maps the recipe onto it).
// A zero field means its default.
type Config struct {
	ClipLow, ClipHigh float64 // PPO ratio clip bounds: [1 − low, 1 + high] (default 0.2, 0.28)
	KLCoef            float64 // weight of the KL-to-reference loss term (0 = off; needs RefLogProbs)
	KLEstimator       string  // k1 | k3 (default k3)
	EntropyCoef       float64 // weight of the entropy bonus subtracted from the loss (0 = off)
	Aggregation       string  // token-mean | seq-mean (default token-mean)

	LR, WeightDecay float64 // AdamW (default lr 1e-5, wd 0); decay skips 1-D parameters (norms, biases)
	Beta1, Beta2    float64 // default 0.9, 0.999
	Eps             float64 // default 1e-8
	GradClip        float64 // global-norm clip (0 = off)
	// OptimizerBits is the AdamW moments' storage: 32 (float32) or 8 (block-wise 8-bit, see
	// optim8.go and MomentShape); 0 is 32.
	OptimizerBits int
	// Compiles counts the programs the trainer compiles (see compileKind); nil: not counted.
	Compiles *compiles.Counter

	// MicroBatch is the number of sequences per forward/backward pass in Update; every pass has
	// exactly this many rows (short ones are padded) so that one compiled graph per length bucket
	// serves all steps. 0 puts all of an update's sequences in one pass.
	MicroBatch int
	// GradAccumulation is the number of micro-batches whose gradients are summed into one AdamW
	// update in Update; 0 makes one update per Update call.
	GradAccumulation int
	// GradientCheckpointing keeps only each decoder layer's input (and each log-prob chunk's
	// hidden input) for the backward pass and recomputes the rest: less memory, more compute.
	GradientCheckpointing bool
	// LogitsChunk is the number of positions projected onto the vocabulary at once; 0 means
	// DefaultLogitChunkTokens ÷ rows, so a chunk never holds more than that many tokens' logits.
	LogitsChunk int
	// HeadPositions is where the loss projects hidden states onto the vocabulary: HeadAll at
	// every position of a micro-batch, HeadLoss only at the positions the loss reads (policy
	// tokens; see head.go), HeadAuto ("", the default) HeadLoss for vocabularies of at least
	// model.CompactHeadVocab words and HeadAll below.
	HeadPositions string
	// OnPolicy takes the old log-probs of the surrogate from the trained model itself (their
	// values, with no gradient) instead of the sequences' OldLogProbs: the ratio is exactly 1, and
	// with advantages 1 the loss's gradient is the log-likelihood's. It is supervised fine-tuning
	// through the policy loss without the log-probs pass an RL update needs first; the sequences'
	// OldLogProbs are then not read (zeros do). Metrics.NLL gives the loss before the update.
	OnPolicy bool

	// ValueCoef is the weight of the value (critic) loss ValueCoef·½(V − R)² in the total loss,
	// aggregated like the policy loss. 0 (the default) means no value head at all: the trainer's
	// graphs, inputs and parameters are exactly those of a policy-only trainer. With ValueCoef > 0
	// the trainer owns a linear value head on the final hidden state (see ValueShared) and every
	// sequence must bring Returns.
	ValueCoef float64
	// ValueClip is PPO's value clipping: the loss takes ½·max((V − R)², (V_clip − R)²) with V_clip
	// = OldValues + clip(V − OldValues, −ValueClip, ValueClip), so that one update cannot move the
	// critic far from the values the advantages were computed with. 0 = off; > 0 needs OldValues.
	// Read only when ValueCoef > 0, like ValueShared.
	ValueClip float64
	// ValueShared lets the value loss's gradient flow into the transformer trunk (standard PPO
	// with a shared backbone). The default, false, stops it at the final hidden state: the critic
	// is a linear probe on the policy's features and the value loss trains the head only, so a
	// small model's features are not pulled between two objectives and the policy update is the
	// same as without a critic, apart from the shared global-norm clip.
	ValueShared bool
	// ValueLRScale multiplies the learning rate of the value head's own parameters (0 means 1).
	// Adam moves every head weight by about lr per update whatever the gradient's size, so V moves
	// by about lr·Σ|h| per update: with a large hidden size or learning rate the critic jumps past
	// its targets and its noise swamps the advantages, with a tiny one it never catches up. The
	// trunk's learning rate is not affected (with ValueShared, the value loss moves it at lr).
	ValueLRScale float64
}

// fill replaces zero fields by their defaults and rejects values no default can repair.
func (c *Config) fill() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("train config: %s is %v; want %s", field, v, want)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"ClipLow", c.ClipLow}, {"ClipHigh", c.ClipHigh}, {"KLCoef", c.KLCoef}, {"EntropyCoef", c.EntropyCoef},
		{"LR", c.LR}, {"WeightDecay", c.WeightDecay}, {"Beta1", c.Beta1}, {"Beta2", c.Beta2}, {"Eps", c.Eps}, {"GradClip", c.GradClip},
		{"ValueCoef", c.ValueCoef}, {"ValueClip", c.ValueClip}, {"ValueLRScale", c.ValueLRScale}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			return bad(f.name, f.v, "a finite value ≥ 0 (0 picks the default)")
		}
	}
	if c.OptimizerBits != 0 && c.OptimizerBits != 32 && c.OptimizerBits != 8 {
		return bad("OptimizerBits", c.OptimizerBits, "32 or 8")
	}
	if c.ClipLow >= 1 {
		return bad("ClipLow", c.ClipLow, "a value below 1 (the ratio is clipped at 1 − ClipLow)")
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"WeightDecay", c.WeightDecay}, {"Beta1", c.Beta1}, {"Beta2", c.Beta2}} {
		if f.v >= 1 {
			return bad(f.name, f.v, "a value in [0, 1)")
		}
	}
	for _, f := range []struct {
		name string
		v    int
	}{{"MicroBatch", c.MicroBatch}, {"GradAccumulation", c.GradAccumulation}, {"LogitsChunk", c.LogitsChunk}} {
		if f.v < 0 {
			return bad(f.name, f.v, "a count ≥ 0 (0 picks the default)")
		}
	}
	switch c.HeadPositions {
	case HeadAuto, HeadAll, HeadLoss:
	default:
		return bad("HeadPositions", fmt.Sprintf("%q", c.HeadPositions), `"all", "loss" or "" (auto)`)
	}
	if c.ClipLow == 0 {
		c.ClipLow = 0.2
	}
	if c.ClipHigh == 0 {
		c.ClipHigh = 0.28
	}
	switch c.KLEstimator {
	case "":
		c.KLEstimator = K3
	case K1, K3:
	default:
		return bad("KLEstimator", fmt.Sprintf("%q", c.KLEstimator), "k1 or k3")
	}
	switch c.Aggregation {
	case "":
		c.Aggregation = TokenMean
	case TokenMean, SeqMean:
	default:
		return bad("Aggregation", fmt.Sprintf("%q", c.Aggregation), "token-mean or seq-mean")
	}
	if c.LR == 0 {
		c.LR = 1e-5
	}
	if c.Beta1 == 0 {
		c.Beta1 = 0.9
	}
	if c.Beta2 == 0 {
		c.Beta2 = 0.999
	}
	if c.Eps == 0 {
		c.Eps = 1e-8
	}
	if c.ValueLRScale == 0 {
		c.ValueLRScale = 1
	}
	return nil
}

// chunkFor is the number of positions per vocabulary-projection chunk for a batch of rows.
func (c *Config) chunkFor(rows int) int {
	if c.LogitsChunk > 0 {
		return c.LogitsChunk
	}
	return max(1, DefaultLogitChunkTokens/max(rows, 1))
}
