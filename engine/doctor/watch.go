package doctor

import (
	"errors"
	"os/exec"
	"time"

	"agentrl/engine/device"
)

// Peak is what NVML showed of GPU 0 while a command ran: used memory before it started (other
// processes, the driver) and at its highest, sampled every Every. Available is false on a
// machine without a GPU (Reason says why); the command runs all the same.
type Peak struct {
	Available bool    `json:"available"`
	Reason    string  `json:"reason,omitempty"`
	Baseline  uint64  `json:"baseline_used_bytes"`
	PeakUsed  uint64  `json:"peak_used_bytes"`
	Total     uint64  `json:"total_bytes"`
	Samples   int     `json:"samples"`
	EverySecs float64 `json:"every_s"`
	ExitCode  int     `json:"exit_code"`
	Wall      float64 `json:"wall_s"`
}

// Reader is one NVML sample; device.Monitor has it.
type Reader interface {
	Read() (device.Reading, bool)
	Available() (bool, string)
}

// Watch runs cmd to its end while sampling r every every, and returns the peak and cmd's
// error (an *exec.ExitError when it exited non-zero).
func Watch(cmd *exec.Cmd, r Reader, every time.Duration) (Peak, error) {
	p := Peak{EverySecs: every.Seconds()}
	p.Available, p.Reason = r.Available()
	sample := func() {
		if rd, ok := r.Read(); ok {
			p.Samples++
			p.PeakUsed, p.Total = max(p.PeakUsed, rd.UsedBytes), rd.TotalBytes
		}
	}
	if rd, ok := r.Read(); ok {
		p.Baseline = rd.UsedBytes
	}
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return p, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	tick := time.NewTicker(every)
	defer tick.Stop()
	var err error
loop:
	for {
		select {
		case err = <-done:
			break loop
		case <-tick.C:
			sample()
		}
	}
	sample()
	p.Wall = time.Since(t0).Seconds()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		p.ExitCode = ee.ExitCode()
	} else if err != nil {
		p.ExitCode = -1
	}
	return p, err
}
