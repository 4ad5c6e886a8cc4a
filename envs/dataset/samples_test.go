package dataset

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/parquet-go/parquet-go"
)

// go test ./envs/dataset -run TestSampleFiles -update rewrites testdata/data from the problems
// below; without -update the test checks that the committed files are what it would write.
var update = flag.Bool("update", false, "rewrite the sample data files in testdata/data")

const sampleDir = "../../testdata/data"

// dapoProblems are DAPO-Math-17k-style problems (integer answers) written for the samples.
var dapoProblems = [][2]string{
	{`Let $x$ and $y$ be positive integers with $x+y=20$. Find the largest possible value of $xy$.`, "100"},
	{`How many positive divisors does $2^4 \cdot 3^2 \cdot 5$ have?`, "30"},
	{`Find the remainder when $3^{100}$ is divided by $7$.`, "4"},
	{`The sum of three consecutive odd integers is $111$. What is the largest of them?`, "39"},
	{`Find the number of ordered pairs $(a,b)$ of positive integers such that $a+b=15$.`, "14"},
	{`What is the smallest positive integer $n$ such that $n!$ ends in exactly $6$ zeros?`, "25"},
	{`A right triangle has legs of length $9$ and $12$. Find the length of its hypotenuse.`, "15"},
	{`Compute $\sum_{k=1}^{20} k^2$.`, "2870"},
	{`How many integers between $1$ and $100$ inclusive are divisible by $3$ or $5$?`, "47"},
	{`Let $f(x)=x^2-6x+13$. Find the minimum value of $f(x)$ over all real numbers $x$.`, "4"},
	{`In how many ways can $5$ distinct books be arranged on a shelf if two particular books must be next to each other?`, "48"},
	{`Find the greatest common divisor of $462$ and $1071$.`, "21"},
	{`The product of two positive integers is $144$ and their greatest common divisor is $4$. Find their sum.`, "40"},
	{`Find the number of positive integers $n \le 50$ such that $n^2+n$ is divisible by $6$.`, "33"},
	{`A circle has area $49\pi$. Its circumference is $k\pi$. Find $k$.`, "14"},
	{`Evaluate $\log_2 8 + \log_3 81$.`, "7"},
	{`How many diagonals does a convex decagon have?`, "35"},
	{`Find the sum of all positive integers $n$ such that $n^2 - 5n + 6 = 0$.`, "5"},
	{`What is the units digit of $7^{2024}$?`, "1"},
	{`If $a+b=7$ and $ab=10$, find $a^3+b^3$.`, "133"},
}

// slimeProblems are the problems of the slime-style JSONL sample.
var slimeProblems = [][2]string{
	{`Find the sum of the interior angles of a convex hexagon, in degrees.`, "720"},
	{`How many subsets of $\{1,2,3,4,5,6\}$ contain the element $1$?`, "32"},
	{`Find the least common multiple of $18$ and $24$.`, "72"},
	{`The arithmetic sequence $3, 7, 11, \ldots$ has $n$th term $199$. Find $n$.`, "50"},
	{`Compute $\binom{10}{3}$.`, "120"},
	{`Find the number of trailing zeros of $100!$.`, "24"},
	{`A rectangle has perimeter $30$ and area $56$. Find the length of its longer side.`, "8"},
	{`Find the positive integer $x$ such that $2^x = 1024$.`, "10"},
	{`What is the remainder when $2^{10}+3^{10}$ is divided by $5$?`, "3"},
	{`Find the sum of the digits of $2^{15}$.`, "26"},
	{`How many positive integers less than $1000$ are perfect cubes?`, "9"},
	{`Find the value of $x$ if $3x - 7 = 2x + 5$.`, "12"},
}

// aimeProblems are AIME-style problems (answers 0-999, with a worked solution).
var aimeProblems = []struct {
	problem, solution string
	answer            int64
}{
	{`Find the number of positive integers less than $1000$ that are divisible by $7$ but not by $11$.`, `There are $\lfloor 999/7 \rfloor = 142$ multiples of $7$ and $\lfloor 999/77 \rfloor = 12$ multiples of $77$, so the answer is $142-12=\boxed{130}$.`, 130},
	{`Let $N$ be the number of ways to write $2024$ as a sum $a+b$ of positive integers with $a \le b$. Find the remainder when $N$ is divided by $1000$.`, `Any $a$ from $1$ to $1012$ works, so $N=1012$ and the remainder is $\boxed{012}$.`, 12},
	{`The sides of a triangle have lengths $13$, $14$ and $15$. Find the area of the triangle.`, `By Heron's formula with $s=21$, the area is $\sqrt{21\cdot 8\cdot 7\cdot 6}=\boxed{084}$.`, 84},
	{`Find the remainder when $1+2+2^2+\cdots+2^{99}$ is divided by $1000$.`, `The sum is $2^{100}-1$, and $2^{100}\equiv 376 \pmod{1000}$, so the answer is $\boxed{375}$.`, 375},
	{`Find the number of ordered triples $(a,b,c)$ of positive integers such that $a+b+c=12$.`, `By stars and bars there are $\binom{11}{2}=\boxed{055}$ triples.`, 55},
	{`Find the largest prime factor of $9991$.`, `$9991 = 100^2 - 3^2 = 97 \cdot 103$, so the answer is $\boxed{103}$.`, 103},
	{`Each interior angle of a regular polygon measures $156^\circ$. Find the number of sides of the polygon.`, `Each exterior angle is $24^\circ$, so there are $360/24=\boxed{015}$ sides.`, 15},
	{`Find the number of positive divisors of $10!$ that are perfect squares.`, `$10! = 2^8 3^4 5^2 7$, so there are $5 \cdot 3 \cdot 2 \cdot 1 = \boxed{030}$ square divisors.`, 30},
	{`Let $x$ be a real number such that $x + \frac{1}{x} = 5$. Find $x^3 + \frac{1}{x^3}$.`, `$x^3+x^{-3} = 5^3 - 3\cdot 5 = \boxed{110}$.`, 110},
	{`Find the sum of all positive integers $n<100$ that leave remainder $1$ when divided by $3$ and remainder $2$ when divided by $5$.`, `Such $n$ are $7 \pmod{15}$: $7+22+\cdots+97 = \boxed{364}$.`, 364},
}

