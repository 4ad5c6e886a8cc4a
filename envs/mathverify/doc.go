// Package mathverify decides whether a model's answer to a competition math problem (AIME, MATH,
// DAPO-Math) equals the reference answer. It is pure Go on the standard library.
//
// # Extraction
//
// Extract reads the final answer out of a whole response. Precedence, first match wins:
//
//  1. the last \boxed{…} or \fbox{…} (nested braces matched), or \boxed X without braces (X runs to
//     the next space or $): a box is the most explicit answer a response can give;
//  2. else the last line that starts with "Answer:" (DAPO's prompt asks for "Answer: $Answer" as the
//     last line; bold ** and $ around the answer are stripped);
//  3. else the last <answer>…</answer>.
//
// An answer that normalises to nothing (\boxed{}, "Answer: $$") is no answer.
//
// # Equality
//
// Equal compares two extracted answers after Normalize has removed the LaTeX that does not change
// a value (see Normalize). Then, in order:
//
//   - equal normalised text, compared case-insensitively, is equal ("Monday", "(C)" and "c");
//   - "∪" of pieces: as many pieces on both sides, each equal in order;
//   - \{a, b\}: sets, order-insensitive, as multisets (every element matched once);
//   - (a, b), [a, b), (-\infty, 2]: tuples and intervals, element by element in order, and the
//     opening and closing bracket kinds must agree: (1, 3) ≠ [1, 3) ≠ [1, 3];
//   - a, b without brackets: a list of answers ("all solutions"), order-insensitive like a set, and
//     of the same length, so \boxed{3, 7} is not 7; a ± b stands for the list a+b, a−b;
//   - equations: y = 2x+1 against y = 1+2x compares the right sides when the left sides are the
//     same; x = 5 against 5 compares 5, when the left side is one variable name (symmetric);
//   - anything else is evaluated as an expression: + − × ÷ ^, parentheses, implicit multiplication
//     (2\sqrt{3}, 3\pi, 2(x+1)), \sqrt and nth roots, \pi, e (Euler's number), n!, sin, cos, tan,
//     ln, log, exp. Rational values on both sides compare exactly (0.5 = \frac12, 0.333 ≠ \frac13,
//     033 = 33); where either side is irrational they compare to a relative tolerance of 1e-9
//     (0.7071067811865476 = \frac{\sqrt2}{2}, 0.7071 ≠ it). Expressions with variables compare by
//     their values at six fixed pseudo-random points (x+1 = 1+x, 2(x+1) = 2x+2).
//   - what does not parse is compared as text only.
//
// Equal is symmetric. Options.LastNumberFallback (off by default) adds one asymmetric rule: a
// prediction that is not equal but contains a number counts when its last number equals a numeric
// truth ("The answer is 42." against 42); Check then also takes the response's last number when
// nothing else extracts.
//
// Inputs longer than MaxLen bytes, nesting deeper than maxDepth, and powers too large to compute
// are compared as text, and one Equal makes at most maxCompares element comparisons (past them the
// answers are unequal), so no input makes the verifier loop, recurse or search without bound.
package mathverify
