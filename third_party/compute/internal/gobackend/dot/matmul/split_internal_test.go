// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package matmul

import "testing"

// TestFeedWorkItemsSplitsSmallProducts (agentrl patch 18): a product whose split dimension is
// under two panels is still split among the workers, in multiples of the kernel's rows or
// columns; the parts tile the output exactly once.
func TestFeedWorkItemsSplitsSmallProducts(t *testing.T) {
	params := CacheParams{LHSL1KernelRows: 4, RHSL1KernelCols: 16, PanelContractingSize: 128, LHSPanelCrossSize: 24, RHSPanelCrossSize: 512}
	for _, tc := range []struct {
		batch, lhs, rhs, workers int
		wantItems                int
	}{
		{1, 128, 256, 2, 2},  // a weight gradient [128, B·T] × [B·T, 256]: was one item
		{1, 128, 128, 2, 2},  // equal sizes split the RHS: was one item
		{1, 64, 392, 2, 2},   // the log-prob head's gradient
		{1, 512, 512, 2, 2},  // the square peak product: was one item
		{1, 512, 512, 4, 4},  //
		{1, 2048, 128, 2, 3}, // a projection: the LHS in parts of 1,008 = 42 panels of 24 (as before)
		{1, 40, 16, 2, 2},    // LHS parts of 20 rows (multiples of 4)
		{1, 16, 8, 4, 4},     // LHS parts of one kernel's 4 rows
		{1, 8, 16, 4, 1},     // 16 columns are one kernel's: not split
		{1, 1536, 1024, 2, 2},
		{3, 100, 200, 2, 4}, // two whole batch items, the third split in two
		{8, 100, 200, 2, 2}, // batches only
	} {
		ch := make(chan workItem, 10000)
		feedWorkItems(tc.batch, tc.lhs, tc.rhs, &params, tc.workers, ch)
		covered := make([]int, tc.batch*tc.lhs*tc.rhs)
		items := 0
		for it := range ch {
			items++
			for b := it.batchStart; b < it.batchEnd; b++ {
				for r := it.lhsRowStart; r < it.lhsRowEnd; r++ {
					for c := it.rhsColStart; c < it.rhsColEnd; c++ {
						covered[(b*tc.lhs+r)*tc.rhs+c]++
					}
				}
			}
		}
		for i, n := range covered {
			if n != 1 {
				t.Fatalf("batch %d, %d × %d, %d workers: output element %d covered %d times", tc.batch, tc.lhs, tc.rhs, tc.workers, i, n)
			}
		}
		if items != tc.wantItems {
			t.Errorf("batch %d, %d × %d, %d workers: %d work items; want %d", tc.batch, tc.lhs, tc.rhs, tc.workers, items, tc.wantItems)
		}
	}
}
