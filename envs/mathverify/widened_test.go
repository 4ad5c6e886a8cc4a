package mathverify

import "testing"

// TestWidened holds the forms #45 found the verifier missing or misjudging, each with its wrong
// twin: the widening must never pass the twin.
func TestWidened(t *testing.T) {
	cases := []struct {
		name, response, truth string
		want                  bool
	}{
		// mixed numbers are numbers, not products
		{"mixed number", `$\boxed{2\frac{1}{4}}$`, `\frac94`, true},
		{"mixed number is not a product", `$\boxed{2\frac{1}{4}}$`, `\frac12`, false},
		{"mixed number, decimal truth", `\boxed{918\frac{1}{2}}`, `918.5`, true},
		{"mixed number, not 459", `\boxed{918\frac{1}{2}}`, `459`, false},
		{"mixed number with a space", `\boxed{3 \frac{2}{3}}`, `\frac{11}{3}`, true},
		{"negative mixed number", `\boxed{-1\tfrac{1}{2}}`, `-1.5`, true},
		{"a product with pi stays a product", `\boxed{2\frac{\pi}{3}}`, `\frac{2\pi}{3}`, true},
		// several boxes forming one answer
		{"three boxes as a set", `so $\boxed{1}, \boxed{2}, \boxed{3}$`, `\{1,2,3\}`, true},
		{"three boxes as a list", `The solutions are $\boxed{3}$ and $\boxed{-1}$.`, `-1, 3`, true},
		{"boxes missing one", `so $\boxed{1}, \boxed{2}$`, `\{1,2,3\}`, false},
		{"a scalar truth reads the last box", `first $\boxed{2}$, then $\boxed{5}$`, `5`, true},
		{"two boxes, a tuple truth", `$\boxed{3}$, $\boxed{2}$`, `(3,2)`, true},
		{"two boxes, a tuple truth in the other order", `$\boxed{2}$, $\boxed{3}$`, `(3,2)`, false},
		// labelled and chained answers
		{"labelled tuple", `\boxed{(p,q)=(3,2)}`, `(3,2)`, true},
		{"labelled tuple, wrong", `\boxed{(p,q)=(2,3)}`, `(3,2)`, false},
		{"function label", `\boxed{f(x)=1}`, `1`, true},
		{"length label", `\boxed{|AB|=1}`, `1`, true},
		{"chained", `\boxed{x = 5+6 = 11}`, `11`, true},
		{"chained, wrong", `\boxed{x = 5+6 = 12}`, `11`, false},
		{"subscript label", `\boxed{a_{10} = 55}`, `55`, true},
		// unit words
		{"digits", `\boxed{4 \text{ digits}}`, `4`, true},
		{"meals", `\boxed{12 meals}`, `12`, true},
		{"edges", `\boxed{30\text{ edges}}`, `30`, true},
		{"percent", `\boxed{25 percent}`, `25`, true},
		{"pct", `\boxed{25 pct}`, `25`, true},
		{"gm", `\boxed{500 gm}`, `500`, true},
		{"a unit word does not change the number", `\boxed{40 edges}`, `30`, false},
		// separators
		{"and", `\boxed{2 \text{ and } 5}`, `2, 5`, true},
		{"or", `\boxed{x=1 \text{ or } x=-2}`, `1,-2`, true},
		{"semicolon", `\boxed{1; 4}`, `4, 1`, true},
		{"and, wrong", `\boxed{2 \text{ and } 6}`, `2, 5`, false},
		// relations and intervals
		{">= and geq", `\boxed{x >= 5}`, `x \geq 5`, true},
		{"reversed relation", `\boxed{5 \leq x}`, `x \geq 5`, true},
		{"reversed relation, wrong", `\boxed{5 \geq x}`, `x \geq 5`, false},
		{"strict and not", `\boxed{x > 5}`, `x \geq 5`, false},
		{"membership", `\boxed{x \in [-2,7]}`, `[-2,7]`, true},
		{"relation as interval", `\boxed{x \ge 5}`, `[5, \infty)`, true},
		{"chain as interval", `\boxed{-2 \le x < 7}`, `[-2, 7)`, true},
		{"chain as interval, wrong bracket", `\boxed{-2 < x < 7}`, `[-2, 7)`, false},
		// approximately
		{"approx", `\boxed{x \approx 3.14}`, `3.14`, true},
		{"approx is not the exact value", `\boxed{\approx 3.14}`, `\pi`, false},
		// matrices
		{"bmatrix and pmatrix", `\boxed{\begin{bmatrix} 1 & 2 \\ 3 & 4 \end{bmatrix}}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}`, true},
		{"matrix by value", `\boxed{\begin{pmatrix} 0.5 & 2 \\ 3 & 4 \end{pmatrix}}`, `\begin{pmatrix}\frac12&2\\3&4\end{pmatrix}`, true},
		{"matrix, rows swapped", `\boxed{\begin{pmatrix} 3 & 4 \\ 1 & 2 \end{pmatrix}}`, `\begin{pmatrix}1&2\\3&4\end{pmatrix}`, false},
		// functions with powers
		{"sec squared", `\boxed{\sec^2 y}`, `\frac{1}{\cos^2 y}`, true},
		{"sec squared, wrong", `\boxed{\sec^2 y}`, `\frac{1}{\sin^2 y}`, false},
		// ordinals
		{"ordinal", `\boxed{5^{\mathrm{th}}}`, `5`, true},
		{"ordinal text", `\boxed{21st}`, `21`, true},
		{"ordinal, wrong", `\boxed{4^{\text{th}}}`, `5`, false},
		// thousands
		{"thin-space thousands then a space", `\boxed{32,\! 349}`, `32349`, true},
		{"a list stays a list", `\boxed{32, 349}`, `32349`, false},
		// prose final answers
		{"final answer is", "Final Answer: The final answer is $100$. I hope it is correct.", `100`, true},
		{"final answer is, plain", "so the final answer is 42.", `42`, true},
		{"final answer is, wrong", "Final Answer: The final answer is $101$. I hope it is correct.", `100`, false},
	}
	for _, c := range cases {
		got := Check(c.response, c.truth, Options{})
		if got.Correct != c.want {
			t.Errorf("%s: Check(%q, %q) = %v (extracted %q, normalized %q, truth %q); want %v",
				c.name, c.response, c.truth, got.Correct, got.Extracted, got.Normalized, Normalize(c.truth), c.want)
		}
		if c.want { // symmetric where both are plain answers
			continue
		}
	}
}