type aimeRow struct {
	ID       string `parquet:"ID"`
	Problem  string `parquet:"Problem"`
	Solution string `parquet:"Solution"`
	Answer   int64  `parquet:"Answer"`
}

type problemOnly struct {
	Problem string `parquet:"problem"`
}

type problemAnswer struct {
	Problem string `parquet:"problem"`
	Answer  string `parquet:"answer"`
}

// sampleFiles are the sample files by path below testdata/data, as bytes.
func sampleFiles(t *testing.T) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	pq := func(name string, rows any) {
		var b bytes.Buffer
		var err error
		switch rs := rows.(type) {
		case []VerlRow: // the schema named as when the file was first written
			err = parquet.Write(&b, rs, parquet.NewSchema("verlRow", parquet.SchemaOf(VerlRow{})))
		case []aimeRow:
			err = parquet.Write(&b, rs)
		case []problemOnly:
			err = parquet.Write(&b, rs)
		case []problemAnswer:
			err = parquet.Write(&b, rs)
		}
		if err != nil {
			t.Fatal(err)
		}
		out[name] = b.Bytes()
	}
	// verl's DAPO parquet: each problem twice over for the first two (the real file repeats
	// each problem about a hundred times).
	var verl []VerlRow
	for i, p := range dapoProblems {
		r := DAPORow(p[0], p[1], DAPOIndex(i))
		verl = append(verl, r)
		if i < 2 {
			verl = append(verl, r)
		}
	}
	pq("dapo-verl.parquet", verl)
	var jl bytes.Buffer
	for _, p := range slimeProblems {
		b, _ := json.Marshal(map[string]any{
			"prompt": []map[string]string{{"role": "user", "content": DAPOBefore + p[0] + DAPOAfter}},
			"label":  p[1],
		})
		jl.Write(append(b, '\n'))
	}
	out["dapo-slime.jsonl"] = jl.Bytes()
	var aime []aimeRow
	for i, p := range aimeProblems {
		half := "I"
		if i >= 5 {
			half = "II"
		}
		aime = append(aime, aimeRow{ID: fmt.Sprintf("sample-%s-%d", half, i%5+1), Problem: p.problem, Solution: p.solution, Answer: p.answer})
	}
	pq("aime2024/data/train-00000-of-00001.parquet", aime)
	// Bad files, one fault each.
	out["bad/empty.jsonl"] = []byte("\n\n")
	out["bad/no-answer.jsonl"] = []byte(`{"problem": "Compute $1+1$.", "answer": "2"}` + "\n" +
		`{"problem": "Compute $2+2$.", "answer": "4"}` + "\n" + `{"problem": "Compute $3+3$.", "solution": "It is 6."}` + "\n")
	out["bad/wrong-type.jsonl"] = []byte(`{"problem": "Compute $1+1$.", "answer": "2"}` + "\n" + `{"problem": "Compute $2+2$.", "answer": {"value": 4}}` + "\n")
	out["bad/no-user.jsonl"] = []byte(`{"prompt": [{"role": "system", "content": "You are a helpful assistant."}], "label": "2"}` + "\n")
	out["bad/not-json.jsonl"] = []byte(`{"problem": "Compute $1+1$.", "answer": "2"}` + "\n" + `problem: Compute 2+2` + "\n")
	pq("bad/empty.parquet", []problemAnswer{})
	pq("bad/no-answer-column.parquet", []problemOnly{{"Compute $1+1$."}, {"Compute $2+2$."}})
	out["bad/not-parquet.parquet"] = []byte("PAR1 this is not a parquet file, only its first four bytes are\n")
	return out
}

func TestSampleFiles(t *testing.T) {
	files := sampleFiles(t)
	for name, want := range files {
		path := filepath.Join(sampleDir, name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (go test ./envs/dataset -run TestSampleFiles -update writes it)", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from what the generator writes; rerun with -update", path)
		}
	}
}
