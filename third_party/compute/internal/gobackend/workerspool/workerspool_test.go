package workerspool

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gomlx/compute/support/testutil"
	"github.com/gomlx/compute/support/xsync"
)

func TestPool_Saturate(t *testing.T) {
	// Test saturation.
	pool := New()
	wantTasks := 5
	pool.SetMaxParallelism(wantTasks)

	var count atomic.Int32
	doneNewTasks := xsync.NewLatch()
	doneTest := xsync.NewLatch()

	go func() {
		pool.Saturate(func() {
			got := count.Add(1)
			runtime.Gosched()
			if int(got) == wantTasks {
				doneNewTasks.Trigger()
				return
			}
			doneNewTasks.Wait()
		})
		doneTest.Trigger()
	}()

	select {
	case <-doneTest.WaitChan():
		// Success
	case <-time.After(100 * time.Millisecond):
		t.Fatal("Timeout before all tasks were executed.")
	}
	if int(count.Load()) != wantTasks {
		t.Fatalf("Expected %d tasks, got %d", wantTasks, count.Load())
	}

	// Test No Parallelism
	pool.SetMaxParallelism(0)
	count.Store(0)
	pool.Saturate(func() { count.Add(1) })
	if ok, diff := testutil.IsEqual(int32(1), count.Load()); !ok {
		t.Errorf("Pool with parallelism 0 result mismatch:\n%s", diff)
	}

	// Test Unlimited
	pool.SetMaxParallelism(-1)
	count.Store(0)
	var started atomic.Int32
	pool.Saturate(func() {
		started.Add(1)
		runtime.Gosched()
		count.Add(1)
	})
	if runtime.GOMAXPROCS(0) > 1 && started.Load() <= 1 {
		t.Errorf("Expected more than 1 started task for unlimited parallelism, got %d", started.Load())
	}
	if count.Load() != started.Load() {
		t.Errorf("Expected count %d to match started %d", count.Load(), started.Load())
	}
}

// TestPool_SaturateFromFullPool: workers that call Saturate while every worker is taken (the
// parallel executor's node tasks each running a matrix product) finish. Before agentrl patch 21
// each waited for a free worker with its own held, and none came.
func TestPool_SaturateFromFullPool(t *testing.T) {
	for _, workers := range []int{1, 2, 4} {
		pool := New()
		pool.SetMaxParallelism(workers)
		var inside sync.WaitGroup
		inside.Add(workers)
		var ran atomic.Int32
		done := make(chan struct{})
		go func() {
			var wg sync.WaitGroup
			for range workers {
				wg.Add(1)
				pool.WaitToStart(func() {
					defer wg.Done()
					inside.Done()
					inside.Wait() // every worker is now taken by one of these
					pool.Saturate(func() { ran.Add(1) })
				})
			}
			wg.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(time.Minute): // a hang, not a slow machine: the work is a few atomic adds
			t.Fatalf("%d workers, each calling Saturate with the pool full: still waiting after a minute", workers)
		}
		if got := ran.Load(); got < int32(workers) {
			t.Errorf("%d workers: the task ran %d times; want at least once per Saturate", workers, got)
		}
	}
}
