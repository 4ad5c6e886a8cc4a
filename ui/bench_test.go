package ui

import (
	"testing"

	"agentrl/engine/event"
)

// run10k is sampleRun with 10,000 trajectories (100 steps of 100).
func run10k() []event.Event {
	evs := sampleRun()
	for step := 1; step <= 100; step++ {
		for i := 0; i < 100; i++ {
			evs = append(evs, trajectory(step, i))
		}
	}
	return evs
}

// BenchmarkRender10k draws the whole screen (120×40) with 10,000 trajectories loaded: the list
// (only the rows on screen are formatted), the list sorted and filtered, and the detail of one
// trajectory (cached, and rendered afresh for a different trajectory every frame).
func BenchmarkRender10k(b *testing.B) {
	evs := run10k()
	setup := func(b *testing.B, keys ...string) *model {
		m := newModel(config{initial: evs, ctrl: &fakeCtrl{}, memSample: func() uint64 { return 1 }})
		m.resize(120, 40)
		press(m, keys...)
		m.View()
		b.ReportAllocs()
		b.ResetTimer()
		return m
	}
	b.Run("list", func(b *testing.B) {
		m := setup(b, "3")
		for range b.N {
			_ = m.View()
		}
	})
	b.Run("list_sorted_filtered", func(b *testing.B) {
		m := setup(b, "3", "s", "/", "w", "r", "o", "n", "g", "enter", "f")
		for range b.N {
			_ = m.View()
		}
	})
	b.Run("detail", func(b *testing.B) {
		m := setup(b, "3", "enter")
		for range b.N {
			_ = m.View()
		}
	})
	b.Run("detail_uncached", func(b *testing.B) {
		m := setup(b, "3", "enter")
		n := len(m.sh.data.trajs)
		for i := range b.N {
			m.detail.open(i % n)
			_ = m.View()
		}
	})
	b.Run("tokens_uncached", func(b *testing.B) {
		m := setup(b, "3", "enter")
		n := len(m.sh.data.trajs)
		for i := range b.N {
			m.detail.open(i % n)
			m.detail.tokens = true
			_ = m.View()
		}
	})
	// what a new batch costs when the list is sorted by reward: the order of all 10,000 rebuilt
	b.Run("resort", func(b *testing.B) {
		m := setup(b, "3", "s")
		p := trajPaneOf(m)
		for range b.N {
			p.dirty = true
			p.refresh()
			_ = m.View()
		}
	})
}

func TestList10k(t *testing.T) {
	m := newModel(config{initial: run10k(), ctrl: &fakeCtrl{}, memSample: func() uint64 { return 1 }})
	m.resize(120, 40)
	press(m, "3")
	v := screen(t, m, 120, 40)
	if p := trajPaneOf(m); len(p.view) != 10028 || p.selected() != 10027 { // 24 + 4 evaluation trajectories of sampleRun
		t.Fatalf("list of %d, selected %d\n%s", len(p.view), p.selected(), v)
	}
}
