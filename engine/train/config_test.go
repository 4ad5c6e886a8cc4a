package train

import "testing"

// TestRunLogitsChunk: a recipe run's chunk projects at least 256 tokens (rows × positions) in a
// multiple of 32 positions, keeps 32 from 8 to 32 rows (the runs' chunk before the rule), and never
// passes the ledger's bound of DefaultLogitChunkTokens tokens.
func TestRunLogitsChunk(t *testing.T) {
	for _, tt := range []struct{ rows, want int }{
		{0, 32}, {1, 256}, {2, 128}, {3, 96}, {4, 64}, {5, 64}, {7, 64}, {8, 32}, {16, 32}, {32, 32}, {33, 31}, {64, 16}, {1024, 1},
	} {
		got := RunLogitsChunk(tt.rows)
		if got != tt.want {
			t.Errorf("RunLogitsChunk(%d) = %d, want %d", tt.rows, got, tt.want)
		}
		if rows := max(tt.rows, 1); got*rows > DefaultLogitChunkTokens || (tt.rows > 0 && got*rows < 256) {
			t.Errorf("RunLogitsChunk(%d) = %d: %d tokens a chunk", tt.rows, got, got*rows)
		}
	}
}
