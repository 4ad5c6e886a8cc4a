package recipes

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// unitSize returns the size in bytes of an accepted unit: binary units (KiB, MiB, GiB, TiB) are
// powers of 1024, decimal units (KB, MB, GB, TB) powers of 1000, as in IEC 80000-13.
func unitSize(unit string) (float64, bool) {
	switch unit {
	case "TiB":
		return 1 << 40, true
	case "GiB":
		return 1 << 30, true
	case "MiB":
		return 1 << 20, true
	case "KiB":
		return 1 << 10, true
	case "TB":
		return 1e12, true
	case "GB":
		return 1e9, true
	case "MB":
		return 1e6, true
	case "KB":
		return 1e3, true
	case "B":
		return 1, true
	}
	return 0, false
}

// ParseBytes parses a memory size: a non-negative number, an optional single space, and a unit
// spelled exactly B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024), e.g.
// "24GiB" = 25769803776 and "24GB" = 24000000000. A bare number or an ambiguous unit ("24G",
// "24gb") is an error, because it is unclear which of the two the user meant.
func ParseBytes(s string) (int64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty size; write e.g. 24GiB (2^30 bytes each) or 24GB (10^9 bytes each)")
	}
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.TrimPrefix(t[i:], " ")
	if num == "" {
		return 0, fmt.Errorf("size %q does not start with a number; write e.g. 24GiB or 24GB", s)
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: %q is not a number; write e.g. 24GiB or 24GB", s, num)
	}
	if unit == "" {
		return 0, fmt.Errorf("size %q has no unit; write %sGiB (2^30 bytes each) or %sGB (10^9 bytes each)", s, num, num)
	}
	if size, ok := unitSize(unit); ok {
		b := v * size
		if b > math.MaxInt64/2 {
			return 0, fmt.Errorf("size %q is too large", s)
		}
		return int64(math.Round(b)), nil
	}
	return 0, fmt.Errorf("size %q: unknown unit %q; use B, KB, MB, GB, TB (powers of 1000) or KiB, MiB, GiB, TiB (powers of 1024)", s, unit)
}

// FormatGiB renders bytes as GiB with two decimals, e.g. "23.50 GiB".
func FormatGiB(b int64) string {
	return strconv.FormatFloat(float64(b)/(1<<30), 'f', 2, 64) + " GiB"
}
