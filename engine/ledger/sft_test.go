package ledger

import "testing"

// TestSFT: plan --sft's rows for Qwen3-4B at 16K tokens in bf16 are the RL ledger's train phase
// with nothing else held: a full fine-tune fits 96 GiB only with gradient checkpointing, LoRA
// r64 with checkpointing fits 24 GiB, and with 8-bit moments a checkpointed full fine-tune fits
// 48 GiB at one conversation a pass.
func TestSFT(t *testing.T) {
	sh, err := KnownShape("qwen3-4b")
	if err != nil {
		t.Fatal(err)
	}
	gib := int64(1) << 30
	budgets := []int64{96 * gib, 48 * gib, 24 * gib}
	fits := func(bits int) map[string][]int {
		rows, err := SFT(sh, Settings{ComputeBytes: 2, SeqLen: 16384, OptimizerBits: bits}, budgets, 64, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(rows) != 12 {
			t.Fatalf("%d rows; want 2 modes × 2 × 3 budgets", len(rows))
		}
		out := map[string][]int{}
		for _, r := range rows {
			out[r.Mode] = append(out[r.Mode], r.MicroBatch)
			st := Settings{ComputeBytes: 2, SeqLen: 16384, OptimizerBits: bits, Offload: OffloadDevice, MaxKVSlots: 1, MaxMicroBatch: 1}
			if r.Mode == "lora r64" || r.Mode == "lora r64 + checkpointing" {
				st.LoRARank = 64
			}
			st.GradientCheckpointing = r.Mode == "full + checkpointing" || r.Mode == "lora r64 + checkpointing"
			if want := newSizer(sh, st).train(max(r.MicroBatch, 1)).Bytes; r.Bytes != want {
				t.Errorf("%s on %d GiB: %d bytes; the RL ledger's train phase holds %d", r.Mode, r.Budget/gib, r.Bytes, want)
			}
		}
		return out
	}
	got := fits(32)
	t.Logf("float32 moments, micro-batches on 96/48/24 GiB: %v", got)
	if got["full"][0] != 0 || got["full + checkpointing"][0] == 0 || got["lora r64 + checkpointing"][2] == 0 {
		t.Errorf("float32 moments: %v", got)
	}
	if got = fits(8); got["full + checkpointing"][1] != 1 {
		t.Errorf("8-bit moments: %v", got)
	}
}
