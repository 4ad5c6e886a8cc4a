package batch

// ExpandSegments appends, after scoring, each trajectory's later segments to the batch as
// sequences of their own with its reward: the reference forward, the advantages and the update
// treat them as any sequence, and advantages counts them once (with their trajectory) in the
// group's statistics. CollapseSegments undoes it.
func ExpandSegments(trajs []*Trajectory) []*Trajectory {
	out := trajs
	for _, t := range trajs {
		for _, s := range t.LaterSegments {
			s.Reward = t.Reward
			out = append(out, s)
		}
	}
	return out
}

// CollapseSegments drops the later segments ExpandSegments added (their trajectory keeps them,
// with their advantages, for its event).
func CollapseSegments(trajs []*Trajectory) []*Trajectory {
	out := trajs[:0:0]
	for _, t := range trajs {
		if !t.IsLaterSegment() {
			out = append(out, t)
		}
	}
	return out
}

// IsLaterSegment reports whether t is a later segment of a trajectory.
func (t *Trajectory) IsLaterSegment() bool { return t.SegmentOf != nil }
