// Copyright 2023-2026 The GoMLX Authors. SPDX-License-Identifier: Apache-2.0

package vectorstate

// The XINUSE bits this package reads (Intel SDM vol. 1, 13.6): a state component whose bit is 0
// is in its initial configuration.
const (
	xinuseAVX      = 1 << 2 // upper 128 bits of YMM0-15
	xinuseZMMHi256 = 1 << 6 // upper 256 bits of ZMM0-15
)

// xgetbv1Supported reports whether XGETBV with ECX=1 (the XINUSE bitmap) is available:
// CPUID.(EAX=0DH,ECX=1):EAX[2], and OSXSAVE.
func xgetbv1Supported() bool

// xinuse returns XGETBV(ECX=1): the state components in use on this thread.
func xinuse() uint64

// dirtyUpper loads the 8 values at p into Y3, which leaves its upper half non-zero.
func dirtyUpper(p *[8]float32)

// UpperDirty reports whether this thread's vector registers have upper bits in use (AVX or
// AVX-512 state not in its initial configuration), as the CPU itself tracks it. ok is false on
// a CPU that cannot tell (no XGETBV with ECX=1). For tests: the answer is about the calling
// thread, so the caller should hold runtime.LockOSThread.
func UpperDirty() (dirty, ok bool) {
	if !xgetbv1Supported() {
		return false, false
	}
	return xinuse()&(xinuseAVX|xinuseZMMHi256) != 0, true
}

// MakeDirty leaves the upper half of a vector register non-zero, as 256-bit code does, where the
// CPU has AVX and XINUSE can be read (ok); for tests of Clear and of its callers.
func MakeDirty() (ok bool) {
	if !xgetbv1Supported() {
		return false
	}
	v := [8]float32{1, 2, 3, 4, 5, 6, 7, 8}
	dirtyUpper(&v)
	return true
}
