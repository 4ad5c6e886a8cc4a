package cli

import (
	"os"
	"syscall"
	"testing"
)

// TestStopperAfterTheEnd: a run's signals against the moment it ends. A second signal before the
// end aborts (endOrAbort says so, and abort runs once); a signal taken after the end changes
// nothing: no abort (which closes the store the caller is closing: the double close panicked) and
// no stop, and the exit status stays the first signal's, or 0 without one.
func TestStopperAfterTheEnd(t *testing.T) {
	for _, tc := range []struct {
		name          string
		before, after []os.Signal // taken before and after the run's end
		aborts, stops int
		wantAbort     bool
		status        int // the exit status without an abort
	}{
		{"two before the end abort", []os.Signal{syscall.SIGHUP, syscall.SIGINT}, nil, 1, 1, true, 0},
		{"the second after the end is ignored", []os.Signal{syscall.SIGHUP}, []os.Signal{syscall.SIGINT}, 0, 1, false, 129},
		{"Ctrl-C then nothing", []os.Signal{syscall.SIGINT}, nil, 0, 1, false, 0},
		{"any signal after a plain end is ignored", nil, []os.Signal{syscall.SIGTERM, syscall.SIGINT}, 0, 0, false, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stops, aborts := make(chan string, 4), make(chan string, 4)
			st := &stopper{sigs: make(chan os.Signal), aborted: make(chan int, 1),
				stop:  func(r string) { stops <- r },
				abort: func(r string) string { aborts <- r; return "aborted" }}
			watched := make(chan struct{})
			go func() { st.watch(); close(watched) }()
			for _, s := range tc.before {
				st.sigs <- s
			}
			if len(tc.before) > 1 { // the abort is under way: wait for its status, as run does
				<-st.aborted
			}
			if got := st.endOrAbort(); got != tc.wantAbort {
				t.Fatalf("endOrAbort = %v; want %v", got, tc.wantAbort)
			}
			for _, s := range tc.after {
				st.sigs <- s // taken (the channel is unbuffered), then ignored
			}
			close(st.sigs)
			<-watched
			if len(aborts) != tc.aborts {
				t.Errorf("%d aborts; want %d", len(aborts), tc.aborts)
			}
			for range tc.stops { // stop runs on a goroutine of its own
				<-stops
			}
			if len(stops) != 0 {
				t.Errorf("%d more stops than %d", len(stops), tc.stops)
			}
			if !tc.wantAbort {
				if got := st.status(); got != tc.status {
					t.Errorf("exit status %d; want %d", got, tc.status)
				}
			}
		})
	}
}
