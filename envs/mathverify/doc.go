// Package mathverify decides whether a model's answer to a competition math problem (AIME, MATH,
// DAPO-Math) equals the reference answer. It is pure Go on the standard library.
//
// # Extraction
//
// Extract reads the final answer out of a whole response. Precedence, first match wins:
//
//  1. the last \boxed{…} or \fbox{…} (nested braces matched), or \boxed X without braces (X runs to
//     the next space or $): a box is the most explicit answer a response can give — unless a
//     "Final Answer:" or "the final answer is" comes after it;
//  2. else the last "Final Answer: …" or "the final answer is …" (Minerva's "Final Answer: The final
//     answer is $100$. I hope it is correct.", and prose: what follows the last " is " up to the end
//     of its sentence, else the last $…$, else the sentence's one number);
//  3. else the last line that starts with "Answer:" (DAPO's prompt asks for "Answer: $Answer" as the
//     last line; bold ** and $ around the answer are stripped);
//  4. else the last <answer>…</answer>.
//
// Check reads several boxes in a row (\boxed{1}, \boxed{2} and \boxed{3}: only spaces, $, commas,
// semicolons, "and", "or" or a short \text{… and …} between them) as one answer when the truth has
// as many elements: a set, a tuple in order, or a list. An answer that normalises to nothing
// (\boxed{}, "Answer: $$") is no answer.
//
// # Equality
//
// Equal compares two extracted answers after Normalize has removed the LaTeX that does not change
// a value (see Normalize). Then, in order:
//
//   - equal normalised text, compared case-insensitively, is equal ("Monday", "(C)" and "c");
//   - an inequality in one variable is the interval it describes (x ≥ 5, 5 ≤ x, x >= 5 and [5, ∞)
//     are one answer; -2 ≤ x < 7 is [-2, 7)), and x ∈ S is S; "A ≈ 0.577" is A when A is a value,
//     the value after ≈ when A is a name or nothing;
//   - "∪" of pieces: as many pieces on both sides, each equal in order;
//   - \{a, b\}: sets, order-insensitive, each element named once however often written; a set
//     and a list of the same elements are equal (\{3, 7\} and "3, 7"), and {2, 3} in bare braces is a set;
//   - (a, b), [a, b), (-\infty, 2]: tuples and intervals, element by element in order, and the
//     opening and closing bracket kinds must agree: (1, 3) ≠ [1, 3) ≠ [1, 3];
//   - a, b without brackets (or "and", "or", ";"): a list of answers ("all solutions"),
//     order-insensitive, as a multiset of the same length (1, 1, 2 is not 1, 2, 2), so \boxed{3, 7}
//     is not 7; a ± b stands for the list a+b, a−b;
//   - matrices (pmatrix, bmatrix, Bmatrix, matrix, array) row by row and cell by cell; vmatrix, a
//     determinant, is not a matrix;
//   - equations: y = 2x+1 against y = 1+2x compares the right sides when the left sides are the
//     same, and two equations that differ by a constant factor are equal (2x+4y-3 = 0 and
//     y = -x/2+3/4); a labelled answer compares its value: x = 5, f(x) = 5, |AB| = 5, a_(10) = 5,
//     (p, q) = (3, 2), a+b = 5, V_1:V_2 = 11:21 against the bare value (symmetric); a chain
//     x = 5+6 = 11 is its last side;
//   - anything else is evaluated as an expression: + − × ÷ ^, parentheses, implicit multiplication
//     (2\sqrt{3}, 3\pi, 2(x+1)), \sqrt and nth roots, \pi, e (Euler's number), n!, sin, cos, tan,
//     ln, log, exp, a whole power of a function (\sec^2 y; sin^{-1} stays text: it may mean arcsin).
//     A whole number before a proper fraction of whole numbers is a mixed number (2\frac14 and 7 3/4
//     are 9/4 and 31/4, never products); digits on both sides of a space are not one number (7 3 is
//     not 73) unless the whole answer is thousands grouped by spaces (1 000 000). Rational values on both sides compare exactly (0.5 = \frac12, 0.333 ≠ \frac13,
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
