package mathverify

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// pathological are inputs built to be slow or deep: nesting, \frac chains, towers of powers, huge
// factorials, long lists and sets, unclosed boxes. Each is a (response, truth) pair. They are kept
// near 1 KB (MaxLen; the bounds they test are maxDepth 48 and MaxLen 1024 bytes): the fuzzer minimises every new interesting input, up to -fuzzminimizetime (60 s by
// default), and with seeds of 4 to 90 KB minimising took most of a 60 s run.
func pathological() [][2]string {
	rep := strings.Repeat
	list := func(n int, sep string) string {
		parts := make([]string, n)
		for i := range parts {
			parts[i] = itoa(i + 1)
		}
		return strings.Join(parts, sep)
	}
	return [][2]string{
		{`\boxed{` + rep("{", 300) + "1" + rep("}", 300) + `}`, "1"},
		{`\boxed{` + rep("{", 400) + "1", "1"}, // never closes
		{rep(`\boxed{`, 100) + "1", "1"},
		{`\boxed{` + rep(`\frac{1}{`, 60) + "2" + rep("}", 60) + `}`, "0"},
		{`\boxed{` + rep(`\frac{`, 40) + "1" + rep("}{2}", 40) + `}`, `2^{-40}`},
		{`\boxed{` + rep(`\frac{`, 47) + "1" + rep("}{2}", 47) + `}`, rep(`\frac{`, 47) + "1" + rep("}{2}", 47)},
		{`\boxed{10^{10^{10}}}`, `10^{10^{10}}`},
		{`\boxed{10^{10^{10}}}`, "1"},
		{`\boxed{2^{2^{2^{2^{2^{2}}}}}}`, `2^{65536}`},
		{`\boxed{9^{9^{9^{9}}}}`, `9^{9^{9^{9}}}`},
		{`\boxed{(-1)^{10^{18}}}`, "1"},
		{`\boxed{` + rep("9", 40) + `!}`, rep("9", 40) + "!"},
		{`\boxed{99999!}`, "1"},
		{`\boxed{((10!)!)!}`, "0"},
		{`\boxed{10^{-10^{10}}}`, "0"},
		{`\boxed{1e999999999}`, "1e999999999"},
		{`\boxed{0.` + rep("0", 1100) + `1}`, "0"},
		{`\boxed{` + list(250, ", ") + `}`, list(250, ",")},
		{`\boxed{\{` + list(150, ", ") + `\}}`, `\{` + list(150, ",") + `\}`},
		{`\boxed{` + rep("(1, 2), ", 70) + `(1, 3)}`, `(1, 3), ` + rep("(1, 2), ", 70)[:len(rep("(1, 2), ", 70))-2]},
		{`\boxed{` + rep("x+", 300) + "x}", "301x"},
		{`\boxed{` + rep(`\sqrt{`, 45) + "2" + rep("}", 45) + `}`, "1"},
		{`\boxed{` + rep(`\sqrt`, 100) + "2}", "1"},
		{`\boxed{` + rep("(", 47) + "1" + rep(")", 47) + `}`, "1"},
		{`\boxed{` + rep("-", 600) + "1}", "1"},
		{`\boxed{` + rep("2^", 100) + "2}", "4"},
		{`\boxed{\sin(\sin(\sin(` + rep(`\sin(`, 40) + "x" + rep(")", 43) + `}`, `\sin(x)`},
		{`\boxed{x = y = z = ` + rep("w = ", 80) + "1}", "1"},
		{`\boxed{(-\infty, 2] \cup ` + rep(`(3, 4) \cup `, 60) + `(5, \infty)}`, `(-\infty,2]`},
		{"Answer: " + rep("1 \\pm ", 60) + "1", "1"},
		{rep("The answer is 42. ", 40) + `\boxed{42}`, "42"},
		{rep("\n", 600) + "Answer: 7", "7"},
		{rep("<answer>", 60) + "7" + rep("</answer>", 60), "7"},
		{`\boxed{\binom{10^{9}}{10^{8}}}`, "1"},
		{`\boxed{\sqrt[10^{9}]{2}}`, "1"},
		{`\boxed{` + rep(`\left(`, 40) + "1" + rep(`\right)`, 40) + `}`, "1"},
	}
}

func itoa(i int) string {
	if i == 0 {
		return "0"
	}
	var b []byte
	for ; i > 0; i /= 10 {
		b = append([]byte{byte('0' + i%10)}, b...)
	}
	return string(b)
}

// FuzzCheckPathological feeds Check and Equal pathological answers and their mutations: Check
// must return (no panic, and within slowCheck, or a watchdog crashes the worker with the input), and Equal must be symmetric without the
// last-number fallback, on the raw strings and on the extracted answer. (FuzzCheck, in
// mathverify_test.go, fuzzes the ordinary answers.)
func FuzzCheckPathological(f *testing.F) {
	for _, p := range pathological() {
		f.Add(p[0], p[1])
	}
	f.Fuzz(func(t *testing.T, response, truth string) {
		// A hang would stall the fuzzer silently: past slowCheck, crash the worker with the input
		// (the fuzzer then reports it and keeps it under testdata/fuzz).
		watchdog := time.AfterFunc(slowCheck, func() {
			panic(fmt.Sprintf("Check has run over %v on response %.2000q (%d bytes), truth %.2000q", slowCheck, response, len(response), truth))
		})
		r := Check(response, truth, Options{})
		watchdog.Stop()
		if r.Correct && r.Extracted == "" {
			t.Fatalf("Check(%q, %q) is correct with nothing extracted", response, truth)
		}
		if ab, ba := Equal(response, truth, Options{}), Equal(truth, response, Options{}); ab != ba {
			t.Fatalf("Equal(%q, %q) = %v but swapped %v", response, truth, ab, ba)
		}
		if r.Extracted != "" {
			if ab, ba := Equal(r.Extracted, truth, Options{}), Equal(truth, r.Extracted, Options{}); ab != ba {
				t.Fatalf("Equal(%q, %q) = %v but swapped %v", r.Extracted, truth, ab, ba)
			}
		}
	})
}

// slowCheck is the time one Check may take before the fuzzer calls the input slow: far above the
// slowest pathological input (see BenchmarkCheckWorst), so that a loaded machine does not fail it.
const slowCheck = 5 * time.Second
